package main

import (
	"context"
	"regexp"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The server's side of a PostgreSQL drain: where the server spent its
// time, so the report says what bounds a measurement, not only how fast it
// was. Two sources, each used when the server offers it:
//
//   - pg_stat_statements (the server started with
//     shared_preload_libraries=pg_stat_statements; the tool creates the
//     extension in its database): the execution time of every statement
//     the drain ran, per run, and the statements that cost the most.
//   - pg_stat_wal with track_wal_io_timing=on: how many times the WAL was
//     flushed to disk (about once per commit) and how long each flush took.
//
// Both are server-wide counters, reset before the drain: another client of
// the same server would be counted too (the tool already asks for a
// server of its own, for its WAL figures).

// serverProfile is what the server spent on one drain.
type serverProfile struct {
	ExecUsPerRun float64     `json:"exec_us_per_run,omitempty"` // statement execution, all statements of the drain
	Top          []stmtShare `json:"top_statements,omitempty"`
	SyncsPerKRun float64     `json:"wal_syncs_per_1k_runs,omitempty"`
	MsPerSync    float64     `json:"ms_per_wal_sync,omitempty"` // 0: track_wal_io_timing is off
	// The sources the server offered (see profiler).
	Statements bool `json:"statement_times"`
	WALTiming  bool `json:"wal_flush_times"`
}

// stmtShare is one statement's execution time per run.
type stmtShare struct {
	Statement string  `json:"statement"`
	UsPerRun  float64 `json:"us_per_run"`
	Calls     int64   `json:"calls"`
}

// profiler reads a server's counters around a drain.
type profiler struct {
	statements bool // pg_stat_statements is there
	walTiming  bool // track_wal_io_timing is on
}

// newProfiler prepares the counters the server offers and says which.
func newProfiler(ctx context.Context, conn *pgx.Conn) profiler {
	var p profiler
	var preload, timing string
	conn.QueryRow(ctx, "SELECT current_setting('shared_preload_libraries'), current_setting('track_wal_io_timing')").Scan(&preload, &timing)
	if strings.Contains(preload, "pg_stat_statements") {
		_, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
		p.statements = err == nil
	}
	p.walTiming = timing == "on"
	return p
}

// describe says what the profile holds, for the report's header.
func (sp serverProfile) describe() string {
	var have, miss []string
	if sp.Statements {
		have = append(have, "statement times (pg_stat_statements)")
	} else {
		miss = append(miss, "shared_preload_libraries=pg_stat_statements")
	}
	if sp.WALTiming {
		have = append(have, "WAL flush times (track_wal_io_timing)")
	} else {
		miss = append(miss, "track_wal_io_timing=on")
	}
	s := "server profile: WAL flushes per run (pg_stat_wal)"
	if len(have) > 0 {
		s += ", " + strings.Join(have, ", ")
	}
	if len(miss) > 0 {
		s += "; for more, start the server with " + strings.Join(miss, " and ")
	}
	return s
}

// reset zeroes the server-wide counters before a drain.
func (p profiler) reset(ctx context.Context, conn *pgx.Conn) error {
	if p.statements {
		if _, err := conn.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
			return err
		}
	}
	_, err := conn.Exec(ctx, "SELECT pg_stat_reset_shared('wal')")
	return err
}

// read returns the drain's profile: runs is how many it drained, schema
// the one its statements name (the others, such as the tool's own, are
// left out).
func (p profiler) read(ctx context.Context, conn *pgx.Conn, schema string, runs int) (serverProfile, error) {
	sp := serverProfile{Statements: p.statements, WALTiming: p.walTiming}
	var syncs int64
	var syncMs float64
	if err := conn.QueryRow(ctx, "SELECT wal_sync, wal_sync_time FROM pg_stat_wal").Scan(&syncs, &syncMs); err != nil {
		return sp, err
	}
	sp.SyncsPerKRun = 1000 * float64(syncs) / float64(runs)
	if p.walTiming && syncs > 0 {
		sp.MsPerSync = syncMs / float64(syncs)
	}
	if !p.statements {
		return sp, nil
	}
	rows, err := conn.Query(ctx, `SELECT query, calls, total_exec_time FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND strpos(query, $1) > 0`, schema)
	if err != nil {
		return sp, err
	}
	type stmt struct {
		query string
		calls int64
		ms    float64
	}
	byLabel := map[string]*stmt{}
	for rows.Next() {
		var s stmt
		if err := rows.Scan(&s.query, &s.calls, &s.ms); err != nil {
			return sp, err
		}
		l := stmtLabel(s.query, schema)
		if t := byLabel[l]; t != nil {
			t.calls, t.ms = t.calls+s.calls, t.ms+s.ms
		} else {
			s.query = l
			byLabel[l] = &s
		}
	}
	if err := rows.Err(); err != nil {
		return sp, err
	}
	var all []stmt
	var total float64
	for _, s := range byLabel {
		all = append(all, *s)
		total += s.ms
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ms > all[j].ms })
	sp.ExecUsPerRun = 1000 * total / float64(runs)
	for _, s := range all[:min(3, len(all))] {
		sp.Top = append(sp.Top, stmtShare{Statement: s.query, UsPerRun: 1000 * s.ms / float64(runs), Calls: s.calls})
	}
	return sp, nil
}

var blanks = regexp.MustCompile(`\s+`)

// stmtLabel names a statement for people: its first 64 characters, with
// the schema left out and blanks collapsed.
func stmtLabel(query, schema string) string {
	q := blanks.ReplaceAllString(query, " ")
	q = strings.ReplaceAll(q, `"`+schema+`".`, "")
	q = strings.ReplaceAll(q, schema+".", "")
	if r := []rune(q); len(r) > 64 {
		q = string(r[:64]) + "…"
	}
	return q
}
