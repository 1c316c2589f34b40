package pgstore

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestClaimReadsIdleRunsInOrder: a claim on a backlog the statistics do
// not know yet (a new table, never analyzed) reads runs_idle in claim
// order and stops at its limit; it does not read and sort the whole
// backlog (which cost 12.6 ms a claim at 20,000 runs). The plan is read
// with EXPLAIN under the settings a writer runs the claim with.
func TestClaimReadsIdleRunsInOrder(t *testing.T) {
	ctx := context.Background()
	s := planStore(t, "claimplan")
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.q.schema+`.runs (id, process, event, status, created_at)
		SELECT 'r' || g, 'p', 'e', 'idle', g FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, set := range append(writerPlan, claimPlan...) {
		if _, err := tx.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	text := explain(t, tx, s.q.claimNext, int32(1), int64(2), int64(1), []string{"p"}, 30, int32(1))
	if strings.Contains(text, "Sort") || strings.Contains(text, "Bitmap Heap Scan on runs runs") || !strings.Contains(text, "Index Scan using runs_idle") {
		t.Errorf("the claim does not read runs_idle in order:\n%s", text)
	}
}

// planStore opens a store on a schema of its own (named from prefix) for
// a test that reads plans, dropped when the test ends; without a server
// the test skips.
func planStore(t *testing.T, prefix string) *Store {
	t.Helper()
	url := os.Getenv("YELLA_PG_URL")
	if url == "" {
		t.Skip(`YELLA_PG_URL is not set: the PostgreSQL tests skip (start a throwaway server with eval "$(.ci/postgres)")`)
	}
	ctx := context.Background()
	opts := Options{Schema: fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano()%1e9)}
	s, err := Open(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		DropSchema(context.Background(), url, opts)
	})
	return s
}

// explain returns the plan of sql with args, as EXPLAIN prints it, in tx.
func explain(t *testing.T, tx pgx.Tx, sql string, args ...any) string {
	t.Helper()
	rows, err := tx.Query(context.Background(), "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}

// TestFlowClaimReadsIdleRunsInOrder: the candidates of a claim with flow
// limits are read the same way, from runs_idle in rank order, stopping at
// the limit, and the runs' ranks are the index's key.
func TestFlowClaimReadsIdleRunsInOrder(t *testing.T) {
	ctx := context.Background()
	s := planStore(t, "flowplan")
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.q.schema+`.runs (id, process, event, status, created_at, rate_key, conc_key)
		SELECT 'r' || g, 'p', 'e', 'idle', g, 'k' || (g % 10), 'c' || (g % 7) FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, set := range append(writerPlan, claimPlan...) {
		if _, err := tx.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	text := explain(t, tx, s.q.flowCands, int64(1), "p", []string{"c1"}, []string{"k2"}, []int64{5}, 30)
	if strings.Contains(text, "Sort") || strings.Contains(text, "Bitmap Heap Scan on runs runs") || !strings.Contains(text, "Index Scan using runs_idle") {
		t.Errorf("the flow claim does not read runs_idle in order:\n%s", text)
	}
}

// TestWaitStatementsReadTheirIndexes: on tables the statistics do not
// know yet, a claim's promotion of the waits past their deadline and its
// read of the next deadline read runs_wait_due in deadline order, and
// stop early (no sort, no scan of the runs); a signal finds the run
// waiting for its key through runs_wait_key, and a wait finds a kept
// signal through signals_key.
func TestWaitStatementsReadTheirIndexes(t *testing.T) {
	ctx := context.Background()
	s := planStore(t, "waitplan")
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.q.schema+`.runs (id, process, event, status, created_at, retry_at, wait_key)
		SELECT 'r' || g, 'p', 'e', CASE WHEN g % 10 = 0 THEN 'waiting' ELSE 'idle' END, g,
			CASE WHEN g % 20 = 0 THEN g END, CASE WHEN g % 10 = 0 THEN 'k' || g END
		FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.q.schema+`.signals (key, keep_until) SELECT 'k' || (g % 100), g FROM generate_series(1, 2000) g`); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, set := range writerPlan {
		if _, err := tx.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, sql string
		args      []any
		want      []string
	}{
		{"promotion", s.q.promoteDue, []any{int64(10000), []string{"p"}, 30, int32(1)}, []string{"Limit", "Index Scan using runs_wait_due"}},
		{"signal", s.q.sigFirst, []any{"k20"}, []string{"Index Scan using runs_wait_key"}},
		{"kept signal", s.q.sigTake, []any{"k20", int64(10)}, []string{"Index Scan using signals_key"}},
	} {
		plan := explain(t, tx, c.sql, c.args...)
		for _, w := range c.want {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: the plan has no %q:\n%s", c.name, w, plan)
			}
		}
		for _, bad := range []string{"Seq Scan", "Sort", "Bitmap Heap Scan"} {
			if strings.Contains(plan, bad) {
				t.Errorf("%s: the plan has %q:\n%s", c.name, bad, plan)
			}
		}
	}
}
