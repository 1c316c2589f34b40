package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/yella-go/yella/internal/commithook"
	"github.com/yella-go/yella/store"
)

// TestFollowUpsBeforeLaterCommands: the follow-up runs of a batch's
// attempt ends exist for the batch's other commands, which the
// transaction runs after the ends. Here an admission that names a
// follow-up as its parent, in the same batch as the end that admits it,
// finds it (as retention's check that a run has no children would).
func TestFollowUpsBeforeLaterCommands(t *testing.T) {
	ctx := context.Background()
	s := planStore(t, "followups")
	now := time.Now()
	if _, err := s.Admit(ctx, store.Admission{Event: "e", Runs: []store.NewRun{{ID: "parent", Process: "p"}}, Now: now}); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{"parent"}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Hour)})
	if err != nil || len(rs) != 1 {
		t.Fatalf("claim: %v", err)
	}

	// Hold a first batch at its commit, queue the end and the admission
	// behind it, then let them go as one batch.
	held, rel := make(chan struct{}), make(chan struct{})
	first := true
	restore := commithook.Set(func(db string) error {
		if db == s.hookName() && first {
			first = false
			close(held)
			<-rel
		}
		return nil
	})
	defer restore()
	go s.Admit(ctx, store.Admission{Event: "e", Runs: []store.NewRun{{ID: "other", Process: "p"}}, Now: now})
	<-held
	queued := func(n int) {
		for len(s.cmds) < n {
			time.Sleep(time.Millisecond)
		}
	}
	ended := make(chan error, 1)
	go func() {
		_, err := s.Update(ctx, store.Update{RunID: "parent", Epoch: rs[0].Epoch, Action: store.ActionComplete, Now: now, Then: "next",
			Children: &store.Admission{Event: "next", ParentID: "parent", CorrelationID: "parent", Depth: 1, Now: now,
				Runs: []store.NewRun{{ID: "child", Process: "c"}}}})
		ended <- err
	}()
	queued(1)
	admitted := make(chan error, 1)
	go func() {
		_, err := s.Admit(ctx, store.Admission{Event: "late", ParentID: "child", CorrelationID: "parent", Depth: 2, Now: now,
			Runs: []store.NewRun{{ID: "grandchild", Process: "g"}}})
		admitted <- err
	}()
	queued(2)
	before := s.Stats().Batches
	close(rel)
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	if err := <-admitted; err != nil {
		t.Fatalf("the admission naming the follow-up as its parent, in the follow-up's batch: %v", err)
	}
	if d := s.Stats().Batches - before; d != 2 {
		t.Fatalf("%d batches after the held one's release, want 2 (it and the end with the admission)", d)
	}
	for _, id := range []string{"child", "grandchild"} {
		if _, err := s.Run(ctx, id); err != nil {
			t.Errorf("run %s: %v", id, err)
		}
	}
}
