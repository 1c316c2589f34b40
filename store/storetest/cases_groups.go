package storetest

import (
	"encoding/json"
	"time"

	"github.com/yella-go/yella/store"
)

// admitGrouped admits one run of process p on event e with payload raw,
// group key k and policy g, not before notBefore (zero: at once).
func (h *H) admitGrouped(p, k string, g store.GroupPolicy, raw string, now, notBefore time.Time) store.AdmitResult {
	h.Helper()
	res, err := h.St.Admit(h.Ctx(), store.Admission{Event: "e", Payload: json.RawMessage(raw), Now: now, NotBefore: notBefore,
		Runs: []store.NewRun{{ID: newID(), Process: p, GroupKey: k, Group: g}}})
	if err != nil {
		h.Fatalf("admit: %v", err)
	}
	return res
}

// groupCases: admissions grouped by key (singleton, debounce) and paused
// schedules.
func groupCases() []Case {
	return []Case{
		// Singleton: while the group's run is idle, running or waiting, a new
		// admission stands in for it; once it ended, a new run is admitted.
		{Name: "Store/Groups/Singleton", Fn: func(h *H) {
			now := h.Now()
			first := h.admitGrouped("p", "user-1", store.GroupSingleton, `1`, now, time.Time{})
			expect(h, "first admitted", len(first.Admitted), 1)
			expect(h, "group key stored", h.Run(first.Admitted[0].ID).GroupKey, "user-1")
			id := first.Admitted[0].ID
			check := func(what string, want string) {
				h.Helper()
				res := h.admitGrouped("p", "user-1", store.GroupSingleton, `2`, now, time.Time{})
				got := "admitted"
				if len(res.Grouped) == 1 && len(res.Admitted) == 0 {
					got = res.Grouped[0].ID
				}
				if want == "admitted" && got == "admitted" {
					expect(h, what+": one admitted", len(res.Admitted), 1)
					return
				}
				expect(h, what, got, want)
			}
			check("idle stands in", id)
			expect(h, "payload unchanged", string(h.Run(id).Payload), "1")
			other := h.admitGrouped("p", "user-2", store.GroupSingleton, `1`, now, time.Time{})
			expect(h, "another key admitted", len(other.Admitted), 1)
			otherProc := h.admitGrouped("q", "user-1", store.GroupSingleton, `1`, now, time.Time{})
			expect(h, "another process admitted", len(otherProc.Admitted), 1)
			r := h.Claim(id, "o", time.Minute)
			check("running stands in", id)
			h.mustWait(r, "w", "s", now, time.Time{})
			check("waiting stands in", id)
			h.signal(store.SignalRequest{Key: "s", Now: now})
			r = h.Claim(id, "o", time.Minute)
			if _, err := h.St.Update(h.Ctx(), store.Update{RunID: id, Epoch: r.Epoch, Now: now, Action: store.ActionComplete}); err != nil {
				h.Fatal(err)
			}
			check("completed: a new run", "admitted")
		}},
		// Debounce: a burst updates the one run that has not started; its
		// payload is the latest and its start is the latest's NotBefore.
		{Name: "Store/Groups/Debounce", Fn: func(h *H) {
			now := h.Now()
			first := h.admitGrouped("p", "doc-9", store.GroupDebounce, `{"v":1}`, now, now.Add(5*time.Second))
			id := first.Admitted[0].ID
			second := h.admitGrouped("p", "doc-9", store.GroupDebounce, `{"v":2}`, now.Add(time.Second), now.Add(6*time.Second))
			expect(h, "nothing new admitted", len(second.Admitted), 0)
			if len(second.Grouped) != 1 || second.Grouped[0].ID != id {
				h.Fatalf("grouped %+v, want run %s", second.Grouped, id)
			}
			expect(h, "answered start", second.Grouped[0].RetryAt.Equal(now.Add(6*time.Second)), true)
			r := h.Run(id)
			expect(h, "latest payload", string(r.Payload), `{"v":2}`)
			expect(h, "start moved", r.RetryAt.Equal(now.Add(6*time.Second)), true)
			expect(h, "still idle", r.Status, store.StatusIdle)
			expect(h, "noted", h.lastNote(id), "debounced")
			ps := pendingIDs(h)
			expect(h, "pending at the new start", ps[id].Equal(now.Add(6*time.Second)), true)
			expect(h, "one idle run", h.Count(store.StatusIdle), 1)
			expect(h, "not claimable at the first start", len(h.claimAt(id, now.Add(5*time.Second))), 0)
			rs := h.claimAt(id, now.Add(6*time.Second))
			expect(h, "claimable at the new start", len(rs), 1)
			third := h.admitGrouped("p", "doc-9", store.GroupDebounce, `{"v":3}`, now.Add(7*time.Second), now.Add(12*time.Second))
			expect(h, "started: a new run admitted", len(third.Admitted), 1)
			expect(h, "the started run keeps its payload", string(h.Run(id).Payload), `{"v":2}`)
		}},
		// A retry does not reopen the group: a run that started once is not
		// debounced into.
		{Name: "Store/Groups/DebounceNotAfterStart", Fn: func(h *H) {
			now := h.Now()
			id := h.admitGrouped("p", "k", store.GroupDebounce, `1`, now, time.Time{}).Admitted[0].ID
			r := h.Claim(id, "o", time.Minute)
			if _, err := h.St.Update(h.Ctx(), store.Update{RunID: id, Epoch: r.Epoch, Now: now, Action: store.ActionRetryLater, Error: "e"}); err != nil {
				h.Fatal(err)
			}
			res := h.admitGrouped("p", "k", store.GroupDebounce, `2`, now, time.Time{})
			expect(h, "a new run", len(res.Admitted), 1)
			expect(h, "the retried run keeps its payload", string(h.Run(id).Payload), "1")
		}},
		// In one batch, a later admission sees the group's earlier one.
		{Name: "Store/Groups/InBatch", Fn: func(h *H) {
			now := h.Now()
			var as []store.Admission
			for i := range 3 {
				as = append(as, store.Admission{Event: "e", Payload: json.RawMessage([]byte{byte('1' + i)}), Now: now,
					Runs: []store.NewRun{{ID: newID(), Process: "p", GroupKey: "k", Group: store.GroupDebounce}}})
			}
			res, err := h.St.AdmitBatch(h.Ctx(), as)
			expect(h, "batch", err, nil)
			expect(h, "first admitted", len(res[0].Admitted), 1)
			expect(h, "others grouped", len(res[1].Grouped)+len(res[2].Grouped), 2)
			expect(h, "latest payload", string(h.Run(res[0].Admitted[0].ID).Payload), "3")
		}},
		// Schedules paused and resumed; a pause keeps its first time and
		// survives a reopen (of a durable store).
		{Name: "Store/Groups/PausedSchedules", Fn: func(h *H) {
			now := h.Now().Truncate(time.Millisecond)
			expect(h, "pause", h.St.PauseSchedule(h.Ctx(), "daily", true, now), nil)
			expect(h, "pause again", h.St.PauseSchedule(h.Ctx(), "daily", true, now.Add(time.Hour)), nil)
			expect(h, "pause other", h.St.PauseSchedule(h.Ctx(), "hourly", true, now), nil)
			expect(h, "resume other", h.St.PauseSchedule(h.Ctx(), "hourly", false, now), nil)
			expect(h, "resume unknown", h.St.PauseSchedule(h.Ctx(), "never", false, now), nil)
			if h.f.Durable {
				h.Reopen()
			}
			got, err := h.St.PausedSchedules(h.Ctx())
			expect(h, "paused", err, nil)
			expect(h, "one paused", len(got), 1)
			expect(h, "since its first pause", got["daily"].Equal(now), true)
		}},
	}
}
