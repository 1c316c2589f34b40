package yella_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

// unreachableOnce is a SQLite store whose first queued effect end fails
// as an unreachable store's would, without being written.
type unreachableOnce struct {
	*sqlitestore.Store
	failed atomic.Bool
}

func (s *unreachableOnce) QueueFinishEffect(ctx context.Context, runID string, epoch int64, key string, status store.EffectStatus, output json.RawMessage, errMsg string, now time.Time) func() error {
	if s.failed.CompareAndSwap(false, true) {
		return func() error { return errors.New("connection refused") }
	}
	return s.Store.QueueFinishEffect(ctx, runID, epoch, key, status, output, errMsg, now)
}

// TestQueuedEffectEndWrittenAgain: an effect's end that the handler did not
// wait for, and that the store failed to write, is written again before
// the attempt's end: the run completes with its effect completed (not
// left started), and effect:completed comes before run:completed.
func TestQueuedEffectEndWrittenAgain(t *testing.T) {
	ctx := context.Background()
	inner, err := sqlitestore.Open(filepath.Join(t.TempDir(), "q.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := &unreachableOnce{Store: inner}
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	eng.Register(yella.Process{Name: "p", On: "ev", Run: func(c *yella.Ctx) yella.Result {
		v, err := yella.Effect(c, "charge", func(context.Context) (string, error) { calls.Add(1); return "receipt", nil })
		if err != nil {
			return c.Error(err)
		}
		return c.OK(v)
	}})
	var mu sync.Mutex
	var order []yella.EventType
	eng.Subscribe(func(ev yella.Event) {
		if ev.Type == yella.EffectCompleted || ev.Type == yella.RunCompleted {
			mu.Lock()
			order = append(order, ev.Type)
			mu.Unlock()
		}
	})
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(ctx)
	em, err := eng.Emit(ctx, "ev", nil)
	if err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := eng.Drain(dctx); err != nil {
		t.Fatal(err)
	}
	if !st.failed.Load() {
		t.Fatal("the store never failed a queued effect end")
	}
	id := em.Runs[0]
	r, err := eng.Run(ctx, id)
	if err != nil || r.Status != yella.StatusCompleted || string(r.Output) != `"receipt"` {
		t.Fatalf("run: %+v, %v", r, err)
	}
	effs, err := eng.Effects(ctx, id)
	if err != nil || len(effs) != 1 || effs[0].Status != yella.EffectStatusCompleted || string(effs[0].Output) != `"receipt"` {
		t.Fatalf("effects: %+v, %v", effs, err)
	}
	if calls.Load() != 1 {
		t.Errorf("the effect's body ran %d times", calls.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[0] != yella.EffectCompleted || order[1] != yella.RunCompleted {
		t.Errorf("events %v, want effect:completed then run:completed", order)
	}
}
