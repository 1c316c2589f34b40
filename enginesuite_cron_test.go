package yella_test

import (
	"time"

	"github.com/yella-go/yella"
)

// ticks counts the runs of the tick process by the tick in their payload.
func ticks(h *H, e *yella.Engine) map[string]int {
	h.Helper()
	page, err := e.Runs(h.Ctx(), yella.RunQuery{Process: "report", Limit: 500})
	if err != nil {
		h.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range page.Runs {
		out[r.IdempotencyKey]++
	}
	return out
}

func reportProc(s *starts, h *H) yella.Process {
	return yella.Process{Name: "report", On: "report:due", Run: func(c *yella.Ctx) yella.Result { s.add(h, c); return c.OK(nil) }}
}

// cronCases: schedules.
func cronCases() []Case {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) // the fake clock's start (H.Fake)
	return []Case{
		Case{Name: "Cron/OneRunPerTick", Note: "new: a schedule admits one run per tick, at the tick, keyed by the schedule and the tick's time; fake clock", Fn: func(h *H) {
			clk := h.Fake()
			var s starts
			e := h.Started(slowClock, reportProc(&s, h))
			if err := e.AddSchedule(yella.Schedule{Name: "quarter", Cron: "*/15 * * * *", Event: "report:due"}); err != nil {
				h.Fatal(err)
			}
			Expect(h, "next", e.Schedules()[0].Next, t0.Add(15*time.Minute))
			for i := 1; i <= 4; i++ {
				clk.Advance(15*time.Minute - time.Second)
				s.settle(h, "not before the tick", i-1)
				clk.Advance(time.Second)
				s.settle(h, "at the tick", i)
			}
			h.Drain(e)
			got := ticks(h, e)
			Expect(h, "runs", len(got), 4)
			Expect(h, "the 13:00 tick", got[yella.TickKey("quarter", t0.Add(time.Hour))], 1)
			info := e.Schedules()[0]
			Expect(h, "last", info.Last, t0.Add(time.Hour))
			Expect(h, "last runs", len(info.LastRuns), 1)
		}},
		Case{Name: "Cron/TimeZone", Note: "new: a schedule's fields are read in its Location", Fn: func(h *H) {
			h.Fake()
			var s starts
			e := h.Started(slowClock, reportProc(&s, h))
			paris, err := time.LoadLocation("Europe/Paris")
			if err != nil {
				h.Skip("no time zone database: ", err)
			}
			if err := e.AddSchedule(yella.Schedule{Name: "daily", Cron: "0 9 * * *", Location: paris, Event: "report:due"}); err != nil {
				h.Fatal(err)
			}
			// 12:00 UTC is 13:00 in Paris (winter time): the next 09:00 there
			// is 08:00 UTC the next day.
			Expect(h, "next", e.Schedules()[0].Next.UTC(), time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))
		}},
		Case{Name: "Cron/MissedTickPolicy", Durable: true, Note: "new: ticks missed while no engine ran are skipped by default; with CatchUp the latest missed tick not older than it runs once at start", Fn: func(h *H) {
			clk := h.Fake()
			var s starts
			sched := yella.Schedule{Name: "hourly", Cron: "@hourly", Event: "report:due"}
			e := h.Started(slowClock, reportProc(&s, h))
			if err := e.AddSchedule(sched); err != nil {
				h.Fatal(err)
			}
			h.Reopen() // stopped at 12:00: the 13:00, 14:00 and 15:00 ticks are missed
			clk.Advance(3*time.Hour + 30*time.Minute)
			e = h.Started(slowClock, reportProc(&s, h))
			if err := e.AddSchedule(sched); err != nil {
				h.Fatal(err)
			}
			s.settle(h, "missed ticks skipped", 0)
			h.Reopen()
			e = h.Engine(slowClock, reportProc(&s, h))
			sched.CatchUp = 2 * time.Hour
			if err := e.AddSchedule(sched); err != nil {
				h.Fatal(err)
			}
			h.Start(e)
			s.settle(h, "the latest missed tick, once", 1)
			Expect(h, "which", ticks(h, e)[yella.TickKey("hourly", t0.Add(3*time.Hour))], 1)
			h.Reopen() // restarted again: the caught-up tick is not run twice
			e = h.Engine(slowClock, reportProc(&s, h))
			if err := e.AddSchedule(sched); err != nil {
				h.Fatal(err)
			}
			h.Start(e)
			clk.Advance(30 * time.Minute)
			s.settle(h, "then the 16:00 tick", 2)
			got := ticks(h, e)
			Expect(h, "runs", len(got), 2)
			Expect(h, "16:00", got[yella.TickKey("hourly", t0.Add(4*time.Hour))], 1)
		}},
		Case{Name: "Cron/OneRunPerTickAcrossEngines", Shared: true, Note: "new: two engines holding the same schedule on one store admit each tick once", Fn: func(h *H) {
			clk := h.Fake()
			var s starts
			sched := yella.Schedule{Name: "quarter", Cron: "*/15 * * * *", Event: "report:due"}
			var es []*yella.Engine
			for range 2 {
				e := h.Started(slowClock, reportProc(&s, h))
				if err := e.AddSchedule(sched); err != nil {
					h.Fatal(err)
				}
				es = append(es, e)
			}
			for i := 1; i <= 3; i++ {
				clk.Advance(15 * time.Minute)
				s.settle(h, "one run per tick", i)
			}
			for _, e := range es {
				h.Drain(e)
			}
			got := ticks(h, es[0])
			Expect(h, "ticks", len(got), 3)
			for k, n := range got {
				Expect(h, "runs of "+k, n, 1)
			}
		}},
		Case{Name: "Cron/BadSchedules", Note: "new: a schedule that cannot work is refused when added", Fn: func(h *H) {
			e := h.Engine(yella.Config{KeyRetention: time.Hour}, Proc("report", "report:due", func(c *yella.Ctx) yella.Result { return c.OK(nil) }))
			for _, bad := range []yella.Schedule{
				{Cron: "@hourly", Event: "report:due"},
				{Name: "x", Cron: "@hourly"},
				{Name: "x", Cron: "61 * * * *", Event: "report:due"},
				{Name: "x", Cron: "* * *", Event: "report:due"},
				{Name: "x", Cron: "CRON_TZ=Europe/Paris 0 9 * * *", Event: "report:due"},
				{Name: "x", Cron: "@hourly", Event: "report:due", CatchUp: 2 * time.Hour},
			} {
				ExpectCode(h, "refused: "+bad.Name+" "+bad.Cron, e.AddSchedule(bad), yella.CodeInvalidConfig)
			}
			Expect(h, "a good one", e.AddSchedule(yella.Schedule{Name: "x", Cron: "@every 90s", Event: "report:due"}), nil)
			ExpectCode(h, "the same name again", e.AddSchedule(yella.Schedule{Name: "x", Cron: "@daily", Event: "report:due"}), yella.CodeInvalidConfig)
		}},
	}
}
