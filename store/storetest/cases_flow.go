package storetest

import (
	"errors"
	"time"

	"github.com/yella-go/yella/store"
)

// flowCases: what the stores keep for flow control and delayed runs.
func flowCases() []Case {
	return []Case{
		Case{Name: "Store/Flow/FieldsKept", Fn: func(h *H) {
			now := h.Now()
			res, err := h.St.Admit(h.Ctx(), store.Admission{Event: "e", Now: now, NotBefore: now.Add(time.Hour),
				Runs: []store.NewRun{{ID: newID(), Process: "p", Priority: -3, RateKey: "r\x1fk", ConcurrencyKey: "c\x1fk"}}})
			expect(h, "admit", err, nil)
			a := res.Admitted[0]
			r := h.Run(a.ID)
			for _, got := range []store.Run{a, r} {
				expect(h, "priority", got.Priority, -3)
				expect(h, "rate key", got.RateKey, "r\x1fk")
				expect(h, "concurrency key", got.ConcurrencyKey, "c\x1fk")
				expect(h, "not before", got.RetryAt.Equal(now.Add(time.Hour)), true)
			}
			ps, err := h.St.Pending(h.Ctx(), 0, 10)
			expect(h, "pending", err, nil)
			expect(h, "one pending", len(ps), 1)
			expect(h, "pending keys", ps[0].RateKey+ps[0].ConcurrencyKey, "r\x1fkc\x1fk")
			expect(h, "pending priority", ps[0].Priority, -3)
			expect(h, "pending retry", ps[0].RetryAt.Equal(now.Add(time.Hour)), true)
			expect(h, "pending created", ps[0].CreatedAt.Equal(a.CreatedAt), true)
			rs, err := h.St.Claim(h.Ctx(), store.ClaimRequest{IDs: []string{a.ID}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
			expect(h, "claim", err, nil)
			expect(h, "not claimable before its time", len(rs), 0)
		}},
		// A key's state is the latest one stored with a claim, and it
		// outlives retention while it is in the future.
		Case{Name: "Store/Flow/RateStatesKept", Fn: func(h *H) {
			now := h.Now()
			ids := []string{newID(), newID(), newID()}
			var nrs []store.NewRun
			for _, id := range ids {
				nrs = append(nrs, store.NewRun{ID: id, Process: "p", RateKey: "k"})
			}
			if _, err := h.St.Admit(h.Ctx(), store.Admission{Event: "e", Now: now, Runs: nrs}); err != nil {
				h.Fatal(err)
			}
			tats := []time.Time{now.Add(time.Hour), now.Add(3 * time.Hour), now.Add(2 * time.Hour)}
			for i, id := range ids {
				rs, err := h.St.Claim(h.Ctx(), store.ClaimRequest{IDs: []string{id}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute), RateTATs: tats[i : i+1]})
				if err != nil || len(rs) != 1 {
					h.Fatalf("claim: %v", err)
				}
				if _, err := h.St.Update(h.Ctx(), store.Update{RunID: id, Epoch: rs[0].Epoch, Action: store.ActionComplete, Now: now}); err != nil {
					h.Fatal(err)
				}
			}
			got, err := h.St.RateStates(h.Ctx(), now)
			expect(h, "rate states", err, nil)
			expect(h, "keys", len(got), 1)
			expect(h, "latest", got["k"].Equal(now.Add(3*time.Hour)), true)
			got, _ = h.St.RateStates(h.Ctx(), now.Add(3*time.Hour))
			expect(h, "none after it", len(got), 0)
			// Retention past the completions, not past the state.
			if _, err := h.St.Prune(h.Ctx(), store.PruneRequest{CompletedBefore: now.Add(time.Minute), Limit: 100}); err != nil {
				h.Fatal(err)
			}
			got, _ = h.St.RateStates(h.Ctx(), now)
			expect(h, "kept through retention", got["k"].Equal(now.Add(3*time.Hour)), true)
		}},
		Case{Name: "Store/Flow/HoldRate", Fn: func(h *H) {
			now := h.Now()
			id := newID()
			if _, err := h.St.Admit(h.Ctx(), store.Admission{Event: "e", Now: now, Runs: []store.NewRun{{ID: id, Process: "p", RateKey: "k"}}}); err != nil {
				h.Fatal(err)
			}
			r := h.Claim(id, "o", time.Minute)
			expect(h, "hold", h.St.HoldRate(h.Ctx(), id, r.Epoch, now.Add(time.Hour)), nil)
			expect(h, "an earlier hold", h.St.HoldRate(h.Ctx(), id, r.Epoch, now.Add(time.Minute)), nil)
			got, err := h.St.RateStates(h.Ctx(), now)
			expect(h, "rate states", err, nil)
			expect(h, "held", got["k"].Equal(now.Add(time.Hour)), true)
			expect(h, "stale epoch fenced", errors.Is(h.St.HoldRate(h.Ctx(), id, r.Epoch-1, now.Add(2*time.Hour)), store.ErrFenced), true)
			expect(h, "unknown run", errors.Is(h.St.HoldRate(h.Ctx(), newID(), 1, now), store.ErrNotFound), true)
		}},
	}
}
