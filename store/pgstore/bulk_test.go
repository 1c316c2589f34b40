package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// TestBulkAdmissionsCommitApart: an admission batch of many runs is
// committed apart from the group-commit writer's transactions, so it goes
// on while the writer waits (here on a row lock another connection holds
// on the run the writer is ending): it commits, its runs are stored and
// counted, the store's watchers hear of them, and Stats.Bulk counts it. A
// small batch shares the writer's transaction and waits with it; both
// complete once the lock is released.
func TestBulkAdmissionsCommitApart(t *testing.T) {
	ctx := context.Background()
	s := openIn(t, t.TempDir(), pgstore.Options{})
	admit(t, s, "p", 1, 0)
	now := time.Now().Truncate(time.Microsecond)
	r := claimP(t, s, now, 1)[0]

	// Another connection locks the run's row; the writer's transaction
	// that ends the run waits for it.
	lock, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	var locker int
	if err := lock.QueryRow(ctx, "SELECT pg_backend_pid() FROM "+s.Schema()+".runs WHERE id = $1 FOR UPDATE", r.ID).Scan(&locker); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := s.Update(ctx, store.Update{RunID: r.ID, Epoch: r.Epoch, Action: store.ActionComplete, Now: now})
		ended <- err
	}()
	waitFor(t, "the writer waiting on the row lock", func() bool {
		var n int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, locker).Scan(&n)
		return err == nil && n > 0
	})

	batch := func(prefix string, n int) []store.Admission {
		as := make([]store.Admission, n)
		for i := range as {
			as[i] = store.Admission{Event: "ev", Now: now, Runs: []store.NewRun{{ID: fmt.Sprintf("%s-%d", prefix, i), Process: "bulk"}}}
		}
		return as
	}
	small := make(chan error, 1)
	go func() {
		_, err := s.AdmitBatch(ctx, batch("small", 10))
		small <- err
	}()

	ready := watchFor(t, s, store.ChangeReady)
	bulks := s.Stats().Bulk
	big := make(chan error, 1)
	go func() {
		res, err := s.AdmitBatch(ctx, batch("big", 100))
		if err == nil && len(res) != 100 {
			err = fmt.Errorf("%d results, want 100", len(res))
		}
		big <- err
	}()
	select {
	case err := <-big:
		if err != nil {
			t.Fatalf("the large batch, while the writer waits: %v", err)
		}
	case <-time.After(10 * time.Second):
		lock.Rollback(ctx) // lets the writer, and the batch with it, go on
		t.Fatalf("the large batch did not commit while the writer waited")
	}
	if got := s.Stats().Bulk; got != bulks+1 {
		t.Errorf("Stats.Bulk %d, want %d", got, bulks+1)
	}
	idle, err := s.CountRuns(ctx, store.RunFilter{Process: "bulk", Statuses: []store.Status{store.StatusIdle}})
	if err != nil || idle != 100 {
		t.Errorf("%d idle runs of the batch stored (%v), want 100", idle, err)
	}
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Errorf("no wake-up after the large batch committed")
	}
	select {
	case err := <-small:
		t.Errorf("the small batch completed while the writer waited (%v): it was not committed by the writer", err)
	case err := <-ended:
		t.Fatalf("the end completed while its row was locked: %v", err)
	case <-time.After(300 * time.Millisecond):
	}

	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]chan error{"the run's end": ended, "the small batch": small} {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s did not complete once the lock was released", name)
		}
	}
	if n, err := s.CountRuns(ctx, store.RunFilter{Process: "bulk"}); err != nil || n != 110 {
		t.Errorf("%d runs of the batches (%v), want 110", n, err)
	}
	checkCounts(t, s)
}

// waitFor waits up to 20 s for cond, failing the test with what it waited
// for.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
