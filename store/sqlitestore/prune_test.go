package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

// TestPrunePassesOverKeptRuns: retention reads at most pruneScan×Limit
// runs per call, so a backlog of old runs it keeps (here errored ones,
// more than one call reads) costs a few calls, not a stall: the
// completed runs behind it are pruned by the calls that follow, one pass
// ends at the table's end, and the next pass starts over: it prunes an
// old run completed since.
func TestPrunePassesOverKeptRuns(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "prune.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Unix(1_700_000_000, 0)
	end := func(to store.Status, n int) []string {
		var ids []string
		for i := range n {
			id := fmt.Sprintf("%s-%d", to, i)
			a := store.Admission{Event: "e", Payload: json.RawMessage(`{}`), Runs: []store.NewRun{{ID: id, Process: "p"}}, Now: now}
			if _, err := s.Admit(ctx, a); err != nil {
				t.Fatal(err)
			}
			rs, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{id}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
			if err != nil || len(rs) != 1 {
				t.Fatalf("claim %s: %v %v", id, rs, err)
			}
			if _, err := s.Update(ctx, store.Update{RunID: id, Epoch: 1, Now: now, To: to, Error: "x"}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		return ids
	}
	const limit = 1
	kept := end(store.StatusErrored, pruneScan*limit+pruneScan/2)
	done := end(store.StatusCompleted, 3)
	req := store.PruneRequest{CompletedBefore: now.Add(time.Second), Limit: limit}
	var got []int
	for range 6 {
		n, err := s.Prune(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
	}
	// The first call reads pruneScan errored runs; the second the rest of
	// them and the first completed run; then one completed run per call,
	// the end of the table, and a pass that finds nothing.
	if want := []int{0, 1, 1, 1, 0, 0}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pruned per call %v, want %v", got, want)
	}
	for _, id := range done {
		if _, err := s.Run(ctx, id); err != store.ErrNotFound {
			t.Errorf("%s: %v, want it pruned", id, err)
		}
	}
	for _, id := range kept {
		if r, err := s.Run(ctx, id); err != nil || r.Status != store.StatusErrored {
			t.Errorf("%s: %v %v, want it kept", id, r.Status, err)
		}
	}
	// An old run that completes later is pruned by the next pass, which
	// starts from the table's start again.
	first := kept[0]
	if _, err := s.Update(ctx, store.Update{RunID: first, Now: now, Action: store.ActionRetry}); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{first}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(rs) != 1 {
		t.Fatalf("claim %s again: %v %v", first, rs, err)
	}
	if _, err := s.Update(ctx, store.Update{RunID: first, Epoch: rs[0].Epoch, Now: now, To: store.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	pruned := 0
	for range 4 { // the rest of the pass under way, and the next one
		n, err := s.Prune(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		pruned += n
	}
	if pruned != 1 {
		t.Errorf("the next passes pruned %d, want the run completed behind the last one", pruned)
	}
	kept = kept[1:]
	counts, err := s.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[store.StatusCompleted] != 0 || counts[store.StatusErrored] != int64(len(kept)) {
		t.Errorf("counts %v", counts)
	}
}
