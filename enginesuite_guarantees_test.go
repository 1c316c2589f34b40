package yella_test

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
)

// The cases in this file each pin one guarantee of the README's
// reliability section precisely enough that breaking the code behind it
// makes the case fail (the mutation check, internal/tools/mutation, keeps that
// true). Each is deterministic: no sleeps decide the outcome.

// takeOver moves a running run from the attempt holding it to another
// owner, as a lease sweep after a stall followed by a claim elsewhere would:
// the run is running again, under a newer epoch. It returns the new claim.
func takeOver(h *H, id, owner string) store.Run {
	h.Helper()
	cur := h.Run(id)
	if _, err := h.St.Update(h.Ctx(), store.Update{RunID: id, Epoch: cur.Epoch, Now: h.Now(), To: store.StatusIdle, Note: "lease expired"}); err != nil {
		h.Fatalf("hand the run back: %v", err)
	}
	return h.Claim(id, owner, time.Hour)
}

func guaranteeCases() []Case {
	return []Case{
		// Fencing: an attempt that lost its run completes nothing, even when
		// the run is running again (under a newer epoch), so that a check of
		// the status alone would let the write through.
		Case{Name: "Lease/StaleCompletionWhileRunning", Fn: func(h *H) {
			h.Fake() // no clock advance: no heartbeat notices the loss, the stale attempt runs to its end
			g := newGate()
			e := h.Started(yella.Config{LeaseTimeout: 3 * time.Second, Concurrency: 1}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				g.wait(c) // stalls past its lease (nothing cancels it: no heartbeat runs)
				return c.OK("stale")
			}))
			id := h.One(e, "ev", nil)
			h.WaitEvent(yella.RunStarted, id)
			n := takeOver(h, id, "other")
			g.open() // the stale attempt returns and tries to complete
			h.Drain(e)
			r := h.Run(id)
			Expect(h, "still running for the new owner", r.Status, store.StatusRunning)
			Expect(h, "owner", r.LeaseOwner, "other")
			Expect(h, "epoch", r.Epoch, n.Epoch)
			Expect(h, "attempts", r.Attempts, n.Attempts)
			Expect(h, "no output from the stale attempt", string(r.Output), "")
			Expect(h, "no run:completed", len(h.Events(yella.RunCompleted)), 0)
		}},
		Case{Name: "Lease/StaleEffectStartFenced", Fn: func(h *H) {
			h.Fake()
			g := newGate()
			var body atomic.Int32
			effErr := make(chan error, 1)
			e := h.Started(yella.Config{LeaseTimeout: 3 * time.Second, Concurrency: 1}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				g.wait(c)
				_, err := yella.Effect(c, "charge", func(context.Context) (int, error) { body.Add(1); return 1, nil })
				effErr <- err
				return c.OK(nil)
			}))
			id := h.One(e, "ev", nil)
			h.WaitEvent(yella.RunStarted, id)
			takeOver(h, id, "other")
			g.open()
			h.Drain(e)
			ExpectCode(h, "stale effect", <-effErr, yella.CodeFenced)
			Expect(h, "effect body not run", body.Load(), int32(0))
			effs, err := h.St.Effects(h.Ctx(), id)
			Expect(h, "effects err", err, nil)
			Expect(h, "no effect recorded", len(effs), 0)
			Expect(h, "owner", h.Run(id).LeaseOwner, "other")
		}},

		// Recovery: a store opened afresh by an exclusive owner knows every
		// earlier owner is gone, and Start hands their runs back before it
		// returns, with no wait for the lease.
		Case{Name: "Restart/DeadOwnerReclaimedAtStart", Durable: true, Exclusive: true, Fn: func(h *H) {
			h.Fake() // the lease never expires: only knowing the owner is dead frees the run
			r := h.Admit("a", "ev", nil)
			h.Claim(r.ID, "dead-owner", time.Hour) // an owner that is about to die, holding a long lease
			h.Reopen()                             // the process died; a new one opens the store
			var calls atomic.Int32
			e := h.Engine(yella.Config{LeaseTimeout: time.Hour}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				calls.Add(1)
				return c.OK(c.Attempt())
			}))
			h.Start(e)
			got := h.Run(r.ID)
			if got.Status == store.StatusRunning && got.LeaseOwner == "dead-owner" {
				h.Fatalf("after Start the run is still held by the dead owner (lease until %v): not reclaimed at start", got.LeaseExpires)
			}
			h.WaitStatus(r.ID, store.StatusCompleted)
			Expect(h, "executed once here", calls.Load(), int32(1))
			Expect(h, "second attempt", string(h.Run(r.ID).Output), "2")
			Expect(h, "reclaim event", len(h.Events(yella.LeaseReclaimed)), 1)
		}},

		// Caps: a capped process never has more than its cap executing. The
		// dispatcher decides which runs start inside Emit, so the count is
		// exact as soon as the emissions return.
		Case{Name: "Caps/RunningNeverExceedsCap", Fn: func(h *H) {
			g := newGate()
			var p peak
			e := h.Started(yella.Config{Concurrency: 10}, yella.Process{Name: "q", On: "ev", Concurrency: 2, Overflow: yella.Queue(3), Run: func(c *yella.Ctx) yella.Result {
				p.in()
				defer p.out()
				g.wait(c)
				return c.OK(nil)
			}})
			for range 5 {
				h.Emit(e, "ev", nil)
			}
			if _, nodes := h.St.(store.Shared); nodes { // a node claims through the store, after Emit returns
				h.WaitFor("two executing", func() bool { m, _ := e.Metrics(h.Ctx()); return m.Processes["q"].InFlight == 2 })
			}
			m, err := e.Metrics(h.Ctx())
			Expect(h, "metrics", err, nil)
			Expect(h, "executing after the emissions", m.Processes["q"].InFlight, 2)
			h.WaitFor("two handlers running", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.cur == 2 })
			g.open()
			h.Drain(e)
			Expect(h, "handlers running at once, at most", p.get(), 2)
			c, _ := h.St.Counts(h.Ctx())
			Expect(h, "completed", c[store.StatusCompleted], int64(5))
		}},
	}
}
