package yella_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

// heldByDeadProcess claims the runs ids in st (the SQLite file at path)
// for a lease owner that then dies: st is closed and the file opened
// again, as a restarted process opens it.
func heldByDeadProcess(t *testing.T, st *sqlitestore.Store, path string, ids []string) *sqlitestore.Store {
	t.Helper()
	now := time.Now()
	if rs, err := st.Claim(context.Background(), store.ClaimRequest{IDs: ids, Owner: "dead", Now: now, LeaseUntil: now.Add(time.Hour)}); err != nil || len(rs) != len(ids) {
		t.Fatalf("claim: %v (%d runs)", err, len(rs))
	}
	st.Close()
	st, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Start reclaims the runs a dead process held in a few write transactions,
// not one commit each: 300 abandoned runs take far fewer than 300 commits.
func TestStartReclaimsInBatches(t *testing.T) {
	const n = 300
	path := filepath.Join(t.TempDir(), "r.db")
	ctx := context.Background()
	st, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7()).String()
		if _, err := st.Admit(ctx, store.Admission{Event: "ev", Runs: []store.NewRun{{ID: ids[i], Process: "p"}}, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	st = heldByDeadProcess(t, st, path, ids)
	defer st.Close()
	e, err := yella.New(yella.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(yella.Process{Name: "p", On: "ev", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }}); err != nil {
		t.Fatal(err)
	}
	before := st.Stats().Batches
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Start returns once every abandoned run is reclaimed; the dispatcher
	// runs meanwhile, so some of the commits counted here are the claims
	// and ends of the runs reclaimed first.
	commits := st.Stats().Batches - before
	m, err := e.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Totals.LeaseReclaims != n {
		t.Errorf("%d runs reclaimed at Start, want %d", m.Totals.LeaseReclaims, n)
	}
	if commits > n/4 {
		t.Errorf("Start took %d write transactions to reclaim %d runs, want at most %d (the reclaims share commits)", commits, n, n/4)
	}
	if err := e.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// gatedReclaims is a store whose reclaims (the sweeper's ActionReclaim
// updates) wait for gate to close.
type gatedReclaims struct {
	store.Store
	gate chan struct{}
}

func (g *gatedReclaims) Update(ctx context.Context, u store.Update) (store.UpdateResult, error) {
	if u.Action == store.ActionReclaim {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return store.UpdateResult{}, ctx.Err()
		}
	}
	return g.Store.Update(ctx, u)
}

// Start dispatches the idle runs before it reclaims the runs a dead
// process held, so that work resumes at once after a crash however many
// runs need reclaiming: here no reclaim can commit until an idle run has
// started, and Start still returns only once the reclaims are done.
func TestStartDispatchesBeforeReclaiming(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	ctx := context.Background()
	st, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var held []string
	for i := range 6 {
		id := uuid.Must(uuid.NewV7()).String()
		if _, err := st.Admit(ctx, store.Admission{Event: "ev", Runs: []store.NewRun{{ID: id, Process: "p"}}, Now: now}); err != nil {
			t.Fatal(err)
		}
		if i < 5 {
			held = append(held, id)
		}
	}
	st = heldByDeadProcess(t, st, path, held)
	defer st.Close()
	g := &gatedReclaims{Store: st, gate: make(chan struct{})}
	e, err := yella.New(yella.Config{Store: g})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	if err := e.Register(yella.Process{Name: "p", On: "ev", Run: func(c *yella.Ctx) yella.Result {
		once.Do(func() { close(g.gate) })
		return c.OK(nil)
	}}); err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- e.Start(ctx) }()
	select {
	case <-g.gate:
	case <-time.After(5 * time.Second): // the run starts within milliseconds
		close(g.gate) // let Start end
		<-started
		e.Stop(ctx)
		t.Fatal("no run started while Start was reclaiming: dispatch waited for the reclaims")
	}
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	m, err := e.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Totals.LeaseReclaims != int64(len(held)) {
		t.Errorf("%d runs reclaimed when Start returned, want %d", m.Totals.LeaseReclaims, len(held))
	}
	if err := e.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if m, _ = e.Metrics(ctx); m.Queue[yella.StatusCompleted] != 6 {
		t.Errorf("%d runs completed, want 6", m.Queue[yella.StatusCompleted])
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// orderedReclaims is a store that records when its reclaims commit; each
// reclaim first waits for started (or a moment), so that a run dispatched
// before the reclaims would start first.
type orderedReclaims struct {
	store.Store
	started chan struct{}
	mu      sync.Mutex
	last    time.Time // when the last reclaim committed
}

func (o *orderedReclaims) Update(ctx context.Context, u store.Update) (store.UpdateResult, error) {
	if u.Action != store.ActionReclaim {
		return o.Store.Update(ctx, u)
	}
	select {
	case <-o.started:
	case <-time.After(300 * time.Millisecond):
	}
	res, err := o.Store.Update(ctx, u)
	o.mu.Lock()
	o.last = time.Now()
	o.mu.Unlock()
	return res, err
}

// A run that a dead process held with a concurrency key is reclaimed
// before Start dispatches anything: the dispatcher counts a key's running
// runs among those it starts, so an idle run of the same key (Max 1) must
// not start while the store still holds the dead run running.
func TestStartReclaimsKeyedRunsFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	ctx := context.Background()
	proc := func(run func(*yella.Ctx) yella.Result) yella.Process {
		return yella.Process{Name: "k", On: "ev", Run: run,
			KeyConcurrency: &yella.KeyConcurrency{Max: 1, Key: yella.KeyFromPayload("k")}}
	}
	st, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := yella.New(yella.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(proc(func(c *yella.Ctx) yella.Result { return c.OK(nil) })); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 2 {
		em, err := e.Emit(ctx, "ev", map[string]string{"k": "x"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, em.Runs[0])
	}
	st = heldByDeadProcess(t, st, path, ids[:1])
	defer st.Close()
	o := &orderedReclaims{Store: st, started: make(chan struct{})}
	if e, err = yella.New(yella.Config{Store: o}); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var first time.Time // when the first handler started
	if err := e.Register(proc(func(c *yella.Ctx) yella.Result {
		once.Do(func() {
			first = time.Now()
			close(o.started)
		})
		return c.OK(nil)
	})); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.last.IsZero() {
		t.Fatal("the dead process's run was not reclaimed")
	}
	if first.Before(o.last) {
		t.Fatalf("a run of key x started %v before the key's dead run was reclaimed", o.last.Sub(first))
	}
}
