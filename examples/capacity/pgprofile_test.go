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
