package yella_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/storespy"
	"github.com/yella-go/yella/store"
)

// fanOut is a parent that starts one "item" child per n in 0..count-1
// and joins k of them, completing with the sum of the children's outputs
// and the number that failed.
func fanOut(count, k int, parentRuns *atomic.Int32) yella.Process {
	return yella.Process{Name: "parent", On: "batch", Run: func(c *yella.Ctx) yella.Result {
		parentRuns.Add(1)
		payloads := make([]any, count)
		for i := range payloads {
			payloads[i] = i
		}
		ids, err := yella.Children(c, "items", "item", payloads)
		if err != nil {
			return c.Error(err)
		}
		res, err := yella.Join(c, "items", ids, k)
		if err != nil {
			return c.Error(err)
		}
		sum, failed := 0, 0
		for _, r := range res {
			if !r.OK() {
				failed++
				continue
			}
			var v int
			if err := r.Decode(&v); err != nil {
				return c.Fail(err)
			}
			sum += v
		}
		return c.OK(map[string]int{"sum": sum, "failed": failed, "joined": len(res)})
	}}
}

func doubler(run func(c *yella.Ctx, n int) yella.Result) yella.Process {
	return yella.Process{Name: "item", On: "item", Retry: &yella.Retry{Max: 2, Backoff: yella.Fixed(time.Millisecond)},
		Run: yella.Handle(func(c *yella.Ctx, n int) yella.Result {
			if run != nil {
				return run(c, n)
			}
			return c.OK(2 * n)
		})}
}

// childrenCases: a handler starts child runs and joins them.
func childrenCases() []Case {
	return []Case{
		Case{Name: "Children/JoinOf100", Note: "new: a parent starts 100 children in its chain, once, and joins them all without holding a slot; it completes with their results", Fn: func(h *H) {
			var parentRuns atomic.Int32
			e := h.Started(yella.Config{Concurrency: 4}, fanOut(100, 0, &parentRuns), doubler(nil))
			id := h.One(e, "batch", nil)
			r := h.WaitStatus(id, store.StatusCompleted)
			Expect(h, "output", string(r.Output), `{"failed":0,"joined":100,"sum":9900}`)
			chain, err := e.Chain(h.Ctx(), id)
			Expect(h, "chain", err, nil)
			Expect(h, "the parent and 100 children, once each", len(chain), 101)
			for _, ch := range chain[1:] {
				Expect(h, "child of the parent", ch.ParentID, id)
				Expect(h, "child completed", ch.Status, yella.StatusCompleted)
			}
			h.Logf("the parent ran %d times", parentRuns.Load())
			if n := parentRuns.Load(); n > 60 {
				h.Errorf("the parent ran %d times for 100 children", n)
			}
		}},
		Case{Name: "Children/JoinReadsChildrenOnce", Note: "new: a join counts its children's ends at each look and reads them, outputs included, only once enough have ended", Fn: func(h *H) {
			// Each child's end wakes the waiting parent, which looks at
			// its children again: read whole each time, a join of 300
			// children read them 27 to 79 times over.
			const n = 300
			st, spy := storespy.Wrap(h.St)
			var parentRuns atomic.Int32
			e := h.Started(yella.Config{Store: st, Concurrency: 8}, fanOut(n, 0, &parentRuns),
				doubler(func(c *yella.Ctx, k int) yella.Result { time.Sleep(time.Millisecond); return c.OK(2 * k) }))
			id := h.One(e, "batch", nil)
			r := h.WaitStatus(id, store.StatusCompleted)
			Expect(h, "output", string(r.Output), fmt.Sprintf(`{"failed":0,"joined":%d,"sum":%d}`, n, n*(n-1)))
			h.Logf("the parent ran %d times; its joins read %d runs by id", parentRuns.Load(), spy.ByID())
			if spy.ByID() > 2*n {
				h.Errorf("the join read %d runs by id for %d children, want at most %d", spy.ByID(), n, 2*n)
			}
		}},
		Case{Name: "Children/ChildRetriesThenSucceeds", Note: "new: a child failing then succeeding (its own retry policy) reaches the join as a success", Fn: func(h *H) {
			var parentRuns atomic.Int32
			var fails atomic.Int32
			child := doubler(func(c *yella.Ctx, n int) yella.Result {
				if n == 1 && c.Attempt() == 1 {
					fails.Add(1)
					return c.Error(errors.New("flaky"))
				}
				return c.OK(2 * n)
			})
			// Its retry comes well after the parent waits: the child's end
			// must wake it.
			child.Retry.Backoff = yella.Fixed(300 * time.Millisecond)
			e := h.Started(yella.Config{}, fanOut(3, 0, &parentRuns), child)
			id := h.One(e, "batch", nil)
			r := h.WaitStatus(id, store.StatusCompleted)
			Expect(h, "failed once", fails.Load(), int32(1))
			Expect(h, "output", string(r.Output), `{"failed":0,"joined":3,"sum":6}`)
		}},
		Case{Name: "Children/ChildEndWakesParent", Note: "new: children that end only after their parent waits in Join wake it at once, not at the join's next poll", Fn: func(h *H) {
			var parentRuns atomic.Int32
			gate := make(chan struct{})
			e := h.Started(yella.Config{}, fanOut(3, 0, &parentRuns), doubler(func(c *yella.Ctx, n int) yella.Result {
				select {
				case <-gate:
				case <-c.Done():
					return c.Error(c.Err())
				}
				return c.OK(2 * n)
			}))
			id := h.One(e, "batch", nil)
			h.WaitStatus(id, store.StatusWaiting)
			// The parent's slot is freed once its wait has settled, the join
			// watched (its settle looks at the children once, after its
			// commit): the children end after that, or the settle's own
			// look may find them ended and wake the parent itself.
			h.WaitFor("the parent's wait settled", func() bool {
				m, err := e.Metrics(h.Ctx())
				return err == nil && m.Dispatcher.Running == 3
			})
			close(gate)
			// WaitStatus gives up after 5 s, half the join's poll: only a
			// child's end can have woken the parent.
			r := h.WaitStatus(id, store.StatusCompleted)
			Expect(h, "output", string(r.Output), `{"failed":0,"joined":3,"sum":6}`)
		}},
		Case{Name: "Children/ChildFailsForGood", Note: "new: a child that fails for good reaches the join as an error the parent handles", Fn: func(h *H) {
			var parentRuns atomic.Int32
			e := h.Started(yella.Config{}, fanOut(3, 0, &parentRuns), doubler(func(c *yella.Ctx, n int) yella.Result {
				if n == 2 {
					return c.Fail(errors.New("bad item"))
				}
				return c.OK(2 * n)
			}))
			id := h.One(e, "batch", nil)
			r := h.WaitStatus(id, store.StatusCompleted)
			Expect(h, "output", string(r.Output), `{"failed":1,"joined":3,"sum":2}`)
		}},
		Case{Name: "Children/FirstOf", Note: "new: a join of the first k children returns once k have ended, while the others still wait", Fn: func(h *H) {
			var parentRuns atomic.Int32
			e := h.Started(yella.Config{}, fanOut(3, 1, &parentRuns), doubler(func(c *yella.Ctx, n int) yella.Result {
				if n > 0 {
					if _, _, err := yella.WaitFor[int](c, "go", fmt.Sprint("item:", n), 0); err != nil {
						return c.Error(err)
					}
				}
				return c.OK(10 + n)
			}))
			id := h.One(e, "batch", nil)
			r := h.WaitStatus(id, store.StatusCompleted)
			Expect(h, "output", string(r.Output), `{"failed":0,"joined":1,"sum":10}`)
			// The parent may end before the two others have begun to wait;
			// they must get there (and not end: nothing signals them).
			h.WaitFor("the two others to wait", func() bool {
				n, _ := h.St.CountRuns(h.Ctx(), store.RunFilter{Statuses: []store.Status{store.StatusWaiting}, Limit: 1})
				return n == 2
			})
		}},
		Case{Name: "Children/JoinAcrossRestart", Durable: true, Note: "new: a parent waiting in a join on a restarted engine still completes when its children end", Fn: func(h *H) {
			clk := h.Fake()
			var parentRuns atomic.Int32
			child := doubler(func(c *yella.Ctx, n int) yella.Result {
				if _, _, err := yella.WaitFor[int](c, "go", fmt.Sprint("item:", n), 0); err != nil {
					return c.Error(err)
				}
				return c.OK(2 * n)
			})
			e := h.Started(slowClock, fanOut(2, 0, &parentRuns), child)
			id := h.One(e, "batch", nil)
			h.WaitStatus(id, store.StatusWaiting)
			h.WaitFor("two children waiting", func() bool {
				n, _ := h.St.CountRuns(h.Ctx(), store.RunFilter{Statuses: []store.Status{store.StatusWaiting}, Limit: 1})
				return n == 3
			})
			h.Reopen()
			e = h.Started(slowClock, fanOut(2, 0, &parentRuns), child)
			for i := range 2 {
				if _, err := e.Signal(h.Ctx(), fmt.Sprint("item:", i), nil); err != nil {
					h.Fatal(err)
				}
			}
			h.WaitFor("children completed", func() bool {
				n, _ := h.St.CountRuns(h.Ctx(), store.RunFilter{Statuses: []store.Status{store.StatusCompleted}, Limit: 1})
				return n == 2
			})
			clk.Advance(15 * time.Second) // the restarted engine did not know the parent waited: it looks again
			r := h.WaitStatus(id, store.StatusCompleted)
			Expect(h, "output", string(r.Output), `{"failed":0,"joined":2,"sum":2}`)
		}},
	}
}
