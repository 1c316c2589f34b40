package yella_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
)

func types(evs []yella.Event) string {
	var out []string
	for _, ev := range evs {
		out = append(out, string(ev.Type))
	}
	return strings.Join(out, ",")
}

func retryCases() []Case {
	return []Case{
		Case{Name: "Retry/FailOnceThenSucceed", Spec: []int{226}, Note: "attempts are 1-based and counted when claimed", Fn: func(h *H) {
			var n atomic.Int32
			e := h.Started(yella.Config{Retry: &yella.Retry{Max: 2, Backoff: yella.Fixed(time.Millisecond)}}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				if n.Add(1) == 1 {
					return c.Error(errors.New("first"))
				}
				return c.OK(c.Attempt())
			}))
			id := h.One(e, "ev", nil)
			h.Drain(e)
			r := h.Run(id)
			Expect(h, "status", r.Status, store.StatusCompleted)
			Expect(h, "attempts", r.Attempts, 2)
			Expect(h, "handler saw attempt", string(r.Output), "2")
		}},
		Case{Name: "Retry/CancelledBeforeItsRetrySettled", Note: "new: an operator's cancel that lands after an attempt's end scheduled a retry (in an hour) and before the engine settled that end leaves nothing queued: EmitAndWait returns with the run cancelled", Fn: func(h *H) {
			gate := newLateSettle(h.St, store.ActionRetryLater)
			e := h.Started(yella.Config{Store: gate, Retry: &yella.Retry{Max: 3, Backoff: yella.Fixed(time.Hour)}}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				return c.Error(errors.New("down"))
			}))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			done := make(chan error, 1)
			var runs []yella.Run
			go func() {
				var err error
				runs, err = e.EmitAndWait(ctx, "ev", nil)
				done <- err
			}()
			select {
			case <-gate.committed:
			case <-time.After(5 * time.Second):
				h.Fatal("the attempt never scheduled its retry")
			}
			ps, err := h.St.Pending(h.Ctx(), 0, 10)
			Expect(h, "pending", err, nil)
			Expect(h, "one run waiting for its retry", len(ps), 1)
			_, err = e.Cancel(h.Ctx(), ps[0].ID)
			Expect(h, "cancel", err, nil)
			close(gate.open)
			if err := <-done; err != nil {
				h.Fatalf("EmitAndWait after the run was cancelled: %v", err)
			}
			Expect(h, "cancelled", runs[0].Status, yella.StatusCancelled)
			h.WaitFor("nothing left in the queue", func() bool {
				m, err := e.Metrics(h.Ctx())
				return err == nil && m.Dispatcher.Ready == 0 && m.Dispatcher.Delayed == 0 && m.Dispatcher.Running == 0
			})
		}},
		Case{Name: "Retry/ExhaustedToDeadLetter", Spec: []int{227, 232, 306}, Fn: func(h *H) {
			var n atomic.Int32
			e := h.Started(yella.Config{Retry: &yella.Retry{Max: 2, Backoff: yella.Fixed(time.Millisecond)}}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				return c.Error(fmt.Errorf("fail %d", n.Add(1)))
			}))
			id := h.One(e, "ev", nil)
			h.Drain(e)
			r := h.Run(id)
			Expect(h, "status", r.Status, store.StatusDead)
			Expect(h, "state", r.State(), store.StateErrored)
			Expect(h, "attempts", r.Attempts, 3)
			Expect(h, "last error", r.Error, "fail 3")
			dead := h.Events(yella.RunDeadLettered)
			Expect(h, "one run:dead-lettered", len(dead), 1)
			if len(dead) == 1 {
				Expect(h, "dead error", dead[0].Error, "fail 3")
			}
			Expect(h, "order", types(h.Events(yella.RunRetryScheduled, yella.RunDeadLettered, yella.RunFailed)), "run:retry-scheduled,run:retry-scheduled,run:dead-lettered,run:failed")
		}},
		Case{Name: "Retry/DelayedRetryFiresOnTime", Spec: []int{228}, Note: "fake clock: no sleeping; drain waits for the delayed retry", Fn: func(h *H) {
			clk := h.Fake()
			var n atomic.Int32
			e := h.Started(yella.Config{Retry: &yella.Retry{Max: 1, Backoff: yella.Fixed(100 * time.Millisecond)}}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				if n.Add(1) == 1 {
					return c.Error(errors.New("later"))
				}
				return c.OK(nil)
			}))
			t0 := clk.Now()
			id := h.One(e, "ev", nil)
			h.WaitFor("retry scheduled", func() bool { r := h.Run(id); return r.Status == store.StatusIdle && r.Attempts == 1 })
			r := h.Run(id)
			Expect(h, "retry at", r.RetryAt.Equal(t0.Add(100*time.Millisecond)), true)
			drained := make(chan error, 1)
			go func() { drained <- e.Drain(h.Ctx()) }()
			clk.Advance(99 * time.Millisecond)
			time.Sleep(10 * time.Millisecond)
			select {
			case <-drained:
				h.Fatal("drain returned before the delayed retry ran")
			default:
			}
			Expect(h, "not yet", n.Load(), int32(1))
			clk.Advance(time.Millisecond)
			Expect(h, "drain", <-drained, nil)
			Expect(h, "retried", n.Load(), int32(2))
			Expect(h, "completed", h.Run(id).Status, store.StatusCompleted)
		}},
		Case{Name: "Retry/RetryDelayLengthensBackoff", Spec: []int{228}, Note: "an error with RetryDelay() (a downstream's Retry-After) delays its retry past a shorter backoff; fake clock", Fn: func(h *H) {
			clk := h.Fake()
			var n atomic.Int32
			e := h.Started(yella.Config{Retry: &yella.Retry{Max: 1, Backoff: yella.Fixed(time.Millisecond)}}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				if n.Add(1) == 1 {
					return c.Error(fmt.Errorf("call: %w", &retryDelayErr{d: 5 * time.Second}))
				}
				return c.OK(nil)
			}))
			t0 := clk.Now()
			id := h.One(e, "ev", nil)
			h.WaitFor("retry scheduled", func() bool { r := h.Run(id); return r.Status == store.StatusIdle && r.Attempts == 1 })
			r := h.Run(id)
			Expect(h, "retry at", r.RetryAt.Equal(t0.Add(5*time.Second)), true)
			Expect(h, "retry at (unix ms)", r.RetryAt.UnixMilli()-t0.UnixMilli(), int64(5000))
			drained := make(chan error, 1)
			go func() { drained <- e.Drain(h.Ctx()) }()
			clk.Advance(time.Second) // far past the 1 ms backoff
			time.Sleep(10 * time.Millisecond)
			select {
			case <-drained:
				h.Fatal("drain returned before the delayed retry ran")
			default:
			}
			Expect(h, "not yet", n.Load(), int32(1))
			clk.Advance(4 * time.Second)
			Expect(h, "drain", <-drained, nil)
			Expect(h, "retried", n.Load(), int32(2))
			r = h.Run(id)
			Expect(h, "completed", r.Status, store.StatusCompleted)
			Expect(h, "attempts", r.Attempts, 2)
		}},
		Case{Name: "Retry/ProcessPolicyOverridesEngine", Spec: []int{230}, Fn: func(h *H) {
			e := h.Started(yella.Config{Retry: &yella.Retry{Max: 1, Backoff: yella.Fixed(0)}},
				yella.Process{Name: "a", On: "ev", Retry: &yella.Retry{Max: 3, Backoff: yella.Fixed(0)}, Run: func(c *yella.Ctx) yella.Result { return c.Error(errors.New("x")) }})
			id := h.One(e, "ev", nil)
			h.Drain(e)
			Expect(h, "attempts", h.Run(id).Attempts, 4)
		}},
		Case{Name: "Retry/RetryEvents", Spec: []int{231, 305}, Fn: func(h *H) {
			e := h.Started(yella.Config{Retry: &yella.Retry{Max: 2, Backoff: yella.Fixed(0)}}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				if c.Attempt() < 3 {
					return c.Error(fmt.Errorf("try %d", c.Attempt()))
				}
				return c.OK(nil)
			}))
			h.One(e, "ev", nil)
			h.Drain(e)
			evs := h.Events(yella.RunRetryScheduled)
			Expect(h, "retries", len(evs), 2)
			for i, ev := range evs {
				Expect(h, "attempt", ev.Attempt, i+1)
				Expect(h, "error", ev.Error, fmt.Sprintf("try %d", i+1))
				Expect(h, "status", ev.Status, yella.StatusIdle)
			}
		}},
		Case{Name: "Retry/ContextSurvivesRetry", Spec: []int{233}, Fn: func(h *H) {
			e := h.Started(yella.Config{Retry: &yella.Retry{Max: 1, Backoff: yella.Fixed(0)}}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				var seen int
				c.GetContext("seen", &seen)
				if c.Attempt() == 1 {
					c.SetContext("seen", 41)
					return c.Error(errors.New("again"))
				}
				return c.OK(seen + 1)
			}))
			id := h.One(e, "ev", nil)
			h.Drain(e)
			r := h.Run(id)
			Expect(h, "output", string(r.Output), "42")
			Expect(h, "stored context", string(r.Context), `{"seen":41}`)
		}},
		Case{Name: "Retry/StopDoesNotWaitForDelayedRetry", Spec: []int{234}, Fn: func(h *H) {
			e := h.Started(yella.Config{Retry: &yella.Retry{Max: 1, Backoff: yella.Fixed(5 * time.Second)}}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				return c.Error(errors.New("later"))
			}))
			id := h.One(e, "ev", nil)
			h.WaitFor("retry scheduled", func() bool { return h.Run(id).Status == store.StatusIdle && h.Run(id).Attempts == 1 })
			start := time.Now()
			Expect(h, "stop", e.Stop(h.Ctx()), nil)
			Expect(h, "stop was quick", time.Since(start) < 2*time.Second, true)
			Expect(h, "still idle", h.Run(id).Status, store.StatusIdle)
		}},
		Case{Name: "Events/SuccessOrder", Spec: []int{235, 236, 241, 301}, Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "ev", Noop))
			id := h.One(e, "ev", nil)
			h.Drain(e)
			evs := h.Events(yella.RunStarted, yella.RunCompleted, yella.RunFailed)
			Expect(h, "order", types(evs), "run:started,run:completed")
			for _, ev := range evs {
				Expect(h, "run id", ev.RunID, id)
			}
			Expect(h, "complete status", evs[1].Status, yella.StatusCompleted)
			Expect(h, "duration", evs[1].Duration >= 0, true)
		}},
		Case{Name: "Events/FailureOrder", Spec: []int{237, 238, 239, 242, 303}, Fn: func(h *H) {
			e := h.Started(yella.Config{},
				Proc("thrown", "a", func(c *yella.Ctx) yella.Result { return c.Error(errors.New("boom")) }),
				Proc("failed", "b", func(c *yella.Ctx) yella.Result { return c.Fail(errors.New("nope")) }))
			h.One(e, "a", nil)
			h.Drain(e)
			Expect(h, "thrown order", types(h.Events(yella.RunStarted, yella.RunCompleted, yella.RunFailed)), "run:started,run:failed")
			h.One(e, "b", nil)
			h.Drain(e)
			errs := h.Events(yella.RunFailed)
			Expect(h, "errors", len(errs), 2)
			Expect(h, "thrown message", errs[0].Error, "boom")
			Expect(h, "thrown status", errs[0].Status, yella.StatusErrored)
			Expect(h, "fail message", errs[1].Error, "nope")
		}},
		Case{Name: "Events/StartPerAttemptErrorOnce", Spec: []int{243}, Fn: func(h *H) {
			e := h.Started(yella.Config{Retry: &yella.Retry{Max: 2, Backoff: yella.Fixed(0)}}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				return c.Error(errors.New("x"))
			}))
			h.One(e, "ev", nil)
			h.Drain(e)
			starts := h.Events(yella.RunStarted)
			Expect(h, "starts", len(starts), 3)
			for i, s := range starts {
				Expect(h, "attempt", s.Attempt, i+1)
			}
			Expect(h, "one run:failed", len(h.Events(yella.RunFailed)), 1)
		}},
	}
}

// retryDelayErr asks for its retry to wait d, as a connector's error
// carrying a downstream's Retry-After does.
type retryDelayErr struct{ d time.Duration }

func (e *retryDelayErr) Error() string             { return "slow down" }
func (e *retryDelayErr) RetryDelay() time.Duration { return e.d }
