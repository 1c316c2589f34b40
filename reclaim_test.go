package yella_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

// Start reclaims the runs a dead process held in a few write transactions,
// not one commit each: 300 abandoned runs take far fewer than 300 commits.
func TestStartReclaimsInBatches(t *testing.T) {
	const n = 300
	path := filepath.Join(t.TempDir(), "r.db")
	ctx := context.Background()
	st, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7()).String()
		if _, err := st.Admit(ctx, store.Admission{Event: "ev", Runs: []store.NewRun{{ID: ids[i], Process: "p"}}, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	if rs, err := st.Claim(ctx, store.ClaimRequest{IDs: ids, Owner: "dead", Now: now, LeaseUntil: now.Add(time.Hour)}); err != nil || len(rs) != n {
		t.Fatalf("claim: %v (%d runs)", err, len(rs))
	}
	st.Close() // the process that held the leases is gone
	if st, err = sqlitestore.Open(path, sqlitestore.Options{}); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := yella.New(yella.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(yella.Process{Name: "p", On: "ev", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }}); err != nil {
		t.Fatal(err)
	}
	before := st.Stats().Batches
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Start returns once every abandoned run is reclaimed; the dispatcher
	// starts only then, so few of the commits counted here are claims.
	commits := st.Stats().Batches - before
	m, err := e.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Totals.LeaseReclaims != n {
		t.Errorf("%d runs reclaimed at Start, want %d", m.Totals.LeaseReclaims, n)
	}
	if commits > n/4 {
		t.Errorf("Start took %d write transactions to reclaim %d runs, want at most %d (the reclaims share commits)", commits, n, n/4)
	}
	if err := e.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}
