package yella_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/storespy"
	"github.com/yella-go/yella/store"
)

// cyclic cannot be encoded as JSON.
type cyclic struct{ Self *cyclic }

func newCyclic() *cyclic { c := &cyclic{}; c.Self = c; return c }

// stringNumber decodes a JSON string holding a number: a "schema" that
// transforms the payload.
type stringNumber int

func (n *stringNumber) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := strconv.Atoi(s)
	*n = stringNumber(v)
	return err
}

func guardCases() []Case {
	return []Case{
		Case{Name: "Payload/TooLarge", Spec: []int{157, 244}, Fn: func(h *H) {
			e := h.Engine(yella.Config{MaxPayloadBytes: 100}, Proc("a", "ev", Noop))
			_, err := e.Emit(h.Ctx(), "ev", strings.Repeat("x", 200))
			Expect(h, "is too large", errors.Is(err, yella.ErrPayloadTooLarge), true)
			ExpectContains(h, "message", err.Error(), "payload exceeds max size")
			n, _ := h.St.CountRuns(h.Ctx(), store.RunFilter{})
			Expect(h, "nothing admitted", n, int64(0))
		}},
		Case{Name: "Payload/ExactlyAtLimit", Spec: []int{158, 161}, Fn: func(h *H) {
			e := h.Started(yella.Config{MaxPayloadBytes: 100}, Proc("a", "ev", Noop))
			id := h.One(e, "ev", strings.Repeat("x", 98)) // 98 chars + 2 quotes
			h.Drain(e)
			Expect(h, "completed", h.Run(id).Status, store.StatusCompleted)
		}},
		Case{Name: "Payload/BytesNotCharacters", Spec: []int{160}, Fn: func(h *H) {
			e := h.Engine(yella.Config{MaxPayloadBytes: 100}, Proc("a", "ev", Noop))
			_, err := e.Emit(h.Ctx(), "ev", strings.Repeat("😀", 25)) // 100 bytes + quotes
			ExpectCode(h, "emoji", err, yella.CodePayloadTooLarge)
		}},
		Case{Name: "Payload/NilAccepted", Spec: []int{163}, Fn: func(h *H) {
			e := h.Started(yella.Config{MaxPayloadBytes: 10}, Proc("a", "ev", Noop))
			id := h.One(e, "ev", nil)
			h.Drain(e)
			r := h.Run(id)
			Expect(h, "completed", r.Status, store.StatusCompleted)
			Expect(h, "no payload", len(r.Payload), 0)
		}},
		Case{Name: "Payload/NotEncodable", Spec: []int{32, 172}, Fn: func(h *H) {
			e := h.Engine(yella.Config{}, Proc("a", "ev", Noop))
			for name, v := range map[string]any{"cycle": newCyclic(), "func": func() {}, "chan": make(chan int), "bad raw": json.RawMessage(`{`)} {
				_, err := e.Emit(h.Ctx(), "ev", v)
				ExpectCode(h, name, err, yella.CodeInvalidPayload)
			}
			n, _ := h.St.CountRuns(h.Ctx(), store.RunFilter{})
			Expect(h, "nothing admitted", n, int64(0))
		}},
		Case{Name: "Payload/OutputTooLarge", Spec: []int{159, 162, 247}, Fn: func(h *H) {
			e := h.Started(yella.Config{MaxPayloadBytes: 100},
				Proc("big", "ev", func(c *yella.Ctx) yella.Result { return c.OK(strings.Repeat("x", 200)) }),
				Proc("emoji", "ev2", func(c *yella.Ctx) yella.Result { return c.OK(strings.Repeat("😀", 30)) }))
			a, b := h.One(e, "ev", nil), h.One(e, "ev2", nil)
			h.Drain(e)
			for _, id := range []string{a, b} {
				r := h.Run(id)
				Expect(h, "status", r.Status, store.StatusErrored)
				ExpectContains(h, "error", r.Error, "payload exceeds max size")
				Expect(h, "code", r.ErrorCode, string(yella.CodePayloadTooLarge))
			}
		}},
		Case{Name: "Payload/OutputNotEncodable", Spec: []int{173}, Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "ev", func(c *yella.Ctx) yella.Result { return c.OK(newCyclic()) }))
			id := h.One(e, "ev", nil)
			h.Drain(e)
			r := h.Run(id)
			Expect(h, "status", r.Status, store.StatusErrored)
			Expect(h, "code", r.ErrorCode, string(yella.CodeInvalidPayload))
			ExpectContains(h, "error", r.Error, "cycle")
		}},
		Case{Name: "Timeout/ErrorsSlowHandler", Spec: []int{164, 245}, Fn: func(h *H) {
			clk := h.Fake()
			e := h.Started(yella.Config{HandlerTimeout: 50 * time.Millisecond}, Proc("slow", "ev", func(c *yella.Ctx) yella.Result {
				<-c.Done()
				return c.OK(nil)
			}))
			id := h.One(e, "ev", nil)
			h.WaitEvent(yella.RunStarted, id)
			clk.Advance(50 * time.Millisecond)
			r := h.WaitStatus(id, store.StatusErrored)
			Expect(h, "error", r.Error, "handler timed out")
			Expect(h, "code", r.ErrorCode, string(yella.CodeHandlerTimeout))
		}},
		Case{Name: "Timeout/IgnoredContextStillFreesSlot", Fn: func(h *H) {
			clk := h.Fake()
			release := newGate()
			defer release.open()
			e := h.Started(yella.Config{Concurrency: 1, HandlerTimeout: time.Second}, Proc("stuck", "ev", func(c *yella.Ctx) yella.Result {
				<-release.ch // ignores its context
				return c.OK(nil)
			}), Proc("next", "ev2", Noop))
			id := h.One(e, "ev", nil)
			h.WaitEvent(yella.RunStarted, id)
			other := h.One(e, "ev2", nil)
			clk.Advance(time.Second)
			h.WaitStatus(id, store.StatusErrored)
			h.WaitStatus(other, store.StatusCompleted)
		}},
		Case{Name: "Timeout/FastHandlerCompletes", Spec: []int{165}, Fn: func(h *H) {
			e := h.Started(yella.Config{HandlerTimeout: 5 * time.Second}, Proc("a", "ev", Noop))
			id := h.One(e, "ev", nil)
			h.Drain(e)
			Expect(h, "completed", h.Run(id).Status, store.StatusCompleted)
		}},
		Case{Name: "Timeout/ProcessOverride", Fn: func(h *H) {
			clk := h.Fake()
			e := h.Started(yella.Config{HandlerTimeout: time.Hour}, yella.Process{Name: "a", On: "ev", Timeout: time.Second, Run: func(c *yella.Ctx) yella.Result {
				<-c.Done()
				return c.OK(nil)
			}})
			id := h.One(e, "ev", nil)
			h.WaitEvent(yella.RunStarted, id)
			clk.Advance(time.Second)
			Expect(h, "code", h.WaitStatus(id, store.StatusErrored).ErrorCode, string(yella.CodeHandlerTimeout))
		}},
		Case{Name: "Schema/TypedPayload", Spec: []int{166, 168, 187, 195}, Fn: func(h *H) {
			type In struct {
				N    stringNumber `json:"n"`
				Name string       `json:"name"`
			}
			e := h.Started(yella.Config{},
				yella.Process{Name: "typed", On: "ev", Run: yella.Handle(func(c *yella.Ctx, in In) yella.Result { return c.OK(int(in.N) * 2) })},
				Proc("plain", "ev2", func(c *yella.Ctx) yella.Result { return c.OK(c.Payload()) }))
			id := h.One(e, "ev", map[string]string{"n": "21", "name": "x"})
			plain := h.One(e, "ev2", map[string]int{"x": 1})
			h.Drain(e)
			Expect(h, "transformed", string(h.Run(id).Output), "42")
			Expect(h, "plain", string(h.Run(plain).Output), `{"x":1}`)
		}},
		Case{Name: "Schema/InvalidPayloadFailsBeforeHandler", Spec: []int{167, 246, 240}, Note: "changed: typed decoding runs inside the handler adapter, so run:started is emitted before the failure", Fn: func(h *H) {
			var called atomic.Bool
			e := h.Started(yella.Config{Retry: &yella.Retry{Max: 3}}, yella.Process{Name: "typed", On: "ev", Run: yella.Handle(func(c *yella.Ctx, in struct{ N int }) yella.Result {
				called.Store(true)
				return c.OK(nil)
			})})
			id := h.One(e, "ev", map[string]string{"N": "not a number"})
			h.Drain(e)
			r := h.Run(id)
			Expect(h, "status", r.Status, store.StatusErrored)
			Expect(h, "code", r.ErrorCode, string(yella.CodeSchemaValidationFailed))
			ExpectContains(h, "error", r.Error, "decode payload")
			Expect(h, "handler not called", called.Load(), false)
			Expect(h, "not retried", r.Attempts, 1)
			Expect(h, "run:failed", len(h.Events(yella.RunFailed)), 1)
		}},
		Case{Name: "Config/Invalid", Spec: []int{175}, Note: "changed: durations are typed; each invalid field is named in the error", Fn: func(h *H) {
			bad := map[string]yella.Config{
				"Store":             {},
				"Concurrency":       {Store: h.St, Concurrency: -1},
				"MaxChainDepth":     {Store: h.St, MaxChainDepth: -2},
				"MaxPayloadBytes":   {Store: h.St, MaxPayloadBytes: -1},
				"LeaseTimeout":      {Store: h.St, LeaseTimeout: -time.Second},
				"HeartbeatInterval": {Store: h.St, LeaseTimeout: time.Second, HeartbeatInterval: 2 * time.Second},
				"Retention":         {Store: h.St, Retention: -time.Hour},
				"Retry.Max":         {Store: h.St, Retry: &yella.Retry{Max: -1}},
			}
			for field, cfg := range bad {
				_, err := yella.New(cfg)
				ExpectCode(h, field, err, yella.CodeInvalidConfig)
				var ye *yella.Error
				if errors.As(err, &ye) {
					Expect(h, "field named", ye.Field, field)
					ExpectContains(h, "message names field", err.Error(), field)
				}
			}
		}},
		Case{Name: "Engine/StopThenEmit", Spec: []int{182, 183}, Note: "changed: emitting after Stop is an error (CodeStopped), not an empty result", Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "ev", Noop))
			h.One(e, "ev", nil)
			h.Drain(e)
			Expect(h, "stop", e.Stop(h.Ctx()), nil)
			Expect(h, "second stop", e.Stop(h.Ctx()), nil)
			_, err := e.Emit(h.Ctx(), "ev", nil)
			ExpectCode(h, "emit", err, yella.CodeStopped)
			_, err = e.EmitAndWait(h.Ctx(), "ev", nil)
			ExpectCode(h, "emit and wait", err, yella.CodeStopped)
			ExpectCode(h, "start after stop", e.Start(h.Ctx()), yella.CodeStopped)
			n, _ := h.St.CountRuns(h.Ctx(), store.RunFilter{})
			Expect(h, "runs", n, int64(1))
		}},
		Case{Name: "Engine/QueriesAndCounts", Spec: []int{180, 181, 45}, Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("ok", "a", Noop), Proc("bad", "b", func(c *yella.Ctx) yella.Result { return c.Fail(errors.New("no")) }))
			h.One(e, "a", nil)
			h.One(e, "b", nil)
			h.Drain(e)
			_, err := e.Run(h.Ctx(), ID())
			Expect(h, "unknown run", errors.Is(err, yella.ErrRunNotFound), true)
			m, _ := e.Metrics(h.Ctx())
			Expect(h, "idle", m.Queue[yella.StatusIdle], int64(0))
			Expect(h, "running", m.Queue[yella.StatusRunning], int64(0))
			Expect(h, "completed", m.Queue[yella.StatusCompleted], int64(1))
			Expect(h, "errored", m.Queue[yella.StatusErrored], int64(1))
		}},
		Case{Name: "Engine/RunsQueryPaging", Spec: []int{49}, Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "ev", Noop))
			for range 5 {
				h.One(e, "ev", nil)
			}
			h.Drain(e)
			var all []string
			q := yella.RunQuery{Limit: 2, WithTotal: true, Status: []yella.Status{yella.StatusCompleted}}
			for pages := 0; ; pages++ {
				p, err := e.Runs(h.Ctx(), q)
				Expect(h, "err", err, nil)
				Expect(h, "total", p.Total, int64(5))
				for _, r := range p.Runs {
					all = append(all, r.ID)
				}
				if p.Next == "" || pages > 5 {
					break
				}
				q.Cursor = p.Next
			}
			Expect(h, "all pages", len(all), 5)
			seen := map[string]bool{}
			for _, id := range all {
				seen[id] = true
			}
			Expect(h, "no duplicates", len(seen), 5)
			for _, bad := range []yella.RunQuery{{Status: []yella.Status{"nope"}}, {State: "nope"}, {Cursor: "zzz"}, {Limit: -1}, {Order: 7}} {
				_, err := e.Runs(h.Ctx(), bad)
				ExpectCode(h, "bad query", err, yella.CodeInvalidQuery)
			}
		}},
		Case{Name: "Engine/EmitAndWaitIgnoresUnrelatedWork", Spec: []int{219}, Fn: func(h *H) {
			g := newGate()
			e := h.Started(yella.Config{}, Proc("slow", "slow", func(c *yella.Ctx) yella.Result { g.wait(c); return c.OK(nil) }), Proc("fast", "fast", Noop))
			h.One(e, "slow", nil)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			runs, err := e.EmitAndWait(ctx, "fast", nil)
			if err != nil || len(runs) != 1 {
				h.Fatalf("emit and wait: %v, %d runs, want 1", err, len(runs))
			}
			Expect(h, "completed", runs[0].Status, yella.StatusCompleted)
			g.open()
		}},
		Case{Name: "Engine/EmitAndWaitWaitsForChainAndRetries", Spec: []int{217}, Fn: func(h *H) {
			var tries atomic.Int32
			e := h.Started(yella.Config{},
				Proc("root", "start", func(c *yella.Ctx) yella.Result { return c.OK(nil, yella.Then("next")) }),
				yella.Process{Name: "flaky", On: "next", Retry: &yella.Retry{Max: 2, Backoff: yella.Fixed(5 * time.Millisecond)}, Run: func(c *yella.Ctx) yella.Result {
					if tries.Add(1) < 3 {
						return c.Error(errors.New("transient"))
					}
					return c.OK("done")
				}})
			runs, err := e.EmitAndWait(h.Ctx(), "start", nil)
			if err != nil || len(runs) != 1 {
				h.Fatalf("emit and wait: %v, %d runs, want 1", err, len(runs))
			}
			chain, _ := e.Chain(h.Ctx(), runs[0].ID)
			if len(chain) != 2 {
				h.Fatalf("chain of %d runs, want 2", len(chain))
			}
			Expect(h, "child done when wait returns", chain[1].Status, yella.StatusCompleted)
			Expect(h, "tries", tries.Load(), int32(3))
		}},
		Case{Name: "Engine/EmitAndWaitReadsNoWholeChain", Fn: func(h *H) {
			// A fan-out wider than a page of the wait's reads: the wait
			// lists the chain's unfinished runs a page at a time, and on a
			// shared store counts them after every local event (read
			// whole, the chain cost each look all of its runs).
			const n = 250
			st, spy := storespy.Wrap(h.St)
			e := h.Started(yella.Config{Store: st},
				Proc("root", "start", func(c *yella.Ctx) yella.Result {
					if _, err := yella.Children(c, "kids", "leaf", make([]any, n)); err != nil {
						return c.Error(err)
					}
					return c.OK(nil)
				}),
				Proc("leaf", "leaf", Noop))
			runs, err := e.EmitAndWait(h.Ctx(), "start", nil)
			if err != nil || len(runs) != 1 {
				h.Fatalf("emit and wait: %v, %d runs, want 1", err, len(runs))
			}
			done, err := h.St.CountRuns(h.Ctx(), store.RunFilter{CorrelationID: runs[0].ID, Statuses: []store.Status{store.StatusCompleted}})
			Expect(h, "count", err, nil)
			Expect(h, "every run completed when the wait returns", done, int64(n+1))
			if spy.Max() > 100 {
				h.Fatalf("a store read of the wait returned %d runs, want at most 100", spy.Max())
			}
		}},
		Case{Name: "Engine/EmitAndWaitWithRetention", Spec: []int{220}, Fn: func(h *H) {
			e := h.Started(yella.Config{Retention: time.Millisecond, RetentionInterval: time.Millisecond},
				Proc("root", "start", func(c *yella.Ctx) yella.Result { return c.OK(nil, yella.Then("next")) }),
				Proc("leaf", "next", func(c *yella.Ctx) yella.Result { time.Sleep(30 * time.Millisecond); return c.OK(nil) }))
			runs, err := e.EmitAndWait(h.Ctx(), "start", nil)
			Expect(h, "err", err, nil)
			Expect(h, "root returned", len(runs), 1)
		}},
		Case{Name: "Engine/RetentionCountsPruned", Fn: func(h *H) {
			e := h.Started(yella.Config{Retention: time.Millisecond, RetentionInterval: time.Millisecond}, Proc("a", "ev", Noop))
			for range 5 {
				e.Emit(h.Ctx(), "ev", nil)
			}
			Expect(h, "drain", e.Drain(h.Ctx()), nil)
			deadline := time.Now().Add(5 * time.Second)
			var m yella.Metrics
			for time.Now().Before(deadline) {
				m, _ = e.Metrics(h.Ctx())
				if m.Totals.Pruned >= 5 {
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			Expect(h, "pruned", m.Totals.Pruned, int64(5))
			Expect(h, "completed", m.Totals.Completed, int64(5))
		}},
		Case{Name: "Engine/DuplicateEmitAndWaitReturnsExisting", Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "ev", func(c *yella.Ctx) yella.Result { return c.OK("v") }))
			first, err := e.EmitAndWait(h.Ctx(), "ev", nil, yella.IdempotencyKey("k"))
			if err != nil || len(first) != 1 {
				h.Fatalf("first emit and wait: %v, %d runs, want 1", err, len(first))
			}
			again, err := e.EmitAndWait(h.Ctx(), "ev", nil, yella.IdempotencyKey("k"))
			if err != nil || len(again) != 1 {
				h.Fatalf("repeated emit and wait: %v, %d runs, want the 1 admitted before", err, len(again))
			}
			Expect(h, "same run", again[0].ID, first[0].ID)
			Expect(h, "output", string(again[0].Output), `"v"`)
		}},
	}
}
