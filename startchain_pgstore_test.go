package yella_test

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/commithook"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// On a shared store the engine that ends a chain's stage starts the next
// stage itself, admitted already claimed (Admission.Start), when its
// process runs here with no cap or flow limit.

// openNode opens a second store on ps's schema: another node's.
func openNode(t *testing.T, ps *pgstore.Store) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), os.Getenv("YELLA_PG_URL"), pgstore.Options{Schema: ps.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// waitCompleted waits until ps holds n completed runs.
func waitCompleted(t *testing.T, ps *pgstore.Store, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := ps.Counts(context.Background())
		if err == nil && c[store.StatusCompleted] == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("counts %v, %v; want %d completed", c, err, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestChainStageStartsOnItsEngine: every second stage of a chain runs on
// the engine that ended its first stage, though another engine with the
// second stage's process and free slots claims whatever is idle. The
// first engine has one slot: were the next stages admitted idle, the
// other engine would take most of them.
func TestChainStageStartsOnItsEngine(t *testing.T) {
	if why := pgSkip(); why != "" {
		t.Skip(why)
	}
	ctx := context.Background()
	ps := pgFactory().Open(t, t.TempDir()).(*pgstore.Store)
	var onA, onB atomic.Int32
	a, err := yella.New(yella.Config{Store: ps, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	a.Register(yella.Process{Name: "one", On: "stage:1", Run: func(c *yella.Ctx) yella.Result {
		time.Sleep(5 * time.Millisecond) // the other engine has time to claim an idle stage
		return c.OK(nil, yella.Then("stage:2"))
	}})
	a.Register(yella.Process{Name: "two", On: "stage:2", Run: func(c *yella.Ctx) yella.Result { onA.Add(1); return c.OK(nil) }})
	b, err := yella.New(yella.Config{Store: openNode(t, ps), Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	b.Register(yella.Process{Name: "two", On: "stage:2", Run: func(c *yella.Ctx) yella.Result { onB.Add(1); return c.OK(nil) }})
	for _, e := range []*yella.Engine{b, a} {
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer e.Stop(ctx)
	}
	const roots = 20
	for i := range roots {
		if _, err := a.Emit(ctx, "stage:1", map[string]int{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	waitCompleted(t, ps, 2*roots)
	if onA.Load() != roots || onB.Load() != 0 {
		t.Errorf("second stages: %d on the engine that ended the first, %d on the other; want %d and 0", onA.Load(), onB.Load(), roots)
	}
}

// TestStartedStageHandedBackOnStop: a next stage admitted claimed by an
// engine whose stop began while the end that admitted it was being
// committed is handed back, idle for other engines, not left running
// under the stopped engine's lease.
func TestStartedStageHandedBackOnStop(t *testing.T) {
	if why := pgSkip(); why != "" {
		t.Skip(why)
	}
	ctx := context.Background()
	ps := pgFactory().Open(t, t.TempDir()).(*pgstore.Store)
	e, err := yella.New(yella.Config{Store: ps})
	if err != nil {
		t.Fatal(err)
	}
	inFirst, finish := make(chan struct{}), make(chan struct{})
	e.Register(yella.Process{Name: "one", On: "stage:1", Run: func(c *yella.Ctx) yella.Result {
		close(inFirst)
		<-finish
		return c.OK(nil, yella.Then("stage:2"))
	}})
	e.Register(yella.Process{Name: "two", On: "stage:2", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	em, err := e.Emit(ctx, "stage:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-inFirst
	time.Sleep(100 * time.Millisecond) // the claims that the emission woke are over
	// The store's next commit, the first stage's end (decided while the
	// engine runs: its next stage is to start here), waits until
	// released; meanwhile the stop takes the node out of claiming.
	var held sync.Once
	heldCh, release := make(chan struct{}), make(chan struct{})
	restore := commithook.Set(func(db string) error {
		first := false
		held.Do(func() { first = true })
		if first && db == "pgstore:"+ps.Schema() {
			close(heldCh)
			<-release
		}
		return nil
	})
	defer restore()
	close(finish)
	<-heldCh
	stopped := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		stopped <- e.Stop(sctx)
	}()
	// The end's answer must find the node stopped: on a loaded machine a
	// fixed sleep did not always let Stop get that far.
	for deadline := time.Now().Add(10 * time.Second); !yella.NodeStopped(e); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(release)
			t.Fatal("the node did not stop claiming within 10 s of Stop")
		}
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	rs, err := ps.Runs(ctx, store.RunFilter{CorrelationID: em.Runs[0], Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rs {
		if r.Process != "two" {
			continue
		}
		found = true
		if r.Status != store.StatusIdle || r.LeaseOwner != "" {
			t.Errorf("the next stage after the stop: %s, leased to %q; want idle, handed back", r.Status, r.LeaseOwner)
		}
	}
	if !found {
		t.Errorf("no next stage in the chain: %+v", rs)
	}
}
