package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// TestRunIDsMigrated: a schema of version 2 (ids unique on runs itself)
// is brought to version 3 with every run's id in run_ids, so its runs are
// found by id, their chains and effects read, and a second run with a
// taken id is still refused.
func TestRunIDsMigrated(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openIn(t, dir, pgstore.Options{})
	now := time.Unix(1_800_000_000, 0)
	root, child := newID("root"), newID("child")
	if _, err := s.Admit(ctx, store.Admission{Event: "ev", Runs: []store.NewRun{{ID: root, Process: "p"}}, Now: now}); err != nil {
		t.Fatal(err)
	}
	runs, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{root}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(runs) != 1 {
		t.Fatalf("claim: %v, %d runs", err, len(runs))
	}
	if err := s.StartEffect(ctx, root, runs[0].Epoch, "e", now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, store.Update{RunID: root, Epoch: runs[0].Epoch, Now: now, To: store.StatusCompleted,
		Children: &store.Admission{Event: "next", Runs: []store.NewRun{{ID: child, Process: "q"}}, ParentID: root, CorrelationID: root, Depth: 1, Now: now}}); err != nil {
		t.Fatal(err)
	}
	// Back to version 2 as it was written: no run_ids, ids unique on runs.
	sch := s.Schema()
	downgradeFlow(t, s)
	for _, q := range []string{
		"DROP TABLE " + sch + ".run_ids",
		"ALTER TABLE " + sch + ".runs ADD CONSTRAINT runs_id_key UNIQUE (id)",
		"UPDATE " + sch + ".schema_version SET version = 2",
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()

	s = openIn(t, dir, pgstore.Options{Schema: sch})
	for _, id := range []string{root, child} {
		if r, err := s.Run(ctx, id); err != nil || r.ID != id {
			t.Fatalf("run %s after the migration: %v, %+v", id, err, r)
		}
	}
	chain, err := s.Chain(ctx, root)
	if err != nil || len(chain) != 2 {
		t.Fatalf("chain after the migration: %v, %d runs, want 2", err, len(chain))
	}
	if effs, err := s.Effects(ctx, root); err != nil || len(effs) != 1 {
		t.Fatalf("effects after the migration: %v, %v", err, effs)
	}
	if _, err := s.Admit(ctx, store.Admission{Event: "ev", Runs: []store.NewRun{{ID: child, Process: "p"}}, Now: now}); err == nil {
		t.Fatal("a second run with a taken id was admitted after the migration")
	}
	for name, cols := range indexKeys(t, s, "runs") {
		if cols == "id" {
			t.Errorf("index %s on runs(id) after the migration, want none", name)
		}
	}
}
