package storetest

import (
	"errors"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
)

// Cases for idempotency keys that outlive their runs' retention.
func init() {
	register(
		Case{Name: "Idempotency/KeyOutlivesRunRetention", Note: "new: a key is kept for Config.KeyRetention after its emission even when retention prunes its run, so a repeat is answered as already processed instead of being processed twice", Fn: func(h *H) {
			clk := h.Fake()
			cfg := yella.Config{Retention: time.Hour, KeyRetention: 24 * time.Hour, RetentionInterval: time.Hour,
				LeaseTimeout: 6 * time.Hour, FlushInterval: time.Hour}
			e := h.Started(cfg, Proc("a", "ev", Noop), Proc("b", "ev", Noop))
			key := yella.IdempotencyKey("evt_1")
			first := h.Emit(e, "ev", nil, key)
			Expect(h, "admitted", len(first.Runs), 2)
			h.Drain(e)

			clk.Advance(2 * time.Hour) // past the run retention
			for _, id := range first.Runs {
				_, err := h.St.Run(h.Ctx(), id)
				Expect(h, "run pruned", errors.Is(err, store.ErrNotFound), true)
			}
			again := h.Emit(e, "ev", nil, key)
			Expect(h, "nothing admitted", len(again.Runs), 0)
			Expect(h, "reason", again.Reason, yella.ReasonProcessed)
			Expect(h, "existing", join(again.Existing), join(first.Runs))
			Expect(h, "pruned", join(again.Pruned), join(first.Runs))
			runs, err := e.EmitAndWait(h.Ctx(), "ev", nil, key)
			Expect(h, "emit and wait", err, nil)
			Expect(h, "emit and wait runs", len(runs), 2)
			for i, r := range runs {
				Expect(h, "emit and wait id", r.ID, first.Runs[i])
				Expect(h, "emit and wait status", r.Status, store.StatusCompleted)
				Expect(h, "emit and wait key", r.IdempotencyKey, "evt_1")
			}
			other := h.Emit(e, "ev", nil, yella.IdempotencyKey("evt_2"))
			Expect(h, "another key admits", len(other.Runs), 2)
			h.Drain(e)

			clk.Advance(22 * time.Hour) // 24h since the emission: the sweep at that time keeps the key
			Expect(h, "within the key retention", h.Emit(e, "ev", nil, key).Reason, yella.ReasonProcessed)
			clk.Advance(time.Hour) // the next sweep drops it
			last := h.Emit(e, "ev", nil, key)
			Expect(h, "admitted after the key retention", len(last.Runs), 2)
			Expect(h, "nothing existing", len(last.Existing), 0)
		}},
		Case{Name: "Idempotency/KeyRetentionForever", Fn: func(h *H) {
			clk := h.Fake()
			e := h.Started(yella.Config{Retention: time.Hour, KeyRetention: -1, RetentionInterval: 24 * time.Hour,
				LeaseTimeout: 30 * time.Hour, FlushInterval: 24 * time.Hour}, Proc("a", "ev", Noop))
			id := h.One(e, "ev", nil, yella.IdempotencyKey("k"))
			h.Drain(e)
			clk.Advance(30 * 24 * time.Hour)
			_, err := h.St.Run(h.Ctx(), id)
			Expect(h, "run pruned", errors.Is(err, store.ErrNotFound), true)
			em := h.Emit(e, "ev", nil, yella.IdempotencyKey("k"))
			Expect(h, "still refused after 30 days", em.Reason, yella.ReasonProcessed)
		}},
		Case{Name: "Store/Idempotency/KeptAfterPrune", Fn: func(h *H) {
			admit := func(key string) store.AdmitResult {
				res, err := h.St.Admit(h.Ctx(), store.Admission{Event: "ev", IdempotencyKey: key, Runs: []store.NewRun{{ID: ID(), Process: "p"}}, Now: h.Now()})
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
			Expect(h, "prune", err, nil)
			Expect(h, "pruned", n, 1)
			if h.h.Durable {
				h.Reopen()
			}

			res := admit("k")
			Expect(h, "not admitted", len(res.Admitted), 0)
			Expect(h, "not existing", len(res.Existing), 0)
			Expect(h, "kept", len(res.Pruned), 1)
			if len(res.Pruned) == 1 {
				k := res.Pruned[0]
				Expect(h, "kept id", k.ID, done.ID)
				Expect(h, "kept process", k.Process, "p")
				Expect(h, "kept event", k.Event, "ev")
				Expect(h, "kept key", k.IdempotencyKey, "k")
				Expect(h, "kept status", k.Status, store.StatusCompleted)
				Expect(h, "kept admission time", k.CreatedAt.Equal(done.CreatedAt), true)
			}
			// PruneKeys drops kept keys admitted before the cut, never a
			// live run's key.
			n, err = h.St.PruneKeys(h.Ctx(), done.CreatedAt, 10)
			Expect(h, "prune keys at the admission", err, nil)
			Expect(h, "none before the admission", n, 0)
			n, _ = h.St.PruneKeys(h.Ctx(), h.Now().Add(time.Hour), 10)
			Expect(h, "kept key pruned", n, 1)
			Expect(h, "live key kept", len(admit("live").Existing), 1)
			Expect(h, "live run", h.Run(live.ID).Status, store.StatusIdle)
			Expect(h, "admitted again", len(admit("k").Admitted), 1)
		}},
		Case{Name: "Store/Idempotency/PruneKeysBounded", Fn: func(h *H) {
			for i := range 7 {
				res, _ := h.St.Admit(h.Ctx(), store.Admission{Event: "ev", IdempotencyKey: string(rune('a' + i)), Runs: []store.NewRun{{ID: ID(), Process: "p"}}, Now: h.Now()})
				r := h.Claim(res.Admitted[0].ID, "o", time.Minute)
				h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: h.Now(), To: store.StatusCompleted})
			}
			n, _ := h.St.Prune(h.Ctx(), store.PruneRequest{CompletedBefore: h.Now().Add(time.Second), Limit: 100})
			Expect(h, "runs pruned", n, 7)
			cut := h.Now().Add(time.Second)
			for _, want := range []int{3, 3, 1, 0} {
				n, err := h.St.PruneKeys(h.Ctx(), cut, 3)
				Expect(h, "err", err, nil)
				Expect(h, "keys pruned in a batch", n, want)
			}
		}},
	)
}
