package yella_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
)

// lostRecord fails the first FinishEffect of key, after the effect's body
// ran: the outcome of an attempt that crashed between the two.
type lostRecord struct {
	*memstore.Store
	key  string
	lost atomic.Bool
}

func (s *lostRecord) FinishEffect(ctx context.Context, runID string, epoch int64, key string, st store.EffectStatus, out json.RawMessage, msg string, now time.Time) error {
	if key == s.key && s.lost.CompareAndSwap(false, true) {
		return errors.New("lost")
	}
	return s.Store.FinishEffect(ctx, runID, epoch, key, st, out, msg, now)
}

// Children admitted by an attempt that could not record it are found by
// the next attempt, not admitted again.
func TestChildrenAdmittedOnceAfterLostRecord(t *testing.T) {
	st := &lostRecord{Store: memstore.New(), key: yella.MakeKey("kids").String()}
	eng, err := yella.New(yella.Config{Store: st, Retry: &yella.Retry{Max: 3, Backoff: yella.Fixed(time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	var attempts atomic.Int32
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(eng.Register(yella.Process{Name: "parent", On: "go", Run: func(c *yella.Ctx) yella.Result {
		attempts.Add(1)
		ids, err := yella.Children(c, yella.MakeKey("kids"), "kid", []any{1, 2, 3})
		if err != nil {
			return c.Error(err)
		}
		if _, err := yella.Join(c, "kids", ids, 0); err != nil {
			return c.Error(err)
		}
		return c.OK(len(ids))
	}}))
	must(eng.Register(yella.Process{Name: "kid", On: "kid", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }}))
	ctx := context.Background()
	must(eng.Start(ctx))
	defer eng.Stop(ctx)
	runs, err := eng.EmitAndWait(ctx, "go", nil)
	must(err)
	if !st.lost.Load() || attempts.Load() < 2 {
		t.Fatalf("the record was not lost (%v) or no second attempt ran (%d)", st.lost.Load(), attempts.Load())
	}
	chain, err := eng.Chain(ctx, runs[0].ID)
	must(err)
	if len(chain) != 4 || string(runs[0].Output) != "3" {
		t.Fatalf("a chain of %d runs, output %s: want the parent and its 3 children, admitted once", len(chain), runs[0].Output)
	}
}
