package storetest

import (
	"time"

	"github.com/yella-go/yella/store"
)

// keyCases: idempotency keys kept after their runs are pruned, and the
// bounded pruning of kept keys.
func keyCases() []Case {
	return []Case{
		Case{Name: "Store/Idempotency/KeptAfterPrune", Fn: func(h *H) {
			admit := func(key string) store.AdmitResult {
				res, err := h.St.Admit(h.Ctx(), store.Admission{Event: "ev", IdempotencyKey: key, Runs: []store.NewRun{{ID: newID(), Process: "p"}}, Now: h.Now()})
				if err != nil {
					h.Fatal(err)
				}
				return res
			}
			done := admit("k").Admitted[0]
			live := admit("live").Admitted[0]
			r := h.Claim(done.ID, "o", time.Minute)
			if _, err := h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: h.Now(), To: store.StatusCompleted}); err != nil {
				h.Fatal(err)
			}
			n, err := h.St.Prune(h.Ctx(), store.PruneRequest{CompletedBefore: h.Now().Add(time.Second), Limit: 10})
			expect(h, "prune", err, nil)
			expect(h, "pruned", n, 1)
			if h.f.Durable {
				h.Reopen()
			}

			res := admit("k")
			expect(h, "not admitted", len(res.Admitted), 0)
			expect(h, "not existing", len(res.Existing), 0)
			expect(h, "kept", len(res.Pruned), 1)
			if len(res.Pruned) == 1 {
				k := res.Pruned[0]
				expect(h, "kept id", k.ID, done.ID)
				expect(h, "kept process", k.Process, "p")
				expect(h, "kept event", k.Event, "ev")
				expect(h, "kept key", k.IdempotencyKey, "k")
				expect(h, "kept status", k.Status, store.StatusCompleted)
				expect(h, "kept admission time", k.CreatedAt.Equal(done.CreatedAt), true)
			}
			// PruneKeys drops kept keys admitted before the cut, never a
			// live run's key.
			n, err = h.St.PruneKeys(h.Ctx(), done.CreatedAt, 10)
			expect(h, "prune keys at the admission", err, nil)
			expect(h, "none before the admission", n, 0)
			n, _ = h.St.PruneKeys(h.Ctx(), h.Now().Add(time.Hour), 10)
			expect(h, "kept key pruned", n, 1)
			expect(h, "live key kept", len(admit("live").Existing), 1)
			expect(h, "live run", h.Run(live.ID).Status, store.StatusIdle)
			expect(h, "admitted again", len(admit("k").Admitted), 1)
		}},
		Case{Name: "Store/Idempotency/PruneKeysBounded", Fn: func(h *H) {
			for i := range 7 {
				res, _ := h.St.Admit(h.Ctx(), store.Admission{Event: "ev", IdempotencyKey: string(rune('a' + i)), Runs: []store.NewRun{{ID: newID(), Process: "p"}}, Now: h.Now()})
				r := h.Claim(res.Admitted[0].ID, "o", time.Minute)
				h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: h.Now(), To: store.StatusCompleted})
			}
			n, _ := h.St.Prune(h.Ctx(), store.PruneRequest{CompletedBefore: h.Now().Add(time.Second), Limit: 100})
			expect(h, "runs pruned", n, 7)
			cut := h.Now().Add(time.Second)
			for _, want := range []int{3, 3, 1, 0} {
				n, err := h.St.PruneKeys(h.Ctx(), cut, 3)
				expect(h, "err", err, nil)
				expect(h, "keys pruned in a batch", n, want)
			}
		}},
	}
}
