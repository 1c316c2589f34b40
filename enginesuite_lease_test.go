package yella_test

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
)

func leaseCases() []Case {
	return []Case{
		Case{Name: "Lease/HeartbeatKeepsLongRunAlive", Fn: func(h *H) {
			clk := h.Fake()
			g := newGate()
			e := h.Started(yella.Config{LeaseTimeout: 3 * time.Second, HandlerTimeout: time.Hour}, Proc("long", "ev", func(c *yella.Ctx) yella.Result { g.wait(c); return c.OK(nil) }))
			id := h.One(e, "ev", nil)
			h.WaitEvent(yella.RunStarted, id)
			for range 10 { // 10 s: far past the 3 s lease
				clk.Advance(time.Second)
			}
			Expect(h, "lease extended", h.Run(id).LeaseExpires.After(clk.Now()), true)
			g.open()
			h.Drain(e)
			Expect(h, "completed once", h.Run(id).Status, store.StatusCompleted)
			Expect(h, "no reclaim", len(h.Events(yella.LeaseReclaimed)), 0)
		}},
		Case{Name: "Lease/LostLeaseAbortsOnce", Spec: []int{139}, Fn: func(h *H) {
			clk := h.Fake()
			var aborts atomic.Int32
			var cause atomic.Value
			e := h.Started(yella.Config{LeaseTimeout: 3 * time.Second}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				<-c.Done()
				aborts.Add(1)
				cause.Store(context.Cause(c).Error())
				return c.OK(nil)
			}))
			id := h.One(e, "ev", nil)
			r := h.WaitEvent(yella.RunStarted, id)
			_ = r
			cur := h.Run(id)
			// Another owner takes the run over.
			h.St.Update(h.Ctx(), store.Update{RunID: id, Epoch: cur.Epoch, Now: clk.Now(), To: store.StatusIdle})
			h.Claim(id, "other", time.Hour)
			clk.Advance(time.Second) // heartbeat notices
			h.WaitFor("abort", func() bool { return aborts.Load() == 1 })
			clk.Advance(time.Second)
			time.Sleep(10 * time.Millisecond)
			Expect(h, "aborted once", aborts.Load(), int32(1))
			Expect(h, "cause", cause.Load(), any("run lease lost"))
			Expect(h, "other owner untouched", h.Run(id).LeaseOwner, "other")
			Expect(h, "still running", h.Run(id).Status, store.StatusRunning)
		}},
		Case{Name: "Lease/PeriodicSweepReclaims", Spec: []int{253, 255, 256}, Note: "fixed: expired leases are reclaimed by a periodic sweep while the engine runs, not only at start", Fn: func(h *H) {
			clk := h.Fake()
			var runs atomic.Int32
			e := h.Started(yella.Config{LeaseTimeout: 3 * time.Second, Retry: &yella.Retry{Max: 2}}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				runs.Add(1)
				return c.OK(c.Attempt())
			}))
			// A run claimed by a dead peer: its lease will expire.
			r := h.Admit("a", "ev", nil)
			h.Claim(r.ID, "dead-peer", 3*time.Second)
			clk.Advance(time.Second)
			Expect(h, "not reclaimed before expiry", h.Run(r.ID).Status, store.StatusRunning)
			clk.Advance(3 * time.Second)
			h.WaitStatus(r.ID, store.StatusCompleted)
			Expect(h, "executed once here", runs.Load(), int32(1))
			Expect(h, "attempt", string(h.Run(r.ID).Output), "2")
			Expect(h, "reclaim event", len(h.Events(yella.LeaseReclaimed)), 1)
			rt := h.Events(yella.RunRetryScheduled)
			Expect(h, "retry event", len(rt), 1)
			if len(rt) == 1 {
				ExpectContains(h, "retry error", rt[0].Error, "lease expired")
			}
			tl, _ := e.Timeline(h.Ctx(), r.ID)
			found := false
			for _, en := range tl {
				if en.Status == yella.StatusIdle && en.Note == "lease expired" {
					found = true
				}
			}
			Expect(h, "timeline has lease expired", found, true)
			m, _ := e.Metrics(h.Ctx())
			Expect(h, "reclaims metric", m.Totals.LeaseReclaims, int64(1))
		}},
		Case{Name: "Lease/ReclaimBeyondBudgetIsDead", Spec: []int{254}, Fn: func(h *H) {
			clk := h.Fake()
			e := h.Started(yella.Config{LeaseTimeout: 3 * time.Second, Retry: &yella.Retry{Max: 0}}, Proc("a", "ev", Noop))
			r := h.Admit("a", "ev", nil)
			h.Claim(r.ID, "dead-peer", 3*time.Second)
			clk.Advance(4 * time.Second)
			got := h.WaitStatus(r.ID, store.StatusDead)
			ExpectContains(h, "error", got.Error, "lease expired")
			Expect(h, "code", got.ErrorCode, string(yella.CodeLeaseExpired))
			Expect(h, "run:dead-lettered", len(h.Events(yella.RunDeadLettered)), 1)
			_ = e
		}},
		Case{Name: "Lease/NoPolicyAbandonBudget", Note: "fixed: without a retry policy, abandoned attempts are bounded by Config.AbandonRetries", Fn: func(h *H) {
			clk := h.Fake()
			h.Started(yella.Config{LeaseTimeout: 3 * time.Second, AbandonRetries: 1}, Proc("a", "ev", Noop))
			r := h.Admit("a", "ev", nil)
			r = h.Claim(r.ID, "peer", 3*time.Second) // attempt 1
			h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: clk.Now(), To: store.StatusIdle})
			h.Claim(r.ID, "peer", 3*time.Second) // attempt 2 exceeds 1 + 1 retries
			clk.Advance(4 * time.Second)
			Expect(h, "dead", h.WaitStatus(r.ID, store.StatusDead).ErrorCode, string(yella.CodeLeaseExpired))
		}},
		Case{Name: "Lease/StaleOwnerCompletionFenced", Fn: func(h *H) {
			clk := h.Fake()
			g := newGate()
			var second atomic.Bool
			e := h.Started(yella.Config{LeaseTimeout: 3 * time.Second, Concurrency: 1}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				if !second.Load() {
					<-g.ch // the stale owner: ignores its context
				}
				return c.OK("from " + c.RunID()[:4])
			}))
			id := h.One(e, "ev", nil)
			h.WaitEvent(yella.RunStarted, id)
			cur := h.Run(id)
			// The run is taken away (as a sweep after a long stall would do) and
			// completed by a new attempt.
			h.St.Update(h.Ctx(), store.Update{RunID: id, Epoch: cur.Epoch, Now: clk.Now(), To: store.StatusIdle})
			n := h.Claim(id, "other", time.Hour)
			h.St.Update(h.Ctx(), store.Update{RunID: id, Epoch: n.Epoch, Now: clk.Now(), To: store.StatusCompleted, Output: []byte(`"new owner"`)})
			second.Store(true)
			g.open() // the stale attempt returns and tries to complete
			h.Drain(e)
			r := h.Run(id)
			Expect(h, "new owner's result kept", string(r.Output), `"new owner"`)
			Expect(h, "epoch", r.Epoch, n.Epoch)
		}},
		Case{Name: "Shared/TwoEnginesExecuteOnce", Shared: true, Spec: []int{259}, Fn: func(h *H) {
			var n atomic.Int32
			proc := Proc("a", "ev", func(c *yella.Ctx) yella.Result { n.Add(1); return c.OK(nil) })
			a := h.Started(yella.Config{}, proc)
			b := h.Started(yella.Config{}, proc)
			for i := range 50 {
				if i%2 == 0 {
					h.One(a, "ev", nil)
				} else {
					h.One(b, "ev", nil)
				}
			}
			h.Drain(a)
			h.Drain(b)
			// Drain waits for its own engine's runs: a run the other engine
			// was claiming when the first Drain returned (skipped, locked,
			// by this engine's claim) is that engine's only afterwards.
			h.WaitFor("50 runs completed", func() bool {
				c, err := h.St.Counts(h.Ctx())
				return err == nil && c[store.StatusCompleted] == 50
			})
			h.Drain(a)
			h.Drain(b)
			Expect(h, "each run once", n.Load(), int32(50))
		}},
		Case{Name: "Shared/GracefulStopKeepsHeartbeating", Shared: true, Spec: []int{260}, Fn: func(h *H) {
			clk := h.Fake()
			g := newGate()
			var n atomic.Int32
			proc := Proc("a", "ev", func(c *yella.Ctx) yella.Result { n.Add(1); g.wait(c); return c.OK(nil) })
			cfg := yella.Config{LeaseTimeout: 3 * time.Second, HeartbeatInterval: time.Second}
			a := h.Started(cfg, proc)
			id := h.One(a, "ev", nil)
			h.WaitEvent(yella.RunStarted, id)
			stopped := make(chan error, 1)
			go func() { stopped <- a.Stop(h.Ctx()) }()
			h.Started(cfg, proc) // a second engine sweeps for expired leases
			for range 10 {
				clk.Advance(time.Second)
			}
			g.open()
			Expect(h, "stop", <-stopped, nil)
			Expect(h, "executed once", n.Load(), int32(1))
			Expect(h, "completed", h.Run(id).Status, store.StatusCompleted)
		}},
		Case{Name: "Shared/SignalledRunClaimedAtOnce", Shared: true, Note: "new: a node may claim a signalled run before Signal returns; the run still executes (Drain waits for it) while every slot is busy", Fn: func(h *H) {
			g := newGate()
			var calls counter
			block := Proc("block", "block", func(c *yella.Ctx) yella.Result { g.wait(c); return c.OK(nil) })
			// Signal returns only once the node has claimed the woken run:
			// the claim lands between the store's change and the engine's
			// requeue, which must not take the claimed run back out.
			sh, nodes := h.St.(store.Shared)
			if !nodes {
				h.Skip("engines on this store index their own runs: none claims a run another engine woke")
			}
			hooked := &claimedOnSignal{Shared: sh, h: h}
			e := h.Started(yella.Config{Store: hooked, Concurrency: 1}, approver(h, &calls, 0), block)
			hooked.e = e
			id := h.One(e, "order", "1")
			h.WaitStatus(id, store.StatusWaiting)
			blocker := h.One(e, "block", nil)
			h.WaitEvent(yella.RunStarted, blocker)
			res, err := e.Signal(h.Ctx(), "order:1", approval{By: "op"})
			Expect(h, "signal", err, nil)
			Expect(h, "woken", res.RunID, id)
			Expect(h, "claimed before Signal returned", h.Run(id).Status, store.StatusRunning)
			g.open()
			h.Drain(e)
			Expect(h, "approved", output(h, id), "op")
			Expect(h, "handler runs", calls.get("handler"), 2)
		}},
		Case{Name: "Shared/IdempotencyAcrossEngines", Shared: true, Spec: []int{263}, Fn: func(h *H) {
			a := h.Engine(yella.Config{}, Proc("p", "ev", Noop))
			b := h.Engine(yella.Config{}, Proc("p", "ev", Noop))
			Expect(h, "first", len(h.Emit(a, "ev", nil, yella.IdempotencyKey("k")).Runs), 1)
			Expect(h, "other engine", len(h.Emit(b, "ev", nil, yella.IdempotencyKey("k")).Runs), 0)
		}},

		// Durable stores: restart behaviour.
		Case{Name: "Restart/UnstartedWorkRunsOnNextEngine", Durable: true, Spec: []int{251, 266}, Fn: func(h *H) {
			e := h.Engine(yella.Config{}, Proc("a", "ev", Noop))
			id := h.One(e, "ev", nil)
			h.Reopen()
			e2 := h.Engine(yella.Config{})
			e2.Register(Proc("a", "ev", Noop)) // registered before Start: no handler-not-found
			h.Start(e2)
			h.Drain(e2)
			Expect(h, "completed", h.Run(id).Status, store.StatusCompleted)
		}},
		Case{Name: "Restart/CapsCountRunsOfEarlierProcess", Durable: true, Fn: func(h *H) {
			capped := yella.Process{Name: "capped", On: "ev", Concurrency: 2, Overflow: yella.Drop, Run: Noop}
			e := h.Engine(yella.Config{}, capped)
			h.One(e, "ev", nil)
			h.One(e, "ev", nil)
			h.Reopen()
			e2 := h.Engine(yella.Config{}, capped)
			em := h.Emit(e2, "ev", nil)
			Expect(h, "cap counts runs admitted before the restart", em.Reason, yella.ReasonAtCapacity)
			h.Start(e2)
			h.Drain(e2)
			Expect(h, "admitted after the drain", len(h.Emit(e2, "ev", nil).Runs), 1)
		}},
		Case{Name: "Restart/LargeBacklogLoadsInPages", Durable: true, Fn: func(h *H) {
			var n atomic.Int32
			proc := Proc("a", "ev", func(c *yella.Ctx) yella.Result { n.Add(1); return c.OK(nil) })
			e := h.Engine(yella.Config{}, proc)
			const total = 2100 // more than one page (2048) of the loader
			for i := range total {
				h.One(e, "ev", i)
			}
			h.Reopen()
			e2 := h.Started(yella.Config{Concurrency: 50}, proc)
			// A bound against a hang, not a speed target: SQLite under the
			// race detector on a busy machine drains a few hundred runs/s.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := e2.Drain(ctx); err != nil {
				h.Fatalf("drain: %v", err)
			}
			Expect(h, "every run executed once", n.Load(), int32(total))
		}},
		Case{Name: "Restart/CompletedNotReExecuted", Durable: true, Spec: []int{252}, Fn: func(h *H) {
			var n atomic.Int32
			proc := Proc("a", "ev", func(c *yella.Ctx) yella.Result { n.Add(1); return c.OK(nil) })
			e := h.Started(yella.Config{}, proc)
			h.One(e, "ev", nil)
			h.Drain(e)
			h.Reopen()
			e2 := h.Started(yella.Config{}, proc)
			h.Drain(e2)
			Expect(h, "once", n.Load(), int32(1))
		}},
		Case{Name: "Restart/DelayedRetryResumes", Durable: true, Note: "fixed: delayed retries inherited across a restart get a timer", Fn: func(h *H) {
			clk := h.Fake()
			var fail atomic.Bool
			fail.Store(true)
			proc := yella.Process{Name: "a", On: "ev", Retry: &yella.Retry{Max: 1, Backoff: yella.Fixed(time.Minute)}, Run: func(c *yella.Ctx) yella.Result {
				if fail.Load() {
					return c.Error(errors.New("later"))
				}
				return c.OK(nil)
			}}
			e := h.Started(yella.Config{}, proc)
			id := h.One(e, "ev", nil)
			h.WaitFor("retry scheduled", func() bool { r := h.Run(id); return r.Status == store.StatusIdle && r.Attempts == 1 })
			h.Reopen()
			fail.Store(false)
			e2 := h.Started(yella.Config{}, proc)
			drained := make(chan error, 1)
			go func() { drained <- e2.Drain(h.Ctx()) }()
			clk.Advance(time.Minute)
			Expect(h, "drain", <-drained, nil)
			Expect(h, "completed", h.Run(id).Status, store.StatusCompleted)
		}},
		Case{Name: "Restart/CompletedEffectReplayed", Durable: true, Spec: []int{261}, Fn: func(h *H) {
			var fn atomic.Int32
			release := newGate()
			defer release.open()
			proc := yella.Process{Name: "a", On: "ev", Run: func(c *yella.Ctx) yella.Result {
				v, err := yella.Effect(c, "k", func(context.Context) (string, error) { fn.Add(1); return "stored", nil })
				if err != nil {
					return c.Error(err)
				}
				if c.Attempt() == 1 {
					<-release.ch // "crash" after the effect completed
				}
				return c.OK(v)
			}}
			e := h.Started(yella.Config{}, proc)
			id := h.One(e, "ev", nil)
			h.WaitFor("effect done", func() bool { return fn.Load() == 1 })
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			e.Stop(ctx)
			cancel()
			h.Reopen()
			e2 := h.Started(yella.Config{}, proc)
			h.Drain(e2)
			r := h.Run(id)
			Expect(h, "completed", r.Status, store.StatusCompleted)
			Expect(h, "output", string(r.Output), `"stored"`)
			Expect(h, "fn once", fn.Load(), int32(1))
		}},
	}
}

// claimedOnSignal is a shared store whose Signal returns only once the run
// it woke is claimed and queued in e's dispatcher (e's one slot is busy):
// a node's claim at the worst moment for the engine that sent the signal.
type claimedOnSignal struct {
	store.Shared
	h *H
	e *yella.Engine
}

func (s *claimedOnSignal) Signal(ctx context.Context, req store.SignalRequest) (store.SignalResult, error) {
	res, err := s.Shared.Signal(ctx, req)
	if err == nil && res.Woken != nil && s.e != nil {
		s.h.WaitFor("the woken run claimed and queued", func() bool {
			m, err := s.e.Metrics(ctx)
			return err == nil && m.Dispatcher.Ready == 1
		})
	}
	return res, err
}
