package yella_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
)

// outageStore fails every write of an attempt and every heartbeat while
// down is set, as a store whose server is unreachable.
type outageStore struct {
	store.Store
	down  atomic.Bool
	calls atomic.Int64 // failed calls
}

var errUnreachable = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

func (s *outageStore) Update(ctx context.Context, u store.Update) (store.UpdateResult, error) {
	if s.down.Load() {
		s.calls.Add(1)
		return store.UpdateResult{}, errUnreachable
	}
	return s.Store.Update(ctx, u)
}

func (s *outageStore) Heartbeat(ctx context.Context, owner string, now, until time.Time) ([]store.Lease, error) {
	if s.down.Load() {
		s.calls.Add(1)
		return nil, errUnreachable
	}
	return s.Store.Heartbeat(ctx, owner, now, until)
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.b.String(), s)
}

// TestStoreHealth: while the store fails, the engine reports it down
// (StoreHealth, with the time it went down and the last error), logs the
// outage once however many retries fail, keeps the outcome of an attempt
// that finished meanwhile and retries it with backoff, and, when the store
// answers again, commits that outcome, reports the store up and logs the
// end of the outage once.
func TestStoreHealth(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	st := &outageStore{Store: memstore.New()}
	var logs syncBuffer
	eng, err := yella.New(yella.Config{Store: st, Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	eng.Register(yella.Process{Name: "job", On: "job", Run: func(c *yella.Ctx) yella.Result { return c.OK("done") }})
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { // a failed check may leave the store down and an outcome retried on the fake clock
		st.down.Store(false)
		stopped := make(chan struct{})
		go func() {
			eng.Stop(ctx)
			close(stopped)
		}()
		for {
			select {
			case <-stopped:
				return
			case <-time.After(time.Millisecond):
				clk.Advance(time.Second)
			}
		}
	}()
	if h := eng.StoreHealth(); !h.Up || h.Failures != 0 || !h.Since.IsZero() {
		t.Fatalf("before any failure: %+v", h)
	}
	st.down.Store(true)
	em, err := eng.Emit(ctx, "job", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The attempt finishes; its completion fails and is retried every
	// backoff (100ms, 200ms, …) of the engine's clock.
	waitFor(t, "the completion's first failure", func() bool { return eng.StoreHealth().Failures >= 1 })
	h := eng.StoreHealth()
	if h.Up || !h.Since.Equal(t0) || !strings.Contains(h.LastError, "connection refused") || h.Outages != 1 {
		t.Fatalf("during the outage: %+v", h)
	}
	for i := 0; eng.StoreHealth().Failures < 5; i++ {
		if i > 1000 {
			t.Fatalf("the completion was not retried: %+v", eng.StoreHealth())
		}
		clk.Advance(100 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	if r, err := eng.Run(ctx, em.Runs[0]); err != nil || r.Status != yella.StatusRunning {
		t.Fatalf("during the outage the run is %v (%v), want running", r.Status, err)
	}
	if n := logs.count("store unreachable"); n != 1 {
		t.Errorf("%d outage-start log lines for %d failures, want 1:\n%s", n, eng.StoreHealth().Failures, logs.b.String())
	}
	st.down.Store(false)
	for i := 0; !eng.StoreHealth().Up; i++ {
		if i > 1000 {
			t.Fatalf("the store never came back: %+v", eng.StoreHealth())
		}
		clk.Advance(100 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	if err := eng.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := eng.Run(ctx, em.Runs[0]); err != nil || r.Status != yella.StatusCompleted {
		t.Fatalf("after the outage the run is %v (%v), want completed", r.Status, err)
	}
	if n := logs.count("internal error"); n != 0 {
		t.Errorf("%d per-retry log lines, want none", n)
	}
	h = eng.StoreHealth()
	if !h.Up || h.Outages != 1 || h.Failures != st.calls.Load() || !h.Since.After(t0) {
		t.Errorf("after the outage: %+v (%d failed calls)", h, st.calls.Load())
	}
	if n := logs.count("store reachable again"); n != 1 {
		t.Errorf("%d outage-end log lines, want 1", n)
	}
	m, err := eng.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Totals.InternalErrors != h.Failures {
		t.Errorf("internal errors %d, want one per failure (%d)", m.Totals.InternalErrors, h.Failures)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
