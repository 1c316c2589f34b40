package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/yella-go/yella/store"
)

// wait ends r's attempt (claimed at epoch) at a wait recorded under key
// for signal sig ("" for a sleep) with deadline until (zero: none).
func (h *H) wait(r store.Run, key, sig string, now, until time.Time) (store.Run, error) {
	h.Helper()
	res, err := h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: now, Action: store.ActionWait,
		RetryAt: until, Wait: &store.Wait{Key: key, Signal: sig}})
	return res.Run, err
}

// mustWait is wait failing the case on error.
func (h *H) mustWait(r store.Run, key, sig string, now, until time.Time) store.Run {
	h.Helper()
	w, err := h.wait(r, key, sig, now, until)
	if err != nil {
		h.Fatalf("wait %s: %v", r.ID, err)
	}
	return w
}

// effectOf returns run id's effect record key (Status "" when there is none).
func (h *H) effectOf(id, key string) store.Effect {
	h.Helper()
	effs, err := h.St.Effects(h.Ctx(), id)
	if err != nil {
		h.Fatalf("effects %s: %v", id, err)
	}
	for _, e := range effs {
		if e.Key == key {
			return e
		}
	}
	return store.Effect{}
}

// lastNote is the note of run id's latest timeline entry.
func (h *H) lastNote(id string) string {
	h.Helper()
	tl, err := h.St.Timeline(h.Ctx(), id)
	if err != nil || len(tl) == 0 {
		h.Fatalf("timeline %s: %v (%d entries)", id, err, len(tl))
	}
	return tl[len(tl)-1].Note
}

// claimAt claims run id at now and returns the claimed runs (none when it
// is not due).
func (h *H) claimAt(id string, now time.Time) []store.Run {
	h.Helper()
	rs, err := h.St.Claim(h.Ctx(), store.ClaimRequest{IDs: []string{id}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil {
		h.Fatalf("claim %s: %v", id, err)
	}
	return rs
}

func (h *H) signal(req store.SignalRequest) store.SignalResult {
	h.Helper()
	res, err := h.St.Signal(h.Ctx(), req)
	if err != nil {
		h.Fatalf("signal %s: %v", req.Key, err)
	}
	return res
}

func pendingIDs(h *H) map[string]time.Time {
	h.Helper()
	ps, err := h.St.Pending(h.Ctx(), 0, 1000)
	if err != nil {
		h.Fatalf("pending: %v", err)
	}
	out := map[string]time.Time{}
	for _, p := range ps {
		out[p.ID] = p.RetryAt
	}
	return out
}

// waitCases: waits recorded by the wait action, ended by their deadline,
// a signal, or an operator.
func waitCases() []Case {
	return []Case{
		// A sleep: the attempt ends waiting, spends no attempt, and the run is
		// claimable at its deadline, not a moment before.
		{Name: "Store/Waits/SleepUntilDeadline", Fn: func(h *H) {
			now := h.Now()
			r := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			until := now.Add(time.Hour)
			w := h.mustWait(r, "nap", "", now, until)
			for _, got := range []store.Run{w, h.Run(r.ID)} {
				expect(h, "status", got.Status, store.StatusWaiting)
				expect(h, "attempts refunded", got.Attempts, 0)
				expect(h, "deadline", got.RetryAt.Equal(until), true)
				expect(h, "no lease", got.LeaseOwner, "")
				expect(h, "not completed", got.CompletedAt.IsZero(), true)
				expect(h, "no wait key", got.WaitKey, "")
			}
			expect(h, "note", h.lastNote(r.ID), "waiting")
			e := h.effectOf(r.ID, "nap")
			expect(h, "wait record", e.Status, store.EffectWaiting)
			at, ok := pendingIDs(h)[r.ID]
			expect(h, "pending with its deadline", ok && at.Equal(until), true)
			ps, _ := h.St.Pending(h.Ctx(), 0, 10)
			expect(h, "pending as waiting", len(ps) == 1 && ps[0].Waiting, true)
			expect(h, "claim before the deadline", len(h.claimAt(r.ID, until.Add(-time.Nanosecond))), 0)
			rs := h.claimAt(r.ID, until)
			if len(rs) != 1 {
				h.Fatalf("claim at the deadline: %d runs", len(rs))
			}
			got := h.Run(r.ID)
			expect(h, "running", got.Status, store.StatusRunning)
			expect(h, "epoch", got.Epoch, r.Epoch+1)
			expect(h, "attempts", got.Attempts, 1)
			expect(h, "deadline cleared", got.RetryAt.IsZero(), true)
			expect(h, "record still waiting", h.effectOf(r.ID, "nap").Status, store.EffectWaiting)
			// The next attempt records the wait's outcome as an effect's.
			expect(h, "start", h.St.StartEffect(h.Ctx(), r.ID, got.Epoch, "nap", until), nil)
			expect(h, "finish", h.St.FinishEffect(h.Ctx(), r.ID, got.Epoch, "nap", store.EffectCompleted, json.RawMessage(`{"slept":true}`), "", until), nil)
			expect(h, "recorded", h.effectOf(r.ID, "nap").Status, store.EffectCompleted)
			c := h.Count(store.StatusWaiting)
			expect(h, "no waiting run left", c, 0)
		}},
		// A wait for a signal without a deadline is never claimable nor
		// pending; a signal makes it idle with the payload recorded.
		{Name: "Store/Waits/SignalEndsWait", Fn: func(h *H) {
			now := h.Now()
			r := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			w := h.mustWait(r, "approval", "order-7", now, time.Time{})
			expect(h, "status", w.Status, store.StatusWaiting)
			expect(h, "wait key", h.Run(r.ID).WaitKey, "order-7")
			_, pending := pendingIDs(h)[r.ID]
			expect(h, "not pending", pending, false)
			expect(h, "not claimable", len(h.claimAt(r.ID, now.Add(1000*time.Hour))), 0)
			expect(h, "counted as waiting", h.Count(store.StatusWaiting), 1)
			res := h.signal(store.SignalRequest{Key: "order-7", Payload: json.RawMessage(`{"ok":true}`), Now: now.Add(time.Second)})
			if res.Woken == nil || res.Woken.ID != r.ID || res.Kept {
				h.Fatalf("signal: %+v, want run %s woken", res, r.ID)
			}
			for _, got := range []store.Run{*res.Woken, h.Run(r.ID)} {
				expect(h, "idle", got.Status, store.StatusIdle)
				expect(h, "wait key cleared", got.WaitKey, "")
				expect(h, "claimable now", got.RetryAt.IsZero(), true)
			}
			expect(h, "note", h.lastNote(r.ID), "signalled")
			e := h.effectOf(r.ID, "approval")
			expect(h, "record", e.Status, store.EffectCompleted)
			expect(h, "payload", string(e.Output), `{"ok":true}`)
			expect(h, "counts", h.Count(store.StatusWaiting), 0)
			// Nothing waits now: without KeepUntil the signal is dropped.
			res = h.signal(store.SignalRequest{Key: "order-7", Payload: json.RawMessage(`2`), Now: now.Add(2 * time.Second)})
			expect(h, "dropped", res.Woken == nil && !res.Kept, true)
			r = h.Claim(r.ID, "o", time.Minute)
			expect(h, "claimed after the signal", r.Status, store.StatusRunning)
			// Dropped, not kept: a new wait on the key waits.
			w = h.mustWait(r, "second", "order-7", now.Add(3*time.Second), time.Time{})
			expect(h, "waits again", w.Status, store.StatusWaiting)
		}},
		// A signal sent before the wait is kept and consumed, once, by the
		// wait that finds it: the run is idle at once.
		{Name: "Store/Waits/SignalBeforeWait", Fn: func(h *H) {
			now := h.Now()
			res := h.signal(store.SignalRequest{Key: "k", Payload: json.RawMessage(`"early"`), Now: now, KeepUntil: now.Add(time.Hour)})
			expect(h, "kept", res.Kept && res.Woken == nil, true)
			r := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			w := h.mustWait(r, "w", "k", now.Add(time.Minute), now.Add(24*time.Hour))
			for _, got := range []store.Run{w, h.Run(r.ID)} {
				expect(h, "idle at once", got.Status, store.StatusIdle)
				expect(h, "no deadline", got.RetryAt.IsZero(), true)
				expect(h, "no wait key", got.WaitKey, "")
				expect(h, "attempts refunded", got.Attempts, 0)
			}
			expect(h, "note", h.lastNote(r.ID), "signalled")
			e := h.effectOf(r.ID, "w")
			expect(h, "record", e.Status, store.EffectCompleted)
			expect(h, "payload", string(e.Output), `"early"`)
			// Consumed: another run's wait on the key waits.
			r2 := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			expect(h, "consumed once", h.mustWait(r2, "w", "k", now.Add(time.Minute), time.Time{}).Status, store.StatusWaiting)
		}},
		// A kept signal is not received after its KeepUntil, and Prune
		// deletes it.
		{Name: "Store/Waits/KeptSignalExpires", Fn: func(h *H) {
			now := h.Now()
			h.signal(store.SignalRequest{Key: "k", Payload: json.RawMessage(`1`), Now: now, KeepUntil: now.Add(time.Minute)})
			h.signal(store.SignalRequest{Key: "k2", Payload: json.RawMessage(`2`), Now: now, KeepUntil: now.Add(time.Minute)})
			r := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			expect(h, "expired", h.mustWait(r, "w", "k", now.Add(time.Minute), time.Time{}).Status, store.StatusWaiting)
			_, err := h.St.Prune(h.Ctx(), store.PruneRequest{SignalsBefore: now.Add(2 * time.Minute), Limit: 10})
			expect(h, "prune", err, nil)
			r2 := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			// Pruned: even a wait dated before its expiry does not find it.
			expect(h, "pruned", h.mustWait(r2, "w", "k2", now, time.Time{}).Status, store.StatusWaiting)
		}},
		// Two runs wait on one key: each signal wakes one, the one admitted
		// first first; a third signal is kept.
		{Name: "Store/Waits/TwoWaiters", Fn: func(h *H) {
			now := h.Now()
			other := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			h.mustWait(other, "w", "another key", now, time.Time{}) // admitted first, on another key
			a := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			b := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			h.mustWait(b, "w", "k", now, time.Time{}) // b waits first, a was admitted first
			h.mustWait(a, "w", "k", now.Add(time.Second), time.Time{})
			var woken []string
			for i := range 3 {
				res := h.signal(store.SignalRequest{Key: "k", Payload: json.RawMessage(fmt.Sprint(i)), Now: now.Add(2 * time.Second), KeepUntil: now.Add(time.Hour)})
				if res.Woken != nil {
					woken = append(woken, res.Woken.ID)
				} else if !res.Kept {
					h.Errorf("signal %d neither woke a run nor was kept", i)
				}
			}
			expect(h, "woken", fmt.Sprint(woken), fmt.Sprint([]string{a.ID, b.ID}))
			expect(h, "a's payload", string(h.effectOf(a.ID, "w").Output), "0")
			expect(h, "b's payload", string(h.effectOf(b.ID, "w").Output), "1")
			c := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			w := h.mustWait(c, "w", "k", now.Add(3*time.Second), time.Time{})
			expect(h, "the run waiting on another key still waits", h.Run(other.ID).Status, store.StatusWaiting)
			expect(h, "third kept for the next wait", w.Status, store.StatusIdle)
			expect(h, "third payload", string(h.effectOf(c.ID, "w").Output), "2")
		}},
		// A signal for one run: it must be waiting for the key, and is never
		// kept.
		{Name: "Store/Waits/SignalToRun", Fn: func(h *H) {
			now := h.Now()
			a := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			b := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			h.mustWait(a, "w", "k", now, time.Time{})
			h.mustWait(b, "w", "k", now, time.Time{})
			_, err := h.St.Signal(h.Ctx(), store.SignalRequest{Key: "k", RunID: "no-such-run", Now: now, KeepUntil: now.Add(time.Hour)})
			expect(h, "unknown run", errors.Is(err, store.ErrNotFound), true)
			_, err = h.St.Signal(h.Ctx(), store.SignalRequest{Key: "other", RunID: b.ID, Now: now, KeepUntil: now.Add(time.Hour)})
			var se *store.StatusError
			expect(h, "other key refused", errors.As(err, &se), true)
			res := h.signal(store.SignalRequest{Key: "k", RunID: b.ID, Payload: json.RawMessage(`"b"`), Now: now})
			expect(h, "b woken", res.Woken != nil && res.Woken.ID == b.ID, true)
			expect(h, "a still waits", h.Run(a.ID).Status, store.StatusWaiting)
			_, err = h.St.Signal(h.Ctx(), store.SignalRequest{Key: "k", RunID: b.ID, Now: now, KeepUntil: now.Add(time.Hour)})
			expect(h, "b no longer waits", errors.As(err, &se) && se.Status == store.StatusIdle, true)
			r := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			expect(h, "nothing kept", h.mustWait(r, "w", "k", now, time.Time{}).Status, store.StatusWaiting)
		}},
		// An operator cancels a waiting run, or ends its wait; a manual retry
		// begins the wait again.
		{Name: "Store/Waits/Operator", Fn: func(h *H) {
			now := h.Now()
			a := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			h.mustWait(a, "w", "k", now, now.Add(time.Hour))
			res, err := h.St.Update(h.Ctx(), store.Update{RunID: a.ID, Now: now, Action: store.ActionEndWait})
			expect(h, "end wait", err, nil)
			expect(h, "idle", res.Run.Status, store.StatusIdle)
			expect(h, "due now", res.Run.RetryAt.IsZero(), true)
			expect(h, "no wait key", res.Run.WaitKey, "")
			expect(h, "record kept", h.effectOf(a.ID, "w").Status, store.EffectWaiting)
			expect(h, "a signal finds no waiter", h.signal(store.SignalRequest{Key: "k", Now: now}).Woken == nil, true)

			b := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			expect(h, "start", h.St.StartEffect(h.Ctx(), b.ID, b.Epoch, "fx", now), nil)
			expect(h, "finish", h.St.FinishEffect(h.Ctx(), b.ID, b.Epoch, "fx", store.EffectCompleted, json.RawMessage(`1`), "", now), nil)
			h.mustWait(b, "w", "k", now, time.Time{})
			res, err = h.St.Update(h.Ctx(), store.Update{RunID: b.ID, Now: now, Action: store.ActionCancel, Error: "no longer needed"})
			expect(h, "cancel", err, nil)
			expect(h, "cancelled", res.Run.Status, store.StatusCancelled)
			expect(h, "signal after cancel", h.signal(store.SignalRequest{Key: "k", Now: now}).Woken == nil, true)
			res, err = h.St.Update(h.Ctx(), store.Update{RunID: b.ID, Now: now, Action: store.ActionRetry})
			expect(h, "retry", err, nil)
			expect(h, "idle again", res.Run.Status, store.StatusIdle)
			expect(h, "wait record deleted", h.effectOf(b.ID, "w").Status, store.EffectStatus(""))
			expect(h, "effect kept", h.effectOf(b.ID, "fx").Status, store.EffectCompleted)
		}},
		// Only the attempt at its epoch may wait.
		{Name: "Store/Waits/StaleEpoch", Fn: func(h *H) {
			now := h.Now()
			r := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			stale := r
			stale.Epoch++ // not the attempt's
			_, err := h.wait(stale, "w", "k", now, time.Time{})
			expect(h, "fenced", errors.Is(err, store.ErrFenced), true)
			expect(h, "still running", h.Run(r.ID).Status, store.StatusRunning)
			expect(h, "no record", h.effectOf(r.ID, "w").Status, store.EffectStatus(""))
			_, err = h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: now, Action: store.ActionWait})
			expect(h, "a wait action needs its wait", errors.Is(err, store.ErrInvalidUpdate), true)
		}},
		// Waits and kept signals survive a reopen.
		{Name: "Store/Waits/Durable", Durable: true, Fn: func(h *H) {
			now := h.Now()
			a := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			b := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			h.mustWait(a, "nap", "", now, now.Add(time.Hour))
			h.mustWait(b, "w", "k", now, time.Time{})
			h.signal(store.SignalRequest{Key: "later", Payload: json.RawMessage(`"kept"`), Now: now, KeepUntil: now.Add(time.Hour)})
			h.Reopen()
			expect(h, "a waits", h.Run(a.ID).Status, store.StatusWaiting)
			expect(h, "b waits", h.Run(b.ID).WaitKey, "k")
			at, ok := pendingIDs(h)[a.ID]
			expect(h, "a pending with its deadline", ok && at.Equal(now.Add(time.Hour)), true)
			res := h.signal(store.SignalRequest{Key: "k", Payload: json.RawMessage(`"go"`), Now: now})
			expect(h, "b woken", res.Woken != nil && res.Woken.ID == b.ID, true)
			c := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
			h.mustWait(c, "w", "later", now, time.Time{})
			expect(h, "kept signal survived", string(h.effectOf(c.ID, "w").Output), `"kept"`)
		}},
		// A signal and the wait for it, at the same moment: the signal is
		// delivered to the wait or consumed by it, never kept while the run
		// waits.
		{Name: "Store/Waits/SignalRacesWait", Fn: func(h *H) {
			now := h.Now()
			for i := range 40 {
				key := fmt.Sprintf("race-%d", i)
				r := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
				var wg sync.WaitGroup
				var werr, serr error
				wg.Add(2)
				go func() {
					defer wg.Done()
					_, werr = h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Epoch: r.Epoch, Now: now, Action: store.ActionWait,
						Wait: &store.Wait{Key: "w", Signal: key}})
				}()
				go func() {
					defer wg.Done()
					_, serr = h.St.Signal(h.Ctx(), store.SignalRequest{Key: key, Payload: json.RawMessage(`1`), Now: now, KeepUntil: now.Add(time.Hour)})
				}()
				wg.Wait()
				if werr != nil || serr != nil {
					h.Fatalf("race %d: wait %v, signal %v", i, werr, serr)
				}
				got := h.Run(r.ID)
				if got.Status != store.StatusIdle || h.effectOf(r.ID, "w").Status != store.EffectCompleted {
					h.Fatalf("race %d: run %s with record %s: the signal was lost to a waiting run", i, got.Status, h.effectOf(r.ID, "w").Status)
				}
			}
		}},
		// Many signals on one key against many waiters: each wakes one run,
		// once.
		{Name: "Store/Waits/ConcurrentSignals", Fn: func(h *H) {
			now := h.Now()
			const n = 30
			ids := map[string]bool{}
			for range n {
				r := h.Claim(h.Admit("p", "e", nil).ID, "o", time.Minute)
				h.mustWait(r, "w", "k", now, time.Time{})
				ids[r.ID] = true
			}
			var mu sync.Mutex
			woken := map[string]int{}
			kept := 0
			var wg sync.WaitGroup
			for i := range n + 5 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := h.St.Signal(h.Ctx(), store.SignalRequest{Key: "k", Payload: json.RawMessage(fmt.Sprint(i)), Now: now, KeepUntil: now.Add(time.Hour)})
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err != nil:
						h.Errorf("signal %d: %v", i, err)
					case res.Woken != nil:
						woken[res.Woken.ID]++
					case res.Kept:
						kept++
					}
				}()
			}
			wg.Wait()
			expect(h, "runs woken", len(woken), n)
			expect(h, "signals kept", kept, 5)
			for id, c := range woken {
				expect(h, "woken once", c, 1)
				expect(h, "a waiter", ids[id], true)
				expect(h, "idle", h.Run(id).Status, store.StatusIdle)
			}
		}},
	}
}

// Count is the number of runs in status st, by Counts, checked against
// CountRuns.
func (h *H) Count(st store.Status) int64 {
	h.Helper()
	cs, err := h.St.Counts(h.Ctx())
	if err != nil {
		h.Fatalf("counts: %v", err)
	}
	n, err := h.St.CountRuns(h.Ctx(), store.RunFilter{Statuses: []store.Status{st}, Limit: 1})
	if err != nil {
		h.Fatalf("count runs: %v", err)
	}
	if n != cs[st] {
		h.Errorf("%s: Counts says %d, CountRuns %d", st, cs[st], n)
	}
	return n
}
