package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/yella-go/yella/store"
)

// op is one way to change a run's status through the store contract.
type op struct {
	name string
	do   func(h *H, r store.Run) (store.Run, error)
}

var ops = []op{
	{"claim", func(h *H, r store.Run) (store.Run, error) {
		rs, err := h.St.Claim(h.Ctx(), store.ClaimRequest{IDs: []string{r.ID}, Owner: "o", Now: h.Now(), LeaseUntil: h.Now().Add(time.Minute)})
		if err == nil && len(rs) == 0 {
			err = errNotClaimed
		}
		if len(rs) == 1 {
			return rs[0], err
		}
		return store.Run{}, err
	}},
	{"complete", finish(store.StatusCompleted)},
	{"defer", finish(store.StatusDeferred)},
	{"fail", finish(store.StatusErrored)},
	{"retry-later", finish(store.StatusIdle)},
	{"dead-letter", finish(store.StatusDead)},
	{"fence", finish(store.StatusFenced)},
	{"wait", finish(store.StatusWaiting)},
	{"end-wait", operator([]store.Status{store.StatusWaiting}, store.StatusIdle)},
	{"cancel", operator([]store.Status{store.StatusIdle, store.StatusRunning, store.StatusWaiting}, store.StatusCancelled)},
	{"manual-retry", operator([]store.Status{store.StatusErrored, store.StatusDead, store.StatusFenced, store.StatusCancelled}, store.StatusIdle)},
	{"requeue", operator([]store.Status{store.StatusDead}, store.StatusIdle)},
	{"resume", operator([]store.Status{store.StatusDeferred}, store.StatusCompleted)},
	{"resolve-effect", operator([]store.Status{store.StatusFenced}, store.StatusIdle)},
}

var errNotClaimed = errors.New("not claimable")

func finish(to store.Status) func(h *H, r store.Run) (store.Run, error) {
	return func(h *H, r store.Run) (store.Run, error) {
		epoch := r.Epoch
		if epoch == 0 {
			epoch = 1
		}
		u := store.Update{RunID: r.ID, Epoch: epoch, Now: h.Now(), To: to, Then: "next"}
		if to == store.StatusWaiting { // until a signal, or an hour from now
			u.Then, u.RetryAt, u.Wait = "", h.Now().Add(time.Hour), &store.Wait{Key: "w", Signal: "s"}
		}
		res, err := h.St.Update(h.Ctx(), u)
		return res.Run, err
	}
}

func operator(from []store.Status, to store.Status) func(h *H, r store.Run) (store.Run, error) {
	return func(h *H, r store.Run) (store.Run, error) {
		u := store.Update{RunID: r.ID, Now: h.Now(), From: from, To: to}
		if to == store.StatusIdle && len(from) == 1 && from[0] == store.StatusFenced {
			u.CompleteEffect = &store.EffectDone{Key: "k", Output: json.RawMessage(`1`)}
		}
		if to == store.StatusIdle && len(from) == 1 && from[0] == store.StatusWaiting {
			u.Action = store.ActionEndWait
		}
		res, err := h.St.Update(h.Ctx(), u)
		return res.Run, err
	}
}

// prepare returns a run in status st.
func prepare(h *H, st store.Status) store.Run {
	r := h.Admit("p", "ev", nil)
	if st == store.StatusIdle {
		return r
	}
	if st == store.StatusCancelled { // as an operator does
		res, err := h.St.Update(h.Ctx(), store.Update{RunID: r.ID, Now: h.Now(), From: []store.Status{store.StatusIdle}, To: st})
		if err != nil {
			h.Fatalf("prepare %s: %v", st, err)
		}
		return res.Run
	}
	r = h.Claim(r.ID, "o", time.Minute)
	if st == store.StatusRunning {
		return r
	}
	r, err := finish(st)(h, r)
	if err != nil {
		h.Fatalf("prepare %s: %v", st, err)
	}
	return r
}

// transitions is the state machine: for each status and operation, the
// resulting status, or "" when the operation is refused (and changes
// nothing).
var transitions = map[store.Status]map[string]store.Status{
	store.StatusIdle: {
		"claim": store.StatusRunning, "cancel": store.StatusCancelled,
	},
	store.StatusRunning: {
		"complete": store.StatusCompleted, "defer": store.StatusDeferred, "fail": store.StatusErrored,
		"retry-later": store.StatusIdle, "dead-letter": store.StatusDead, "fence": store.StatusFenced,
		"wait": store.StatusWaiting, "cancel": store.StatusCancelled,
	},
	// Not claimable before its deadline (an hour away).
	store.StatusWaiting:   {"end-wait": store.StatusIdle, "cancel": store.StatusCancelled},
	store.StatusCompleted: {},
	store.StatusDeferred:  {"resume": store.StatusCompleted},
	store.StatusErrored:   {"manual-retry": store.StatusIdle},
	store.StatusDead:      {"manual-retry": store.StatusIdle, "requeue": store.StatusIdle},
	store.StatusFenced:    {"manual-retry": store.StatusIdle, "resolve-effect": store.StatusIdle},
	store.StatusCancelled: {"manual-retry": store.StatusIdle},
}

// transitionCases: every status × every operation of the contract, checked
// against the state machine above.
func transitionCases() []Case {
	return []Case{{Name: "Transitions/Matrix", Spec: []int{140, 141, 142, 283}, Fn: func(h *H) {
		for _, from := range store.Statuses {
			for _, o := range ops {
				r := prepare(h, from)
				before, _ := h.St.Timeline(h.Ctx(), r.ID)
				got, err := o.do(h, r)
				want := transitions[from][o.name]
				where := fmt.Sprintf("%s --%s-->", from, o.name)
				if want == "" {
					if err == nil {
						h.Errorf("%s allowed (became %s), want refused", where, got.Status)
						continue
					}
					var se *store.StatusError
					refusedOK := errors.Is(err, store.ErrFenced) || errors.Is(err, errNotClaimed) ||
						(errors.As(err, &se) && se.Status == from)
					if !refusedOK {
						h.Errorf("%s refused with %v, want ErrFenced, not claimable, or a StatusError naming %s", where, err, from)
					}
					after, _ := h.St.Timeline(h.Ctx(), r.ID)
					expect(h, where+" status unchanged", h.Run(r.ID).Status, from)
					expect(h, where+" timeline unchanged", len(after), len(before))
					continue
				}
				if err != nil {
					h.Errorf("%s refused: %v, want %s", where, err, want)
					continue
				}
				expect(h, where, h.Run(r.ID).Status, want)
				after, _ := h.St.Timeline(h.Ctx(), r.ID)
				expect(h, where+" appends one entry", len(after), len(before)+1)
			}
		}
	}}}
}
