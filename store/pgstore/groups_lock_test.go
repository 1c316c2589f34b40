package pgstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

// TestGroupLockOnlyWithPolicy: an admission with a group policy takes its
// group's lock (it waits while another session holds it), and one whose
// group key has no policy does not: its key is only stored, and it pays
// for no lock.
func TestGroupLockOnlyWithPolicy(t *testing.T) {
	ctx := context.Background()
	s := planStore(t, "grouplock")
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	lock := s.groupLock("p", "k")
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, lock); err != nil {
		t.Fatal(err)
	}
	admit := func(g store.GroupPolicy) <-chan error {
		done := make(chan error, 1)
		id := "r" + strconv.Itoa(int(g))
		go func() {
			_, err := s.Admit(ctx, store.Admission{Event: "e", Now: time.Now(), Runs: []store.NewRun{{ID: id, Process: "p", GroupKey: "k", Group: g}}})
			done <- err
		}()
		return done
	}
	select {
	case err := <-admit(store.GroupNone):
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an admission with a group key and no policy waited for the group's lock")
	}
	single := admit(store.GroupSingleton)
	select {
	case err := <-single:
		t.Fatalf("a singleton admission did not wait for its group's lock: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, lock); err != nil {
		t.Fatal(err)
	}
	if err := <-single; err != nil {
		t.Fatal(err)
	}
}
