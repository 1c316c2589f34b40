package yella_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
)

// nested returns JSON arrays nested n deep around 1.
func nested(n int) json.RawMessage {
	return json.RawMessage(strings.Repeat("[", n) + "1" + strings.Repeat("]", n))
}

// Cases for the safety guarantees: a chain read from any of its runs,
// payload limits at admission, the cancelled status, a bounded queue beyond
// a cap by default.
func safetyCases() []Case {
	return []Case{
		Case{Name: "Caps/DefaultQueuesBeyondCap", Note: "changed: a capped process without an explicit Overflow queues up to yella.DefaultQueueLimit runs beyond its cap instead of dropping; a drop beyond that is reported by Emission.Err", Fn: func(h *H) {
			g := newGate()
			var p peak
			e := h.Started(yella.Config{Concurrency: 20}, yella.Process{Name: "research", On: "topic", Concurrency: 5, Run: func(c *yella.Ctx) yella.Result {
				p.in()
				defer p.out()
				g.wait(c)
				return c.OK(nil)
			}})
			for i := range 10 { // the README's library example
				em := h.Emit(e, "topic", i)
				Expect(h, "admitted", len(em.Runs), 1)
				Expect(h, "no drop", em.Err(), nil)
			}
			m, _ := e.Metrics(h.Ctx())
			Expect(h, "queue limit", m.Processes["research"].QueueLimit, yella.DefaultQueueLimit)
			Expect(h, "overflow", e.Processes()[0].Overflow.String(), "default (queue(1000))")
			for i := 10; i < 5+yella.DefaultQueueLimit; i++ {
				if em := h.Emit(e, "topic", i); len(em.Runs) != 1 {
					h.Fatalf("emit %d within the bound: %+v", i, em)
				}
			}
			em := h.Emit(e, "topic", "one too many")
			Expect(h, "beyond the bound", len(em.Runs), 0)
			Expect(h, "reason", em.Reason, yella.ReasonAtCapacity)
			err := em.Err()
			Expect(h, "drop is an error", errors.Is(err, yella.ErrDropped), true)
			if err != nil {
				ExpectContains(h, "message", err.Error(), "research")
			}
			g.open()
			// 1,005 runs five at a time: on SQLite under -race on a busy
			// two-core machine this takes longer than the suite's 10 s.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := e.Drain(ctx); err != nil {
				h.Fatalf("drain: %v", err)
			}
			Expect(h, "parallelism bounded by the cap", p.get() <= 5, true)
			c, _ := h.St.Counts(h.Ctx())
			Expect(h, "completed", c[store.StatusCompleted], int64(5+yella.DefaultQueueLimit))
			m, _ = e.Metrics(h.Ctx())
			Expect(h, "dropped", m.Totals.Dropped, int64(1))
		}},
		Case{Name: "Repair/CancelledIsItsOwnStatus", Note: "changed: Cancel ends a run in its own status cancelled (refining errored), with no retry time, counted apart from failures; Retry runs it again, RequeueDead refuses it", Fn: func(h *H) {
			clk := h.Fake()
			var fail atomic.Bool
			fail.Store(true)
			e := h.Started(yella.Config{}, yella.Process{Name: "a", On: "ev", Retry: &yella.Retry{Max: 3, Backoff: yella.Fixed(time.Minute)},
				Run: func(c *yella.Ctx) yella.Result {
					if fail.Load() {
						return c.Error(errors.New("downstream down"))
					}
					return c.OK("ok")
				}})
			id := h.One(e, "ev", nil)
			r := h.WaitStatus(id, store.StatusIdle) // waiting a minute for its retry
			h.WaitFor("retry scheduled", func() bool { r = h.Run(id); return !r.RetryAt.IsZero() })
			cancelled, err := e.Cancel(h.Ctx(), id)
			Expect(h, "cancel", err, nil)
			Expect(h, "returned status", cancelled.Status, yella.StatusCancelled)
			r = h.Run(id)
			Expect(h, "status", r.Status, store.StatusCancelled)
			Expect(h, "state", r.State(), store.StateErrored)
			Expect(h, "error", r.Error, "cancelled by an operator")
			Expect(h, "code", r.ErrorCode, string(yella.CodeCancelled))
			Expect(h, "no retry time", r.RetryAt.IsZero(), true)
			Expect(h, "completed at", r.CompletedAt.IsZero(), false)
			tl, _ := e.Timeline(h.Ctx(), id)
			last := tl[len(tl)-1]
			Expect(h, "timeline status", last.Status, yella.StatusCancelled)
			Expect(h, "timeline note", last.Note, "cancelled")

			evs := h.Events(yella.RunCancelled)
			Expect(h, "run:cancelled", len(evs), 1)
			if len(evs) == 1 {
				Expect(h, "event status", evs[0].Status, yella.StatusCancelled)
				Expect(h, "event code", evs[0].Code, yella.CodeCancelled)
			}
			Expect(h, "no run:failed", len(h.Events(yella.RunFailed)), 0)
			m, _ := e.Metrics(h.Ctx())
			Expect(h, "queue cancelled", m.Queue[yella.StatusCancelled], int64(1))
			Expect(h, "queue errored", m.Queue[yella.StatusErrored], int64(0))
			Expect(h, "queue idle", m.Queue[yella.StatusIdle], int64(0))
			Expect(h, "cancels", m.Totals.Cancels, int64(1))
			c, _ := h.St.Counts(h.Ctx())
			Expect(h, "store count", c[store.StatusCancelled], int64(1))
			for what, q := range map[string]yella.RunQuery{
				"status filter": {Status: []yella.Status{yella.StatusCancelled}, WithTotal: true},
				"state filter":  {State: yella.StateErrored, WithTotal: true},
			} {
				p, err := e.Runs(h.Ctx(), q)
				Expect(h, what, err, nil)
				Expect(h, what+" total", p.Total, int64(1))
			}
			p, _ := e.Runs(h.Ctx(), yella.RunQuery{Status: []yella.Status{yella.StatusErrored}, WithTotal: true})
			Expect(h, "not listed as errored", p.Total, int64(0))
			rep, _ := e.Observability(h.Ctx(), yella.ObservabilityQuery{})
			Expect(h, "observability cancelled", rep.Summary.Runs.Cancelled, int64(1))

			// Past the retry's time: the cancelled retry never fires. (A
			// short backoff: every periodic timer of the engine fires as
			// the fake clock passes its times, an hour's worth took 30 s
			// under -race.)
			clk.Advance(2 * time.Minute)
			Expect(h, "still cancelled", h.Run(id).Status, store.StatusCancelled)
			_, err = e.RequeueDead(h.Ctx(), id)
			ExpectCode(h, "requeue", err, yella.CodeInvalidRunState)
			_, err = e.Cancel(h.Ctx(), id)
			ExpectCode(h, "cancel again", err, yella.CodeInvalidRunState)
			fail.Store(false)
			_, err = e.Retry(h.Ctx(), id)
			Expect(h, "retry", err, nil)
			r = h.WaitStatus(id, store.StatusCompleted)
			Expect(h, "output", string(r.Output), `"ok"`)
		}},
		Case{Name: "Payload/InvalidUTF8Refused", Note: "new: a payload (emitted, output, follow-up, resume) or context value whose strings are not valid UTF-8 is refused with CodeInvalidPayload, so every listing reads back with strict JSON parsers", Fn: func(h *H) {
			bad := json.RawMessage("{\"name\":\"\xff\xfe\"}")
			e := h.Started(yella.Config{},
				Proc("a", "ev", Noop),
				Proc("out", "out", func(c *yella.Ctx) yella.Result { return c.OK(bad) }),
				Proc("ctx", "ctx", func(c *yella.Ctx) yella.Result {
					err := c.SetContext("k", bad)
					ExpectCode(h, "set context", err, yella.CodeInvalidPayload)
					return c.OK(nil)
				}),
				Proc("gate", "gate", func(c *yella.Ctx) yella.Result { return c.Defer("ev", nil) }))
			_, err := e.Emit(h.Ctx(), "ev", bad)
			ExpectCode(h, "emit", err, yella.CodeInvalidPayload)
			if err != nil {
				ExpectContains(h, "message", err.Error(), "not valid UTF-8")
			}
			n, _ := h.St.CountRuns(h.Ctx(), store.RunFilter{})
			Expect(h, "nothing admitted", n, int64(0))

			// A Go string is encoded with U+FFFD in place of invalid bytes.
			id := h.One(e, "ev", map[string]string{"name": "\xff\xfe"})
			Expect(h, "Go value stored as valid UTF-8", utf8.Valid(h.Run(id).Payload), true)

			out := h.One(e, "out", nil)
			withCtx := h.One(e, "ctx", nil)
			gate := h.One(e, "gate", nil)
			h.Drain(e)
			r := h.Run(out)
			Expect(h, "output refused", r.Status, store.StatusErrored)
			Expect(h, "output code", r.ErrorCode, string(yella.CodeInvalidPayload))
			Expect(h, "context run completes", h.Run(withCtx).Status, store.StatusCompleted)
			Expect(h, "context not stored", len(h.Run(withCtx).Context) == 0 || string(h.Run(withCtx).Context) == "{}", true)

			_, err = e.Resume(h.Ctx(), gate, bad)
			ExpectCode(h, "resume", err, yella.CodeInvalidPayload)
			Expect(h, "still deferred", h.Run(gate).Status, store.StatusDeferred)

			// Every stored run reads back with a strict parser.
			rs, _ := h.St.Runs(h.Ctx(), store.RunFilter{Limit: 100})
			for _, r := range rs {
				for _, b := range []json.RawMessage{r.Payload, r.Output, r.Context} {
					if len(b) > 0 && (!json.Valid(b) || !utf8.Valid(b)) {
						h.Errorf("run %s (%s) holds %q", r.ID, r.Process, b)
					}
				}
			}
		}},
		Case{Name: "Payload/DepthLimit", Note: "new: payloads nested deeper than Config.MaxPayloadDepth (default 100) are refused with CodeInvalidPayload", Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "ev", Noop))
			h.One(e, "ev", nested(yella.DefaultMaxPayloadDepth))
			_, err := e.Emit(h.Ctx(), "ev", nested(yella.DefaultMaxPayloadDepth+1))
			ExpectCode(h, "default limit", err, yella.CodeInvalidPayload)
			if err != nil {
				ExpectContains(h, "message", err.Error(), "nests deeper than 100 levels")
			}

			deep := map[string]any{"a": map[string]any{"b": []int{1}}}
			e2 := h.Started(yella.Config{MaxPayloadDepth: 2},
				Proc("b", "ev2", Noop),
				Proc("out", "out", func(c *yella.Ctx) yella.Result { return c.OK(deep) }),
				Proc("then", "then", func(c *yella.Ctx) yella.Result { return c.OK(deep, yella.Then("ev2")) }))
			h.One(e2, "ev2", map[string]any{"a": map[string]int{"b": 1}})
			_, err = e2.Emit(h.Ctx(), "ev2", deep)
			ExpectCode(h, "Go value", err, yella.CodeInvalidPayload)
			_, err = e2.Emit(h.Ctx(), "ev2", nested(3))
			ExpectCode(h, "raw", err, yella.CodeInvalidPayload)
			out, then := h.One(e2, "out", nil), h.One(e2, "then", nil)
			h.Drain(e2)
			for _, id := range []string{out, then} {
				r := h.Run(id)
				Expect(h, r.Process+" status", r.Status, store.StatusErrored)
				Expect(h, r.Process+" code", r.ErrorCode, string(yella.CodeInvalidPayload))
			}
			chain, _ := e2.Chain(h.Ctx(), then)
			Expect(h, "no follow-up admitted", len(chain), 1)

			_, err = yella.New(yella.Config{Store: h.St, MaxPayloadDepth: -1})
			ExpectCode(h, "negative", err, yella.CodeInvalidConfig)
			var ye *yella.Error
			if errors.As(err, &ye) {
				Expect(h, "field", ye.Field, "MaxPayloadDepth")
			}
		}},
		Case{Name: "Chain/FromAnyRun", Fn: func(h *H) {
			e := h.Started(yella.Config{},
				Proc("root", "start", func(c *yella.Ctx) yella.Result { return c.OK(1, yella.Then("mid")) }),
				Proc("mid", "mid", func(c *yella.Ctx) yella.Result { return c.OK(2, yella.Then("leaf")) }),
				Proc("leaf", "leaf", Noop))
			root := h.One(e, "start", nil)
			h.Drain(e)
			chain, err := e.Chain(h.Ctx(), root)
			Expect(h, "err", err, nil)
			Expect(h, "chain from the root", len(chain), 3)
			if len(chain) != 3 {
				return
			}
			for _, r := range chain {
				got, err := e.Chain(h.Ctx(), r.ID)
				Expect(h, "err", err, nil)
				Expect(h, "chain from "+r.Process, join(runIDs(got)), join(runIDs(chain)))
			}
			// In the store a chain is named by its correlation id only: the
			// id of a run further down names no chain.
			child := chain[1].ID
			none, err := h.St.Chain(h.Ctx(), child)
			Expect(h, "store chain of a child's id: err", err, nil)
			Expect(h, "store chain of a child's id", len(none), 0)
			f := store.RunFilter{CorrelationID: child, Limit: 10}
			rs, _ := h.St.Runs(h.Ctx(), f)
			Expect(h, "runs filtered by a child's id", len(rs), 0)
			n, _ := h.St.CountRuns(h.Ctx(), f)
			Expect(h, "count filtered by a child's id", n, int64(0))
			f.CorrelationID = root
			rs, _ = h.St.Runs(h.Ctx(), f)
			Expect(h, "runs filtered by the root's id", len(rs), 3)
			page, err := e.Runs(h.Ctx(), yella.RunQuery{CorrelationID: root, WithTotal: true})
			Expect(h, "err", err, nil)
			Expect(h, "engine listing of the chain", len(page.Runs), 3)
			Expect(h, "engine total of the chain", page.Total, int64(3))
		}},
	}
}

func runIDs(rs []yella.Run) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}
