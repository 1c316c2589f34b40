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
	var busy, other atomic.Int64
	var mu sync.Mutex
	var samples []string
	note := func(where string, err error) {
		if err == nil {
			return
		}
		if isBusy(err) {
			busy.Add(1)
		} else {
			other.Add(1)
		}
		mu.Lock()
		if len(samples) < 5 {
			samples = append(samples, where+": "+err.Error())
		}
		mu.Unlock()
	}
	eng.Subscribe(func(ev yella.Event) {
		if ev.Type == yella.InternalError {
			note("internal "+ev.Context, errors.New(ev.Error))
		}
	})
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var emitted atomic.Int64
	for range 4 { // writers
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := eng.Emit(ctx, "ev", map[string]int{"n": 1})
				note("emit", err)
				emitted.Add(1)
			}
		}()
	}
	for range 2 { // dashboard readers
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				page, err := eng.Runs(ctx, yella.RunQuery{Limit: 50, WithTotal: true})
				note("runs", err)
				if len(page.Runs) > 0 {
					_, err = eng.Chain(ctx, page.Runs[0].ID)
					if !errors.Is(err, yella.ErrRunNotFound) { // pruned meanwhile is fine
						note("chain", err)
					}
					_, err = eng.Timeline(ctx, page.Runs[0].ID)
					if !errors.Is(err, yella.ErrRunNotFound) {
						note("timeline", err)
					}
				}
				_, err = eng.Runs(ctx, yella.RunQuery{Status: []yella.Status{yella.StatusCompleted, yella.StatusErrored}, Process: "second", Limit: 200})
				note("runs by status", err)
				_, err = eng.Observability(ctx, yella.ObservabilityQuery{})
				note("observability", err)
				_, err = eng.Metrics(ctx)
				note("metrics", err)
			}
		}()
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
	if busy.Load() != 0 || other.Load() != 0 {
		t.Errorf("%d busy/locked errors and %d other errors; first: %v", busy.Load(), other.Load(), samples)
	}
	m, _ := eng.Metrics(ctx)
	t.Logf("%d emits, %d runs completed, %d pruned by retention meanwhile, 0 busy", emitted.Load(), m.Totals.Completed, m.Totals.Completed-m.Queue[yella.StatusCompleted])
	if m.Totals.Completed == 0 || m.Queue[yella.StatusCompleted] >= m.Totals.Completed {
		t.Errorf("the load did not exercise completions and retention: %+v", m.Totals)
	}
}
