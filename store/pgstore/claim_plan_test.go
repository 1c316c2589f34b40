package pgstore

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestClaimReadsIdleRunsInOrder: a claim on a backlog the statistics do
// not know yet (a new table, never analyzed) reads runs_idle in claim
// order and stops at its limit; it does not read and sort the whole
// backlog (which cost 12.6 ms a claim at 20,000 runs). The plan is read
// with EXPLAIN under the settings a writer runs the claim with.
func TestClaimReadsIdleRunsInOrder(t *testing.T) {
	url := os.Getenv("YELLA_PG_URL")
	if url == "" {
		t.Skip(`YELLA_PG_URL is not set: the PostgreSQL tests skip (start a throwaway server with eval "$(.ci/postgres)")`)
	}
	ctx := context.Background()
	opts := Options{Schema: fmt.Sprintf("claimplan_%d", time.Now().UnixNano()%1e9)}
	s, err := Open(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer DropSchema(ctx, url, opts)
	defer s.Close()
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
	rows, err := tx.Query(ctx, "EXPLAIN "+s.q.claimNext, "o", int64(2), int64(1), []string{"p"}, 30)
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
	text := strings.Join(plan, "\n")
	if strings.Contains(text, "Sort") || strings.Contains(text, "Bitmap Heap Scan on runs runs") || !strings.Contains(text, "Index Scan using runs_idle") {
		t.Errorf("the claim does not read runs_idle in order:\n%s", text)
	}
}
