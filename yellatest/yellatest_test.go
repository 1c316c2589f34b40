package yellatest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/yellatest"
)

// Every goroutine a kit starts is gone when the tests end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// flaky fails its first n attempts.
func flaky(n int) func(*yella.Ctx) yella.Result {
	return func(c *yella.Ctx) yella.Result {
		if c.Attempt() <= n {
			return c.Error(fmt.Errorf("attempt %d failed", c.Attempt()))
		}
		return c.OK(c.Attempt())
	}
}

// Retries an hour apart complete at once, and the clock ends exactly at the
// last retry's due time.
func TestRunUntilIdleRunsRetriesOnTheFakeClock(t *testing.T) {
	k := yellatest.Start(t, yella.Config{}, yella.Process{Name: "p", On: "ev",
		Retry: &yella.Retry{Max: 2, Backoff: yella.Fixed(time.Hour)}, Run: flaky(2)})
	start := k.Clock.Now()
	em, err := k.Engine.Emit(ctx(t), "ev", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.RunUntilIdle(ctx(t)); err != nil {
		t.Fatal(err)
	}
	r := k.ExpectStatus(t, em.Runs[0], yella.StatusCompleted)
	if r.Attempts != 3 || string(r.Output) != "3" {
		t.Errorf("attempts %d, output %s; want 3, 3", r.Attempts, r.Output)
	}
	k.ExpectTimeline(t, em.Runs[0],
		yella.StatusIdle, yella.StatusRunning, yella.StatusIdle, yella.StatusRunning, yella.StatusIdle, yella.StatusRunning, yella.StatusCompleted)
	if got := k.Clock.Now().Sub(start); got != 2*time.Hour {
		t.Errorf("fake time passed: %v, want 2h (two retries an hour apart)", got)
	}
	// Idle already: nothing to do, the clock stays.
	if err := k.RunUntilIdle(ctx(t)); err != nil || k.Clock.Now().Sub(start) != 2*time.Hour {
		t.Errorf("second RunUntilIdle: %v, clock %v", err, k.Clock.Now().Sub(start))
	}
}

// The clock does not move while a handler runs, even with a retry waiting.
func TestRunUntilIdleHoldsTheClockWhileHandlersRun(t *testing.T) {
	gate := make(chan struct{})
	var seen [2]atomic.Int64 // the fake time at the slow handler's start and end
	var k *yellatest.Kit
	k = yellatest.Start(t, yella.Config{},
		yella.Process{Name: "flaky", On: "a", Retry: &yella.Retry{Max: 1, Backoff: yella.Fixed(time.Minute)}, Run: flaky(1)},
		yella.Process{Name: "slow", On: "b", Run: func(c *yella.Ctx) yella.Result {
			seen[0].Store(k.Clock.Now().UnixNano())
			<-gate
			seen[1].Store(k.Clock.Now().UnixNano())
			return c.OK(nil)
		}})
	a, _ := k.Engine.Emit(ctx(t), "a", nil)
	b, _ := k.Engine.Emit(ctx(t), "b", nil)
	done := make(chan error, 1)
	go func() { done <- k.RunUntilIdle(ctx(t)) }()
	for {
		m, err := k.Engine.Metrics(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if m.Dispatcher.Delayed == 1 && m.Dispatcher.Running == 1 {
			break // the retry waits for the clock, the slow handler runs
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // give a faulty RunUntilIdle time to move the clock
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if seen[0].Load() != seen[1].Load() {
		t.Errorf("the clock moved by %v while a handler ran", time.Duration(seen[1].Load()-seen[0].Load()))
	}
	k.ExpectStatus(t, a.Runs[0], yella.StatusCompleted)
	k.ExpectStatus(t, b.Runs[0], yella.StatusCompleted)
}

// A handler that never returns stops RunUntilIdle at the context's end,
// with an error that says so.
func TestRunUntilIdleEndsWithTheContext(t *testing.T) {
	gate := make(chan struct{})
	k := yellatest.Start(t, yella.Config{}, yella.Process{Name: "stuck", On: "ev", Run: func(c *yella.Ctx) yella.Result {
		<-gate
		return c.OK(nil)
	}})
	defer close(gate)
	k.Engine.Emit(ctx(t), "ev", nil)
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := k.RunUntilIdle(short)
	if err == nil || !strings.Contains(err.Error(), "not idle") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("RunUntilIdle with a stuck handler: %v, want a not-idle error wrapping the deadline", err)
	}
}

func TestNewTakesTheKitsClockOnly(t *testing.T) {
	clk := yellatest.NewClock(time.Date(2030, 5, 1, 0, 0, 0, 0, time.UTC))
	k, err := yellatest.New(yella.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if k.Clock != clk {
		t.Error("the kit does not use the clock it was given")
	}
	if _, err := yellatest.New(yella.Config{Clock: otherClock{}}); err == nil || !strings.Contains(err.Error(), "yellatest.Clock") {
		t.Errorf("another clock: %v, want an error naming yellatest.Clock", err)
	}
}

type otherClock struct{}

func (otherClock) Now() time.Time                              { return time.Now() }
func (otherClock) AfterFunc(time.Duration, func()) func() bool { return func() bool { return true } }

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// The checks fail with a message naming what differs, and pass silently
// when it matches.
func TestExpectationsFailAndPass(t *testing.T) {
	k := yellatest.Start(t, yella.Config{}, yella.Process{Name: "p", On: "ev", Run: func(c *yella.Ctx) yella.Result {
		if _, err := yella.Effect(c, yella.MakeKey("charge", "42"), func(context.Context) (int, error) { return 1, nil }); err != nil {
			return c.Error(err)
		}
		yella.Effect(c, "mail", func(context.Context) (int, error) { return 0, errors.New("smtp down") })
		return c.Fail(errors.New("bad input"))
	}})
	em, _ := k.Engine.Emit(ctx(t), "ev", nil)
	if err := k.RunUntilIdle(ctx(t)); err != nil {
		t.Fatal(err)
	}
	id := em.Runs[0]

	ok := &recorder{}
	k.ExpectStatus(ok, id, yella.StatusErrored)
	k.ExpectTimeline(ok, id, yella.StatusIdle, yella.StatusRunning, yella.StatusErrored)
	if rec := k.ExpectEffect(ok, id, yella.EffectStatusCompleted, "charge", "42"); string(rec.Output) != "1" {
		t.Errorf("effect output %s, want 1", rec.Output)
	}
	k.ExpectEffect(ok, id, yella.EffectStatusFailed, "mail")
	if len(ok.errs) != 0 {
		t.Errorf("matching checks failed: %q", ok.errs)
	}

	for _, tc := range []struct {
		name  string
		check func(testing.TB)
		want  string
	}{
		{"status", func(tb testing.TB) { k.ExpectStatus(tb, id, yella.StatusCompleted) }, "is errored (error: bad input), want completed"},
		{"timeline", func(tb testing.TB) { k.ExpectTimeline(tb, id, yella.StatusIdle, yella.StatusCompleted) }, "[idle running errored], want [idle completed]"},
		{"effect status", func(tb testing.TB) { k.ExpectEffect(tb, id, yella.EffectStatusCompleted, "mail") }, `effect "mail" of run ` + id + ` is failed (error "smtp down"), want completed`},
		{"no such effect", func(tb testing.TB) { k.ExpectEffect(tb, id, yella.EffectStatusCompleted, "charge") }, `has no effect "charge" (it has ["charge/42" "mail"])`},
	} {
		r := &recorder{}
		tc.check(r)
		if len(r.errs) != 1 || !strings.Contains(r.errs[0], tc.want) {
			t.Errorf("%s: failures %q, want one containing %q", tc.name, r.errs, tc.want)
		}
	}
}

// The engine runs inside a synctest bubble with its default wall clock:
// Drain returns once the hour-long retry delays have passed in the bubble's
// fake time.
func TestSynctestBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		defer st.Close()
		eng, err := yella.New(yella.Config{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		eng.Register(yella.Process{Name: "p", On: "ev", Retry: &yella.Retry{Max: 2, Backoff: yella.Fixed(time.Hour)}, Run: flaky(2)})
		bg := context.Background()
		if err := eng.Start(bg); err != nil {
			t.Fatal(err)
		}
		defer eng.Stop(bg)
		start := time.Now()
		em, err := eng.Emit(bg, "ev", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := eng.Drain(bg); err != nil {
			t.Fatal(err)
		}
		r, _ := eng.Run(bg, em.Runs[0])
		if r.Status != yella.StatusCompleted || r.Attempts != 3 {
			t.Errorf("run %s after %d attempts, want completed after 3", r.Status, r.Attempts)
		}
		if got := time.Since(start); got != 2*time.Hour {
			t.Errorf("bubble time passed: %v, want 2h", got)
		}
	})
}
