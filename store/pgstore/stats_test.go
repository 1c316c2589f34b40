package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

// TestCommitTimeCounted: Stats.CommitNanos adds the time of every
// transaction a writer committed, from its start to COMMIT's answer, so
// that a transaction held at its commit for 150 ms adds at least that,
// and one more transaction adds more.
func TestCommitTimeCounted(t *testing.T) {
	ctx := context.Background()
	s := planStore(t, "stats")
	now := time.Now()
	before := s.Stats()
	rel, restore := holdFirstBatch(ctx, s, now) // admits "other", held at its commit
	time.Sleep(150 * time.Millisecond)
	close(rel)
	restore()
	if _, err := s.Admit(ctx, store.Admission{Event: "e", Runs: []store.NewRun{{ID: "next", Process: "p"}}, Now: now}); err != nil {
		t.Fatal(err)
	}
	held := s.Stats()
	if n := held.Batches - before.Batches; n < 2 {
		t.Fatalf("%d transactions committed, want at least 2", n)
	}
	if d := time.Duration(held.CommitNanos - before.CommitNanos); d < 150*time.Millisecond {
		t.Errorf("CommitNanos grew by %v over a transaction held 150 ms at its commit", d)
	}
	if _, err := s.Admit(ctx, store.Admission{Event: "e", Runs: []store.NewRun{{ID: "last", Process: "p"}}, Now: now}); err != nil {
		t.Fatal(err)
	}
	if after := s.Stats(); after.Batches == held.Batches || after.CommitNanos <= held.CommitNanos {
		t.Errorf("a transaction more: Batches %d -> %d, CommitNanos %d -> %d", held.Batches, after.Batches, held.CommitNanos, after.CommitNanos)
	}
}
