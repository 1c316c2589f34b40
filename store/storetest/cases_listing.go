package storetest

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/yella-go/yella/store"
)

// listingCases: run listings filtered on several statuses.
func listingCases() []Case {
	return []Case{
		Case{Name: "Store/Lookups/StringsNoStoreKeeps", Fn: func(h *H) {
			// An id, process, event or chain that is not text (a NUL
			// byte, invalid UTF-8), as an operator's request may name,
			// matches no run, as an unknown one does: the lookups find
			// nothing and writes to its run fail ErrNotFound, rather than
			// the store failing them as if it were down.
			h.Admit("p", "ev", nil)
			bad := "a\x00\xff"
			ctx := h.Ctx()
			if _, err := h.St.Run(ctx, bad); !errors.Is(err, store.ErrNotFound) {
				h.Errorf("Run: %v, want ErrNotFound", err)
			}
			if rs, err := h.St.RunsByID(ctx, []string{bad}); err != nil || len(rs) != 0 {
				h.Errorf("RunsByID: %v, %v; want none", rs, err)
			}
			for _, f := range []store.RunFilter{{Process: bad}, {Event: bad}, {CorrelationID: bad}} {
				f.Limit = 10
				if rs, err := h.St.Runs(ctx, f); err != nil || len(rs) != 0 {
					h.Errorf("Runs(%+v): %v, %v; want none", f, rs, err)
				}
				if n, err := h.St.CountRuns(ctx, f); err != nil || n != 0 {
					h.Errorf("CountRuns(%+v): %d, %v; want 0", f, n, err)
				}
			}
			if rs, err := h.St.Chain(ctx, bad); err != nil || len(rs) != 0 {
				h.Errorf("Chain: %v, %v; want none", rs, err)
			}
			if _, err := h.St.Timeline(ctx, bad); !errors.Is(err, store.ErrNotFound) {
				h.Errorf("Timeline: %v, want ErrNotFound", err)
			}
			if es, err := h.St.Effects(ctx, bad); err != nil || len(es) != 0 {
				h.Errorf("Effects: %v, %v; want none", es, err)
			}
			if _, err := h.St.Update(ctx, store.Update{RunID: bad, Epoch: 1, Now: h.Now(), To: store.StatusCompleted}); !errors.Is(err, store.ErrNotFound) {
				h.Errorf("Update: %v, want ErrNotFound", err)
			}
			if err := h.St.StartEffect(ctx, bad, 1, "k", h.Now()); !errors.Is(err, store.ErrNotFound) {
				h.Errorf("StartEffect: %v, want ErrNotFound", err)
			}
			if err := h.St.SetContext(ctx, bad, 1, nil); !errors.Is(err, store.ErrNotFound) {
				h.Errorf("SetContext: %v, want ErrNotFound", err)
			}
		}},
		Case{Name: "Store/Runs/RepeatedStatusesListOnce", Fn: func(h *H) {
			for range 10 {
				r := h.Claim(h.Admit("p", "ev", nil).ID, "o", time.Minute)
				h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: h.Now(), To: store.StatusCompleted})
			}
			c := store.StatusCompleted
			f := store.RunFilter{Statuses: []store.Status{c, c, c}, Limit: 5}
			rs, err := h.St.Runs(h.Ctx(), f)
			expect(h, "err", err, nil)
			expect(h, "rows", len(rs), 5)
			expect(h, "distinct ids", len(distinct(rs)), 5)
			n, _ := h.St.CountRuns(h.Ctx(), f)
			expect(h, "count", n, int64(10))
		}},
		Case{Name: "Store/Runs/SeveralStatusesMergeInOrder", Fn: func(h *H) {
			// Runs of four statuses, interleaved in creation order.
			var all []store.Run
			for i := range 24 {
				r := h.Admit("p", "ev", nil)
				if st := []store.Status{store.StatusIdle, store.StatusCompleted, store.StatusErrored, store.StatusDead}[i%4]; st != store.StatusIdle {
					r = h.Claim(r.ID, "o", time.Minute)
					res, err := h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: h.Now(), To: st})
					if err != nil {
						h.Fatal(err)
					}
					r = res.Run
				}
				all = append(all, r)
			}
			statuses := map[string]store.Status{}
			for _, r := range all {
				statuses[r.ID] = h.Run(r.ID).Status
			}
			sets := [][]store.Status{
				{store.StatusCompleted, store.StatusDead},
				{store.StatusDead, store.StatusIdle, store.StatusErrored, store.StatusDead},
				{store.StatusErrored, store.StatusCompleted, store.StatusIdle, store.StatusDead, store.StatusRunning},
			}
			for _, set := range sets {
				for _, order := range []store.Order{store.NewestFirst, store.OldestFirst} {
					for _, limit := range []int{1, 3, 7, 100} {
						var want []string
						for _, r := range all {
							if slices.Contains(set, statuses[r.ID]) {
								want = append(want, r.ID)
							}
						}
						if order == store.NewestFirst {
							slices.Reverse(want)
						}
						// Page through with the store's own cursor.
						var got []string
						var after int64
						for pages := 0; pages <= len(all); pages++ {
							rs, err := h.St.Runs(h.Ctx(), store.RunFilter{Statuses: set, Order: order, Limit: limit, After: after})
							expect(h, "err", err, nil)
							if len(rs) > limit {
								h.Errorf("%v %v limit %d: page of %d runs", set, order, limit, len(rs))
							}
							for _, r := range rs {
								got = append(got, r.ID)
							}
							if len(rs) < limit {
								break
							}
							after = rs[len(rs)-1].Seq
						}
						expect(h, fmt.Sprintf("%v order %d limit %d", set, order, limit), join(got), join(want))
					}
				}
			}
		}},
	}
}

func distinct(rs []store.Run) map[string]bool {
	out := map[string]bool{}
	for _, r := range rs {
		out[r.ID] = true
	}
	return out
}
