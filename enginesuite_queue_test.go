package yella_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
)

// queueCases: a backlog larger than Config.MaxQueued waits in the store and
// is read back as the queue drains (queue.go). On a shared store a node
// holds only what it claimed, and the cases check the same outcomes.
func queueCases() []Case {
	return []Case{
		Case{Name: "Queue/BacklogBeyondMaxQueued", Note: "new: runs emitted beyond MaxQueued wait in the store, not in memory; they start in admission order, each once, and Drain waits for them", Fn: func(h *H) {
			var s starts
			release := make(chan struct{})
			e := h.Started(yella.Config{Concurrency: 1, MaxQueued: 8}, yella.Process{Name: "work", On: "ev",
				Run: func(c *yella.Ctx) yella.Result { s.add(h, c); <-release; return c.OK(nil) }})
			var ids []string
			for i := range 60 {
				ids = append(ids, h.One(e, "ev", i))
			}
			m, err := e.Metrics(h.Ctx())
			Expect(h, "metrics", err, nil)
			if m.Dispatcher.Ready > 8 {
				h.Fatalf("%d runs queued in memory, MaxQueued is 8", m.Dispatcher.Ready)
			}
			batch := make([]yella.BatchEvent, 40)
			for i := range batch {
				batch[i] = yella.BatchEvent{Event: "ev", Payload: 60 + i}
			}
			ems, err := e.EmitBatch(h.Ctx(), batch)
			Expect(h, "batch", err, nil)
			for _, em := range ems {
				ids = append(ids, em.Runs...)
			}
			close(release)
			h.Drain(e)
			if got := s.order(); !slices.Equal(got, ids) {
				h.Fatalf("started %d runs in this order:\n%v\nwant admission order:\n%v", len(got), got, ids)
			}
			c, _ := h.St.Counts(h.Ctx())
			Expect(h, "completed", c[store.StatusCompleted], int64(100))
		}},
		Case{Name: "Queue/UrgentAndWaitedRunsJoinAFullQueue", Note: "new: a run of priority above 0 joins the queue and overtakes a backlog waiting in the store; a run EmitAndWait waits for joins it too, so the wait is told when its chain ends instead of reading the store until then", Fn: func(h *H) {
			var s starts
			release := make(chan struct{})
			cfg := yella.Config{Concurrency: 1, MaxQueued: 4}
			reads := &chainReads{Store: h.St}
			if _, nodes := h.St.(store.Shared); !nodes {
				cfg.Store = reads
			}
			e := h.Started(cfg, yella.Process{Name: "work", On: "ev",
				Run: func(c *yella.Ctx) yella.Result {
					s.add(h, c)
					<-release
					time.Sleep(time.Millisecond) // the backlog drains over a while
					return c.OK(nil)
				}})
			first := h.One(e, "ev", nil)
			h.WaitStatus(first, store.StatusRunning)
			for range 50 {
				h.One(e, "ev", nil)
			}
			urgent := h.One(e, "ev", nil, yella.Priority(10))
			close(release)
			runs, err := e.EmitAndWait(h.Ctx(), "ev", "waited")
			Expect(h, "emit and wait", err, nil)
			Expect(h, "waited run completed", runs[0].Status, yella.StatusCompleted)
			if n := reads.n.Load(); n > 10 {
				h.Errorf("EmitAndWait read its chain %d times while the backlog drained, want a few", n)
			}
			h.Drain(e)
			order := s.order()
			pos := slices.Index(order, urgent)
			if pos < 1 || pos > 2 { // a shared store's node may have claimed one more run ahead
				h.Fatalf("urgent run started at position %d of %d, want right after the first", pos, len(order))
			}
			Expect(h, "runs", len(order), 53)
		}},
		Case{Name: "Queue/EmittedDuringARead", Note: "new: a run emitted while the loader reads waits behind the runs read and is read by a later page (the read held open after it saw the store)", Fn: func(h *H) {
			if _, nodes := h.St.(store.Shared); nodes {
				h.Skip("a node holds only the runs it claimed: no backlog waits outside its queue")
			}
			gate := &heldReads{Store: h.St, open: make(chan struct{})}
			var s starts
			step := make(chan struct{})
			e := h.Started(yella.Config{Store: gate, Concurrency: 1, MaxQueued: 8}, yella.Process{Name: "work", On: "ev",
				Run: func(c *yella.Ctx) yella.Result { s.add(h, c); <-step; return c.OK(nil) }})
			var ids []string
			for i := range 10 { // one running, eight queued, one in the store
				ids = append(ids, h.One(e, "ev", i))
			}
			gate.armed.Store(true)
			for range 5 { // the queue runs low: the loader reads the run left, and is held
				step <- struct{}{}
			}
			h.WaitFor("the loader's read held", gate.entered.Load)
			ids = append(ids, h.One(e, "ev", "late"))
			close(step)
			h.WaitFor("the queue empty", func() bool {
				m, err := e.Metrics(h.Ctx())
				return err == nil && m.Dispatcher.Ready == 0 && m.Dispatcher.Running == 0
			})
			close(gate.open)
			h.Drain(e)
			if got := s.order(); !slices.Equal(got, ids) {
				h.Fatalf("started %d runs in this order:\n%v\nwant admission order:\n%v", len(got), got, ids)
			}
		}},
		Case{Name: "Queue/ConcurrentEmittersLoseNothing", Note: "new: emitters racing the loader's reads and the end of a spill: every run executes exactly once", Fn: func(h *H) {
			var mu sync.Mutex
			seen := map[string]int{}
			e := h.Started(yella.Config{Concurrency: 4, MaxQueued: 6}, yella.Process{Name: "work", On: "ev",
				Run: func(c *yella.Ctx) yella.Result { mu.Lock(); seen[c.RunID()]++; mu.Unlock(); return c.OK(nil) }})
			var wg sync.WaitGroup
			ids := make([][]string, 6)
			for g := range ids {
				wg.Go(func() {
					for i := range 80 {
						em, err := e.Emit(h.Ctx(), "ev", fmt.Sprint(g, "-", i))
						if err != nil {
							h.Error(err)
							return
						}
						ids[g] = append(ids[g], em.Runs...)
					}
				})
			}
			wg.Wait()
			h.Drain(e)
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, g := range ids {
				for _, id := range g {
					n++
					if seen[id] != 1 {
						h.Errorf("run %s executed %d times, want 1 (status %s)", id, seen[id], h.Run(id).Status)
					}
				}
			}
			Expect(h, "runs executed", len(seen), n)
		}},
		Case{Name: "Queue/RegisteredAfterStart", Note: "new: a process registered after Start has its backlog read page by page as the queue drains, and Drain waits for all of it", Fn: func(h *H) {
			var ids []string
			for range 40 {
				ids = append(ids, h.Admit("late", "ev", nil).ID)
			}
			var n atomic.Int64
			e := h.Started(yella.Config{MaxQueued: 8, Concurrency: 2}, Proc("other", "other", Noop))
			if err := e.Register(Proc("late", "ev", func(c *yella.Ctx) yella.Result { n.Add(1); return c.OK(nil) })); err != nil {
				h.Fatalf("register: %v", err)
			}
			h.Drain(e)
			for _, id := range ids {
				Expect(h, "status", h.Run(id).Status, store.StatusCompleted)
			}
			Expect(h, "handler runs", n.Load(), int64(40))
		}},
		Case{Name: "Queue/MixedLoadOnATinyQueue", Note: "new: caps, per-key bounds, priorities, chains, batches and concurrent emitters on a queue of 3: every run executes once and Drain waits for all", Fn: func(h *H) {
			type job struct {
				Tenant string `json:"tenant"`
				N      int    `json:"n"`
			}
			var mu sync.Mutex
			seen := map[string]int{}
			count := func(c *yella.Ctx) { mu.Lock(); seen[c.RunID()]++; mu.Unlock() }
			e := h.Started(yella.Config{Concurrency: 4, MaxQueued: 3},
				yella.Process{Name: "capped", On: "a", Concurrency: 2, Run: func(c *yella.Ctx) yella.Result { count(c); return c.OK(c.Payload(), yella.Then("b")) }},
				yella.Process{Name: "keyed", On: "a", KeyConcurrency: &yella.KeyConcurrency{Max: 1, Key: yella.KeyFromPayload("tenant")},
					Run: func(c *yella.Ctx) yella.Result { count(c); return c.OK(nil) }},
				yella.Process{Name: "stage-b", On: "b", Run: func(c *yella.Ctx) yella.Result { count(c); return c.OK(nil) }})
			var wg sync.WaitGroup
			var total atomic.Int64
			for g := range 4 {
				wg.Go(func() {
					for i := range 30 {
						var opts []yella.EmitOption
						if i%7 == 0 {
							opts = append(opts, yella.Priority(i%3))
						}
						em, err := e.Emit(h.Ctx(), "a", job{Tenant: fmt.Sprint("t", i%3), N: g*1000 + i}, opts...)
						if err != nil {
							h.Error(err)
							return
						}
						total.Add(int64(len(em.Runs)))
					}
					batch := make([]yella.BatchEvent, 20)
					for i := range batch {
						batch[i] = yella.BatchEvent{Event: "a", Payload: job{Tenant: fmt.Sprint("t", i%2), N: g*1000 + 500 + i}}
					}
					ems, err := e.EmitBatch(h.Ctx(), batch)
					if err != nil {
						h.Error(err)
						return
					}
					for _, em := range ems {
						total.Add(int64(len(em.Runs)))
					}
				})
			}
			wg.Wait()
			h.Drain(e)
			c, _ := h.St.Counts(h.Ctx())
			want := total.Load() * 3 / 2 // each emission: capped and keyed; each capped run: one stage-b
			Expect(h, "completed", c[store.StatusCompleted], want)
			mu.Lock()
			defer mu.Unlock()
			Expect(h, "runs executed", int64(len(seen)), want)
			for id, n := range seen {
				if n != 1 {
					h.Errorf("run %s executed %d times", id, n)
				}
			}
		}},
		Case{Name: "Queue/BacklogAcrossRestart", Durable: true, Note: "new: a restart reads a first page and starts it; the rest of the backlog is read as the queue drains, and every run completes once", Fn: func(h *H) {
			proc := func(n *counter) yella.Process {
				return yella.Process{Name: "work", On: "ev", Run: func(c *yella.Ctx) yella.Result { n.add(c.RunID()); n.add("all"); return c.OK(nil) }}
			}
			var before counter
			e := h.Engine(yella.Config{MaxQueued: 16}, proc(&before))
			batch := make([]yella.BatchEvent, 700)
			for i := range batch {
				batch[i] = yella.BatchEvent{Event: "ev", Payload: i}
			}
			_, err := e.EmitBatch(h.Ctx(), batch)
			Expect(h, "batch", err, nil)
			h.Reopen()
			var after counter
			e = h.Started(yella.Config{MaxQueued: 16, Concurrency: 3}, proc(&after))
			h.Drain(e)
			Expect(h, "executed", after.get("all"), 700)
			Expect(h, "none before the restart", before.get("all"), 0)
			c, _ := h.St.Counts(h.Ctx())
			Expect(h, "completed", c[store.StatusCompleted], int64(700))
		}},
	}
}

// chainReads counts the reads of a chain: Chain, and listings of a chain
// (Runs with a CorrelationID).
type chainReads struct {
	store.Store
	n atomic.Int64
}

func (c *chainReads) Chain(ctx context.Context, corr string) ([]store.Run, error) {
	c.n.Add(1)
	return c.Store.Chain(ctx, corr)
}

// Runs counts the listings of a chain (how a wait looks at its chain).
func (c *chainReads) Runs(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	if f.CorrelationID != "" {
		c.n.Add(1)
	}
	return c.Store.Runs(ctx, f)
}

// heldReads is a store whose Pending, once armed, reads and then waits
// for open before it returns what it read.
type heldReads struct {
	store.Store
	armed, entered atomic.Bool
	open           chan struct{}
}

func (g *heldReads) Pending(ctx context.Context, after int64, limit int) ([]store.Pending, error) {
	ps, err := g.Store.Pending(ctx, after, limit)
	if g.armed.Load() {
		g.entered.Store(true)
		<-g.open
	}
	return ps, err
}
