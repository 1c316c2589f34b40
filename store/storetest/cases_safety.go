package storetest

import (
	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
)

// Cases for guarantees added after the original engine: a chain read from
// any of its runs.
func init() {
	register(
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
	)
}

func runIDs(rs []store.Run) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}
