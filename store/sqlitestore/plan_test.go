package sqlitestore

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
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
		{"pending", pendingSQL, []string{"MERGE (UNION ALL)", "SEARCH runs USING INDEX runs_status (status=? AND rowid>?)",
			"SEARCH runs USING INDEX runs_wait_due (seq>?)"}},
		{"waiter", waiterSQL, []string{"SEARCH runs USING COVERING INDEX runs_wait_key (wait_key=?)"}},
		{"kept signal", keptSignalSQL, []string{"SEARCH signals USING INDEX signals_key (key=?)"}},
		{"singleton", singletonSQL, []string{"SEARCH runs USING INDEX runs_group (process=? AND group_key=?)"}},
		{"debounce", debounceSQL, []string{"SEARCH runs USING INDEX runs_group (process=? AND group_key=?)"}},
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

// explain returns the query plan of q, one detail a line.
func explain(t *testing.T, s *Store, q string) string {
	t.Helper()
	// An argument for every parameter: the driver binds the ones q has
	// (numbered up to ?15 at most) and ignores the rest.
	args := make([]any, 16)
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
