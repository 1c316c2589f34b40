package yella_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
)

// counter counts calls by name.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
}

func (c *counter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// approval is the payload the signal cases send.
type approval struct {
	By string `json:"by"`
}

// approver waits for the signal "order:<payload>" for at most timeout and
// completes with who approved, or "timed out".
func approver(h *H, calls *counter, timeout time.Duration) yella.Process {
	return yella.Process{Name: "approve", On: "order", Run: func(c *yella.Ctx) yella.Result {
		calls.add("handler")
		var order string
		if err := c.Decode(&order); err != nil {
			return c.Fail(err)
		}
		if _, err := yella.Effect(c, "before", func(context.Context) (int, error) { calls.add("before"); return 1, nil }); err != nil {
			return c.Error(err)
		}
		a, ok, err := yella.WaitFor[approval](c, "approval", "order:"+order, timeout)
		if err != nil {
			return c.Error(err)
		}
		if !ok {
			return c.OK("timed out")
		}
		return c.OK(a.By)
	}}
}

func output(h *H, id string) string {
	h.Helper()
	var s string
	if err := json.Unmarshal(h.Run(id).Output, &s); err != nil {
		h.Fatalf("output of %s: %v", id, err)
	}
	return s
}

// suspendCases: handlers that wait (Sleep, WaitFor) without holding a slot,
// and the signals that end their waits.
func suspendCases() []Case {
	return []Case{
		Case{Name: "Waits/SleepOnceAtItsTime", Note: "new: a durable sleep ends the attempt (status waiting, no slot, no attempt spent) and the handler runs again at its time, not before, replaying the effects before it", Fn: func(h *H) {
			clk := h.Fake()
			var calls counter
			e := h.Started(yella.Config{Concurrency: 1, LeaseTimeout: 30 * time.Minute, FlushInterval: 10 * time.Minute, RetentionInterval: 10 * time.Minute},
				yella.Process{Name: "nap", On: "ev", Run: func(c *yella.Ctx) yella.Result {
					calls.add("handler")
					if _, err := yella.Effect(c, "before", func(context.Context) (int, error) { calls.add("before"); return 1, nil }); err != nil {
						return c.Error(err)
					}
					if err := yella.Sleep(c, "nap", time.Hour); err != nil {
						return c.Error(err)
					}
					calls.add("after")
					return c.OK(c.Attempt())
				}},
				yella.Process{Name: "other", On: "other", Run: func(c *yella.Ctx) yella.Result { calls.add("other"); return c.OK(nil) }})
			t0 := clk.Now()
			id := h.One(e, "ev", nil)
			r := h.WaitStatus(id, store.StatusWaiting)
			Expect(h, "deadline", r.RetryAt.Equal(t0.Add(time.Hour)), true)
			Expect(h, "no attempt spent", r.Attempts, 0)
			h.WaitEvent(yella.RunWaiting, id)
			// The only slot is free: another run starts while it sleeps.
			other := h.One(e, "other", nil)
			h.WaitStatus(other, store.StatusCompleted)
			view, err := e.Run(h.Ctx(), id)
			Expect(h, "run", err, nil)
			Expect(h, "waiting for", view.Waiting, "sleep")
			Expect(h, "until", view.WaitingUntil.Equal(t0.Add(time.Hour)), true)
			Expect(h, "since", view.WaitingSince.Equal(t0), true)
			Expect(h, "wait key", view.WaitKey, "str:nap")
			clk.Advance(time.Hour - time.Millisecond)
			time.Sleep(50 * time.Millisecond)
			Expect(h, "not before its time", calls.get("handler"), 1)
			clk.Advance(time.Millisecond)
			r = h.WaitStatus(id, store.StatusCompleted)
			Expect(h, "handler ran twice", calls.get("handler"), 2)
			Expect(h, "effect before the sleep ran once", calls.get("before"), 1)
			Expect(h, "after once", calls.get("after"), 1)
			Expect(h, "one attempt counted", r.Attempts, 1)
			Expect(h, "output: the attempt after the sleep is attempt 1", string(r.Output), "1")
		}},
		Case{Name: "Waits/SleepAcrossRestart", Durable: true, Note: "new: a sleep survives a restart of the engine: not earlier, not lost, not twice", Fn: func(h *H) {
			clk := h.Fake()
			var calls counter
			proc := yella.Process{Name: "nap", On: "ev", Run: func(c *yella.Ctx) yella.Result {
				calls.add("handler")
				if err := yella.Sleep(c, "nap", 48*time.Hour); err != nil {
					return c.Error(err)
				}
				calls.add("after")
				return c.OK(nil)
			}}
			e := h.Started(slowClock, proc)
			id := h.One(e, "ev", nil)
			h.WaitStatus(id, store.StatusWaiting)
			h.Reopen()
			e = h.Started(slowClock, proc)
			clk.Advance(48*time.Hour - time.Second)
			time.Sleep(50 * time.Millisecond)
			Expect(h, "still waiting a second before its time", h.Run(id).Status, store.StatusWaiting)
			clk.Advance(time.Second)
			h.WaitStatus(id, store.StatusCompleted)
			h.Drain(e)
			Expect(h, "after once", calls.get("after"), 1)
			Expect(h, "handler twice", calls.get("handler"), 2)
		}},
		Case{Name: "Waits/SignalEndsWait", Note: "new: WaitFor holds no slot; Engine.Signal by business key ends the wait with its payload, once; the run view says what it waits for", Fn: func(h *H) {
			var calls counter
			e := h.Started(yella.Config{Concurrency: 1}, approver(h, &calls, 0))
			id := h.One(e, "order", "7")
			h.WaitStatus(id, store.StatusWaiting)
			view, err := e.Run(h.Ctx(), id)
			Expect(h, "run", err, nil)
			Expect(h, "status", view.Status, yella.StatusWaiting)
			Expect(h, "waiting for", view.Waiting, "signal")
			Expect(h, "signal key", view.Signal, "order:7")
			Expect(h, "no deadline", view.WaitingUntil.IsZero(), true)
			res, err := e.Signal(h.Ctx(), "order:7", approval{By: "ann"})
			Expect(h, "signal", err, nil)
			Expect(h, "woke the run", res.RunID, id)
			h.WaitStatus(id, store.StatusCompleted)
			Expect(h, "output", output(h, id), "ann")
			Expect(h, "effect before the wait ran once", calls.get("before"), 1)
			h.WaitEvent(yella.RunSignalled, id)
			res, err = e.Signal(h.Ctx(), "order:7", approval{By: "bob"})
			Expect(h, "second signal", err, nil)
			Expect(h, "kept, not delivered", res.RunID == "" && res.Kept, true)
			Expect(h, "output unchanged", output(h, id), "ann")
		}},
		Case{Name: "Waits/SignalBeforeWait", Note: "new: a signal sent before the wait begins is kept and delivered to it; with SignalRetention negative it is not kept", Fn: func(h *H) {
			var calls counter
			e := h.Started(yella.Config{}, approver(h, &calls, 0))
			res, err := e.Signal(h.Ctx(), "order:8", approval{By: "early"})
			Expect(h, "signal", err, nil)
			Expect(h, "kept", res.Kept, true)
			id := h.One(e, "order", "8")
			h.WaitStatus(id, store.StatusCompleted)
			Expect(h, "received", output(h, id), "early")
			id2 := h.One(e, "order", "8")
			h.WaitStatus(id2, store.StatusWaiting)
			Expect(h, "consumed once", h.Run(id2).Status, store.StatusWaiting)

			e2 := h.Started(yella.Config{SignalRetention: -1}, yella.Process{Name: "x", On: "x", Run: Noop})
			res, err = e2.Signal(h.Ctx(), "order:9", nil)
			Expect(h, "signal", err, nil)
			Expect(h, "not kept", res.Kept || res.RunID != "", false)
		}},
		Case{Name: "Waits/Timeout", Note: "new: WaitFor returns false once its timeout passes (fake clock), not before; a later signal is kept for another wait, not delivered to the ended one", Fn: func(h *H) {
			clk := h.Fake()
			var calls counter
			e := h.Started(slowClock, approver(h, &calls, 48*time.Hour))
			id := h.One(e, "order", "1")
			r := h.WaitStatus(id, store.StatusWaiting)
			Expect(h, "deadline", r.RetryAt.Equal(clk.Now().Add(48*time.Hour)), true)
			clk.Advance(48*time.Hour - time.Second)
			time.Sleep(50 * time.Millisecond)
			Expect(h, "still waiting", h.Run(id).Status, store.StatusWaiting)
			clk.Advance(time.Second)
			h.WaitStatus(id, store.StatusCompleted)
			Expect(h, "timed out", output(h, id), "timed out")
			res, err := e.Signal(h.Ctx(), "order:1", approval{By: "late"})
			Expect(h, "late signal", err, nil)
			Expect(h, "kept", res.Kept, true)
			Expect(h, "handler ran twice", calls.get("handler"), 2)
		}},
		Case{Name: "Waits/TwoWaiters", Note: "new: two runs waiting on one key: each signal ends one wait, the run admitted first first", Fn: func(h *H) {
			var calls counter
			e := h.Started(yella.Config{}, approver(h, &calls, 0))
			a := h.One(e, "order", "2")
			h.WaitStatus(a, store.StatusWaiting)
			b := h.One(e, "order", "2")
			h.WaitStatus(b, store.StatusWaiting)
			for _, by := range []string{"first", "second"} {
				if _, err := e.Signal(h.Ctx(), "order:2", approval{By: by}); err != nil {
					h.Fatal(err)
				}
			}
			h.WaitStatus(a, store.StatusCompleted)
			h.WaitStatus(b, store.StatusCompleted)
			Expect(h, "a", output(h, a), "first")
			Expect(h, "b", output(h, b), "second")
		}},
		Case{Name: "Waits/Operator", Note: "new: an operator ends a wait (WaitFor reports a timeout, Sleep is over), signals one run by id, or cancels a waiting run", Fn: func(h *H) {
			var calls counter
			e := h.Started(yella.Config{}, approver(h, &calls, time.Hour))
			ended := h.One(e, "order", "3")
			h.WaitStatus(ended, store.StatusWaiting)
			if _, err := e.EndWait(h.Ctx(), ended); err != nil {
				h.Fatal(err)
			}
			h.WaitStatus(ended, store.StatusCompleted)
			Expect(h, "ended as a timeout", output(h, ended), "timed out")
			h.WaitEvent(yella.RunWaitEnded, ended)
			_, err := e.EndWait(h.Ctx(), ended)
			ExpectCode(h, "not waiting", err, yella.CodeInvalidRunState)

			a := h.One(e, "order", "4")
			b := h.One(e, "order", "4")
			h.WaitStatus(a, store.StatusWaiting)
			h.WaitStatus(b, store.StatusWaiting)
			res, err := e.SignalRun(h.Ctx(), b, approval{By: "op"})
			Expect(h, "signal run", err, nil)
			Expect(h, "woke b", res.RunID, b)
			h.WaitStatus(b, store.StatusCompleted)
			Expect(h, "b approved", output(h, b), "op")
			Expect(h, "a still waits", h.Run(a).Status, store.StatusWaiting)
			_, err = e.SignalRun(h.Ctx(), b, nil)
			ExpectCode(h, "b is not waiting", err, yella.CodeInvalidRunState)
			if _, err := e.Cancel(h.Ctx(), a); err != nil {
				h.Fatal(err)
			}
			Expect(h, "cancelled", h.Run(a).Status, store.StatusCancelled)
			res, err = e.Signal(h.Ctx(), "order:4", nil)
			Expect(h, "signal after cancel", err, nil)
			Expect(h, "no run woken", res.RunID, "")
		}},
		Case{Name: "Waits/NoSlotHeld", Note: "new: 200 runs wait at once with Concurrency 2; signalled, every one completes once", Fn: func(h *H) {
			var calls counter
			e := h.Started(yella.Config{Concurrency: 2}, approver(h, &calls, 0))
			var ids []string
			for i := range 200 {
				ids = append(ids, h.One(e, "order", fmt.Sprint(i)))
			}
			h.WaitFor("200 runs waiting", func() bool {
				n, _ := h.St.CountRuns(h.Ctx(), store.RunFilter{Statuses: []store.Status{store.StatusWaiting}, Limit: 1})
				return n == 200
			})
			for i := 199; i >= 0; i-- { // the last admitted first: each signal finds its own run
				if _, err := e.Signal(h.Ctx(), fmt.Sprint("order:", i), approval{By: fmt.Sprint(i)}); err != nil {
					h.Fatal(err)
				}
			}
			h.Drain(e)
			for i, id := range ids {
				Expect(h, "approved by its own signal", output(h, id), fmt.Sprint(i))
			}
			Expect(h, "handler runs", calls.get("handler"), 400)
		}},
		Case{Name: "Waits/EmitAndWaitWaits", Note: "new: EmitAndWait waits for a run waiting for a signal, and returns once the signal ended the wait and the run completed", Fn: func(h *H) {
			var calls counter
			e := h.Started(yella.Config{}, approver(h, &calls, 0))
			done := make(chan []yella.Run, 1)
			go func() {
				runs, err := e.EmitAndWait(h.Ctx(), "order", "5")
				if err != nil {
					h.Error(err)
				}
				done <- runs
			}()
			h.WaitFor("a waiting run", func() bool {
				n, _ := h.St.CountRuns(h.Ctx(), store.RunFilter{Statuses: []store.Status{store.StatusWaiting}, Limit: 1})
				return n == 1
			})
			time.Sleep(30 * time.Millisecond)
			select {
			case <-done:
				h.Fatal("EmitAndWait returned while the run waits")
			default:
			}
			if _, err := e.Signal(h.Ctx(), "order:5", approval{By: "x"}); err != nil {
				h.Fatal(err)
			}
			runs := <-done
			Expect(h, "one run", len(runs), 1)
			Expect(h, "completed", runs[0].Status, yella.StatusCompleted)
		}},
		Case{Name: "Waits/SignalledBeforeItsWaitSettled", Note: "new: a signal that ends a wait (with a timeout) before the engine has settled the attempt that began it, the woken run completing meanwhile, leaves no deadline queued: EmitAndWait returns, nothing stays in the queue", Fn: func(h *H) {
			var calls counter
			gate := newLateSettle(h.St, store.ActionWait)
			e := h.Started(yella.Config{Store: gate, Concurrency: 2}, approver(h, &calls, 24*time.Hour))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := e.EmitAndWait(ctx, "order", "7")
				done <- err
			}()
			select {
			case <-gate.committed:
			case <-time.After(5 * time.Second):
				h.Fatal("the attempt never began its wait")
			}
			res, err := e.Signal(h.Ctx(), "order:7", approval{By: "op"})
			Expect(h, "signal", err, nil)
			h.WaitStatus(res.RunID, store.StatusCompleted) // on the other slot, before the wait is settled
			close(gate.open)
			if err := <-done; err != nil {
				h.Fatalf("EmitAndWait after the run completed: %v", err)
			}
			Expect(h, "approved", output(h, res.RunID), "op")
			h.WaitFor("nothing left in the queue", func() bool {
				m, err := e.Metrics(h.Ctx())
				return err == nil && m.Dispatcher.Ready == 0 && m.Dispatcher.Delayed == 0 && m.Dispatcher.Running == 0
			})
		}},
		Case{Name: "Waits/WaitingIsSticky", Note: "new: after a wait, the attempt's durable calls return ErrWaiting without running, and whatever the handler returns the run waits", Fn: func(h *H) {
			var bodies, sawWaiting atomic.Int32
			e := h.Started(yella.Config{}, yella.Process{Name: "p", On: "ev", Run: func(c *yella.Ctx) yella.Result {
				_, _, err := yella.WaitFor[int](c, "w", "k", 0)
				if !errors.Is(err, yella.ErrWaiting) {
					return c.Fail(fmt.Errorf("want ErrWaiting, got %v", err))
				}
				_, err = yella.Effect(c, "fx", func(context.Context) (int, error) { bodies.Add(1); return 1, nil })
				if errors.Is(err, yella.ErrWaiting) {
					sawWaiting.Add(1)
				}
				if errors.Is(c.SetContext("k", 1), yella.ErrWaiting) {
					sawWaiting.Add(1)
				}
				return c.OK("ignored")
			}})
			id := h.One(e, "ev", nil)
			r := h.WaitStatus(id, store.StatusWaiting)
			Expect(h, "effect body not run", bodies.Load(), int32(0))
			Expect(h, "both refused", sawWaiting.Load(), int32(2))
			Expect(h, "no output", len(r.Output), 0)
		}},
		Case{Name: "Waits/NoRetrySpent", Note: "new: waits spend none of the retry budget: a run that slept three times still has its retry", Fn: func(h *H) {
			var calls counter
			e := h.Started(yella.Config{}, yella.Process{Name: "p", On: "ev", Retry: &yella.Retry{Max: 1, Backoff: yella.Fixed(time.Millisecond)},
				Run: func(c *yella.Ctx) yella.Result {
					for i := range 3 {
						if err := yella.Sleep(c, fmt.Sprint("nap", i), time.Millisecond); err != nil {
							return c.Error(err)
						}
					}
					calls.add("past the sleeps")
					if calls.get("past the sleeps") == 1 {
						return c.Error(errors.New("flaky"))
					}
					return c.OK(nil)
				}})
			id := h.One(e, "ev", nil)
			r := h.WaitStatus(id, store.StatusCompleted)
			Expect(h, "attempts: the failure and the success", r.Attempts, 2)
		}},
		Case{Name: "Waits/BadKeys", Note: "new: an empty, oversized, NUL-holding or invalid UTF-8 signal key is refused with CodeInvalidSignal; an effect or wait key with a NUL byte or invalid UTF-8 with CodeInvalidPayload, and its body never runs, on every store", Fn: func(h *H) {
			var bodies atomic.Int32
			var codes = make(chan yella.Code, 3)
			e := h.Started(yella.Config{}, yella.Process{Name: "x", On: "x", Run: Noop}, yella.Process{Name: "k", On: "k", Run: func(c *yella.Ctx) yella.Result {
				_, err := yella.Effect(c, "a\x00b", func(context.Context) (int, error) { bodies.Add(1); return 1, nil })
				codes <- yella.CodeOf(err)
				_, err = yella.Effect(c, "bad \xff", func(context.Context) (int, error) { bodies.Add(1); return 1, nil })
				codes <- yella.CodeOf(err)
				codes <- yella.CodeOf(yella.Sleep(c, "nap\x00", time.Hour))
				_, err = yella.Effect(c, yella.MakeKey("a\x00b", "c"), func(context.Context) (int, error) { return 1, nil })
				if err != nil {
					return c.Fail(err)
				}
				return c.OK(nil)
			}})
			id := h.One(e, "k", nil)
			for i := range 3 {
				Expect(h, fmt.Sprint("bad key ", i), <-codes, yella.CodeInvalidPayload)
			}
			h.WaitStatus(id, store.StatusCompleted)
			Expect(h, "no body ran", bodies.Load(), int32(0))
			_, err := e.Signal(h.Ctx(), "a\x00b", nil)
			ExpectCode(h, "NUL", err, yella.CodeInvalidSignal)
			_, err = e.Signal(h.Ctx(), "\xff", nil)
			ExpectCode(h, "invalid UTF-8", err, yella.CodeInvalidSignal)
			_, err = e.Signal(h.Ctx(), "", nil)
			ExpectCode(h, "empty", err, yella.CodeInvalidSignal)
			_, err = e.Signal(h.Ctx(), strings.Repeat("k", yella.MaxSignalKeyBytes+1), nil)
			ExpectCode(h, "too long", err, yella.CodeInvalidSignal)
			_, err = e.Signal(h.Ctx(), "k", make(chan int))
			ExpectCode(h, "payload", err, yella.CodeInvalidPayload)
		}},
	}
}

// drainWaitCases: Drain does not wait for waiting runs.
func drainWaitCases() []Case {
	return []Case{
		Case{Name: "Waits/DrainSkipsWaiting", Durable: true, Note: "new: Drain returns while runs sleep or wait for a signal (they hold nothing and may wait for days), before and after a restart", Fn: func(h *H) {
			h.Fake()
			proc := yella.Process{Name: "p", On: "ev", Run: func(c *yella.Ctx) yella.Result {
				if err := yella.Sleep(c, "nap", time.Hour); err != nil {
					return c.Error(err)
				}
				return c.OK(nil)
			}}
			e := h.Started(slowClock, proc)
			id := h.One(e, "ev", nil)
			h.WaitStatus(id, store.StatusWaiting)
			h.Drain(e)
			h.Reopen()
			e = h.Started(slowClock, proc)
			h.Drain(e)
			Expect(h, "still waiting", h.Run(id).Status, store.StatusWaiting)
			h.Clock.Advance(time.Hour)
			h.WaitStatus(id, store.StatusCompleted)
		}},
	}
}

// lateSettle is a store whose first Update of its action commits and then
// returns only once open is closed: the engine settles that attempt's end
// after whatever happens meanwhile.
type lateSettle struct {
	store.Store
	action    store.Action
	once      atomic.Bool
	committed chan struct{}
	open      chan struct{}
}

func newLateSettle(st store.Store, a store.Action) *lateSettle {
	return &lateSettle{Store: st, action: a, committed: make(chan struct{}), open: make(chan struct{})}
}

func (g *lateSettle) Update(ctx context.Context, u store.Update) (store.UpdateResult, error) {
	res, err := g.Store.Update(ctx, u)
	if err == nil && u.Action == g.action && g.once.CompareAndSwap(false, true) {
		close(g.committed)
		<-g.open
	}
	return res, err
}
