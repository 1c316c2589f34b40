package main

import "testing"

func TestStmtLabel(t *testing.T) {
	for _, tc := range []struct{ query, want string }{
		{"SELECT count(*) FROM cap_x.runs WHERE status = $1", "SELECT count(*) FROM runs WHERE status = $1"},
		{"UPDATE \"cap_x\".runs r\n\t\tSET status = $2", "UPDATE runs r SET status = $2"},
		{"WITH i AS MATERIALIZED (\n\t\t\tSELECT i.*, m.seq FROM unnest($1::int[], $2::text[], $3::bigint[])", "WITH i AS MATERIALIZED ( SELECT i.*, m.seq FROM unnest($1::int[]…"},
	} {
		if got := stmtLabel(tc.query, "cap_x"); got != tc.want {
			t.Errorf("stmtLabel(%q) = %q, want %q", tc.query, got, tc.want)
		}
	}
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		sp   serverProfile
		want string
	}{
		{serverProfile{Statements: true, WALTiming: true}, "server profile: WAL flushes per run (pg_stat_wal), statement times (pg_stat_statements), WAL flush times (track_wal_io_timing)"},
		{serverProfile{WALTiming: true}, "server profile: WAL flushes per run (pg_stat_wal), WAL flush times (track_wal_io_timing); for more, start the server with shared_preload_libraries=pg_stat_statements"},
		{serverProfile{}, "server profile: WAL flushes per run (pg_stat_wal); for more, start the server with shared_preload_libraries=pg_stat_statements and track_wal_io_timing=on"},
	} {
		if got := tc.sp.describe(); got != tc.want {
			t.Errorf("describe(%+v) =\n%q, want\n%q", tc.sp, got, tc.want)
		}
	}
}
