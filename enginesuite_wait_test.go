package yella_test

import (
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
)

// slowClock is an engine configuration for cases that advance a fake
// clock by hours: its periodic work (heartbeats, sweeps, flushes) runs
// every few minutes of fake time, not thousands of times.
var slowClock = yella.Config{LeaseTimeout: 30 * time.Minute, FlushInterval: 10 * time.Minute, RetentionInterval: 10 * time.Minute}

// waitCases: runs that start later than they are admitted.
func waitCases() []Case {
	return []Case{
		Case{Name: "Wait/DelayedEmit", Note: "new: Delay and StartAt admit at once and start no earlier than the given time, on a fake clock; a negative delay is refused", Fn: func(h *H) {
			clk := h.Fake()
			var s starts
			e := h.Started(slowClock, yella.Process{Name: "remind", On: "ev",
				Run: func(c *yella.Ctx) yella.Result { s.add(h, c); return c.OK(nil) }})
			t0 := clk.Now()
			later := h.One(e, "ev", nil, yella.Delay(time.Hour))
			at := h.One(e, "ev", nil, yella.StartAt(t0.Add(2*time.Hour)))
			past := h.One(e, "ev", nil, yella.StartAt(t0.Add(-time.Hour)))
			s.settle(h, "only the one whose time has passed", 1)
			Expect(h, "first", s.order()[0], past)
			r := h.Run(later)
			Expect(h, "idle, scheduled", r.Status, store.StatusIdle)
			Expect(h, "scheduled at", r.RetryAt.Equal(t0.Add(time.Hour)), true)
			clk.Advance(time.Hour - time.Millisecond)
			s.settle(h, "not before its time", 1)
			clk.Advance(time.Millisecond)
			s.settle(h, "at its time", 2)
			clk.Advance(time.Hour)
			s.settle(h, "the StartAt one", 3)
			Expect(h, "order", s.order()[1]+" "+s.order()[2], later+" "+at)
			_, err := e.Emit(h.Ctx(), "ev", nil, yella.Delay(-time.Second))
			ExpectCode(h, "negative delay", err, yella.CodeInvalidConfig)
		}},
		Case{Name: "Wait/DelayedEmitAcrossRestart", Durable: true, Note: "new: a delayed run keeps its start time across a restart: not earlier, not lost", Fn: func(h *H) {
			clk := h.Fake()
			var s starts
			proc := yella.Process{Name: "remind", On: "ev", Run: func(c *yella.Ctx) yella.Result { s.add(h, c); return c.OK(nil) }}
			e := h.Started(slowClock, proc)
			id := h.One(e, "ev", nil, yella.Delay(48*time.Hour))
			h.Reopen()
			e = h.Started(slowClock, proc)
			clk.Advance(47 * time.Hour)
			s.settle(h, "not yet", 0)
			clk.Advance(time.Hour)
			s.settle(h, "after 48 hours", 1)
			h.Drain(e)
			Expect(h, "completed", h.Run(id).Status, store.StatusCompleted)
		}},
		Case{Name: "Wait/ThenAfter", Note: "new: ThenAfter admits the follow-up with the completion and starts it no earlier than the delay after it", Fn: func(h *H) {
			clk := h.Fake()
			var s starts
			e := h.Started(slowClock,
				yella.Process{Name: "signup", On: "user:created", Run: func(c *yella.Ctx) yella.Result {
					s.add(h, c)
					return c.OK(map[string]int{"day": 1}, yella.Then("user:followup"), yella.ThenAfter(24*time.Hour))
				}},
				yella.Process{Name: "followup", On: "user:followup", Run: func(c *yella.Ctx) yella.Result { s.add(h, c); return c.OK(nil) }})
			root := h.One(e, "user:created", nil)
			h.WaitStatus(root, store.StatusCompleted)
			chain, err := e.Chain(h.Ctx(), root)
			Expect(h, "chain", err, nil)
			Expect(h, "two runs", len(chain), 2)
			Expect(h, "follow-up scheduled", chain[1].RetryAt.Sub(chain[0].CompletedAt), 24*time.Hour)
			clk.Advance(24*time.Hour - time.Second)
			s.settle(h, "not before a day", 1)
			clk.Advance(time.Second)
			s.settle(h, "a day later", 2)
		}},
	}
}
