package yella_test

import (
	"github.com/yella-go/yella"
)

// Cases for run listings filtered on several statuses.
func listingCases() []Case {
	return []Case{
		Case{Name: "Engine/RunsRepeatedStatuses", Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "ev", Noop))
			for range 10 {
				h.One(e, "ev", nil)
			}
			h.Drain(e)
			c := yella.StatusCompleted
			q := yella.RunQuery{Status: []yella.Status{c, c, c}, State: yella.StateCompleted, Limit: 5, WithTotal: true}
			p, err := e.Runs(h.Ctx(), q)
			Expect(h, "err", err, nil)
			Expect(h, "rows", len(p.Runs), 5)
			Expect(h, "distinct ids", len(distinct(p.Runs)), 5)
			Expect(h, "total", p.Total, int64(10))
			q.Cursor = p.Next
			p2, err := e.Runs(h.Ctx(), q)
			Expect(h, "err", err, nil)
			Expect(h, "second page", len(distinct(append(p.Runs, p2.Runs...))), 10)
			Expect(h, "last page", p2.Next, "")
		}},
	}
}

func distinct(rs []yella.Run) map[string]bool {
	out := map[string]bool{}
	for _, r := range rs {
		out[r.ID] = true
	}
	return out
}
