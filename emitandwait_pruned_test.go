package yella_test

import (
	"context"
	"sync"
	"testing"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
)

// prunedOnReread is a store whose runs are gone from the second read on,
// as when retention prunes a chain the moment it ends.
type prunedOnReread struct {
	store.Store
	mu    sync.Mutex
	reads map[string]int
}

func (s *prunedOnReread) Run(ctx context.Context, id string) (store.Run, error) {
	s.mu.Lock()
	s.reads[id]++
	n := s.reads[id]
	s.mu.Unlock()
	if n > 1 {
		return store.Run{}, store.ErrNotFound
	}
	return s.Store.Run(ctx, id)
}

// TestEmitAndWaitRunPrunedWhileWaiting: a root run that retention prunes
// between the end of its chain and EmitAndWait's read is returned as a
// pruned run (completed), not as an error.
func TestEmitAndWaitRunPrunedWhileWaiting(t *testing.T) {
	ctx := context.Background()
	st := &prunedOnReread{Store: memstore.New(), reads: map[string]int{}}
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	eng.Register(yella.Process{Name: "a", On: "ev", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(ctx)
	runs, err := eng.EmitAndWait(ctx, "ev", nil, yella.IdempotencyKey("k"))
	if err != nil || len(runs) != 1 {
		t.Fatalf("EmitAndWait: %v, %d runs, want the pruned root", err, len(runs))
	}
	if r := runs[0]; r.Status != yella.StatusCompleted || r.Process != "a" || r.IdempotencyKey != "k" || r.ID == "" {
		t.Errorf("pruned root returned as %+v", r)
	}
}
