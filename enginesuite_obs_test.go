package yella_test

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
)

// panicOn subscribes a handler that panics on events of type t.
func panicOn(e *yella.Engine, t yella.EventType) {
	e.Subscribe(func(ev yella.Event) {
		if ev.Type == t {
			panic("subscriber bug")
		}
	})
}

func obsCases() []Case {
	return []Case{
		// A panicking subscriber never affects runs: it is counted and
		// recorded, and the engine goes on.
		Case{Name: "Hardening/PanickingSubscribers", Spec: []int{292, 293, 294, 295, 296, 297, 300, 312, 313}, Fn: func(h *H) {
			e := h.Engine(yella.Config{Retry: &yella.Retry{Max: 1, Backoff: yella.Fixed(0)}},
				Proc("ok", "a", Noop),
				Proc("flaky", "b", func(c *yella.Ctx) yella.Result {
					if c.Attempt() == 1 {
						return c.Error(errors.New("once"))
					}
					return c.OK(nil)
				}),
				Proc("doomed", "c", func(c *yella.Ctx) yella.Result { return c.Error(errors.New("always")) }))
			for _, t := range []yella.EventType{yella.RunStarted, yella.RunCompleted, yella.RunFailed, yella.RunRetryScheduled, yella.RunDeadLettered} {
				panicOn(e, t)
			}
			var after atomic.Int32
			e.Subscribe(func(yella.Event) { after.Add(1) }) // later subscribers still run
			h.Start(e)
			a, b, c := h.One(e, "a", nil), h.One(e, "b", nil), h.One(e, "c", nil)
			h.Drain(e)
			Expect(h, "ok completed", h.Run(a).Status, store.StatusCompleted)
			Expect(h, "flaky retried and completed", h.Run(b).Status, store.StatusCompleted)
			Expect(h, "doomed dead", h.Run(c).Status, store.StatusDead)
			m, _ := e.Metrics(h.Ctx())
			Expect(h, "internal errors counted", m.Totals.InternalErrors >= 5, true)
			Expect(h, "later subscriber saw events", after.Load() > 0, true)
		}},
		Case{Name: "Events/SubscribeUnsubscribe", Spec: []int{302}, Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "ev", Noop))
			var n atomic.Int32
			unsub := e.Subscribe(func(ev yella.Event) {
				if ev.Type == yella.RunCompleted {
					n.Add(1)
				}
			})
			h.One(e, "ev", nil)
			h.Drain(e)
			unsub()
			h.One(e, "ev", nil)
			h.Drain(e)
			Expect(h, "delivered once", n.Load(), int32(1))
		}},
		Case{Name: "Metrics/QueueAndTotals", Spec: []int{314, 317}, Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "ev", Noop))
			h.One(e, "ev", nil)
			h.One(e, "ev", nil)
			h.Drain(e)
			m, err := e.Metrics(h.Ctx())
			Expect(h, "err", err, nil)
			Expect(h, "completed", m.Queue[yella.StatusCompleted], int64(2))
			Expect(h, "retries", m.Totals.Retries, int64(0))
			Expect(h, "dead", m.Totals.DeadLetters, int64(0))
			Expect(h, "resumes", m.Totals.Resumes, int64(0))
			Expect(h, "internal", m.Totals.InternalErrors, int64(0))
			m.Queue[yella.StatusCompleted] = 99
			m.Processes["a"] = yella.ProcessMetrics{Dropped: 9}
			again, _ := e.Metrics(h.Ctx())
			Expect(h, "copy", again.Queue[yella.StatusCompleted], int64(2))
			Expect(h, "process copy", again.Processes["a"].Dropped, int64(0))
			Expect(h, "slots", again.Dispatcher.Slots, 10)
		}},
		Case{Name: "Observability/Report", Spec: []int{318, 320}, Fn: func(h *H) {
			e := h.Started(yella.Config{},
				Proc("good", "a", func(c *yella.Ctx) yella.Result {
					yella.Effect(c, "k", func(context.Context) (int, error) { return 1, nil })
					return c.OK(nil)
				}),
				Proc("bad", "b", func(c *yella.Ctx) yella.Result {
					yella.Effect(c, "e", func(context.Context) (int, error) { return 0, errors.New("effect down") })
					return c.Error(errors.New("boom"))
				}))
			panicOn(e, yella.RunStarted) // one internal error per start
			h.One(e, "a", nil)
			h.One(e, "b", nil)
			h.Drain(e)
			rep, err := e.Observability(h.Ctx(), yella.ObservabilityQuery{})
			Expect(h, "err", err, nil)
			s := rep.Summary
			Expect(h, "started", s.Runs.Started, int64(2))
			Expect(h, "completed", s.Runs.Completed, int64(1))
			Expect(h, "failed", s.Runs.Failed, int64(1))
			Expect(h, "success rate", s.Runs.SuccessRate, 0.5)
			Expect(h, "durations", s.Runs.Duration.Count, int64(2))
			Expect(h, "effect completed", s.Effects.Completed, int64(1))
			Expect(h, "effect failed", s.Effects.Failed, int64(1))
			Expect(h, "internal", s.System.InternalErrors >= 2, true)
			Expect(h, "buckets", len(rep.Buckets) >= 1, true)
			kinds := map[string]string{}
			for _, er := range rep.RecentErrors {
				kinds[er.Kind] = er.Message
			}
			Expect(h, "run error", kinds["run"], "boom")
			Expect(h, "effect error", kinds["effect"], "effect down")
			_, hasInternal := kinds["internal"]
			Expect(h, "internal error kept", hasInternal, true)
			one, _ := e.Observability(h.Ctx(), yella.ObservabilityQuery{Process: "good"})
			Expect(h, "per process", one.Summary.Runs.Completed, int64(1))
			Expect(h, "per process failed", one.Summary.Runs.Failed, int64(0))
		}},
		Case{Name: "Observability/BucketsOverWindow", Spec: []int{319}, Fn: func(h *H) {
			clk := h.Fake()
			e := h.Started(yella.Config{}, Proc("a", "ev", Noop))
			h.One(e, "ev", nil)
			h.Drain(e)
			now := clk.Now() // 12:00, bucket-aligned
			rep, err := e.Observability(h.Ctx(), yella.ObservabilityQuery{From: now.Add(-20 * time.Minute), To: now, Bucket: 5 * time.Minute})
			Expect(h, "err", err, nil)
			Expect(h, "buckets", len(rep.Buckets), 5)
			empty := 0
			for _, b := range rep.Buckets {
				if b.Runs.Started == 0 {
					empty++
				}
			}
			Expect(h, "empty buckets", empty, 4)
			Expect(h, "summary started", rep.Summary.Runs.Started, int64(1))
			Expect(h, "bucket size", rep.BucketSize, 5*time.Minute)
			_, err = e.Observability(h.Ctx(), yella.ObservabilityQuery{From: now, To: now.Add(-time.Hour)})
			ExpectCode(h, "from after to", err, yella.CodeInvalidQuery)
		}},
		Case{Name: "Observability/AccuratePercentiles", Note: "fixed: percentiles within 1%, not bucket bounds", Fn: func(h *H) {
			clk := h.Fake()
			e := h.Started(yella.Config{Concurrency: 1}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				var ms int
				c.Decode(&ms)
				clk.Advance(time.Duration(ms) * time.Millisecond) // the handler "takes" ms
				return c.OK(nil)
			}))
			for i := 1; i <= 100; i++ {
				h.One(e, "ev", i*10) // 10ms … 1000ms
			}
			h.Drain(e)
			rep, _ := e.Observability(h.Ctx(), yella.ObservabilityQuery{From: clk.Now().Add(-time.Hour), To: clk.Now()})
			d := rep.Summary.Runs.Duration
			Expect(h, "count", d.Count, int64(100))
			within := func(got time.Duration, want float64) bool {
				g := float64(got) / float64(time.Millisecond)
				return g >= want*0.98 && g <= want*1.02
			}
			Expect(h, "p50 ≈ 500ms", within(d.P50, 500), true)
			Expect(h, "p95 ≈ 950ms", within(d.P95, 950), true)
			Expect(h, "max", d.Max, time.Second)
			Expect(h, "min", d.Min, 10*time.Millisecond)
		}},
		Case{Name: "Observability/PersistsAcrossRestart", Durable: true, Spec: []int{321}, Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "ev", Noop))
			h.One(e, "ev", nil)
			h.Drain(e)
			before, _ := e.Observability(h.Ctx(), yella.ObservabilityQuery{})
			h.Reopen()
			e2 := h.Engine(yella.Config{}, Proc("a", "ev", Noop))
			after, _ := e2.Observability(h.Ctx(), yella.ObservabilityQuery{})
			Expect(h, "completed before", before.Summary.Runs.Completed, int64(1))
			Expect(h, "completed after", after.Summary.Runs.Completed, int64(1))
			Expect(h, "durations after", after.Summary.Runs.Duration.Count, int64(1))
		}},
	}
}
