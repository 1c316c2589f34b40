package storetest

import (
	"errors"

	"github.com/yella-go/yella/store"
)

// batchCases: AdmitBatch, several admissions in one transaction, all or
// none.
func batchCases() []Case {
	one := func(event, key, process string, limit int) store.Admission {
		return store.Admission{Event: event, IdempotencyKey: key, Payload: []byte(`{"k":1}`),
			Runs: []store.NewRun{{ID: newID(), Process: process, Limit: limit}}}
	}
	return []Case{
		Case{Name: "Store/AdmitBatch/InOrder", Fn: func(h *H) {
			old := one("ev", "old", "p", 0)
			old.Now = h.Now()
			pre, err := h.St.Admit(h.Ctx(), old)
			expect(h, "admit before", err, nil)
			as := []store.Admission{
				one("ev", "k", "p", 0),    // 0: admitted
				one("ev", "k", "p", 0),    // 1: the key of 0: existing
				one("ev", "old", "p", 0),  // 2: the key admitted before: existing
				one("capped", "", "c", 1), // 3: admitted, the cap's one run
				one("capped", "", "c", 1), // 4: dropped: 3 counts toward the cap
				one("ev", "", "p", 0),     // 5: admitted
			}
			for i := range as {
				as[i].Now = h.Now()
			}
			res, err := h.St.AdmitBatch(h.Ctx(), as)
			if err != nil || len(res) != len(as) {
				h.Fatalf("AdmitBatch: %v (%d results)", err, len(res))
			}
			counts := func(r store.AdmitResult) [3]int { return [3]int{len(r.Admitted), len(r.Existing), len(r.Dropped)} }
			for i, want := range [][3]int{{1, 0, 0}, {0, 1, 0}, {0, 1, 0}, {1, 0, 0}, {0, 0, 1}, {1, 0, 0}} {
				if got := counts(res[i]); got != want {
					h.Errorf("admission %d: admitted, existing, dropped = %v, want %v", i, got, want)
				}
			}
			if len(res[1].Existing) == 1 {
				expect(h, "in-batch duplicate names the batch's run", res[1].Existing[0].ID, res[0].Admitted[0].ID)
			}
			if len(res[2].Existing) == 1 {
				expect(h, "duplicate names the earlier run", res[2].Existing[0].ID, pre.Admitted[0].ID)
			}
			for _, i := range []int{0, 3, 5} {
				if len(res[i].Admitted) == 1 {
					r := h.Run(res[i].Admitted[0].ID)
					expect(h, "admitted run is idle", r.Status, store.StatusIdle)
					expect(h, "admitted run's payload", string(r.Payload), `{"k":1}`)
					expect(h, "admitted run's seq", r.Seq, res[i].Admitted[0].Seq)
				}
			}
			c, err := h.St.Counts(h.Ctx())
			expect(h, "counts", err, nil)
			expect(h, "idle runs", c[store.StatusIdle], int64(4))
			ps, err := h.St.Pending(h.Ctx(), 0, 10)
			expect(h, "pending", err, nil)
			expect(h, "pending runs", len(ps), 4)
			if len(ps) == 4 {
				expect(h, "pending in admission order", ps[1].ID+ps[2].ID+ps[3].ID,
					res[0].Admitted[0].ID+res[3].Admitted[0].ID+res[5].Admitted[0].ID)
			}
			empty, err := h.St.AdmitBatch(h.Ctx(), nil)
			expect(h, "empty batch", err, nil)
			expect(h, "empty batch results", len(empty), 0)
		}},
		Case{Name: "Store/AdmitBatch/AllOrNothing", Fn: func(h *H) {
			for _, tc := range []struct {
				name string
				bad  func(as []store.Admission) store.Admission
			}{
				{"missing parent", func([]store.Admission) store.Admission {
					a := one("ev", "", "p", 0)
					a.ParentID, a.CorrelationID, a.Depth = newID(), newID(), 1
					return a
				}},
				{"run id taken by an earlier admission of the batch", func(as []store.Admission) store.Admission {
					a := one("ev", "", "q", 0)
					a.Runs[0].ID = as[0].Runs[0].ID
					return a
				}},
			} {
				as := []store.Admission{one("ev", "k-"+tc.name, "p", 0), one("ev", "", "p", 0)}
				as = append(as, tc.bad(as))
				for i := range as {
					as[i].Now = h.Now()
				}
				res, err := h.St.AdmitBatch(h.Ctx(), as)
				var be *store.BatchError
				if !errors.As(err, &be) {
					h.Fatalf("%s: err = %v (%d results), want a *store.BatchError", tc.name, err, len(res))
				}
				expect(h, tc.name+": failed admission's index", be.Index, 2)
				if tc.name == "missing parent" {
					expect(h, tc.name+": unwraps to ErrNotFound", errors.Is(err, store.ErrNotFound), true)
				}
				for i := range 2 {
					if _, err := h.St.Run(h.Ctx(), as[i].Runs[0].ID); !errors.Is(err, store.ErrNotFound) {
						h.Errorf("%s: admission %d of the failed batch was admitted (%v)", tc.name, i, err)
					}
				}
				c, _ := h.St.Counts(h.Ctx())
				expect(h, tc.name+": no idle run counted", c[store.StatusIdle], int64(0))
			}
			// The key of the failed batch was not consumed.
			a := one("ev", "k-missing parent", "p", 0)
			a.Now = h.Now()
			res, err := h.St.Admit(h.Ctx(), a)
			expect(h, "admit after a failed batch", err, nil)
			expect(h, "key of the failed batch still free", len(res.Admitted), 1)

			// Deep in a large batch, whose admissions a store may insert
			// many to a statement: the failure is still the failing
			// admission's, and nothing is admitted.
			before, err := h.St.Counts(h.Ctx())
			expect(h, "counts", err, nil)
			for _, tc := range []struct {
				name  string
				keyed bool
				at    int
				bad   func(as []store.Admission)
			}{
				{"run id taken", false, 250, func(as []store.Admission) { as[250].Runs[0].ID = as[40].Runs[0].ID }},
				{"keyed run id taken", true, 250, func(as []store.Admission) { as[250].Runs[0].ID = as[40].Runs[0].ID }},
				{"parent not found", false, 270, func(as []store.Admission) { as[270].ParentID, as[270].Depth = newID(), 1 }},
				{"parent later in the batch", false, 270, func(as []store.Admission) { as[270].ParentID, as[270].Depth = as[280].Runs[0].ID, 1 }},
			} {
				as := make([]store.Admission, 300)
				for i := range as {
					key := ""
					if tc.keyed {
						key = newID()
					}
					as[i] = one("ev", key, "p", 0)
					as[i].Now = h.Now()
				}
				tc.bad(as)
				_, err := h.St.AdmitBatch(h.Ctx(), as)
				var be *store.BatchError
				if !errors.As(err, &be) {
					h.Fatalf("%s: err = %v, want a *store.BatchError", tc.name, err)
				}
				expect(h, tc.name+": failed admission's index", be.Index, tc.at)
				if tc.at == 270 {
					expect(h, tc.name+": unwraps to ErrNotFound", errors.Is(err, store.ErrNotFound), true)
				}
				if _, err := h.St.Run(h.Ctx(), as[0].Runs[0].ID); !errors.Is(err, store.ErrNotFound) {
					h.Errorf("%s: the failed batch's first run was admitted (%v)", tc.name, err)
				}
				after, err := h.St.Counts(h.Ctx())
				expect(h, "counts", err, nil)
				expect(h, tc.name+": idle runs counted", after[store.StatusIdle], before[store.StatusIdle])
			}
		}},
	}
}
