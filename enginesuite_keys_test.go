package yella_test

import (
	"errors"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
)

// Cases for idempotency keys that outlive their runs' retention.
func keyCases() []Case {
	return []Case{
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
				Expect(h, "emit and wait status", r.Status, yella.StatusCompleted)
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
	}
}
