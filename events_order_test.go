package yella_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/memstore"
)

// TestAdmittedBeforeStarted: a subscriber has received a run's
// run:admitted in full before the run can start: run:started never
// arrives while run:admitted is still being delivered.
func TestAdmittedBeforeStarted(t *testing.T) {
	ctx := context.Background()
	eng, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	eng.Register(yella.Process{Name: "a", On: "ev", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
	var mu sync.Mutex
	delivering := map[string]bool{} // run:admitted being delivered
	var early []string
	eng.Subscribe(func(ev yella.Event) {
		switch ev.Type {
		case yella.RunAdmitted:
			mu.Lock()
			delivering[ev.RunID] = true
			mu.Unlock()
			time.Sleep(100 * time.Millisecond) // long enough for a queued run to start
			mu.Lock()
			delete(delivering, ev.RunID)
			mu.Unlock()
		case yella.RunStarted:
			mu.Lock()
			if delivering[ev.RunID] {
				early = append(early, ev.RunID)
			}
			mu.Unlock()
		}
	})
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(ctx)
	for range 3 {
		if _, err := eng.EmitAndWait(ctx, "ev", nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(early) > 0 {
		t.Errorf("run:started published while run:admitted was still being delivered, for %v", early)
	}
}
