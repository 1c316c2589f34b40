package yella_test

import (
	"encoding/json"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
)

// groupCases: Singleton and Debounce emissions, and paused schedules.
func groupCases() []Case {
	return []Case{
		Case{Name: "Groups/Singleton", Note: "new: Singleton(key) admits no run while one of the same key and process is idle, running or waiting; once it ended, the next runs", Fn: func(h *H) {
			release := make(chan struct{})
			e := h.Started(yella.Config{}, yella.Process{Name: "sync", On: "user:changed", Run: func(c *yella.Ctx) yella.Result {
				<-release
				return c.OK(nil)
			}})
			first := h.Emit(e, "user:changed", 1, yella.Singleton("user-1"))
			Expect(h, "first admitted", len(first.Runs), 1)
			h.WaitStatus(first.Runs[0], store.StatusRunning)
			second := h.Emit(e, "user:changed", 2, yella.Singleton("user-1"))
			Expect(h, "none admitted while it runs", len(second.Runs), 0)
			Expect(h, "reason", second.Reason, yella.ReasonGrouped)
			Expect(h, "stood in", join(second.Grouped), first.Runs[0])
			other := h.Emit(e, "user:changed", 3, yella.Singleton("user-2"))
			Expect(h, "another key runs", len(other.Runs), 1)
			close(release)
			h.WaitStatus(first.Runs[0], store.StatusCompleted)
			third := h.Emit(e, "user:changed", 4, yella.Singleton("user-1"))
			Expect(h, "after it ended, a new run", len(third.Runs), 1)
			_, err := e.Emit(h.Ctx(), "user:changed", nil, yella.Singleton(""))
			ExpectCode(h, "empty key", err, yella.CodeInvalidConfig)
		}},
		Case{Name: "Groups/Debounce", Note: "new: Debounce(key, window) runs a burst once, with its latest payload, window after its last emission (fake clock)", Fn: func(h *H) {
			clk := h.Fake()
			var s starts
			var mu chan string = make(chan string, 10)
			e := h.Started(slowClock, yella.Process{Name: "index", On: "doc:changed", Run: func(c *yella.Ctx) yella.Result {
				s.add(h, c)
				mu <- string(c.Payload())
				return c.OK(nil)
			}})
			first := h.Emit(e, "doc:changed", map[string]int{"v": 1}, yella.Debounce("doc-9", 5*time.Second))
			Expect(h, "admitted", len(first.Runs), 1)
			for v := 2; v <= 4; v++ {
				clk.Advance(2 * time.Second)
				em := h.Emit(e, "doc:changed", map[string]int{"v": v}, yella.Debounce("doc-9", 5*time.Second))
				Expect(h, "debounced into the first", join(em.Grouped), first.Runs[0])
				Expect(h, "reason", em.Reason, yella.ReasonGrouped)
			}
			clk.Advance(5*time.Second - time.Millisecond)
			s.settle(h, "not before the burst has been quiet for the window", 0)
			clk.Advance(time.Millisecond)
			s.settle(h, "once", 1)
			Expect(h, "with the latest payload", <-mu, `{"v":4}`)
			h.WaitStatus(first.Runs[0], store.StatusCompleted)
			next := h.Emit(e, "doc:changed", map[string]int{"v": 5}, yella.Debounce("doc-9", 5*time.Second))
			Expect(h, "after it started, a new run", len(next.Runs), 1)
		}},
		Case{Name: "Groups/DebounceAcrossRestart", Durable: true, Note: "new: a debounced run keeps its latest payload and start across a restart", Fn: func(h *H) {
			clk := h.Fake()
			var got = make(chan json.RawMessage, 2)
			proc := yella.Process{Name: "index", On: "doc:changed", Run: func(c *yella.Ctx) yella.Result { got <- c.Payload(); return c.OK(nil) }}
			e := h.Started(slowClock, proc)
			id := h.Emit(e, "doc:changed", 1, yella.Debounce("d", time.Minute)).Runs[0]
			clk.Advance(30 * time.Second)
			h.Emit(e, "doc:changed", 2, yella.Debounce("d", time.Minute))
			h.Reopen()
			h.Started(slowClock, proc)
			clk.Advance(59 * time.Second)
			time.Sleep(50 * time.Millisecond)
			Expect(h, "not yet", h.Run(id).Status, store.StatusIdle)
			clk.Advance(time.Second)
			h.WaitStatus(id, store.StatusCompleted)
			Expect(h, "latest", string(<-got), "2")
		}},
		Case{Name: "Cron/PauseResume", Note: "new: a paused schedule skips its ticks (on every engine of the store, across restarts) until resumed; skipped ticks are not caught up", Fn: func(h *H) {
			clk := h.Fake()
			var s starts
			e := h.Started(slowClock, reportProc(&s, h))
			if err := e.AddSchedule(yella.Schedule{Name: "quarter", Cron: "*/15 * * * *", Event: "report:due"}); err != nil {
				h.Fatal(err)
			}
			clk.Advance(15 * time.Minute)
			s.settle(h, "first tick", 1)
			if err := e.PauseSchedule(h.Ctx(), "quarter"); err != nil {
				h.Fatal(err)
			}
			info := e.Schedules()[0]
			Expect(h, "paused", info.Paused, true)
			Expect(h, "since", info.PausedAt.Equal(clk.Now()), true)
			clk.Advance(15 * time.Minute)
			s.settle(h, "paused: skipped", 1)
			// Another engine on the store sees the pause at its start (its
			// catch-up of the 12:30 tick is skipped) and at its ticks.
			other := h.Started(slowClock, reportProc(&s, h))
			if err := other.AddSchedule(yella.Schedule{Name: "quarter", Cron: "*/15 * * * *", Event: "report:due", CatchUp: time.Hour}); err != nil {
				h.Fatal(err)
			}
			clk.Advance(15 * time.Minute)
			s.settle(h, "paused on both", 1)
			Expect(h, "the other engine reports it", other.Schedules()[0].Paused, true)
			if err := other.ResumeSchedule(h.Ctx(), "quarter"); err != nil {
				h.Fatal(err)
			}
			clk.Advance(15 * time.Minute)
			s.settle(h, "resumed: the next tick runs once, the skipped ones not", 2)
			ExpectCode(h, "unknown schedule", e.PauseSchedule(h.Ctx(), "nope"), yella.CodeInvalidConfig)
		}},
	}
}
