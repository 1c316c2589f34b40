package storetest

import (
	"errors"
	"time"

	"github.com/yella-go/yella/store"
)

// guaranteeCases each pin one guarantee of the README's reliability section
// at the store's level, precisely enough that breaking the code behind it
// makes the case fail (the mutation check, internal/tools/mutation, keeps that
// true). Each is deterministic: no sleeps decide the outcome.
func guaranteeCases() []Case {
	return []Case{
		// Chains: a follow-up is admitted in the same transaction as its
		// parent's completion. When the follow-up's insert fails, the parent's
		// update fails with it: the parent is still running, unchanged, and
		// nothing was admitted.
		Case{Name: "Chain/FollowUpInsertFailureLeavesParent", Fn: func(h *H) {
			parent := h.Claim(h.Admit("p", "ev", nil).ID, "o", time.Hour)
			other := h.Admit("q", "elsewhere", nil) // its id is reused below, so the follow-up's insert must fail
			tl0, _ := h.St.Timeline(h.Ctx(), parent.ID)
			counts0, _ := h.St.Counts(h.Ctx())
			for _, require := range []bool{true, false} {
				fresh := newID()
				u := store.Update{RunID: parent.ID, Epoch: parent.Epoch, Now: h.Now(), To: store.StatusCompleted, Output: []byte(`"out"`), Then: "next",
					Children: &store.Admission{Event: "next", Payload: []byte(`"out"`), ParentID: parent.ID, CorrelationID: parent.CorrelationID, Depth: 1, Now: h.Now(),
						Runs: []store.NewRun{{ID: fresh, Process: "c1"}, {ID: other.ID, Process: "c2"}}},
					RequireChildren: require}
				if !require {
					u.NoChildren = &store.Outcome{To: store.StatusErrored, Error: "not admitted", ErrorCode: "NOT_ADMITTED"}
				}
				_, err := h.St.Update(h.Ctx(), u)
				if err == nil {
					h.Errorf("require=%v: an update whose follow-up could not be inserted succeeded", require)
				}
				got := h.Run(parent.ID)
				expect(h, "parent still running", got.Status, store.StatusRunning)
				expect(h, "parent epoch", got.Epoch, parent.Epoch)
				expect(h, "parent owner", got.LeaseOwner, "o")
				expect(h, "parent output", string(got.Output), "")
				expect(h, "parent follow-up event", got.Then, "")
				_, err = h.St.Run(h.Ctx(), fresh)
				expect(h, "the other follow-up was not admitted", errors.Is(err, store.ErrNotFound), true)
				o := h.Run(other.ID)
				expect(h, "reused run untouched: process", o.Process, "q")
				expect(h, "reused run untouched: parent", o.ParentID, "")
				expect(h, "reused run untouched: status", o.Status, store.StatusIdle)
				chain, _ := h.St.Chain(h.Ctx(), parent.CorrelationID)
				expect(h, "chain holds the parent alone", len(chain), 1)
				tl, _ := h.St.Timeline(h.Ctx(), parent.ID)
				expect(h, "no timeline entry", len(tl), len(tl0))
				counts, _ := h.St.Counts(h.Ctx())
				for _, st := range store.Statuses {
					expect(h, "count of "+string(st), counts[st], counts0[st])
				}
			}
			// The store is still usable: the same completion with insertable
			// follow-ups goes through.
			res, err := h.St.Update(h.Ctx(), store.Update{RunID: parent.ID, Epoch: parent.Epoch, Now: h.Now(), To: store.StatusCompleted, Then: "next", RequireChildren: true,
				Children: &store.Admission{Event: "next", ParentID: parent.ID, CorrelationID: parent.CorrelationID, Depth: 1, Now: h.Now(), Runs: []store.NewRun{{ID: newID(), Process: "c1"}}}})
			expect(h, "valid completion", err, nil)
			expect(h, "child admitted", len(res.Children.Admitted), 1)
			expect(h, "parent completed", h.Run(parent.ID).Status, store.StatusCompleted)
		}},
	}
}
