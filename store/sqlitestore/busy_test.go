package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/sqlitestore"
)

func isBusy(err error) bool {
	if err == nil {
		return false
	}
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "busy") || strings.Contains(s, "locked")
}

// TestNoBusyUnderMixedLoad drives concurrent emits, completions with
// effects, retention and dashboard-like reads, and asserts that no
// SQLITE_BUSY or SQLITE_LOCKED error ever reaches the engine or a caller.
func TestNoBusyUnderMixedLoad(t *testing.T) {
	d := 2 * time.Second
	if raceEnabled {
		d = time.Second
	}
	st, err := sqlitestore.Open(filepath.Join(t.TempDir(), "busy.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var errs errorTally
	eng := mixedLoadEngine(t, st, &errs)
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var emitted atomic.Int64
	for range 4 { // writers
		wg.Go(func() { emitLoad(ctx, eng, &errs, &emitted, stop) })
	}
	for range 2 { // dashboard readers
		wg.Go(func() { readLoad(ctx, eng, &errs, stop) })
	}
	time.Sleep(d)
	close(stop)
	wg.Wait()
	if err := eng.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := eng.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if errs.busy.Load() != 0 || errs.other.Load() != 0 {
		t.Errorf("%d busy/locked errors and %d other errors; first: %v", errs.busy.Load(), errs.other.Load(), errs.samples)
	}
	m, _ := eng.Metrics(ctx)
	t.Logf("%d emits, %d runs completed, %d pruned by retention meanwhile, 0 busy", emitted.Load(), m.Totals.Completed, m.Totals.Completed-m.Queue[yella.StatusCompleted])
	if m.Totals.Completed == 0 || m.Queue[yella.StatusCompleted] >= m.Totals.Completed {
		t.Errorf("the load did not exercise completions and retention: %+v", m.Totals)
	}
}

// errorTally counts the errors the load meets, busy or locked apart from
// the others, and keeps the first five.
type errorTally struct {
	busy, other atomic.Int64
	mu          sync.Mutex
	samples     []string
}

func (e *errorTally) note(where string, err error) {
	if err == nil {
		return
	}
	if isBusy(err) {
		e.busy.Add(1)
	} else {
		e.other.Add(1)
	}
	e.mu.Lock()
	if len(e.samples) < 5 {
		e.samples = append(e.samples, where+": "+err.Error())
	}
	e.mu.Unlock()
}

// mixedLoadEngine is an engine on st with short retention and a chain of
// two processes, the first with an effect; its internal errors go to errs.
func mixedLoadEngine(t *testing.T, st *sqlitestore.Store, errs *errorTally) *yella.Engine {
	t.Helper()
	eng, err := yella.New(yella.Config{Store: st, Concurrency: 50, Retention: 50 * time.Millisecond, RetentionInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	eng.Register(yella.Process{Name: "first", On: "ev", Run: func(c *yella.Ctx) yella.Result {
		v, err := yella.Effect(c, "k", func(context.Context) (int, error) { return 1, nil })
		if err != nil {
			return c.Error(err)
		}
		c.SetContext("seen", v)
		return c.OK(v, yella.Then("next"))
	}})
	eng.Register(yella.Process{Name: "second", On: "next", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
	eng.Subscribe(func(ev yella.Event) {
		if ev.Type == yella.InternalError {
			errs.note("internal "+ev.Context, errors.New(ev.Error))
		}
	})
	return eng
}

// emitLoad emits as fast as it can until stop closes.
func emitLoad(ctx context.Context, eng *yella.Engine, errs *errorTally, emitted *atomic.Int64, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		_, err := eng.Emit(ctx, "ev", map[string]int{"n": 1})
		errs.note("emit", err)
		emitted.Add(1)
	}
}

// readLoad reads as the dashboard does (listings, a chain, a timeline,
// observability, metrics) until stop closes.
func readLoad(ctx context.Context, eng *yella.Engine, errs *errorTally, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		page, err := eng.Runs(ctx, yella.RunQuery{Limit: 50, WithTotal: true})
		errs.note("runs", err)
		if len(page.Runs) > 0 {
			_, err = eng.Chain(ctx, page.Runs[0].ID)
			if !errors.Is(err, yella.ErrRunNotFound) { // pruned meanwhile is fine
				errs.note("chain", err)
			}
			_, err = eng.Timeline(ctx, page.Runs[0].ID)
			if !errors.Is(err, yella.ErrRunNotFound) {
				errs.note("timeline", err)
			}
		}
		_, err = eng.Runs(ctx, yella.RunQuery{Status: []yella.Status{yella.StatusCompleted, yella.StatusErrored}, Process: "second", Limit: 200})
		errs.note("runs by status", err)
		_, err = eng.Observability(ctx, yella.ObservabilityQuery{})
		errs.note("observability", err)
		_, err = eng.Metrics(ctx)
		errs.note("metrics", err)
	}
}
