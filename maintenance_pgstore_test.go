package yella_test

import (
	"context"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/pgstore"
)

// TestRollupsCompactedAcrossNodes: two nodes that run one process each
// write a rollup row per closed bucket; their retention sweeps merge the
// rows of each process and bucket into one, and the counts a reader sees
// are exactly the runs that ran.
func TestRollupsCompactedAcrossNodes(t *testing.T) {
	if why := pgSkip(); why != "" {
		t.Skip(why)
	}
	ctx := context.Background()
	dir := t.TempDir()
	cfg := yella.Config{ObservabilityBucket: 200 * time.Millisecond, FlushInterval: 50 * time.Millisecond, RetentionInterval: 100 * time.Millisecond}
	var engs []*yella.Engine
	var st *pgstore.Store
	for range 2 {
		st = pgFactory().Open(t, dir).(*pgstore.Store)
		c := cfg
		c.Store = st
		eng, err := yella.New(c)
		if err != nil {
			t.Fatal(err)
		}
		eng.Register(yella.Process{Name: "p", On: "ev", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
		if err := eng.Start(ctx); err != nil {
			t.Fatal(err)
		}
		engs = append(engs, eng)
	}
	const n = 200
	t0 := time.Now()
	for i := range n {
		if _, err := engs[i%2].Emit(ctx, "ev", map[string]int{"i": i}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Wait until the runs are done and every bucket closed long enough
	// ago has been compacted to one row per process.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var done, groups, rows int
		q := `SELECT (SELECT count(*) FROM ` + st.Schema() + `.runs WHERE status = 'completed'),
			(SELECT count(DISTINCT (bucket, process)) FROM ` + st.Schema() + `.rollups WHERE bucket < $1),
			(SELECT count(*) FROM ` + st.Schema() + `.rollups WHERE bucket < $1)`
		cut := time.Now().Add(-time.Second).UnixNano()
		if err := st.Pool().QueryRow(ctx, q, cut).Scan(&done, &groups, &rows); err != nil {
			t.Fatal(err)
		}
		if done == n && time.Since(t0) > 2*time.Second && groups > 0 && rows == groups {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs completed; %d rollup rows for %d groups of buckets closed a second ago", done, n, rows, groups)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i, eng := range engs {
		m, err := eng.Metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Totals.Completed == 0 {
			t.Errorf("node %d ran nothing: the test needs both nodes writing rollups", i)
		}
		if err := eng.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	reader, err := yella.New(yella.Config{Store: st, ObservabilityBucket: cfg.ObservabilityBucket})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := reader.Observability(ctx, yella.ObservabilityQuery{From: t0.Add(-time.Minute), To: time.Now().Add(time.Minute), Bucket: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Summary.Runs.Completed != n || rep.Summary.Runs.Started != n || rep.Summary.Runs.Duration.Count != n {
		t.Errorf("after compaction the rollups count %d started, %d completed, %d durations; want %d each",
			rep.Summary.Runs.Started, rep.Summary.Runs.Completed, rep.Summary.Runs.Duration.Count, n)
	}
}
