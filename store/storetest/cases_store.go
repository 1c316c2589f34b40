package storetest

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"time"

	"github.com/yella-go/yella/store"
)

// storeEffectCases: the effect records: absent, started, completed,
// failed, cleared, scoped to a run, restarted.
func storeEffectCases() []Case {
	return []Case{
		Case{Name: "Store/Effect/UnknownIsAbsent", Spec: []int{11, 18}, Fn: func(h *H) {
			r := h.Admit("p", "e", nil)
			effs, err := h.St.Effects(h.Ctx(), r.ID)
			expect(h, "err", err, nil)
			expect(h, "effects", len(effs), 0)
		}},
		Case{Name: "Store/Effect/StartedRecord", Spec: []int{12, 19}, Fn: func(h *H) {
			r := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			if err := h.St.StartEffect(h.Ctx(), r.ID, r.Epoch, "k", h.Now()); err != nil {
				h.Fatal(err)
			}
			e := effect(h, r.ID, "k")
			expect(h, "status", e.Status, store.EffectStarted)
			expect(h, "output", len(e.Output), 0)
			expect(h, "error", e.Error, "")
			expect(h, "completed at zero", e.CompletedAt.IsZero(), true)
			expect(h, "started at set", e.StartedAt.IsZero(), false)
			expect(h, "epoch", e.Epoch, r.Epoch)
		}},
		Case{Name: "Store/Effect/Completed", Spec: []int{13, 20}, Fn: func(h *H) {
			r := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			h.St.StartEffect(h.Ctx(), r.ID, r.Epoch, "k", h.Now())
			err := h.St.FinishEffect(h.Ctx(), r.ID, r.Epoch, "k", store.EffectCompleted, json.RawMessage(`{"v":1}`), "", h.Now())
			expect(h, "err", err, nil)
			e := effect(h, r.ID, "k")
			expect(h, "status", e.Status, store.EffectCompleted)
			expect(h, "output", string(e.Output), `{"v":1}`)
			expect(h, "completed at set", e.CompletedAt.IsZero(), false)
		}},
		Case{Name: "Store/Effect/Failed", Spec: []int{14, 21}, Fn: func(h *H) {
			r := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			h.St.StartEffect(h.Ctx(), r.ID, r.Epoch, "k", h.Now())
			err := h.St.FinishEffect(h.Ctx(), r.ID, r.Epoch, "k", store.EffectFailed, nil, "boom", h.Now())
			expect(h, "err", err, nil)
			e := effect(h, r.ID, "k")
			expect(h, "status", e.Status, store.EffectFailed)
			expect(h, "error", e.Error, "boom")
			expect(h, "completed at set", e.CompletedAt.IsZero(), false)
		}},
		Case{Name: "Store/Effect/ClearStartedOnly", Spec: []int{15, 22}, Fn: func(h *H) {
			a := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			b := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			for _, k := range []string{"s1", "s2", "done"} {
				h.St.StartEffect(h.Ctx(), a.ID, a.Epoch, k, h.Now())
			}
			h.St.FinishEffect(h.Ctx(), a.ID, a.Epoch, "done", store.EffectCompleted, json.RawMessage(`1`), "", h.Now())
			h.St.StartEffect(h.Ctx(), b.ID, b.Epoch, "s1", h.Now())
			_, err := h.St.Update(h.Ctx(), store.Update{RunID: a.ID, Epoch: a.Epoch, Now: h.Now(), To: store.StatusErrored, Error: "x"})
			expect(h, "err", err, nil)
			_, err = h.St.Update(h.Ctx(), store.Update{RunID: a.ID, Now: h.Now(), From: []store.Status{store.StatusErrored}, To: store.StatusIdle, ClearStartedEffects: true})
			expect(h, "err", err, nil)
			effs, _ := h.St.Effects(h.Ctx(), a.ID)
			expect(h, "effects of a", len(effs), 1)
			if len(effs) == 1 {
				expect(h, "kept", effs[0].Key, "done")
			}
			effs, _ = h.St.Effects(h.Ctx(), b.ID)
			expect(h, "effects of b", len(effs), 1)
		}},
		Case{Name: "Store/Effect/ScopedPerRun", Spec: []int{16, 23}, Fn: func(h *H) {
			a := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			b := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			h.St.StartEffect(h.Ctx(), a.ID, a.Epoch, "k", h.Now())
			h.St.FinishEffect(h.Ctx(), a.ID, a.Epoch, "k", store.EffectCompleted, json.RawMessage(`"a"`), "", h.Now())
			h.St.StartEffect(h.Ctx(), b.ID, b.Epoch, "k", h.Now())
			expect(h, "a", effect(h, a.ID, "k").Status, store.EffectCompleted)
			expect(h, "b", effect(h, b.ID, "k").Status, store.EffectStarted)
		}},
		Case{Name: "Store/Effect/RestartOverwritesStarted", Spec: []int{17, 24}, Fn: func(h *H) {
			r := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			t0 := h.Now()
			h.St.StartEffect(h.Ctx(), r.ID, r.Epoch, "k", t0)
			// The attempt is abandoned and a new one starts the effect again.
			h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: t0, To: store.StatusIdle})
			r2 := h.Claim(r.ID, "o2", time.Minute)
			t1 := t0.Add(time.Second)
			expect(h, "restart", h.St.StartEffect(h.Ctx(), r2.ID, r2.Epoch, "k", t1), nil)
			e := effect(h, r.ID, "k")
			expect(h, "status", e.Status, store.EffectStarted)
			expect(h, "epoch", e.Epoch, r2.Epoch)
			expect(h, "started at not earlier", !e.StartedAt.Before(t1), true)
			// The old attempt's late finish no longer applies.
			err := h.St.FinishEffect(h.Ctx(), r.ID, r.Epoch, "k", store.EffectCompleted, json.RawMessage(`1`), "", t1)
			expect(h, "stale finish fenced", errors.Is(err, store.ErrFenced), true)
		}},
	}
}

// storeEffectGuardCases: a completed effect is never started again, and
// only the run's live epoch starts one.
func storeEffectGuardCases() []Case {
	return []Case{
		Case{Name: "Store/Effect/CompletedNeverRestarted", Spec: []int{284}, Fn: func(h *H) {
			r := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			h.St.StartEffect(h.Ctx(), r.ID, r.Epoch, "k", h.Now())
			h.St.FinishEffect(h.Ctx(), r.ID, r.Epoch, "k", store.EffectCompleted, json.RawMessage(`1`), "", h.Now())
			err := h.St.StartEffect(h.Ctx(), r.ID, r.Epoch, "k", h.Now())
			expect(h, "fenced", errors.Is(err, store.ErrFenced), true)
			expect(h, "still completed", effect(h, r.ID, "k").Status, store.EffectCompleted)
		}},
		Case{Name: "Store/Effect/StartNeedsLiveEpoch", Spec: []int{276}, Fn: func(h *H) {
			r := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			err := h.St.StartEffect(h.Ctx(), r.ID, r.Epoch+1, "k", h.Now())
			expect(h, "wrong epoch fenced", errors.Is(err, store.ErrFenced), true)
			idle := h.Admit("p", "e", nil)
			err = h.St.StartEffect(h.Ctx(), idle.ID, 0, "k", h.Now())
			expect(h, "idle run fenced", errors.Is(err, store.ErrFenced), true)
		}},
	}
}

// storeAdmitCases: admission and the runs it creates.
func storeAdmitCases() []Case {
	return []Case{
		Case{Name: "Store/Admit/IdleRunFields", Spec: []int{26, 67, 51, 99}, Fn: func(h *H) {
			r := h.Admit("p", "ev", map[string]int{"a": 1})
			expect(h, "status", r.Status, store.StatusIdle)
			expect(h, "state", r.State(), store.StateIdle)
			expect(h, "process", r.Process, "p")
			expect(h, "event", r.Event, "ev")
			expect(h, "payload", string(r.Payload), `{"a":1}`)
			expect(h, "output", len(r.Output), 0)
			expect(h, "parent", r.ParentID, "")
			expect(h, "completed at", r.CompletedAt.IsZero(), true)
			expect(h, "created at", r.CreatedAt.IsZero(), false)
			expect(h, "lease owner", r.LeaseOwner, "")
			expect(h, "lease expiry", r.LeaseExpires.IsZero(), true)
			expect(h, "attempts", r.Attempts, 0)
			expect(h, "epoch", r.Epoch, int64(0))
		}},
		Case{Name: "Store/Admit/FirstTimelineEntry", Spec: []int{27, 68}, Fn: func(h *H) {
			r := h.Admit("p", "ev", 1)
			tl, err := h.St.Timeline(h.Ctx(), r.ID)
			expect(h, "err", err, nil)
			expect(h, "entries", len(tl), 1)
			if len(tl) == 1 {
				expect(h, "status", tl[0].Status, store.StatusIdle)
				expect(h, "n", tl[0].N, 1)
				expect(h, "note", tl[0].Note, "admitted")
			}
		}},
		Case{Name: "Store/Admit/IDsAndCorrelation", Spec: []int{28, 69}, Fn: func(h *H) {
			r := h.Admit("p", "ev", nil)
			expect(h, "id length", len(r.ID), 36)
			expect(h, "correlation", r.CorrelationID, r.ID)
		}},
		Case{Name: "Store/Admit/ChildGetsCorrelationContextParent", Spec: []int{29, 70, 30, 71}, Fn: func(h *H) {
			p := h.Admit("p", "ev", nil)
			res, err := h.St.Admit(h.Ctx(), store.Admission{Event: "next", Runs: []store.NewRun{{ID: newID(), Process: "q"}},
				ParentID: p.ID, CorrelationID: p.ID, Depth: 1, Context: json.RawMessage(`{"k":"v"}`), Now: h.Now()})
			expect(h, "err", err, nil)
			c := res.Admitted[0]
			expect(h, "correlation", c.CorrelationID, p.ID)
			expect(h, "parent", c.ParentID, p.ID)
			expect(h, "context", string(c.Context), `{"k":"v"}`)
			expect(h, "depth", c.Depth, 1)
			chain, _ := h.St.Chain(h.Ctx(), p.ID)
			expect(h, "chain", len(chain), 2)
			_, err = h.St.Admit(h.Ctx(), store.Admission{Event: "next", Runs: []store.NewRun{{ID: newID(), Process: "q"}}, ParentID: newID(), CorrelationID: p.ID, Now: h.Now()})
			expect(h, "unknown parent", errors.Is(err, store.ErrNotFound), true)
			// Claimed, a child keeps its chain: claimed by id alone, and a
			// second one, admitted after a claim, with the seq the store gave
			// it (ClaimRequest.Seqs), which a store may find it by.
			claimed := func(c store.Run, seqs []int64) {
				h.Helper()
				rs, err := h.St.Claim(h.Ctx(), store.ClaimRequest{IDs: []string{c.ID}, Seqs: seqs, Owner: "o", Now: h.Now(), LeaseUntil: h.Now().Add(time.Minute)})
				expect(h, "claim err", err, nil)
				expect(h, "claimed", len(rs), 1)
				if len(rs) == 1 {
					expect(h, "claimed correlation", rs[0].CorrelationID, p.ID)
					expect(h, "claimed parent", rs[0].ParentID, p.ID)
					expect(h, "claimed depth", rs[0].Depth, 1)
					expect(h, "claimed context", string(rs[0].Context), `{"k":"v"}`)
				}
			}
			claimed(c, nil)
			res, err = h.St.Admit(h.Ctx(), store.Admission{Event: "next", Runs: []store.NewRun{{ID: newID(), Process: "q"}},
				ParentID: p.ID, CorrelationID: p.ID, Depth: 1, Context: json.RawMessage(`{"k":"v"}`), Now: h.Now()})
			expect(h, "err", err, nil)
			claimed(res.Admitted[0], []int64{res.Admitted[0].Seq})
		}},
	}
}

// admitAsked admits n runs of one process and returns their ids, and the
// ids to ask for: each run's id beside an id no run has.
func (h *H) admitAsked(n int) (ids, asked []string) {
	for i := range n {
		r := h.Admit("p", "ev", map[string]int{"i": i})
		ids = append(ids, r.ID)
		asked = append(asked, r.ID, newID())
	}
	return ids, asked
}

// claimTo claims the run id and, unless to is running, ends its attempt
// in to.
func (h *H) claimTo(id string, to store.Status) {
	r := h.Claim(id, "o", time.Minute)
	if to == store.StatusRunning {
		return
	}
	if _, err := h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: h.Now(), To: to, Output: json.RawMessage(`7`)}); err != nil {
		h.Fatal(err)
	}
}

// storeRunCases: runs returned as copies, transitions and the run's
// context.
func storeRunCases() []Case {
	return []Case{
		Case{Name: "Store/Run/DetachedCopies", Spec: []int{31, 46}, Fn: func(h *H) {
			r := h.Admit("p", "ev", map[string]any{"n": map[string]int{"x": 1}})
			r.Payload[2] = 'X'
			r.Status = store.StatusCompleted
			again := h.Run(r.ID)
			expect(h, "payload", string(again.Payload), `{"n":{"x":1}}`)
			expect(h, "status", again.Status, store.StatusIdle)
			again.Payload[0] = '['
			expect(h, "payload after 2nd mutation", string(h.Run(r.ID).Payload), `{"n":{"x":1}}`)
		}},
		Case{Name: "Store/RunsByID", Fn: func(h *H) {
			// Many runs in one read, each as Run returns it, each once
			// however often its id is named; unknown ids are left out.
			ids, asked := h.admitAsked(1200)
			h.claimTo(ids[7], store.StatusCompleted)
			asked = append(asked, ids[0], ids[1199], ids[7])
			got, err := h.St.RunsByID(h.Ctx(), asked)
			expect(h, "err", err, nil)
			expect(h, "runs", len(got), len(ids))
			seen := map[string]bool{}
			for _, r := range got {
				if seen[r.ID] {
					h.Fatalf("run %s returned twice", r.ID)
				}
				seen[r.ID] = true
				want := h.Run(r.ID)
				if !reflect.DeepEqual(r, want) {
					h.Fatalf("RunsByID gave\n%+v\nRun gives\n%+v", r, want)
				}
			}
			for _, id := range ids {
				expect(h, "found "+id, seen[id], true)
			}
			none, err := h.St.RunsByID(h.Ctx(), []string{newID()})
			expect(h, "unknown err", err, nil)
			expect(h, "unknown runs", len(none), 0)
			empty, err := h.St.RunsByID(h.Ctx(), nil)
			expect(h, "empty err", err, nil)
			expect(h, "empty runs", len(empty), 0)
		}},
		Case{Name: "Store/CountEnded", Fn: func(h *H) {
			// How many of many runs exist and are final, each counted
			// once however often its id is named; unknown ids and ids
			// that are not text are not counted.
			ids, asked := h.admitAsked(1200)
			for i, to := range map[int]store.Status{7: store.StatusCompleted, 8: store.StatusErrored, 9: store.StatusRunning} {
				h.claimTo(ids[i], to)
			}
			asked = append(asked, ids[0], ids[1199], ids[7], ids[8], "a\x00\xff")
			exist, final, err := h.St.CountEnded(h.Ctx(), asked)
			expect(h, "err", err, nil)
			expect(h, "exist", exist, len(ids))
			expect(h, "final", final, 2)
			exist, final, err = h.St.CountEnded(h.Ctx(), []string{ids[8], ids[9], newID()})
			expect(h, "few err", err, nil)
			expect(h, "few exist", exist, 2)
			expect(h, "few final", final, 1)
			exist, final, err = h.St.CountEnded(h.Ctx(), nil)
			expect(h, "empty err", err, nil)
			expect(h, "empty", [2]int{exist, final}, [2]int{0, 0})
		}},
		Case{Name: "Store/Update/TransitionAppendsTimeline", Spec: []int{33, 72, 37, 76}, Fn: func(h *H) {
			r := h.Claim(h.Admit("p", "ev", nil).ID, "o", time.Minute)
			res, err := h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: h.Now(), To: store.StatusErrored, Error: "bad", ErrorCode: "X", Note: "failed"})
			expect(h, "err", err, nil)
			expect(h, "status", res.Run.Status, store.StatusErrored)
			tl, _ := h.St.Timeline(h.Ctx(), r.ID)
			expect(h, "entries", len(tl), 3)
			last := tl[len(tl)-1]
			expect(h, "last status", last.Status, store.StatusErrored)
			expect(h, "last error", last.Error, "bad")
			expect(h, "last code", last.Code, "X")
			expect(h, "last note", last.Note, "failed")
			expect(h, "claim entry", tl[1].Status, store.StatusRunning)
		}},
		Case{Name: "Store/Update/TerminalSetsCompletedAt", Spec: []int{34, 73, 35, 74, 38, 77}, Fn: func(h *H) {
			for _, to := range []store.Status{store.StatusCompleted, store.StatusErrored} {
				r := h.Claim(h.Admit("p", "ev", nil).ID, "o", time.Minute)
				res, err := h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: h.Now(), To: to, Output: json.RawMessage(`{"ok":true}`)})
				expect(h, "err", err, nil)
				expect(h, string(to)+" completed at", res.Run.CompletedAt.IsZero(), false)
				if to == store.StatusCompleted {
					expect(h, "output", string(h.Run(r.ID).Output), `{"ok":true}`)
				}
			}
		}},
		Case{Name: "Store/Update/UnknownRun", Spec: []int{36, 75, 39, 78}, Fn: func(h *H) {
			_, err := h.St.Update(h.Ctx(), store.Update{RunID: newID(), Now: h.Now(), To: store.StatusErrored})
			expect(h, "not found", errors.Is(err, store.ErrNotFound), true)
			_, err = h.St.Run(h.Ctx(), newID())
			expect(h, "run not found", errors.Is(err, store.ErrNotFound), true)
		}},
		Case{Name: "Store/SetContext", Spec: []int{40, 79, 41, 80}, Fn: func(h *H) {
			r := h.Claim(h.Admit("p", "ev", nil).ID, "o", time.Minute)
			expect(h, "set", h.St.SetContext(h.Ctx(), r.ID, r.Epoch, json.RawMessage(`{"a":1}`)), nil)
			expect(h, "context", string(h.Run(r.ID).Context), `{"a":1}`)
			err := h.St.SetContext(h.Ctx(), newID(), 1, json.RawMessage(`{}`))
			expect(h, "unknown", errors.Is(err, store.ErrNotFound), true)
			err = h.St.SetContext(h.Ctx(), r.ID, r.Epoch+1, json.RawMessage(`{}`))
			expect(h, "stale epoch", errors.Is(err, store.ErrFenced), true)
		}},
	}
}

// storeLeaseCases: claims, leases, heartbeats and reclaims.
func storeLeaseCases() []Case {
	return []Case{
		Case{Name: "Store/Claim/MarksRunning", Spec: []int{42, 81, 84, 52, 100, 44, 83}, Fn: func(h *H) {
			var ids []string
			for range 10 {
				ids = append(ids, h.Admit("p", "ev", nil).ID)
			}
			now := h.Now()
			rs, err := h.St.Claim(h.Ctx(), store.ClaimRequest{IDs: ids[:3], Owner: "me", Now: now, LeaseUntil: now.Add(30 * time.Second)})
			expect(h, "err", err, nil)
			expect(h, "claimed", len(rs), 3)
			for _, r := range rs {
				expect(h, "returned status", r.Status, store.StatusRunning)
				again := h.Run(r.ID)
				expect(h, "stored status", again.Status, store.StatusRunning)
				expect(h, "owner", again.LeaseOwner, "me")
				expect(h, "expiry", again.LeaseExpires.Equal(now.Add(30*time.Second)), true)
				expect(h, "attempts", again.Attempts, 1)
				expect(h, "epoch", again.Epoch, int64(1))
				expect(h, "started at", again.StartedAt.Equal(now), true)
			}
			c, _ := h.St.Counts(h.Ctx())
			expect(h, "idle left", c[store.StatusIdle], int64(7))
		}},
		Case{Name: "Store/Claim/NothingClaimable", Spec: []int{43, 82, 85}, Fn: func(h *H) {
			now := h.Now()
			rs, err := h.St.Claim(h.Ctx(), store.ClaimRequest{IDs: []string{newID()}, Owner: "me", Now: now, LeaseUntil: now.Add(time.Minute)})
			expect(h, "err", err, nil)
			expect(h, "unknown", len(rs), 0)
			r := h.Claim(h.Admit("p", "ev", nil).ID, "me", time.Minute)
			rs, _ = h.St.Claim(h.Ctx(), store.ClaimRequest{IDs: []string{r.ID}, Owner: "other", Now: now, LeaseUntil: now.Add(time.Minute)})
			expect(h, "double claim", len(rs), 0)
			// An idle run whose retry is not due is not claimable.
			h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: now, To: store.StatusIdle, RetryAt: now.Add(time.Hour)})
			rs, _ = h.St.Claim(h.Ctx(), store.ClaimRequest{IDs: []string{r.ID}, Owner: "me", Now: now, LeaseUntil: now.Add(time.Minute)})
			expect(h, "not due", len(rs), 0)
			rs, _ = h.St.Claim(h.Ctx(), store.ClaimRequest{IDs: []string{r.ID}, Owner: "me", Now: now.Add(time.Hour), LeaseUntil: now.Add(2 * time.Hour)})
			expect(h, "due", len(rs), 1)
		}},
		Case{Name: "Store/Lease/TransitionsClearLease", Spec: []int{54, 102, 62, 111, 257}, Fn: func(h *H) {
			r := h.Claim(h.Admit("p", "ev", nil).ID, "me", time.Minute)
			res, _ := h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: h.Now(), To: store.StatusCompleted})
			expect(h, "owner", res.Run.LeaseOwner, "")
			expect(h, "expiry", res.Run.LeaseExpires.IsZero(), true)
			expect(h, "stored owner", h.Run(r.ID).LeaseOwner, "")
		}},
		Case{Name: "Store/Lease/HeartbeatOwner", Spec: []int{55, 104, 56, 105, 57, 106}, Fn: func(h *H) {
			r := h.Claim(h.Admit("p", "ev", nil).ID, "me", time.Minute)
			idle := h.Admit("p", "ev", nil)
			until := h.Now().Add(time.Hour)
			ls, err := h.St.Heartbeat(h.Ctx(), "me", h.Now(), until)
			expect(h, "err", err, nil)
			expect(h, "leases", len(ls), 1)
			if len(ls) == 1 {
				expect(h, "lease", ls[0], store.Lease{RunID: r.ID, Epoch: r.Epoch})
			}
			expect(h, "extended", h.Run(r.ID).LeaseExpires.Equal(until), true)
			ls, _ = h.St.Heartbeat(h.Ctx(), "other", h.Now(), until.Add(time.Hour))
			expect(h, "other owner", len(ls), 0)
			expect(h, "unchanged", h.Run(r.ID).LeaseExpires.Equal(until), true)
			expect(h, "idle untouched", h.Run(idle.ID).LeaseExpires.IsZero(), true)
		}},
		Case{Name: "Store/Lease/AbandonedAndReclaim", Spec: []int{58, 107, 59, 108, 60, 109, 61, 110, 112}, Fn: func(h *H) {
			t0 := h.Now()
			r := h.Claim(h.Admit("p", "ev", nil).ID, "dead", 30*time.Second)
			fresh := h.Claim(h.Admit("p", "ev", nil).ID, "alive", time.Hour)
			h.Admit("p", "ev", nil) // idle runs are never abandoned
			ab, err := h.St.Abandoned(h.Ctx(), "alive", t0.Add(10*time.Second), 10)
			expect(h, "err", err, nil)
			for _, a := range ab {
				if a.ID == r.ID && a.LeaseOwner != "alive" {
					// A store that knows dead owners may report it early; nothing else.
					continue
				}
				h.Errorf("unexpected abandoned run %s (owner %s)", a.ID, a.LeaseOwner)
			}
			later := t0.Add(31 * time.Second)
			ab, _ = h.St.Abandoned(h.Ctx(), "alive", later, 10)
			expect(h, "abandoned", len(ab), 1)
			// A reclaim of a lease that is not expired is refused.
			_, err = h.St.Update(h.Ctx(), store.Update{RunID: fresh.ID, Epoch: fresh.Epoch, Reclaim: true, Now: later, To: store.StatusIdle})
			expect(h, "live lease fenced", errors.Is(err, store.ErrFenced), true)
			res, err := h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Reclaim: true, Now: later, To: store.StatusIdle, Error: "lease expired", Note: "lease expired"})
			expect(h, "reclaim", err, nil)
			expect(h, "status", res.Run.Status, store.StatusIdle)
			expect(h, "attempts kept", res.Run.Attempts, 1)
			expect(h, "owner cleared", res.Run.LeaseOwner, "")
			tl, _ := h.St.Timeline(h.Ctx(), r.ID)
			expect(h, "timeline error", tl[len(tl)-1].Error, "lease expired")
			again := h.Claim(r.ID, "alive", time.Minute)
			expect(h, "reclaimed by other", again.LeaseOwner, "alive")
			expect(h, "epoch bumped", again.Epoch, r.Epoch+1)
			expect(h, "attempts", again.Attempts, 2)
		}},
	}
}

// storeFenceCases: the epoch fence and the transitions the table allows or
// refuses.
func storeFenceCases() []Case {
	return []Case{
		Case{Name: "Store/Update/EpochFencesStaleOwner", Spec: []int{131, 132}, Fn: func(h *H) {
			r := h.Claim(h.Admit("p", "ev", nil).ID, "a", time.Second)
			h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Reclaim: true, Now: h.Now().Add(time.Hour), To: store.StatusIdle})
			h.Claim(r.ID, "b", time.Hour)
			_, err := h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: h.Now(), To: store.StatusCompleted})
			expect(h, "stale completion fenced", errors.Is(err, store.ErrFenced), true)
			expect(h, "still running for b", h.Run(r.ID).LeaseOwner, "b")
		}},
		Case{Name: "Store/Transitions/Allowed", Spec: []int{140}, Fn: func(h *H) {
			// idle → running (claim), running → completed, running → errored,
			// idle → cancelled (cancel), running → idle (retry), errored → idle (repair).
			r := h.Claim(h.Admit("p", "ev", nil).ID, "o", time.Minute)
			_, err := h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: h.Now(), To: store.StatusCompleted})
			expect(h, "running→completed", err, nil)
			r = h.Claim(h.Admit("p", "ev", nil).ID, "o", time.Minute)
			_, err = h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: h.Now(), To: store.StatusIdle})
			expect(h, "running→idle", err, nil)
			r = h.Claim(r.ID, "o", time.Minute)
			_, err = h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: h.Now(), To: store.StatusErrored})
			expect(h, "running→errored", err, nil)
			_, err = h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Now: h.Now(), From: []store.Status{store.StatusErrored}, To: store.StatusIdle})
			expect(h, "errored→idle", err, nil)
			_, err = h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Now: h.Now(), From: []store.Status{store.StatusIdle, store.StatusRunning}, To: store.StatusCancelled})
			expect(h, "idle→cancelled", err, nil)
		}},
		Case{Name: "Store/Transitions/Refused", Spec: []int{141}, Fn: func(h *H) {
			idle := h.Admit("p", "ev", nil)
			// idle → completed: only a running attempt completes a run.
			_, err := h.St.Update(h.Ctx(), store.Update{RunID: idle.ID, Epoch: 1, Now: h.Now(), To: store.StatusCompleted})
			expect(h, "idle→completed", errors.Is(err, store.ErrFenced), true)
			done := h.Claim(h.Admit("p", "ev", nil).ID, "o", time.Minute)
			h.St.Update(h.Ctx(), store.Update{RunID: done.ID, Epoch: done.Epoch, Now: h.Now(), To: store.StatusCompleted})
			rs, _ := h.St.Claim(h.Ctx(), store.ClaimRequest{IDs: []string{done.ID}, Owner: "o", Now: h.Now(), LeaseUntil: h.Now().Add(time.Minute)})
			expect(h, "completed→running", len(rs), 0)
			_, err = h.St.Update(h.Ctx(), store.Update{RunID: done.ID, Now: h.Now(), From: []store.Status{store.StatusIdle, store.StatusRunning}, To: store.StatusCancelled})
			var se *store.StatusError
			expect(h, "completed→cancelled", errors.As(err, &se) && se.Status == store.StatusCompleted, true)
			failed := h.Claim(h.Admit("p", "ev", nil).ID, "o", time.Minute)
			h.St.Update(h.Ctx(), store.Update{RunID: failed.ID, Epoch: failed.Epoch, Now: h.Now(), To: store.StatusErrored})
			rs, _ = h.St.Claim(h.Ctx(), store.ClaimRequest{IDs: []string{failed.ID}, Owner: "o", Now: h.Now(), LeaseUntil: h.Now().Add(time.Minute)})
			expect(h, "errored→running", len(rs), 0)
			_, err = h.St.Update(h.Ctx(), store.Update{RunID: failed.ID, Epoch: failed.Epoch, Now: h.Now(), To: store.StatusCompleted})
			expect(h, "errored→completed", errors.Is(err, store.ErrFenced), true)
			expect(h, "unchanged", h.Run(failed.ID).Status, store.StatusErrored)
		}},
	}
}

// storeListCases: listings: filters, pagination and order.
func storeListCases() []Case {
	return []Case{
		Case{Name: "Store/Runs/Filters", Spec: []int{47, 86, 48, 87, 50, 88}, Fn: func(h *H) {
			a := h.Admit("a", "e1", nil)
			h.Admit("b", "e2", nil)
			c := h.Claim(h.Admit("a", "e2", nil).ID, "o", time.Minute)
			get := func(f store.RunFilter) int {
				f.Limit = 100
				rs, err := h.St.Runs(h.Ctx(), f)
				expect(h, "err", err, nil)
				n, _ := h.St.CountRuns(h.Ctx(), f)
				expect(h, "count matches list", int(n), len(rs))
				return len(rs)
			}
			expect(h, "all", get(store.RunFilter{}), 3)
			expect(h, "process a", get(store.RunFilter{Process: "a"}), 2)
			expect(h, "event e2", get(store.RunFilter{Event: "e2"}), 2)
			expect(h, "running", get(store.RunFilter{Statuses: []store.Status{store.StatusRunning}}), 1)
			expect(h, "idle", get(store.RunFilter{Statuses: store.StatusesOf(store.StateIdle)}), 2)
			expect(h, "correlation", get(store.RunFilter{CorrelationID: a.ID}), 1)
			expect(h, "process+status", get(store.RunFilter{Process: "a", Statuses: []store.Status{store.StatusRunning}}), 1)
			_ = c
		}},
		Case{Name: "Store/Runs/StatusPaginationAndOrder", Spec: []int{49, 89}, Fn: func(h *H) {
			var ids []string
			for range 5 {
				r := h.Claim(h.Admit("p", "ev", nil).ID, "o", time.Minute)
				ids = append(ids, r.ID)
				h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: h.Now(), To: store.StatusCompleted})
			}
			d := h.Claim(h.Admit("p", "gate", nil).ID, "o", time.Minute)
			h.St.Update(h.Ctx(), store.Update{RunID: d.ID, Epoch: d.Epoch, Now: h.Now(), To: store.StatusDeferred, Then: "x"})
			// A deferred child.
			res, _ := h.St.Admit(h.Ctx(), store.Admission{Event: "c", Runs: []store.NewRun{{ID: newID(), Process: "p"}}, ParentID: ids[0], CorrelationID: ids[0], Depth: 1, Now: h.Now()})
			ch := h.Claim(res.Admitted[0].ID, "o", time.Minute)
			h.St.Update(h.Ctx(), store.Update{RunID: ch.ID, Epoch: ch.Epoch, Now: h.Now(), To: store.StatusDeferred, Then: "y"})
			list := func(f store.RunFilter) []store.Run {
				rs, err := h.St.Runs(h.Ctx(), f)
				expect(h, "err", err, nil)
				return rs
			}
			expect(h, "completed", len(list(store.RunFilter{Statuses: []store.Status{store.StatusCompleted}, Limit: 100})), 5)
			expect(h, "deferred", len(list(store.RunFilter{Statuses: []store.Status{store.StatusDeferred}, Limit: 100})), 2)
			expect(h, "deferred roots", len(list(store.RunFilter{Statuses: []store.Status{store.StatusDeferred}, RootOnly: true, Limit: 100})), 1)
			expect(h, "completed state", len(list(store.RunFilter{Statuses: store.StatusesOf(store.StateCompleted), Limit: 100})), 7)
			asc := list(store.RunFilter{Statuses: []store.Status{store.StatusCompleted}, Order: store.OldestFirst, Limit: 2})
			expect(h, "asc first", asc[0].ID, ids[0])
			expect(h, "asc second", asc[1].ID, ids[1])
			next := list(store.RunFilter{Statuses: []store.Status{store.StatusCompleted}, Order: store.OldestFirst, Limit: 2, After: asc[1].Seq})
			expect(h, "asc page 2", next[0].ID, ids[2])
			desc := list(store.RunFilter{Statuses: []store.Status{store.StatusCompleted}, Limit: 2})
			expect(h, "desc first", desc[0].ID, ids[4])
			desc2 := list(store.RunFilter{Statuses: []store.Status{store.StatusCompleted}, Limit: 10, After: desc[1].Seq})
			expect(h, "desc page 2", len(desc2), 3)
			expect(h, "desc page 2 first", desc2[0].ID, ids[2])
			n, _ := h.St.CountRuns(h.Ctx(), store.RunFilter{Statuses: []store.Status{store.StatusCompleted}})
			expect(h, "total", n, int64(5))
		}},
	}
}

// storeChainCases: chains and pruning them.
func storeChainCases() []Case {
	return []Case{
		Case{Name: "Store/Chain/BreadthFirst", Spec: []int{63, 90, 64, 91}, Fn: func(h *H) {
			root := h.Admit("p", "ev", nil)
			kid := func(parent store.Run, depth int) store.Run {
				res, err := h.St.Admit(h.Ctx(), store.Admission{Event: "c", Runs: []store.NewRun{{ID: newID(), Process: "q"}}, ParentID: parent.ID, CorrelationID: root.ID, Depth: depth, Now: h.Now()})
				if err != nil {
					h.Fatal(err)
				}
				return res.Admitted[0]
			}
			c1 := kid(root, 1)
			g := kid(c1, 2)
			c2 := kid(root, 1)
			chain, err := h.St.Chain(h.Ctx(), root.ID)
			expect(h, "err", err, nil)
			var got []string
			for _, r := range chain {
				got = append(got, r.ID)
			}
			want := []string{root.ID, c1.ID, c2.ID, g.ID}
			expect(h, "order", join(got), join(want))
			none, err := h.St.Chain(h.Ctx(), newID())
			expect(h, "unknown err", err, nil)
			expect(h, "unknown", len(none), 0)
		}},
		Case{Name: "Store/Prune/LeafFirstKeepsDeferred", Spec: []int{65, 92, 66, 93, 290}, Fn: func(h *H) {
			t0 := h.Now()
			done := func(r store.Run, to store.Status) {
				r = h.Claim(r.ID, "o", time.Minute)
				h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: t0, To: to, Then: "x"})
			}
			parent := h.Admit("p", "ev", nil)
			done(parent, store.StatusCompleted)
			res, _ := h.St.Admit(h.Ctx(), store.Admission{Event: "c", Runs: []store.NewRun{{ID: newID(), Process: "q"}}, ParentID: parent.ID, CorrelationID: parent.ID, Depth: 1, Now: t0})
			child := res.Admitted[0]
			cr := h.Claim(child.ID, "o", time.Minute)
			h.St.StartEffect(h.Ctx(), cr.ID, cr.Epoch, "k", t0)
			h.St.FinishEffect(h.Ctx(), cr.ID, cr.Epoch, "k", store.EffectCompleted, json.RawMessage(`1`), "", t0)
			h.St.Update(h.Ctx(), store.Update{RunID: cr.ID, Epoch: cr.Epoch, Now: t0, To: store.StatusCompleted})
			deferred := h.Admit("p", "gate", nil)
			done(deferred, store.StatusDeferred)
			failed := h.Admit("p", "ev", nil)
			done(failed, store.StatusErrored)
			req := store.PruneRequest{CompletedBefore: t0.Add(time.Second), Limit: 100}
			n, err := h.St.Prune(h.Ctx(), req)
			expect(h, "err", err, nil)
			expect(h, "first sweep", n, 1)
			_, err = h.St.Run(h.Ctx(), child.ID)
			expect(h, "child pruned", errors.Is(err, store.ErrNotFound), true)
			effs, _ := h.St.Effects(h.Ctx(), child.ID)
			expect(h, "child effects pruned", len(effs), 0)
			expect(h, "parent kept", h.Run(parent.ID).Status, store.StatusCompleted)
			n, _ = h.St.Prune(h.Ctx(), req)
			expect(h, "second sweep", n, 1)
			_, err = h.St.Run(h.Ctx(), parent.ID)
			expect(h, "parent pruned", errors.Is(err, store.ErrNotFound), true)
			expect(h, "deferred kept", h.Run(deferred.ID).Status, store.StatusDeferred)
			expect(h, "errored kept", h.Run(failed.ID).Status, store.StatusErrored)
			n, _ = h.St.Prune(h.Ctx(), req)
			expect(h, "third sweep", n, 0)
		}},
		Case{Name: "Store/Prune/Bounded", Fn: func(h *H) {
			t0 := h.Now()
			for range 7 {
				r := h.Claim(h.Admit("p", "ev", nil).ID, "o", time.Minute)
				h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: t0, To: store.StatusCompleted})
			}
			n, _ := h.St.Prune(h.Ctx(), store.PruneRequest{CompletedBefore: t0.Add(time.Second), Limit: 5})
			expect(h, "batch", n, 5)
			n, _ = h.St.Prune(h.Ctx(), store.PruneRequest{CompletedBefore: t0.Add(time.Second), Limit: 5})
			expect(h, "rest", n, 2)
		}},
		// A store without an index of completed runs reads a bounded window
		// per call (store.PruneWindow): a backlog of old runs it keeps, more
		// than one window, delays the completed runs behind it by a few
		// calls, not for good; and an old run completed since is pruned by
		// a later pass.
		Case{Name: "Store/Prune/PassesOverKeptRuns", Fn: func(h *H) {
			end := func(to store.Status) store.Run {
				r := h.Claim(h.Admit("p", "ev", nil).ID, "o", time.Minute)
				_, err := h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: h.Now(), To: to, Error: "x"})
				expect(h, "end err", err, nil)
				return r
			}
			const limit = 1
			var kept, done []store.Run
			for range store.PruneScan*limit + store.PruneScan/2 {
				kept = append(kept, end(store.StatusErrored))
			}
			for range 3 {
				done = append(done, end(store.StatusCompleted))
			}
			req := store.PruneRequest{CompletedBefore: h.Now().Add(time.Hour), Limit: limit}
			prune := func(calls int) int {
				total := 0
				for range calls {
					n, err := h.St.Prune(h.Ctx(), req)
					expect(h, "prune err", err, nil)
					total += n
				}
				return total
			}
			expect(h, "pruned behind the kept runs in 6 calls", prune(6), len(done))
			for _, r := range done {
				_, err := h.St.Run(h.Ctx(), r.ID)
				expect(h, "completed run pruned", errors.Is(err, store.ErrNotFound), true)
			}
			first := kept[0]
			_, err := h.St.Update(h.Ctx(), store.Update{RunID: first.ID, Now: h.Now(), Action: store.ActionRetry})
			expect(h, "retry err", err, nil)
			r := h.Claim(first.ID, "o", time.Minute)
			_, err = h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: h.Now(), To: store.StatusCompleted})
			expect(h, "complete err", err, nil)
			expect(h, "the old run completed since, pruned in 4 calls", prune(4), 1)
			for _, k := range kept[1:] {
				expect(h, "kept", h.Run(k.ID).Status, store.StatusErrored)
			}
		}},
	}
}

// storeKeyCases: idempotency keys, payloads kept exactly, counts by status
// and a run waiting for its children.
func storeKeyCases() []Case {
	return []Case{
		Case{Name: "Store/Idempotency/PerProcessReservation", Spec: []int{96, 97, 98}, Fn: func(h *H) {
			adm := func(key string, procs ...string) store.AdmitResult {
				var nr []store.NewRun
				for _, p := range procs {
					nr = append(nr, store.NewRun{ID: newID(), Process: p})
				}
				res, err := h.St.Admit(h.Ctx(), store.Admission{Event: "ev", IdempotencyKey: key, Runs: nr, Now: h.Now()})
				expect(h, "err", err, nil)
				return res
			}
			first := adm("k", "a")
			expect(h, "first", len(first.Admitted), 1)
			dup := adm("k", "a")
			expect(h, "same process rejected", len(dup.Admitted), 0)
			expect(h, "existing returned", len(dup.Existing), 1)
			if len(dup.Existing) == 1 {
				expect(h, "existing id", dup.Existing[0].ID, first.Admitted[0].ID)
			}
			expect(h, "other process allowed", len(adm("k", "b").Admitted), 1)
			expect(h, "null keys 1", len(adm("", "a").Admitted), 1)
			expect(h, "null keys 2", len(adm("", "a").Admitted), 1)
		}},
		Case{Name: "Store/Idempotency/DroppedDoesNotConsumeKey", Spec: []int{121}, Note: "changed: a run dropped at its process's cap does not reserve the idempotency key for that process, so the event emitted again with the same key admits it once there is room (the processes that admitted it keep their runs)", Fn: func(h *H) {
			blocker := h.Admit("capped", "other", nil)
			_ = blocker
			res, _ := h.St.Admit(h.Ctx(), store.Admission{Event: "ev", IdempotencyKey: "k",
				Runs: []store.NewRun{{ID: newID(), Process: "free"}, {ID: newID(), Process: "capped", Limit: 1}}, Now: h.Now()})
			expect(h, "admitted", len(res.Admitted), 1)
			expect(h, "dropped", len(res.Dropped), 1)
			b := h.Claim(blocker.ID, "o", time.Minute)
			h.St.Update(h.Ctx(), store.Update{RunID: b.ID, Epoch: b.Epoch, Now: h.Now(), To: store.StatusCompleted})
			res, _ = h.St.Admit(h.Ctx(), store.Admission{Event: "ev", IdempotencyKey: "k",
				Runs: []store.NewRun{{ID: newID(), Process: "free"}, {ID: newID(), Process: "capped", Limit: 1}}, Now: h.Now()})
			expect(h, "retry admits the dropped one", len(res.Admitted), 1)
			if len(res.Admitted) == 1 {
				expect(h, "which", res.Admitted[0].Process, "capped")
			}
			expect(h, "free already admitted", len(res.Existing), 1)
		}},
		Case{Name: "Store/RoundTripComplexJSON", Spec: []int{113}, Fn: func(h *H) {
			v := `{"a":[1,[2,3],{"b":null}],"z":0,"e":"","t":true,"u":"é✓"}`
			res, _ := h.St.Admit(h.Ctx(), store.Admission{Event: "ev", Payload: json.RawMessage(v), Context: json.RawMessage(v),
				Runs: []store.NewRun{{ID: newID(), Process: "p"}}, Now: h.Now()})
			r := h.Claim(res.Admitted[0].ID, "o", time.Minute)
			h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: h.Now(), To: store.StatusCompleted, Output: json.RawMessage(v)})
			got := h.Run(r.ID)
			expect(h, "payload", string(got.Payload), v)
			expect(h, "context", string(got.Context), v)
			expect(h, "output", string(got.Output), v)
		}},
		Case{Name: "Store/Counts", Spec: []int{169}, Fn: func(h *H) {
			h.Admit("p", "ev", nil)
			r := h.Claim(h.Admit("p", "ev", nil).ID, "o", time.Minute)
			d := h.Claim(h.Admit("p", "ev", nil).ID, "o", time.Minute)
			h.St.Update(h.Ctx(), store.Update{RunID: d.ID, Epoch: d.Epoch, Now: h.Now(), To: store.StatusDead})
			c, err := h.St.Counts(h.Ctx())
			expect(h, "err", err, nil)
			expect(h, "idle", c[store.StatusIdle], int64(1))
			expect(h, "running", c[store.StatusRunning], int64(1))
			expect(h, "dead", c[store.StatusDead], int64(1))
			expect(h, "completed", c[store.StatusCompleted], int64(0))
			expect(h, "all statuses present", len(c), len(store.Statuses))
			_ = r
		}},
		Case{Name: "Store/Update/RequireChildrenLeavesRun", Spec: []int{205}, Fn: func(h *H) {
			r := h.Claim(h.Admit("gate", "ev", nil).ID, "o", time.Minute)
			h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: h.Now(), To: store.StatusDeferred, Then: "next"})
			h.Admit("capped", "busy", nil)
			_, err := h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Now: h.Now(), From: []store.Status{store.StatusDeferred}, To: store.StatusCompleted,
				RequireChildren: true, Children: &store.Admission{Event: "next", Runs: []store.NewRun{{ID: newID(), Process: "capped", Limit: 1}}, ParentID: r.ID, CorrelationID: r.ID, Depth: 1, Now: h.Now()}})
			expect(h, "not admitted", errors.Is(err, store.ErrNotAdmitted), true)
			expect(h, "still deferred", h.Run(r.ID).Status, store.StatusDeferred)
			chain, _ := h.St.Chain(h.Ctx(), r.ID)
			expect(h, "no child", len(chain), 1)
		}},
	}
}

// storeRollupCases: observability rollups, pending work, large payloads and
// what survives a reopen.
func storeRollupCases() []Case {
	return []Case{
		Case{Name: "Store/Observability/RollupsAndErrors", Fn: func(h *H) {
			b := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
			err := h.St.AddRollups(h.Ctx(), []store.Rollup{{Bucket: b, Process: "p", Counts: map[string]int64{"x": 2}, Hists: map[string][][]byte{"h": {{1, 2}}}}})
			expect(h, "add", err, nil)
			h.St.AddRollups(h.Ctx(), []store.Rollup{{Bucket: b, Process: "p", Counts: map[string]int64{"x": 3, "y": 1}, Hists: map[string][][]byte{"h": {{3}}}}})
			rs, err := h.St.Rollups(h.Ctx(), b, b.Add(time.Minute))
			expect(h, "err", err, nil)
			expect(h, "rows", len(rs), 1)
			if len(rs) == 1 {
				expect(h, "x", rs[0].Counts["x"], int64(5))
				expect(h, "y", rs[0].Counts["y"], int64(1))
				expect(h, "sketches", len(rs[0].Hists["h"]), 2)
			}
			rs, _ = h.St.Rollups(h.Ctx(), b.Add(time.Minute), b.Add(2*time.Minute))
			expect(h, "outside window", len(rs), 0)
			h.St.AddErrors(h.Ctx(), []store.ErrorRecord{{At: b, Kind: "run", Message: "one"}, {At: b.Add(time.Second), Kind: "effect", Message: "two"}})
			es, err := h.St.Errors(h.Ctx(), b, b.Add(time.Hour), 10)
			expect(h, "err", err, nil)
			expect(h, "errors", len(es), 2)
			if len(es) == 2 {
				expect(h, "newest first", es[0].Message, "two")
				expect(h, "ids assigned", es[0].ID > 0 && es[1].ID > 0, true)
			}
			n, _ := h.St.Prune(h.Ctx(), store.PruneRequest{ObservabilityBefore: b.Add(time.Hour), Limit: 10})
			expect(h, "no runs pruned", n, 0)
			rs, _ = h.St.Rollups(h.Ctx(), b, b.Add(time.Hour))
			es, _ = h.St.Errors(h.Ctx(), b, b.Add(time.Hour), 10)
			expect(h, "rollups pruned", len(rs), 0)
			expect(h, "errors pruned", len(es), 0)
		}},
		Case{Name: "Store/Pending", Fn: func(h *H) {
			a := h.Admit("p", "ev", nil)
			b := h.Claim(h.Admit("p", "ev", nil).ID, "o", time.Minute)
			c := h.Admit("p", "ev", nil)
			ps, err := h.St.Pending(h.Ctx(), 0, 10)
			expect(h, "err", err, nil)
			expect(h, "pending", len(ps), 2)
			if len(ps) == 2 {
				expect(h, "order", ps[0].ID+ps[1].ID, a.ID+c.ID)
				expect(h, "seq", ps[0].Seq < ps[1].Seq, true)
			}
			page, _ := h.St.Pending(h.Ctx(), 0, 1)
			expect(h, "page of one", len(page), 1)
			if len(page) == 1 {
				rest, _ := h.St.Pending(h.Ctx(), page[0].Seq, 10)
				expect(h, "next page", len(rest), 1)
				if len(rest) == 1 {
					expect(h, "next page run", rest[0].ID, c.ID)
				}
			}
			_ = b
		}},
		Case{Name: "Store/Claim/LargePayloadAndContext", Fn: func(h *H) {
			big := `"` + strings.Repeat("é", 6000) + `"`
			res, err := h.St.Admit(h.Ctx(), store.Admission{Event: "ev", Payload: json.RawMessage(big), Context: json.RawMessage(`{"k":` + big + `}`),
				Runs: []store.NewRun{{ID: newID(), Process: "p"}}, Now: h.Now()})
			expect(h, "admit", err, nil)
			r := h.Claim(res.Admitted[0].ID, "o", time.Minute)
			expect(h, "payload", string(r.Payload), big)
			expect(h, "context", string(r.Context), `{"k":`+big+`}`)
			expect(h, "epoch", r.Epoch, int64(1))
		}},
		Case{Name: "Store/Durable/DataSurvivesReopen", Durable: true, Spec: []int{25, 95, 103}, Fn: func(h *H) {
			r := h.Claim(h.Admit("p", "ev", map[string]int{"x": 1}).ID, "o", time.Hour)
			h.St.SetContext(h.Ctx(), r.ID, r.Epoch, json.RawMessage(`{"c":1}`))
			h.St.StartEffect(h.Ctx(), r.ID, r.Epoch, "k", h.Now())
			h.St.FinishEffect(h.Ctx(), r.ID, r.Epoch, "k", store.EffectCompleted, json.RawMessage(`{"out":2}`), "", h.Now())
			before := h.Run(r.ID)
			h.Reopen()
			after := h.Run(r.ID)
			expect(h, "status", after.Status, store.StatusRunning)
			expect(h, "payload", string(after.Payload), `{"x":1}`)
			expect(h, "context", string(after.Context), `{"c":1}`)
			expect(h, "owner", after.LeaseOwner, "o")
			expect(h, "expiry", after.LeaseExpires.Equal(before.LeaseExpires), true)
			expect(h, "epoch", after.Epoch, before.Epoch)
			e := effect(h, r.ID, "k")
			expect(h, "effect", e.Status, store.EffectCompleted)
			expect(h, "effect output", string(e.Output), `{"out":2}`)
		}},
	}
}

func effect(h *H, runID, key string) store.Effect {
	h.Helper()
	effs, err := h.St.Effects(h.Ctx(), runID)
	if err != nil {
		h.Fatalf("effects: %v", err)
	}
	for _, e := range effs {
		if e.Key == key {
			return e
		}
	}
	h.Fatalf("no effect %s on run %s", key, runID)
	return store.Effect{}
}

func join(ss []string) string {
	out := ""
	for _, s := range ss {
		out += s + ","
	}
	return out
}
