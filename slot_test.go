package yella_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
)

// heldEnd is a store whose first completion waits for gate to close; held
// closes when it starts waiting.
type heldEnd struct {
	store.Store
	once sync.Once
	held chan struct{}
	gate chan struct{}
}

func (h *heldEnd) Update(ctx context.Context, u store.Update) (store.UpdateResult, error) {
	if u.Action == store.ActionComplete {
		h.once.Do(func() {
			close(h.held)
			<-h.gate
		})
	}
	return h.Store.Update(ctx, u)
}

// A handler's fleet slot is free as soon as it returns, while its end is
// still being written (so the next run's claim can share that write); its
// process's cap counts the run until the end is written, and Drain waits
// for the end.
func TestSlotFreedWhileEndIsWritten(t *testing.T) {
	ctx := context.Background()
	h := &heldEnd{Store: memstore.New(), held: make(chan struct{}), gate: make(chan struct{})}
	e, err := yella.New(yella.Config{Store: h, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 10)
	run := func(c *yella.Ctx) yella.Result { started <- c.Process(); return c.OK(nil) }
	for _, p := range []yella.Process{
		{Name: "capped", On: "a", Concurrency: 1, Overflow: yella.Queue(10), Run: run},
		{Name: "free", On: "b", Run: run},
	} {
		if err := e.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(ctx)
	release := sync.OnceFunc(func() { close(h.gate) })
	defer release()
	if _, err := e.Emit(ctx, "a", nil); err != nil {
		t.Fatal(err)
	}
	if got := <-started; got != "capped" {
		t.Fatalf("started %q, want the capped run", got)
	}
	<-h.held // its handler returned; its end is being written
	// The second capped run waits for the cap the first one holds; the
	// free run waits for the fleet slot only.
	if _, err := e.Emit(ctx, "a", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Emit(ctx, "b", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-started:
		if got != "free" {
			t.Fatalf("%q started while the capped run's end was held, want the free run", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no run started while an ended handler's end was being written: its fleet slot was not freed")
	}
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = e.Drain(dctx)
	cancel()
	if err == nil {
		t.Fatal("Drain returned while a run's end was still being written")
	}
	select {
	case got := <-started:
		t.Fatalf("%q started while the capped run's end was held", got)
	default:
	}
	release()
	if err := e.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-started; got != "capped" {
		t.Fatalf("started %q, want the second capped run", got)
	}
}
