package sqlitestore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yella-go/yella/store"
)

// TestPlans: the statements whose cost matters use the index they were
// written for, on an empty database (no statistics), so the plan does not
// depend on the data. The claim and the attempt's end look the run up by
// its id; the dispatcher's index merges two index scans without sorting;
// a signal finds its waiting run, and a wait its kept signal, by key; a
// grouped admission finds its group's latest live run by process and key,
// reading the index backwards (no sort).
func TestPlans(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "plans.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		name, sql string
		want      []string // each in the plan
	}{
		{"claim", claimSQL, []string{"SEARCH runs USING INDEX sqlite_autoindex_runs_1 (id=?)"}},
		{"finish", finishSQL, []string{"SEARCH runs USING INDEX sqlite_autoindex_runs_1 (id=?)"}},
		{"claims together", manySQL(claimMany, 4), []string{"SEARCH runs USING INDEX sqlite_autoindex_runs_1 (id=?)"}},
		{"claim of a kept run", claimFreshSQL, []string{"SEARCH runs USING INTEGER PRIMARY KEY (rowid=?)"}},
		{"claims of kept runs together", manySQL(claimFreshMany, 4), []string{"SEARCH runs USING INTEGER PRIMARY KEY (rowid=?)"}},
		{"attempt ends together", manySQL(finishMany, 4), []string{"SEARCH runs USING INDEX sqlite_autoindex_runs_1 (id=?)"}},
		{"pending", pendingSQL, []string{"MERGE (UNION ALL)", "SEARCH runs USING INDEX runs_status (status=? AND rowid>?)",
			"SEARCH runs USING INDEX runs_wait_due (seq>?)"}},
		{"waiter", waiterSQL, []string{"SEARCH runs USING COVERING INDEX runs_wait_key (wait_key=?)"}},
		{"kept signal", keptSignalSQL, []string{"SEARCH signals USING INDEX signals_key (key=?)"}},
		{"singleton", singletonSQL, []string{"SEARCH runs USING INDEX runs_group (process=? AND group_key=?)"}},
		{"debounce", debounceSQL, []string{"SEARCH runs USING INDEX runs_group (process=? AND group_key=?)"}},
		{"active runs of a process", activeSQL, []string{"SEARCH runs USING INDEX runs_status (status=?)"}},
		{"retention", pruneSQL, []string{"SEARCH r USING INTEGER PRIMARY KEY (rowid>?)", "SEARCH c USING COVERING INDEX runs_parent (parent_id=?)"}},
		{"running runs", runningSQL, []string{"SEARCH runs USING INDEX runs_status (status=?)"}},
		{"heartbeat", heartbeatSQL, []string{"SEARCH runs USING INDEX runs_status (status=?)"}},
	} {
		plan := explain(t, s, c.sql)
		for _, w := range c.want {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: plan\n%s\nlacks %q", c.name, plan, w)
			}
		}
		for _, bad := range []string{"SCAN runs", "TEMP B-TREE"} {
			if strings.Contains(plan, bad) {
				t.Errorf("%s: plan\n%s\nhas %q", c.name, plan, bad)
			}
		}
	}
}

// TestListingPlans: a listing never sorts, whatever its filter. With a
// process or an event (no index on either), it reads the table in the
// listing's own order (seq, the rowid), from its cursor, unless it lists
// one status other than completed: then the status index, in seq order.
func TestListingPlans(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "plans.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	idle, completed := []store.Status{store.StatusIdle}, []store.Status{store.StatusCompleted}
	for _, c := range []struct {
		name     string
		f        store.RunFilter
		statuses []store.Status
		want     string
	}{
		{"process", store.RunFilter{Process: "p"}, nil, "SCAN runs"},
		{"event, oldest first, after a cursor", store.RunFilter{Event: "e", Order: store.OldestFirst, After: 7}, nil, "SEARCH runs USING INTEGER PRIMARY KEY (rowid>?)"},
		{"process, after a cursor", store.RunFilter{Process: "p", After: 7}, nil, "SEARCH runs USING INTEGER PRIMARY KEY (rowid<?)"},
		{"process, completed", store.RunFilter{Process: "p"}, completed, "SCAN runs"},
		{"process, idle", store.RunFilter{Process: "p"}, idle, "SEARCH runs USING INDEX runs_status (status=?)"},
		{"event, idle, after a cursor", store.RunFilter{Event: "e", After: 7}, idle, "SEARCH runs USING INDEX runs_status (status=? AND rowid<?)"},
	} {
		w, _ := where(&c.f, c.statuses)
		plan := explain(t, s, listSQL(&c.f, c.statuses, w))
		if !strings.Contains(plan, c.want) {
			t.Errorf("%s: plan\n%s\nlacks %q", c.name, plan, c.want)
		}
		if strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%s: plan\n%s\nsorts", c.name, plan)
		}
	}
}

// explain returns the query plan of q, one detail a line.
func explain(t *testing.T, s *Store, q string) string {
	t.Helper()
	// An argument for every parameter: the driver binds the ones q has
	// (?15 at most, or the rows of a merged statement) and ignores the
	// rest.
	args := make([]any, 64)
	rows, err := s.conn.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		b.WriteString(detail + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestStatusChecksCompareInPlace: writing a run's or an effect's status
// builds no temporary b-tree unconditionally. SQLite evaluates an IN list
// of more than two constants through a temporary b-tree that it builds
// each time the statement runs (OpenEphemeral in its program); the status
// CHECK constraints used to be such lists, and cost every single-run write
// that allocation (schema version 8). The one IN list left on the hot
// path, runs_group's condition, is evaluated only for a run with a group
// key: its b-tree comes right after the IsNull test of the key. (A
// statement with RETURNING, or a merged one, builds a table of its own
// to hold its rows: that one is inherent, these statements have none.)
// The CHECKs still refuse an unknown status.
func TestStatusChecksCompareInPlace(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "checks.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO runs (seq, id, process, event, status, created_at) VALUES (?1, ?2, ?3, ?4, 'idle', ?5)`,
		`UPDATE runs SET status = ?1 WHERE seq = ?2`,
		`INSERT INTO effects (run_seq, key, status, epoch, started_at) VALUES (?1, ?2, 'started', ?3, ?4)`,
		`UPDATE effects SET status = ?1 WHERE run_seq = ?2 AND key = ?3`,
	} {
		rows, err := s.conn.QueryContext(ctx, "EXPLAIN "+q, make([]any, 16)...) // see explain
		if err != nil {
			t.Fatalf("explain %s: %v", q, err)
		}
		cols, _ := rows.Columns()
		var ops []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			ops = append(ops, fmt.Sprint(vals[1])) // addr, opcode, p1, …
		}
		rows.Close()
		for i, op := range ops {
			if op == "OpenEphemeral" && (i == 0 || ops[i-1] != "IsNull") {
				t.Errorf("%s: a temporary b-tree built on every run (opcode %d of %v)", q, i, ops)
			}
		}
	}
	for _, q := range []string{
		`INSERT INTO runs (id, process, event, status, created_at) VALUES ('bad', 'p', 'e', 'done', 1)`,
		`INSERT INTO effects (run_seq, key, status, epoch, started_at) VALUES (1, 'k', 'done', 1, 1)`,
	} {
		if _, err := s.conn.ExecContext(ctx, q); err == nil || !strings.Contains(err.Error(), "CHECK constraint failed") {
			t.Errorf("%s: %v, want a CHECK constraint failure", q, err)
		}
	}
}
