package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// TestBatchLocksInOneOrder: two nodes on one database admit runs of
// bounded processes and of groups, one admission a command, many at once,
// each naming a process at random: the commands of one transaction take
// their advisory locks in whatever order they were queued in, and two
// transactions that took the same locks in opposite orders would wait on
// each other until PostgreSQL broke the deadlock after a second and the
// commands were tried again one by one. Every admission is answered, no
// transaction of either node meets a deadlock, and every run is stored.
func TestBatchLocksInOneOrder(t *testing.T) {
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deadlocks := func() int64 { return a.Stats().Deadlocks + b.Stats().Deadlocks }
	watched := make(chan struct{})
	go func() { // stops the admissions at the first deadlock: each costs a second
		defer close(watched)
		for ctx.Err() == nil && deadlocks() == 0 {
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
	}()
	const workers, each = 16, 60
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range workers {
		s := a
		if g%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if ctx.Err() != nil {
					return
				}
				nr := store.NewRun{ID: fmt.Sprintf("g%d-%d", g, i), Process: fmt.Sprintf("p%d", rand.IntN(4)), Limit: 1 << 20}
				if i%3 == 0 { // a group of its own: its lock too, with the bound's
					nr.GroupKey, nr.Group = nr.ID, store.GroupSingleton
				}
				res, err := s.Admit(ctx, store.Admission{Event: "e", Now: time.Now(), Runs: []store.NewRun{nr}})
				if err != nil {
					if ctx.Err() == nil {
						t.Error(err)
					}
					return
				}
				admitted.Add(int64(len(res.Admitted)))
			}
		}()
	}
	wg.Wait()
	cancel()
	<-watched
	if n := deadlocks(); n > 0 {
		t.Fatalf("%d transactions met a deadlock (the admissions stopped at the first)", n)
	}
	if n := admitted.Load(); n != workers*each {
		t.Fatalf("%d runs admitted, want %d", n, workers*each)
	}
	counts, err := a.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := counts[store.StatusIdle]; n != workers*each {
		t.Fatalf("%d idle runs stored, want %d", n, workers*each)
	}
}
