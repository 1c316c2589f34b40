package pgstore

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestGroupStatementsReadTheirIndex: on a table the statistics do not
// know yet (new, never analyzed, 20,000 runs, most of them ended, a
// backlog of idle ones), and once they know it, the lookups of a
// Singleton and a Debounce admission read runs_group backwards from the
// group's latest run and stop at the first that stands in: no sort, no
// scan of the runs or of the process's active runs. They are planned
// under the writer's settings (writerPlan), and under a session's
// defaults too: a caller's transaction (Tx) admits with those.
func TestGroupStatementsReadTheirIndex(t *testing.T) {
	ctx := context.Background()
	s := planStore(t, "groupplan")
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.q.schema+`.runs (id, process, event, status, created_at, group_key)
		SELECT 'r' || g, 'p', 'e', CASE WHEN g % 5 = 0 THEN 'idle' WHEN g % 50 = 1 THEN 'running' ELSE 'completed' END, g,
			CASE WHEN g % 4 <> 3 THEN 'k' || (g % 100) END
		FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	for i, settings := range [][]string{writerPlan, nil, writerPlan, nil} {
		if i == 2 { // and once the statistics know the table
			if _, err := s.pool.Exec(ctx, `ANALYZE `+s.q.schema+`.runs`); err != nil {
				t.Fatal(err)
			}
		}
		func() {
			tx, err := s.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			for _, set := range settings {
				if _, err := tx.Exec(ctx, set); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range []struct {
				name, sql string
				args      []any
			}{
				{"singleton", s.q.groupSingleton, []any{"p", "k50"}},
				{"debounce", s.q.groupDebounce, []any{"p", "k50", []byte("1"), []byte(nil), (*int64)(nil), time.Now().UnixNano()}},
			} {
				plan := explain(t, tx, c.sql, c.args...)
				if !strings.Contains(plan, "Index Scan Backward using runs_group") || !strings.Contains(plan, "Limit") {
					t.Errorf("%s (writer settings %v): the plan does not read runs_group backwards:\n%s", c.name, settings != nil, plan)
				}
				for _, bad := range []string{"Seq Scan on runs", "Sort", "Bitmap Heap Scan on runs"} {
					if strings.Contains(plan, bad) {
						t.Errorf("%s (writer settings %v): the plan has %q:\n%s", c.name, settings != nil, bad, plan)
					}
				}
			}
		}()
	}
}
