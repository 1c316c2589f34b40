package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// TestBatchesCommitWithTheirStatements: a batch of attempt ends of runs
// the store holds, effect records and claims of uncapped processes is
// committed in the round trip of its statements (Stats.OneTrip), which
// count the status changes themselves: the counts agree with the runs
// after every step, and admissions sent with them (plain commands, run
// before the COMMIT) are stored. Whether the nodes are woken is decided before the
// statements answer (a retry wakes them), and what is read after the
// commit is read right: an end whose run was taken over meanwhile is
// refused as fenced.
func TestBatchesCommitWithTheirStatements(t *testing.T) {
	ctx := context.Background()
	s := openIn(t, t.TempDir(), pgstore.Options{})
	admit(t, s, "p", 40, 0)
	now := time.Now().Truncate(time.Microsecond)
	rs := claimP(t, s, now, 40)
	checkCounts(t, s)
	trips := s.Stats().OneTrip
	if trips == 0 {
		t.Errorf("the claim was not committed with its statements")
	}

	// Retries alone: the runs are claimable again, and the store's
	// watchers hear it.
	time.Sleep(200 * time.Millisecond) // the admission's wake-ups are past
	ready := watchFor(t, s, store.ChangeReady)
	ends := func(rs []store.Run, end func(i int, r store.Run) error) []error {
		errs := make([]error, len(rs))
		var wg sync.WaitGroup
		for i, r := range rs {
			wg.Go(func() { errs[i] = end(i, r) })
		}
		wg.Wait()
		return errs
	}
	for i, err := range ends(rs[:4], func(_ int, r store.Run) error {
		_, err := s.Update(ctx, store.Update{RunID: r.ID, Epoch: r.Epoch, Action: store.ActionRetryLater, Now: now, Error: "again", RetryAt: now})
		return err
	}) {
		if err != nil {
			t.Errorf("retry of %s: %v", rs[i].ID, err)
		}
	}
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Errorf("no wake-up after runs were retried")
	}
	checkCounts(t, s)

	// One run taken over behind the store's back (as by a node that
	// reclaimed it): its end is refused, fenced.
	taken := rs[4]
	if _, err := s.Pool().Exec(ctx, "UPDATE "+s.Schema()+".runs SET epoch = epoch + 1 WHERE id = $1", taken.ID); err != nil {
		t.Fatal(err)
	}
	lease := now.Add(time.Minute)
	// Admissions (plain commands, which a batch runs after those
	// statements and before its COMMIT) sent with the ends: each run
	// admitted exists.
	admitted := make(chan string, len(rs))
	var wg sync.WaitGroup
	for i := range rs {
		wg.Go(func() {
			id := fmt.Sprintf("late-%d", i)
			if _, err := s.Admit(ctx, store.Admission{Event: "e", Now: now, Runs: []store.NewRun{{ID: id, Process: "late"}}}); err != nil {
				t.Errorf("admission of %s: %v", id, err)
				return
			}
			admitted <- id
		})
	}
	errs := ends(rs[4:], func(i int, r store.Run) error {
		u := store.Update{RunID: r.ID, Epoch: r.Epoch, Action: store.ActionComplete, Now: now, Output: json.RawMessage(`1`)}
		switch i % 3 {
		case 1: // with follow-up runs, one started here, one idle
			u.Then = "next"
			u.Children = &store.Admission{Event: "next", ParentID: r.ID, CorrelationID: r.ID, Depth: 1, Now: now,
				Start: &store.Start{Owner: "o", LeaseUntil: lease},
				Runs:  []store.NewRun{{ID: r.ID + "/started", Process: "n", Start: true}, {ID: r.ID + "/idle", Process: "n"}}}
		case 2: // with an effect, recorded before the end and its outcome with it
			if err := s.StartEffect(ctx, r.ID, r.Epoch, "e", now); err != nil {
				return err
			}
			wait := s.QueueFinishEffect(ctx, r.ID, r.Epoch, "e", store.EffectCompleted, json.RawMessage(`2`), "", now)
			defer func() {
				if err := wait(); err != nil {
					t.Errorf("effect outcome of %s: %v", r.ID, err)
				}
			}()
		}
		_, err := s.Update(ctx, u)
		return err
	})
	for i, err := range errs {
		if id := rs[4+i].ID; id == taken.ID {
			if !errors.Is(err, store.ErrFenced) {
				t.Errorf("end of the run taken over: %v, want ErrFenced", err)
			}
		} else if err != nil {
			t.Errorf("end of %s: %v", id, err)
		}
	}
	wg.Wait()
	close(admitted)
	for id := range admitted {
		if _, err := s.Run(ctx, id); err != nil {
			t.Errorf("admitted run %s: %v", id, err)
		}
	}
	checkCounts(t, s)
	if s.Stats().OneTrip <= trips {
		t.Errorf("no batch of ends was committed with its statements")
	}

	// The retried runs and the idle follow-ups claimed.
	res, err := s.ClaimNext(ctx, store.ClaimNextRequest{Owner: "o", Now: now, LeaseUntil: lease, Processes: map[string]int{"p": 0, "n": 0}, Limit: 100})
	if err != nil || len(res.Runs) == 0 {
		t.Fatalf("claim: %v, %d runs", err, len(res.Runs))
	}
	checkCounts(t, s)
}
