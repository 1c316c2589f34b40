package yella_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
)

// gate blocks handlers until released.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func newGate() *gate  { return &gate{ch: make(chan struct{})} }
func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }
func (g *gate) wait(c *yella.Ctx) error {
	select {
	case <-g.ch:
		return nil
	case <-c.Done():
		return c.Err()
	}
}

// peak tracks the most handlers running at once.
type peak struct {
	mu       sync.Mutex
	cur, max int
}

func (p *peak) in() {
	p.mu.Lock()
	p.cur++
	p.max = max(p.max, p.cur)
	p.mu.Unlock()
}
func (p *peak) out() { p.mu.Lock(); p.cur--; p.mu.Unlock() }
func (p *peak) get() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.max
}

func engineCases() []Case {
	return []Case{
		// Registry.
		Case{Name: "Registry/LookupAndOrder", Spec: []int{1, 2, 8, 119}, Fn: func(h *H) {
			e := h.Engine(yella.Config{}, Proc("a", "ev", Noop), Proc("b", "ev", Noop), Proc("c", "other", Noop))
			ps := e.Processes()
			Expect(h, "count", len(ps), 3)
			var names []string
			for _, p := range ps {
				if p.On == "ev" {
					names = append(names, p.Name)
				}
			}
			Expect(h, "order", strings.Join(names, ","), "a,b")
			em := h.Emit(e, "ev", nil)
			Expect(h, "runs", len(em.Runs), 2)
			Expect(h, "first run is a", h.Run(em.Runs[0]).Process, "a")
			Expect(h, "second run is b", h.Run(em.Runs[1]).Process, "b")
		}},
		Case{Name: "Registry/DuplicateName", Spec: []int{3, 248}, Fn: func(h *H) {
			e := h.Engine(yella.Config{}, Proc("a", "ev", Noop))
			err := e.Register(Proc("a", "other", Noop))
			Expect(h, "is duplicate", errors.Is(err, yella.ErrDuplicateProcess), true)
			ExpectCode(h, "code", err, yella.CodeProcessAlreadyRegistered)
			ExpectContains(h, "message", err.Error(), "process already registered: a")
		}},
		Case{Name: "Registry/Unregister", Spec: []int{4, 5, 6, 7}, Fn: func(h *H) {
			e := h.Engine(yella.Config{}, Proc("a", "ev", Noop))
			e.Unregister("nope")
			Expect(h, "still one", len(e.Processes()), 1)
			e.Unregister("a")
			Expect(h, "none", len(e.Processes()), 0)
			_, err := e.Emit(h.Ctx(), "ev", nil)
			ExpectCode(h, "emit after unregister", err, yella.CodeUnknownEvent)
			_, err = e.Emit(h.Ctx(), "never", nil)
			ExpectCode(h, "unknown event", err, yella.CodeUnknownEvent)
		}},
		Case{Name: "Registry/Emits", Spec: []int{9, 10, 221, 222, 223, 224}, Fn: func(h *H) {
			e := h.Engine(yella.Config{},
				yella.Process{Name: "a", On: "start", Emits: []string{"x", "y"}, Run: Noop},
				Proc("bx", "x", Noop), Proc("cx", "x", Noop), Proc("dy", "y", Noop))
			g := e.Graph()
			Expect(h, "nodes", len(g.Nodes), 4)
			Expect(h, "a emits", strings.Join(g.Nodes[0].Emits, ","), "x,y")
			Expect(h, "bx emits none", len(g.Nodes[1].Emits), 0)
			Expect(h, "edges", len(g.Edges), 3)
			seen := map[string]bool{}
			for _, ed := range g.Edges {
				seen[ed.From+">"+ed.Event+">"+ed.To] = true
			}
			for _, want := range []string{"a>x>bx", "a>x>cx", "a>y>dy"} {
				Expect(h, "edge "+want, seen[want], true)
			}
		}},
		Case{Name: "Registry/EmptyGraph", Spec: []int{225}, Fn: func(h *H) {
			g := h.Engine(yella.Config{}).Graph()
			Expect(h, "nodes", len(g.Nodes), 0)
			Expect(h, "edges", len(g.Edges), 0)
		}},
		Case{Name: "Registry/InvalidProcess", Fn: func(h *H) {
			e := h.Engine(yella.Config{})
			for _, p := range []yella.Process{
				{On: "e", Run: Noop}, {Name: "a", Run: Noop}, {Name: "a", On: "e"},
				{Name: "a", On: "e", Run: Noop, Concurrency: -1},
				{Name: "a", On: "e", Run: Noop, Retry: &yella.Retry{Max: -1}},
				{Name: "a", On: "e", Run: Noop, Overflow: yella.Queue(3)},
			} {
				err := e.Register(p)
				ExpectCode(h, "register", err, yella.CodeInvalidConfig)
			}
			Expect(h, "nothing registered", len(e.Processes()), 0)
		}},

		// Admission and execution.
		Case{Name: "Emit/CreatesIdleRunsBeforeStart", Spec: []int{116, 251}, Fn: func(h *H) {
			e := h.Engine(yella.Config{}, Proc("a", "ev", Noop))
			id := h.One(e, "ev", map[string]int{"n": 1})
			r := h.Run(id)
			Expect(h, "idle", r.Status, store.StatusIdle)
			Expect(h, "payload", string(r.Payload), `{"n":1}`)
			if err := e.Drain(h.Ctx()); !errors.Is(err, yella.ErrNotStarted) {
				h.Errorf("drain before start: %v", err)
			}
			h.Start(e)
			h.Drain(e)
			Expect(h, "completed", h.Run(id).Status, store.StatusCompleted)
		}},
		Case{Name: "Emit/UnknownEvent", Spec: []int{117, 218}, Note: "changed: an event with no listener is an error (CodeUnknownEvent), not an empty result", Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "ev", Noop))
			em, err := e.Emit(h.Ctx(), "nobody", nil)
			ExpectCode(h, "emit", err, yella.CodeUnknownEvent)
			Expect(h, "runs", len(em.Runs), 0)
			runs, err := e.EmitAndWait(h.Ctx(), "nobody", nil)
			ExpectCode(h, "emit and wait", err, yella.CodeUnknownEvent)
			Expect(h, "waited runs", len(runs), 0)
			c, _ := h.St.Counts(h.Ctx())
			Expect(h, "nothing stored", c[store.StatusIdle]+c[store.StatusCompleted], int64(0))
		}},
		Case{Name: "Exec/OKStoresOutput", Spec: []int{123, 174, 189, 217, 284}, Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				v, err := yella.Effect(c, "k", func(context.Context) (string, error) { return "from effect", nil })
				if err != nil {
					return c.Error(err)
				}
				return c.OK(map[string]string{"v": v})
			}))
			runs, err := e.EmitAndWait(h.Ctx(), "ev", 1)
			Expect(h, "err", err, nil)
			Expect(h, "runs", len(runs), 1)
			Expect(h, "status", runs[0].Status, yella.StatusCompleted)
			Expect(h, "output", string(runs[0].Output), `{"v":"from effect"}`)
			Expect(h, "no error", runs[0].Error, "")
		}},
		Case{Name: "Exec/FailStoresError", Spec: []int{124, 191, 229, 298}, Fn: func(h *H) {
			var calls atomic.Int32
			e := h.Started(yella.Config{Retry: &yella.Retry{Max: 3}}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				calls.Add(1)
				return c.Fail(errors.New("rejected"), yella.WithCode("CUSTOM"))
			}))
			id := h.One(e, "ev", nil)
			h.Drain(e)
			r := h.Run(id)
			Expect(h, "status", r.Status, store.StatusErrored)
			Expect(h, "error", r.Error, "rejected")
			Expect(h, "code", r.ErrorCode, "CUSTOM")
			Expect(h, "never retried", calls.Load(), int32(1))
			Expect(h, "attempts", r.Attempts, 1)
		}},
		Case{Name: "Exec/ThrownErrorWithoutPolicy", Spec: []int{125, 250, 304}, Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "ev", func(c *yella.Ctx) yella.Result { return c.Error(errors.New("kaput")) }))
			id := h.One(e, "ev", nil)
			h.Drain(e)
			r := h.Run(id)
			Expect(h, "status", r.Status, store.StatusErrored)
			Expect(h, "error", r.Error, "kaput")
			Expect(h, "no code", r.ErrorCode, "")
			evs := h.Events(yella.RunFailed)
			Expect(h, "run:failed", len(evs), 1)
			if len(evs) == 1 {
				Expect(h, "event error", evs[0].Error, "kaput")
			}
		}},
		Case{Name: "Exec/PanicIsThrown", Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "ev", func(c *yella.Ctx) yella.Result { panic("oops") }))
			id := h.One(e, "ev", nil)
			h.Drain(e)
			r := h.Run(id)
			Expect(h, "status", r.Status, store.StatusErrored)
			ExpectContains(h, "error", r.Error, "oops")
			Expect(h, "code", r.ErrorCode, string(yella.CodePanic))
		}},
		Case{Name: "Exec/EmptyResultIsThrown", Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "ev", func(c *yella.Ctx) yella.Result { return yella.Result{} }))
			id := h.One(e, "ev", nil)
			h.Drain(e)
			ExpectContains(h, "error", h.Run(id).Error, "empty Result")
		}},
		Case{Name: "Exec/UnregisteredProcessLeftAsIs", Spec: []int{126},
			Note: "a run whose process this engine does not have is never claimed or ended: it stays idle, untouched, and runs once an engine registers the process (erroring it with HANDLER_NOT_FOUND, as earlier versions did, destroyed the pending work of other programs sharing the database)",
			Fn: func(h *H) {
				e := h.Engine(yella.Config{}, Proc("a", "ev", Noop))
				id := h.One(e, "ev", nil)
				before := h.Run(id)
				e.Unregister("a")
				h.Start(e)
				h.Drain(e) // returns: the engine does not wait for runs it will not execute
				r := h.Run(id)
				Expect(h, "status", r.Status, store.StatusIdle)
				Expect(h, "attempts", r.Attempts, 0)
				Expect(h, "epoch", r.Epoch, before.Epoch)
				Expect(h, "error", r.Error, "")
				tl, err := h.St.Timeline(h.Ctx(), id)
				if err != nil {
					h.Fatalf("timeline: %v", err)
				}
				Expect(h, "timeline entries", len(tl), 1)
				if err := e.Register(Proc("a", "ev", Noop)); err != nil {
					h.Fatalf("register: %v", err)
				}
				h.Drain(e)
				Expect(h, "status after register", h.Run(id).Status, store.StatusCompleted)
			}},
		// Runs of processes this engine has and of one it does not, mixed
		// in one batch of pending runs: those of its own all run, the
		// others stay idle.
		Case{Name: "Exec/UnregisteredAmongRegisteredLeftAsIs", Fn: func(h *H) {
			var ids []string
			for _, p := range []string{"a", "other", "c", "other", "a", "c"} {
				ids = append(ids, h.Admit(p, p+":ev", nil).ID)
			}
			e := h.Started(yella.Config{}, Proc("a", "a:ev", Noop), Proc("c", "c:ev", Noop))
			h.Drain(e)
			for i, id := range ids {
				want := store.StatusCompleted
				if i == 1 || i == 3 {
					want = store.StatusIdle
				}
				Expect(h, "status of run "+strconv.Itoa(i), h.Run(id).Status, want)
			}
		}},
		Case{Name: "Exec/UnregisteredProcessReclaimedIdle",
			Note: "a run of a process this engine does not have, held by an owner that is gone, is handed back idle whatever the retry budget: its policy is not known here",
			Fn: func(h *H) {
				clk := h.Fake()
				r := h.Admit("other", "other:ev", nil)
				h.Claim(r.ID, "gone", time.Millisecond)
				clk.Advance(time.Second)
				e := h.Started(yella.Config{AbandonRetries: -1}, Proc("a", "ev", Noop))
				h.Drain(e)
				got := h.Run(r.ID)
				Expect(h, "status", got.Status, store.StatusIdle)
				Expect(h, "lease owner", got.LeaseOwner, "")
			}},
		Case{Name: "Exec/SetContextPersists", Spec: []int{127, 40}, Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				if err := c.SetContext("tenant", "t1"); err != nil {
					return c.Error(err)
				}
				var got string
				ok, err := c.GetContext("tenant", &got)
				if !ok || err != nil || got != "t1" {
					return c.Fail(errors.New("read back failed"))
				}
				return c.OK(nil)
			}))
			id := h.One(e, "ev", nil)
			h.Drain(e)
			r := h.Run(id)
			Expect(h, "status", r.Status, store.StatusCompleted)
			Expect(h, "context", string(r.Context), `{"tenant":"t1"}`)
		}},
		Case{Name: "Chain/ChildGetsParentLinkPayloadContext", Spec: []int{118, 128, 185, 197, 145, 171}, Fn: func(h *H) {
			var childCtx atomic.Value
			e := h.Started(yella.Config{},
				Proc("parent", "start", func(c *yella.Ctx) yella.Result {
					c.SetContext("who", "parent")
					return c.OK(map[string]int{"n": 7}, yella.Then("next"))
				}),
				Proc("child", "next", func(c *yella.Ctx) yella.Result {
					var who string
					c.GetContext("who", &who)
					childCtx.Store(who)
					return c.OK(who)
				}))
			id := h.One(e, "start", nil)
			h.Drain(e)
			chain, err := e.Chain(h.Ctx(), id)
			Expect(h, "err", err, nil)
			Expect(h, "chain", len(chain), 2)
			p, c := chain[0], chain[1]
			Expect(h, "root depth", p.Depth, 0)
			Expect(h, "child depth", c.Depth, 1)
			Expect(h, "child parent", c.ParentID, p.ID)
			Expect(h, "correlation", c.CorrelationID, p.ID)
			Expect(h, "child payload", string(c.Payload), `{"n":7}`)
			Expect(h, "child saw context", childCtx.Load(), any("parent"))
			Expect(h, "child output", string(c.Output), `"parent"`)
			Expect(h, "parent then", p.Then, "next")
		}},
		Case{Name: "Chain/ContextCopyNotShared", Spec: []int{129, 186}, Fn: func(h *H) {
			e := h.Started(yella.Config{},
				Proc("parent", "start", func(c *yella.Ctx) yella.Result {
					c.SetContext("obj", map[string]int{"x": 1})
					m := c.ContextMap()
					m["obj"] = json.RawMessage(`{"x":99}`) // local only
					m["extra"] = json.RawMessage(`true`)
					return c.OK(nil, yella.Then("next"))
				}),
				Proc("child", "next", func(c *yella.Ctx) yella.Result {
					m := c.ContextMap()
					m["obj"] = json.RawMessage(`{"x":-1}`) // local only
					return c.OK(nil)
				}))
			id := h.One(e, "start", nil)
			h.Drain(e)
			chain, _ := e.Chain(h.Ctx(), id)
			Expect(h, "parent context", string(chain[0].Context), `{"obj":{"x":1}}`)
			Expect(h, "child context", string(chain[1].Context), `{"obj":{"x":1}}`)
		}},
		Case{Name: "Chain/NoListenerForFollowUp", Spec: []int{130}, Fn: func(h *H) {
			e := h.Engine(yella.Config{}, Proc("a", "start", func(c *yella.Ctx) yella.Result { return c.OK(nil, yella.Then("void")) }))
			h.Start(e)
			id := h.One(e, "start", nil)
			h.Drain(e)
			r := h.Run(id)
			Expect(h, "status", r.Status, store.StatusErrored)
			Expect(h, "code", r.ErrorCode, string(yella.CodeNotAdmitted))
			ExpectContains(h, "error", r.Error, "void")
			chain, _ := e.Chain(h.Ctx(), id)
			Expect(h, "no child", len(chain), 1)
		}},
		Case{Name: "Chain/FanOut", Spec: []int{176, 179}, Fn: func(h *H) {
			e := h.Started(yella.Config{},
				Proc("root", "start", func(c *yella.Ctx) yella.Result { return c.OK(1, yella.Then("fan")) }),
				Proc("left", "fan", Noop), Proc("right", "fan", Noop))
			id := h.One(e, "start", nil)
			h.Drain(e)
			chain, _ := e.Chain(h.Ctx(), id)
			Expect(h, "chain", len(chain), 3)
			Expect(h, "root first", chain[0].ID, id)
			for _, r := range chain {
				Expect(h, r.Process+" correlation", r.CorrelationID, id)
				Expect(h, r.Process+" status", r.Status, yella.StatusCompleted)
			}
			evs := h.Events(yella.RunCompleted)
			for _, ev := range evs {
				if ev.RunID == id {
					Expect(h, "children on event", len(ev.Children), 2)
				}
			}
		}},
		Case{Name: "Chain/ThrowDoesNotBlockSibling", Spec: []int{177}, Fn: func(h *H) {
			e := h.Started(yella.Config{},
				Proc("bad", "ev", func(c *yella.Ctx) yella.Result { return c.Error(errors.New("x")) }),
				Proc("good", "ev", Noop))
			em := h.Emit(e, "ev", nil)
			h.Drain(e)
			Expect(h, "bad", h.Run(em.Runs[0]).Status, store.StatusErrored)
			Expect(h, "good", h.Run(em.Runs[1]).Status, store.StatusCompleted)
		}},
		Case{Name: "Chain/DepthWithinLimit", Spec: []int{143}, Fn: func(h *H) {
			e := h.Started(yella.Config{MaxChainDepth: 3},
				Proc("s0", "e0", func(c *yella.Ctx) yella.Result { return c.OK(nil, yella.Then("e1")) }),
				Proc("s1", "e1", func(c *yella.Ctx) yella.Result { return c.OK(nil, yella.Then("e2")) }),
				Proc("s2", "e2", Noop))
			id := h.One(e, "e0", nil)
			h.Drain(e)
			chain, _ := e.Chain(h.Ctx(), id)
			Expect(h, "chain", len(chain), 3)
			for _, r := range chain {
				Expect(h, r.Process, r.Status, yella.StatusCompleted)
			}
		}},
		Case{Name: "Chain/DepthExceeded", Spec: []int{144}, Note: "fixed: the overflow emits run:depth-exceeded and run:failed and is counted", Fn: func(h *H) {
			e := h.Started(yella.Config{MaxChainDepth: 1},
				Proc("s0", "e0", func(c *yella.Ctx) yella.Result { return c.OK(nil, yella.Then("e1")) }),
				Proc("s1", "e1", func(c *yella.Ctx) yella.Result { return c.OK(nil, yella.Then("e2")) }),
				Proc("s2", "e2", Noop))
			id := h.One(e, "e0", nil)
			h.Drain(e)
			chain, _ := e.Chain(h.Ctx(), id)
			Expect(h, "chain", len(chain), 2)
			Expect(h, "e0", chain[0].Status, yella.StatusCompleted)
			Expect(h, "e1", chain[1].Status, yella.StatusErrored)
			Expect(h, "e1 code", chain[1].ErrorCode, yella.CodeChainDepthExceeded)
			Expect(h, "event", len(h.Events(yella.RunDepthExceeded)), 1)
			Expect(h, "run:failed", len(h.Events(yella.RunFailed)), 1)
			m, _ := e.Metrics(h.Ctx())
			Expect(h, "metric", m.Totals.DepthExceeded, int64(1))
		}},

		// Dispatcher.
		Case{Name: "Dispatch/FleetConcurrency", Spec: []int{133, 135, 178}, Fn: func(h *H) {
			for _, conc := range []int{2, 3} {
				var p peak
				e := h.Started(yella.Config{Concurrency: conc}, Proc("a"+string(rune('0'+conc)), "ev"+string(rune('0'+conc)), func(c *yella.Ctx) yella.Result {
					p.in()
					defer p.out()
					time.Sleep(2 * time.Millisecond)
					return c.OK(nil)
				}))
				var ids []string
				for range 20 {
					ids = append(ids, h.One(e, "ev"+string(rune('0'+conc)), nil))
				}
				h.Drain(e)
				Expect(h, "peak", p.get() <= conc, true)
				Expect(h, "peak reached", p.get() >= 1, true)
				for _, id := range ids {
					Expect(h, "completed", h.Run(id).Status, store.StatusCompleted)
				}
			}
		}},
		Case{Name: "Dispatch/NextClaimedAfterCompletion", Spec: []int{134, 136, 209}, Fn: func(h *H) {
			var n atomic.Int32
			e := h.Started(yella.Config{Concurrency: 1}, Proc("a", "ev", func(c *yella.Ctx) yella.Result { n.Add(1); return c.OK(nil) }))
			h.Drain(e) // nothing to do: returns at once
			h.One(e, "ev", nil)
			h.One(e, "ev", nil)
			h.Drain(e)
			Expect(h, "both executed", n.Load(), int32(2))
		}},
		Case{Name: "Dispatch/NoClaimsAfterStop", Spec: []int{137, 267}, Fn: func(h *H) {
			g := newGate()
			var n atomic.Int32
			e := h.Started(yella.Config{Concurrency: 1}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				n.Add(1)
				g.wait(c)
				return c.OK(nil)
			}))
			first := h.One(e, "ev", nil)
			h.WaitStatus(first, store.StatusRunning)
			second := h.One(e, "ev", nil)
			stopped := make(chan error, 1)
			go func() { stopped <- e.Stop(h.Ctx()) }()
			time.Sleep(20 * time.Millisecond)
			select {
			case <-stopped:
				h.Fatal("graceful stop returned while a handler ran")
			default:
			}
			g.open()
			Expect(h, "stop", <-stopped, nil)
			Expect(h, "first completed", h.Run(first).Status, store.StatusCompleted)
			Expect(h, "second still idle", h.Run(second).Status, store.StatusIdle)
			Expect(h, "executions", n.Load(), int32(1))
		}},
		Case{Name: "Dispatch/DrainWaitsAndConcurrentDrains", Spec: []int{138, 208, 299}, Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "ev", func(c *yella.Ctx) yella.Result {
				time.Sleep(10 * time.Millisecond)
				return c.OK(nil)
			}))
			for range 5 {
				h.One(e, "ev", nil)
			}
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i := range errs {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = e.Drain(h.Ctx()) }()
			}
			wg.Wait()
			Expect(h, "drain 1", errs[0], nil)
			Expect(h, "drain 2", errs[1], nil)
			c, _ := h.St.Counts(h.Ctx())
			Expect(h, "all completed", c[store.StatusCompleted], int64(5))
		}},
		Case{Name: "Dispatch/DrainTimeouts", Spec: []int{184, 210, 249}, Fn: func(h *H) {
			g := newGate()
			e := h.Started(yella.Config{}, Proc("a", "ev", func(c *yella.Ctx) yella.Result { g.wait(c); return c.OK(nil) }))
			h.One(e, "ev", nil)
			short, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()
			long, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel2()
			longErr := make(chan error, 1)
			go func() { longErr <- e.Drain(long) }()
			err := e.Drain(short)
			Expect(h, "short drain times out", errors.Is(err, yella.ErrDrainTimeout), true)
			ExpectContains(h, "message", err.Error(), "still active")
			g.open()
			Expect(h, "long drain", <-longErr, nil)
		}},

		// Per-process caps.
		Case{Name: "Caps/DropWhileActive", Spec: []int{122, 146, 188, 169}, Note: "fixed: drops are reported in Emission.Dropped, a run:dropped event and metrics; changed: dropping is the explicit yella.Drop overflow (the default queues, see Caps/DefaultQueuesBeyondCap)", Fn: func(h *H) {
			g := newGate()
			var n atomic.Int32
			e := h.Started(yella.Config{}, yella.Process{Name: "single", On: "ev", Concurrency: 1, Overflow: yella.Drop, Run: func(c *yella.Ctx) yella.Result {
				n.Add(1)
				g.wait(c)
				return c.OK(nil)
			}})
			h.One(e, "ev", nil) // idle or running: active either way
			em := h.Emit(e, "ev", nil)
			Expect(h, "dropped", len(em.Runs), 0)
			Expect(h, "reason", em.Reason, yella.ReasonAtCapacity)
			Expect(h, "dropped process", strings.Join(em.Dropped, ","), "single")
			g.open()
			h.Drain(e)
			Expect(h, "one completion", n.Load(), int32(1))
			Expect(h, "drop event", len(h.Events(yella.RunDropped)), 1)
			m, _ := e.Metrics(h.Ctx())
			Expect(h, "metric", m.Totals.Dropped, int64(1))
			Expect(h, "per process", m.Processes["single"].Dropped, int64(1))
		}},
		Case{Name: "Caps/AdmitAfterCompletion", Spec: []int{147, 151}, Fn: func(h *H) {
			e := h.Started(yella.Config{}, yella.Process{Name: "two", On: "ev", Concurrency: 2, Run: Noop})
			h.One(e, "ev", nil)
			h.One(e, "ev", nil)
			h.Drain(e)
			h.One(e, "ev", nil)
			h.Drain(e)
			c, _ := h.St.Counts(h.Ctx())
			Expect(h, "completed", c[store.StatusCompleted], int64(3))
		}},
		Case{Name: "Caps/OnlyCappedListenerSkipped", Spec: []int{148, 149}, Note: "changed: with the explicit yella.Drop overflow (the default queues)", Fn: func(h *H) {
			g := newGate()
			e := h.Started(yella.Config{},
				yella.Process{Name: "capped", On: "ev", Concurrency: 1, Overflow: yella.Drop, Run: func(c *yella.Ctx) yella.Result { g.wait(c); return c.OK(nil) }},
				Proc("free", "ev", func(c *yella.Ctx) yella.Result { g.wait(c); return c.OK(nil) }))
			Expect(h, "first", len(h.Emit(e, "ev", nil).Runs), 2)
			em := h.Emit(e, "ev", nil)
			Expect(h, "second", len(em.Runs), 1)
			Expect(h, "second is free", h.Run(em.Runs[0]).Process, "free")
			g.open()
			h.Drain(e)
		}},
		Case{Name: "Caps/TwoThenDrop", Spec: []int{150}, Note: "changed: with the explicit yella.Drop overflow (the default queues)", Fn: func(h *H) {
			g := newGate()
			var n atomic.Int32
			e := h.Started(yella.Config{}, yella.Process{Name: "two", On: "ev", Concurrency: 2, Overflow: yella.Drop, Run: func(c *yella.Ctx) yella.Result {
				n.Add(1)
				g.wait(c)
				return c.OK(nil)
			}})
			Expect(h, "1", len(h.Emit(e, "ev", nil).Runs), 1)
			Expect(h, "2", len(h.Emit(e, "ev", nil).Runs), 1)
			Expect(h, "3 dropped", len(h.Emit(e, "ev", nil).Runs), 0)
			g.open()
			h.Drain(e)
			Expect(h, "completions", n.Load(), int32(2))
		}},
		Case{Name: "Caps/QueueOverflow", Note: "new: Queue(n) lets n runs wait beyond the cap; at most Concurrency run at once", Fn: func(h *H) {
			g := newGate()
			var p peak
			e := h.Started(yella.Config{Concurrency: 10}, yella.Process{Name: "q", On: "ev", Concurrency: 2, Overflow: yella.Queue(3), Run: func(c *yella.Ctx) yella.Result {
				p.in()
				defer p.out()
				g.wait(c)
				return c.OK(nil)
			}})
			admitted := 0
			for range 7 {
				admitted += len(h.Emit(e, "ev", nil).Runs)
			}
			Expect(h, "admitted = cap + queue", admitted, 5)
			time.Sleep(20 * time.Millisecond)
			g.open()
			h.Drain(e)
			Expect(h, "parallelism bounded by cap", p.get() <= 2, true)
			c, _ := h.St.Counts(h.Ctx())
			Expect(h, "completed", c[store.StatusCompleted], int64(5))
			m, _ := e.Metrics(h.Ctx())
			Expect(h, "dropped", m.Totals.Dropped, int64(2))
		}},

		// Idempotency.
		Case{Name: "Idempotency/DuplicateAndDifferentKeys", Spec: []int{152, 153, 154, 155, 211, 170}, Note: "changed: a duplicate returns the earlier runs in Existing with ReasonDuplicate", Fn: func(h *H) {
			e := h.Engine(yella.Config{}, Proc("a", "ev", Noop))
			first := h.Emit(e, "ev", nil, yella.IdempotencyKey("k1"))
			dup := h.Emit(e, "ev", nil, yella.IdempotencyKey("k1"))
			Expect(h, "first", len(first.Runs), 1)
			Expect(h, "dup new", len(dup.Runs), 0)
			Expect(h, "dup reason", dup.Reason, yella.ReasonDuplicate)
			Expect(h, "dup existing", strings.Join(dup.Existing, ","), first.Runs[0])
			Expect(h, "other key", len(h.Emit(e, "ev", nil, yella.IdempotencyKey("k2")).Runs), 1)
			Expect(h, "key stored", h.Run(first.Runs[0]).IdempotencyKey, "k1")
			plain := h.One(e, "ev", nil)
			Expect(h, "no key", h.Run(plain).IdempotencyKey, "")
			Expect(h, `key "null" is a real key`, len(h.Emit(e, "ev", nil, yella.IdempotencyKey("null")).Runs), 1)
		}},
		Case{Name: "Idempotency/FanOutOnce", Spec: []int{121, 156}, Fn: func(h *H) {
			e := h.Engine(yella.Config{}, Proc("a", "ev", Noop), Proc("b", "ev", Noop))
			em := h.Emit(e, "ev", nil, yella.IdempotencyKey("k"))
			Expect(h, "both", len(em.Runs), 2)
			for _, id := range em.Runs {
				Expect(h, "key on run", h.Run(id).IdempotencyKey, "k")
			}
			again := h.Emit(e, "ev", nil, yella.IdempotencyKey("k"))
			Expect(h, "repeat admits nothing", len(again.Runs), 0)
			Expect(h, "existing", len(again.Existing), 2)
			n, _ := h.St.CountRuns(h.Ctx(), store.RunFilter{})
			Expect(h, "stored", n, int64(2))
		}},
		Case{Name: "Idempotency/ScopedByEvent", Spec: []int{120, 213, 214}, Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "e1", Noop), Proc("b", "e2", Noop))
			Expect(h, "e1", len(h.Emit(e, "e1", nil, yella.IdempotencyKey("same")).Runs), 1)
			Expect(h, "e2", len(h.Emit(e, "e2", nil, yella.IdempotencyKey("same")).Runs), 1)
			Expect(h, "different keys", len(h.Emit(e, "e2", nil, yella.IdempotencyKey("other")).Runs), 1)
			h.Drain(e)
			c, _ := h.St.Counts(h.Ctx())
			Expect(h, "completions", c[store.StatusCompleted], int64(3))
		}},
		Case{Name: "Idempotency/SequentialAndConcurrent", Spec: []int{212}, Fn: func(h *H) {
			var n atomic.Int32
			e := h.Started(yella.Config{}, Proc("a", "ev", func(c *yella.Ctx) yella.Result { n.Add(1); return c.OK(nil) }))
			total := 0
			for range 10 {
				total += len(h.Emit(e, "ev", nil, yella.IdempotencyKey("k")).Runs)
			}
			var wg sync.WaitGroup
			var conc atomic.Int32
			for range 10 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					em, err := e.Emit(h.Ctx(), "ev", nil, yella.IdempotencyKey("k2"))
					if err == nil {
						conc.Add(int32(len(em.Runs)))
					}
				}()
			}
			wg.Wait()
			h.Drain(e)
			Expect(h, "sequential admitted", total, 1)
			Expect(h, "concurrent admitted", conc.Load(), int32(1))
			Expect(h, "completions", n.Load(), int32(2))
		}},
	}
}
