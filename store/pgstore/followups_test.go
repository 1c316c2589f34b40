package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
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
// Both for an end of a run the store holds from its claim (the end's
// statement inserts its follow-ups) and for one it does not (a statement
// of their own).
func TestFollowUpsBeforeLaterCommands(t *testing.T) {
	for _, fromClaim := range []bool{true, false} {
		t.Run(map[bool]string{true: "held", false: "not held"}[fromClaim], func(t *testing.T) { followUpsBeforeLaterCommands(t, fromClaim) })
	}
}

func followUpsBeforeLaterCommands(t *testing.T, fromClaim bool) {
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
	if !fromClaim {
		s.held.forget("parent") // as a store that did not claim it
	}

	// Hold a first batch at its commit, queue the end and the admission
	// behind it, then let them go as one batch.
	rel, restore := holdFirstBatch(ctx, s, now)
	defer restore()
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

// TestFollowUpLinks: a follow-up run admitted by an attempt end is linked
// to its chain and its parent in run_ids, whichever statement inserts it
// (the end's own, for a run the store holds from its claim, or one of
// their own): the chain and a listing by correlation id find it, and
// retention keeps its parent while it is kept.
func TestFollowUpLinks(t *testing.T) {
	for _, held := range []bool{true, false} {
		t.Run(map[bool]string{true: "held", false: "not held"}[held], func(t *testing.T) {
			ctx := context.Background()
			s := planStore(t, "links")
			now := time.Unix(1_800_000_000, 0)
			if _, err := s.Admit(ctx, store.Admission{Event: "ev", Runs: []store.NewRun{{ID: "root", Process: "p"}, {ID: "lone", Process: "p2"}}, Now: now}); err != nil {
				t.Fatal(err)
			}
			runs, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{"root", "lone"}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
			if err != nil || len(runs) != 2 {
				t.Fatalf("claim: %v, %d runs", err, len(runs))
			}
			if !held {
				s.held.forget("root")
			}
			if _, err := s.Update(ctx, store.Update{RunID: "root", Epoch: runs[0].Epoch, Now: now, Action: store.ActionComplete, Then: "next",
				Children: &store.Admission{Event: "next", Runs: []store.NewRun{{ID: "child", Process: "q"}}, ParentID: "root", CorrelationID: "root", Depth: 1, Now: now}}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Update(ctx, store.Update{RunID: "lone", Epoch: runs[1].Epoch, Now: now, Action: store.ActionComplete}); err != nil {
				t.Fatal(err)
			}
			chain, err := s.Chain(ctx, "root")
			if err != nil || len(chain) != 2 || chain[0].ID != "root" || chain[1].ID != "child" {
				t.Fatalf("chain: %v, %+v; want root, child", err, chain)
			}
			listed, err := s.Runs(ctx, store.RunFilter{CorrelationID: "root", Order: store.OldestFirst, Limit: 10})
			if err != nil || len(listed) != 2 || listed[1].ID != "child" {
				t.Fatalf("runs of the correlation: %v, %+v; want root, child", err, listed)
			}
			if n, err := s.Prune(ctx, store.PruneRequest{CompletedBefore: now.Add(time.Hour), Limit: 100}); err != nil || n != 1 {
				t.Fatalf("retention: %d runs pruned, %v; want the lone run", n, err)
			}
			if _, err := s.Run(ctx, "root"); err != nil {
				t.Errorf("the root, whose follow-up is kept: %v", err)
			}
		})
	}
}

// TestEndResultsStayTheCallers: an attempt end's result (its run, its
// admitted follow-ups) belongs to its caller, whatever ends the store
// answers after it. The store recycles its attempt ends' commands: a
// result that shared memory with a recycled command would show a later
// end's follow-up.
func TestEndResultsStayTheCallers(t *testing.T) {
	ctx := context.Background()
	s := planStore(t, "endresults")
	now := time.Now()
	const n = 12
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("parent-%d", i))
		if _, err := s.Admit(ctx, store.Admission{Event: "e", Runs: []store.NewRun{{ID: ids[i], Process: "p"}}, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := s.Claim(ctx, store.ClaimRequest{IDs: ids, Owner: "o", Now: now, LeaseUntil: now.Add(time.Hour)})
	if err != nil || len(rs) != n {
		t.Fatalf("claim: %d runs, %v", len(rs), err)
	}
	results := make([]store.UpdateResult, n)
	for i, r := range rs {
		results[i], err = s.Update(ctx, store.Update{RunID: r.ID, Epoch: r.Epoch, Action: store.ActionComplete, Now: now, Then: "next",
			Output: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
			Children: &store.Admission{Event: "next", ParentID: r.ID, CorrelationID: r.ID, Depth: 1, Now: now,
				Runs: []store.NewRun{{ID: "child-of-" + r.ID, Process: "c"}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, res := range results {
		id := rs[i].ID
		if res.Run.ID != id || res.Run.Status != store.StatusCompleted {
			t.Errorf("end of %s: result's run %s %s", id, res.Run.ID, res.Run.Status)
		}
		if len(res.Children.Admitted) != 1 || res.Children.Admitted[0].ID != "child-of-"+id {
			t.Errorf("end of %s: result's follow-ups %+v, want only child-of-%s", id, res.Children.Admitted, id)
		}
	}
}

// holdFirstBatch admits a run ("other", of process p) and holds its batch
// at its commit, once held, until rel is closed: the commands queued
// meanwhile are committed together in the batch after it. restore removes
// the commit hook (a batch built with none installed may go in one round
// trip).
func holdFirstBatch(ctx context.Context, s *Store, now time.Time) (rel chan struct{}, restore func()) {
	held, rel := make(chan struct{}), make(chan struct{})
	first := true
	restore = commithook.Set(func(db string) error {
		if db == s.hookName() && first {
			first = false
			close(held)
			<-rel
		}
		return nil
	})
	go s.Admit(ctx, store.Admission{Event: "e", Runs: []store.NewRun{{ID: "other", Process: "p"}}, Now: now})
	<-held
	return rel, restore
}
