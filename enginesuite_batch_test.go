package yella_test

import (
	"encoding/json"
	"sort"
	"sync"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
)

// Cases for EmitBatch: many events in one call and one transaction.
func batchCases() []Case {
	return []Case{
		Case{Name: "Emit/Batch", Note: "new: EmitBatch admits many events in one store transaction, each reported as Emit would report it", Fn: func(h *H) {
			var mu sync.Mutex
			var seen []string
			rec := func(c *yella.Ctx) yella.Result {
				mu.Lock()
				seen = append(seen, c.Process()+":"+string(c.Payload()))
				mu.Unlock()
				return c.OK(nil)
			}
			e := h.Engine(yella.Config{}, Proc("a", "ev", rec), Proc("b", "ev", rec),
				yella.Process{Name: "capped", On: "cap", Concurrency: 1, Overflow: yella.Drop, Run: rec})
			ems, err := e.EmitBatch(h.Ctx(), []yella.BatchEvent{
				{Event: "ev", Payload: 1, IdempotencyKey: "k"},
				{Event: "ev", Payload: 2, IdempotencyKey: "k"}, // the key of event 0
				{Event: "ev", Payload: json.RawMessage(`3`)},
				{Event: "cap", Payload: 4},
				{Event: "cap", Payload: 5}, // event 3's run holds the cap
			})
			Expect(h, "EmitBatch", err, nil)
			Expect(h, "emissions", len(ems), 5)
			if len(ems) != 5 {
				return
			}
			Expect(h, "event 0 admitted", len(ems[0].Runs), 2)
			Expect(h, "event 1 admitted nothing", len(ems[1].Runs), 0)
			Expect(h, "event 1 finds event 0's runs", join(ems[1].Existing), join(ems[0].Runs))
			Expect(h, "event 1 reason", ems[1].Reason, yella.ReasonDuplicate)
			Expect(h, "event 2 admitted", len(ems[2].Runs), 2)
			Expect(h, "event 3 admitted", len(ems[3].Runs), 1)
			Expect(h, "event 4 dropped", join(ems[4].Dropped), "capped")
			Expect(h, "event 4 reason", ems[4].Reason, yella.ReasonAtCapacity)
			Expect(h, "admitted events", len(h.Events(yella.RunAdmitted)), 5)
			Expect(h, "dropped events", len(h.Events(yella.RunDropped)), 1)
			h.Start(e)
			h.Drain(e)
			sort.Strings(seen)
			Expect(h, "handlers ran once per admitted run", join(seen), "a:1,a:3,b:1,b:3,capped:4")
			empty, err := e.EmitBatch(h.Ctx(), nil)
			Expect(h, "empty batch", err, nil)
			Expect(h, "empty batch emissions", len(empty), 0)
		}},
		Case{Name: "Emit/BatchAllOrNothing", Note: "new: one bad event refuses the whole batch, naming its index; nothing is admitted", Fn: func(h *H) {
			e := h.Started(yella.Config{}, Proc("a", "ev", Noop))
			for _, tc := range []struct {
				bad  yella.BatchEvent
				code yella.Code
			}{
				{yella.BatchEvent{Event: "nobody"}, yella.CodeUnknownEvent},
				{yella.BatchEvent{Event: "ev", Payload: func() {}}, yella.CodeInvalidPayload},
				{yella.BatchEvent{Event: "ev", Payload: json.RawMessage(`{"a":`)}, yella.CodeInvalidPayload},
			} {
				ems, err := e.EmitBatch(h.Ctx(), []yella.BatchEvent{{Event: "ev", Payload: 1}, {Event: "ev", IdempotencyKey: "k"}, tc.bad})
				ExpectCode(h, "bad event", err, tc.code)
				if err != nil {
					ExpectContains(h, "error names the event", err.Error(), "event 2")
				}
				Expect(h, "no emissions", len(ems), 0)
			}
			c, err := h.St.Counts(h.Ctx())
			Expect(h, "counts", err, nil)
			Expect(h, "nothing admitted", c[store.StatusIdle]+c[store.StatusRunning]+c[store.StatusCompleted], int64(0))
			Expect(h, "no admitted event", len(h.Events(yella.RunAdmitted)), 0)
			em := h.Emit(e, "ev", nil, yella.IdempotencyKey("k"))
			Expect(h, "the failed batch's key is free", len(em.Runs), 1)
			h.Drain(e)
			h.stopAll()
			_, err = e.EmitBatch(h.Ctx(), []yella.BatchEvent{{Event: "ev"}})
			ExpectCode(h, "after Stop", err, yella.CodeStopped)
		}},
	}
}
