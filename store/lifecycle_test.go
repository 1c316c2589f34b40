package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

var (
	t0  = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now = t0.Add(time.Minute)
)

// lifecycle is the run lifecycle written out independently of the table:
// for each action, who performs it, the statuses it applies to and those it
// may lead to. TestApplyMatrix holds the table to it, so a change to the
// table is a change to this too.
var lifecycle = map[store.Action]struct {
	actor    store.Actor
	from, to []store.Status
}{
	store.ActionComplete:   {store.ActorAttempt, []store.Status{store.StatusRunning}, []store.Status{store.StatusCompleted}},
	store.ActionDefer:      {store.ActorAttempt, []store.Status{store.StatusRunning}, []store.Status{store.StatusDeferred}},
	store.ActionFail:       {store.ActorAttempt, []store.Status{store.StatusRunning}, []store.Status{store.StatusErrored}},
	store.ActionRetryLater: {store.ActorAttempt, []store.Status{store.StatusRunning}, []store.Status{store.StatusIdle}},
	store.ActionDeadLetter: {store.ActorAttempt, []store.Status{store.StatusRunning}, []store.Status{store.StatusDead}},
	store.ActionFence:      {store.ActorAttempt, []store.Status{store.StatusRunning}, []store.Status{store.StatusFenced}},
	store.ActionHandBack:   {store.ActorAttempt, []store.Status{store.StatusRunning}, []store.Status{store.StatusIdle}},
	store.ActionReclaim:    {store.ActorSweeper, []store.Status{store.StatusRunning}, []store.Status{store.StatusIdle, store.StatusDead}},
	store.ActionWait:       {store.ActorAttempt, []store.Status{store.StatusRunning}, []store.Status{store.StatusWaiting}},
	store.ActionEndWait:    {store.ActorOperator, []store.Status{store.StatusWaiting}, []store.Status{store.StatusIdle}},
	store.ActionCancel:     {store.ActorOperator, []store.Status{store.StatusIdle, store.StatusRunning, store.StatusWaiting}, []store.Status{store.StatusCancelled}},
	store.ActionRetry: {store.ActorOperator, []store.Status{store.StatusErrored, store.StatusDead, store.StatusFenced, store.StatusCancelled},
		[]store.Status{store.StatusIdle}},
	store.ActionRequeue: {store.ActorOperator, []store.Status{store.StatusDead}, []store.Status{store.StatusIdle}},
	store.ActionResolve: {store.ActorOperator, []store.Status{store.StatusFenced}, []store.Status{store.StatusIdle}},
	store.ActionResume:  {store.ActorOperator, []store.Status{store.StatusDeferred}, []store.Status{store.StatusCompleted}},
}

// runIn returns a run in status st, as a store holds it: a running run
// holds a lease (epoch 3, expired at now) and every run carries values the
// transitions may keep or clear.
func runIn(st store.Status) store.Run {
	r := store.Run{ID: "r", Seq: 7, Process: "p", Event: "e", CorrelationID: "r", Status: st,
		Payload: json.RawMessage(`{"in":1}`), Context: json.RawMessage(`{"c":1}`),
		Output: json.RawMessage(`"old"`), Error: "old error", ErrorCode: "OLD", Then: "old-next",
		Attempts: 2, Epoch: 3, RetryAt: t0.Add(time.Hour), CreatedAt: t0, StartedAt: t0, CompletedAt: t0, Version: "v1"}
	if st == store.StatusRunning {
		r.Output, r.CompletedAt, r.RetryAt = nil, time.Time{}, time.Time{}
		r.LeaseOwner, r.LeaseExpires = "owner", now
	}
	return r
}

// updateFor is an update of action a leading to status to ("" for the
// action's default), as its actor sends it.
func updateFor(a store.Action, to store.Status) store.Update {
	u := store.Update{RunID: "r", Now: now, Action: a, To: to, Output: json.RawMessage(`"new"`), Then: "next",
		Error: "boom", ErrorCode: "X", RetryAt: now.Add(time.Second), Version: "v2"}
	switch lifecycle[a].actor {
	case store.ActorAttempt:
		u.Epoch = 3
	case store.ActorSweeper:
		u.Epoch, u.Reclaim = 3, true
	}
	if a == store.ActionResolve {
		u.CompleteEffect = &store.EffectDone{Key: "k", Output: json.RawMessage(`1`)}
	}
	if a == store.ActionWait {
		u.Wait = &store.Wait{Key: "w", Signal: "sig"}
	}
	return u
}

// Every (from-status, action, to-status) combination, allowed or refused:
// an action applies to its from-statuses only, leads to its targets only,
// and a refused one returns the run unchanged with the error its actor
// expects (ErrFenced for an attempt or the sweeper, a *StatusError naming
// the status for an operator, ErrInvalidUpdate for a target the action
// cannot lead to).
func TestApplyMatrix(t *testing.T) {
	if len(store.Transitions) != len(lifecycle) {
		t.Errorf("the table has %d rules, the lifecycle %d actions", len(store.Transitions), len(lifecycle))
	}
	allowed := 0
	for a, want := range lifecycle {
		rule := store.RuleOf(a)
		if rule == nil {
			t.Errorf("%s: no rule", a)
			continue
		}
		if rule.Actor != want.actor {
			t.Errorf("%s: actor %s, want %s", a, rule.Actor, want.actor)
		}
		for _, from := range store.Statuses {
			for _, to := range append([]store.Status{""}, store.Statuses...) {
				where := fmt.Sprintf("%s --%s--> %q", from, a, to)
				before := runIn(from)
				got, err := store.Apply(before, updateFor(a, to), store.Facts{})
				okTo := to == "" || slices.Contains(want.to, to)
				okFrom := slices.Contains(want.from, from)
				var se *store.StatusError
				switch {
				case !okTo:
					if !errors.Is(err, store.ErrInvalidUpdate) {
						t.Errorf("%s: %v, want ErrInvalidUpdate", where, err)
					}
				case !okFrom && want.actor == store.ActorOperator:
					if !errors.As(err, &se) || se.Status != from || se.RunID != "r" {
						t.Errorf("%s: %v, want a StatusError naming %s", where, err, from)
					}
				case !okFrom:
					if !errors.Is(err, store.ErrFenced) {
						t.Errorf("%s: %v, want ErrFenced", where, err)
					}
				case err != nil:
					t.Errorf("%s: refused (%v), want allowed", where, err)
					continue
				default:
					if to != "" {
						allowed++
					}
					wantTo := to
					if to == "" {
						wantTo = want.to[0]
					}
					if got.Status != wantTo {
						t.Errorf("%s: became %s, want %s", where, got.Status, wantTo)
					}
					continue
				}
				if !equalRuns(got, before) {
					t.Errorf("%s: refused but changed the run: %+v", where, got)
				}
			}
		}
	}
	if allowed != 21 { // the (from, action, to) triples of lifecycle, counted by hand
		t.Errorf("%d allowed transitions, want 21", allowed)
	}
}

// What each action writes, written out field by field.
func TestApplyWrites(t *testing.T) {
	const (
		kept     = "kept"
		cleared  = "cleared"
		set      = "set"
		refunded = "refunded" // attempts: one fewer
	)
	type writes struct {
		from                                store.Status
		to                                  store.Status
		output, then, errs, retry, attempts string
		completed                           string // set to now, or cleared
	}
	cases := map[store.Action]writes{
		store.ActionComplete:   {store.StatusRunning, store.StatusCompleted, set, set, cleared, cleared, kept, set},
		store.ActionDefer:      {store.StatusRunning, store.StatusDeferred, set, set, cleared, cleared, kept, set},
		store.ActionFail:       {store.StatusRunning, store.StatusErrored, kept, kept, set, cleared, kept, set},
		store.ActionRetryLater: {store.StatusRunning, store.StatusIdle, cleared, kept, set, set, kept, cleared},
		store.ActionDeadLetter: {store.StatusRunning, store.StatusDead, kept, kept, set, cleared, kept, set},
		store.ActionFence:      {store.StatusRunning, store.StatusFenced, kept, kept, set, cleared, kept, set},
		store.ActionHandBack:   {store.StatusRunning, store.StatusIdle, cleared, kept, cleared, cleared, kept, cleared},
		store.ActionReclaim:    {store.StatusRunning, store.StatusIdle, cleared, kept, set, cleared, kept, cleared},
		store.ActionWait:       {store.StatusRunning, store.StatusWaiting, cleared, kept, cleared, set, refunded, cleared},
		store.ActionEndWait:    {store.StatusWaiting, store.StatusIdle, kept, kept, cleared, cleared, kept, cleared},
		store.ActionCancel:     {store.StatusIdle, store.StatusCancelled, kept, kept, set, cleared, kept, set},
		store.ActionRetry:      {store.StatusDead, store.StatusIdle, cleared, kept, cleared, cleared, kept, cleared},
		store.ActionRequeue:    {store.StatusDead, store.StatusIdle, cleared, kept, cleared, cleared, cleared, cleared},
		store.ActionResolve:    {store.StatusFenced, store.StatusIdle, cleared, kept, cleared, cleared, kept, cleared},
		store.ActionResume:     {store.StatusDeferred, store.StatusCompleted, kept, kept, cleared, cleared, kept, set},
	}
	for a, w := range cases {
		before := runIn(w.from)
		u := updateFor(a, "")
		got, err := store.Apply(before, u, store.Facts{})
		if err != nil {
			t.Errorf("%s: %v", a, err)
			continue
		}
		check := func(field, want string, gotV, beforeV, updateV any) {
			t.Helper()
			var wantV any
			switch want {
			case kept:
				wantV = beforeV
			case set:
				wantV = updateV
			case refunded:
				wantV = beforeV.(int) - 1
			default:
				wantV = zeroOf(beforeV)
			}
			if fmt.Sprint(gotV) != fmt.Sprint(wantV) {
				t.Errorf("%s: %s = %v, want %s (%v)", a, field, gotV, want, wantV)
			}
		}
		check("status", set, got.Status, before.Status, w.to)
		check("output", w.output, string(got.Output), string(before.Output), string(u.Output))
		check("then", w.then, got.Then, before.Then, u.Then)
		check("error", w.errs, got.Error, before.Error, u.Error)
		check("error code", w.errs, got.ErrorCode, before.ErrorCode, u.ErrorCode)
		check("retry at", w.retry, got.RetryAt, before.RetryAt, u.RetryAt)
		check("attempts", w.attempts, got.Attempts, before.Attempts, 0)
		check("completed at", w.completed, got.CompletedAt, before.CompletedAt, now)
		check("version", set, got.Version, before.Version, u.Version)
		if got.LeaseOwner != "" || !got.LeaseExpires.IsZero() {
			t.Errorf("%s: lease kept (%s until %s)", a, got.LeaseOwner, got.LeaseExpires)
		}
		if got.Epoch != before.Epoch || string(got.Payload) != string(before.Payload) || string(got.Context) != string(before.Context) ||
			got.ID != before.ID || got.Seq != before.Seq || !got.StartedAt.Equal(before.StartedAt) || !got.CreatedAt.Equal(before.CreatedAt) {
			t.Errorf("%s: changed a field no transition writes: %+v", a, got)
		}
	}
	if len(cases) != len(store.Transitions) {
		t.Errorf("%d actions checked, the table has %d", len(cases), len(store.Transitions))
	}
}

func zeroOf(v any) any {
	switch v.(type) {
	case string:
		return ""
	case int:
		return 0
	case time.Time:
		return time.Time{}
	}
	return nil
}

func equalRuns(a, b store.Run) bool {
	return fmt.Sprintf("%+v", a) == fmt.Sprintf("%+v", b)
}

// The guards: a stale epoch is fenced; a reclaim needs an expired lease or
// a gone owner; From narrows an operator action.
func TestApplyGuards(t *testing.T) {
	running := runIn(store.StatusRunning)
	cases := []struct {
		name string
		r    store.Run
		u    store.Update
		f    store.Facts
		want error // nil: allowed
	}{
		{"complete at the epoch", running, store.Update{Action: store.ActionComplete, Epoch: 3, Now: now}, store.Facts{}, nil},
		{"complete at a stale epoch", running, store.Update{Action: store.ActionComplete, Epoch: 2, Now: now}, store.Facts{}, store.ErrFenced},
		{"reclaim an expired lease", running, store.Update{Action: store.ActionReclaim, Epoch: 3, Reclaim: true, Now: now}, store.Facts{}, nil},
		{"reclaim a live lease", running, store.Update{Action: store.ActionReclaim, Epoch: 3, Reclaim: true, Now: now.Add(-time.Second)}, store.Facts{}, store.ErrFenced},
		{"reclaim a live lease of a gone owner", running, store.Update{Action: store.ActionReclaim, Epoch: 3, Reclaim: true, Now: now.Add(-time.Second)}, store.Facts{OwnerGone: true}, nil},
		{"reclaim at a stale epoch", running, store.Update{Action: store.ActionReclaim, Epoch: 2, Reclaim: true, Now: now}, store.Facts{OwnerGone: true}, store.ErrFenced},
		{"cancel narrowed to idle", running, store.Update{Action: store.ActionCancel, From: []store.Status{store.StatusIdle}, Now: now}, store.Facts{}, store.ErrInvalidStatus},
		{"cancel narrowed to running", running, store.Update{Action: store.ActionCancel, From: []store.Status{store.StatusRunning}, Now: now}, store.Facts{}, nil},
		{"attempt action without epoch", running, store.Update{Action: store.ActionFail, Now: now}, store.Facts{}, store.ErrInvalidUpdate},
		{"operator action with epoch", running, store.Update{Action: store.ActionCancel, Epoch: 3, Now: now}, store.Facts{}, store.ErrInvalidUpdate},
		{"reclaim without the flag", running, store.Update{Action: store.ActionReclaim, Epoch: 3, Now: now}, store.Facts{}, store.ErrInvalidUpdate},
		{"fail with the reclaim flag", running, store.Update{Action: store.ActionFail, Epoch: 3, Reclaim: true, Now: now}, store.Facts{}, store.ErrInvalidUpdate},
		{"unknown action", running, store.Update{Action: "explode", Epoch: 3, Now: now}, store.Facts{}, store.ErrInvalidUpdate},
		{"follow-up on fail", running, store.Update{Action: store.ActionFail, Epoch: 3, Now: now, Children: &store.Admission{}}, store.Facts{Admitted: 1}, store.ErrInvalidUpdate},
		{"resolve without an effect", runIn(store.StatusFenced), store.Update{Action: store.ActionResolve, Now: now}, store.Facts{}, store.ErrInvalidUpdate},
		{"retry with an effect", runIn(store.StatusFenced), store.Update{Action: store.ActionRetry, Now: now, CompleteEffect: &store.EffectDone{Key: "k"}}, store.Facts{}, store.ErrInvalidUpdate},
	}
	for _, c := range cases {
		got, err := store.Apply(c.r, c.u, c.f)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if err != nil && !equalRuns(got, c.r) {
			t.Errorf("%s: refused but changed the run", c.name)
		}
	}
}

// A follow-up that admits nothing: complete falls back to errored with the
// update's NoChildren error (its output and follow-up event not recorded), unless the update
// requires the follow-up or gives no NoChildren; resume is refused.
func TestApplyFollowUp(t *testing.T) {
	children := &store.Admission{Event: "next"}
	nc := &store.Outcome{Error: "nobody", ErrorCode: "NOT_ADMITTED"}
	complete := store.Update{Action: store.ActionComplete, Epoch: 3, Now: now, Output: json.RawMessage(`1`), Then: "next", Children: children, NoChildren: nc}
	got, err := store.Apply(runIn(store.StatusRunning), complete, store.Facts{Admitted: 0})
	if err != nil || got.Status != store.StatusErrored || got.Error != "nobody" || got.ErrorCode != "NOT_ADMITTED" || got.Output != nil || got.Then != "old-next" || !got.CompletedAt.Equal(now) {
		t.Errorf("complete, nothing admitted: %v %+v", err, got)
	}
	if got, err := store.Apply(runIn(store.StatusRunning), complete, store.Facts{Admitted: 2}); err != nil || got.Status != store.StatusCompleted || string(got.Output) != "1" || got.Then != "next" || got.Error != "" {
		t.Errorf("complete, admitted: %v %+v", err, got)
	}
	for name, u := range map[string]store.Update{
		"require":       func() store.Update { u := complete; u.RequireChildren = true; return u }(),
		"no NoChildren": func() store.Update { u := complete; u.NoChildren = nil; return u }(),
		"resume":        {Action: store.ActionResume, Now: now, Children: children, NoChildren: nc},
	} {
		r := runIn(store.StatusRunning)
		if u.Action == store.ActionResume {
			r = runIn(store.StatusDeferred)
		}
		if _, err := store.Apply(r, u, store.Facts{}); !errors.Is(err, store.ErrNotAdmitted) {
			t.Errorf("%s: %v, want ErrNotAdmitted", name, err)
		}
	}
	bad := complete
	bad.NoChildren = &store.Outcome{To: store.StatusDead}
	if _, err := store.Apply(runIn(store.StatusRunning), bad, store.Facts{}); !errors.Is(err, store.ErrInvalidUpdate) {
		t.Errorf("fallback to dead: %v, want ErrInvalidUpdate", err)
	}
}

// An update that names no action is given the one its fields used to say.
func TestInferredAction(t *testing.T) {
	cases := []struct {
		u    store.Update
		want store.Action
	}{
		{store.Update{Epoch: 1, To: store.StatusCompleted}, store.ActionComplete},
		{store.Update{Epoch: 1, To: store.StatusDeferred}, store.ActionDefer},
		{store.Update{Epoch: 1, To: store.StatusErrored}, store.ActionFail},
		{store.Update{Epoch: 1, To: store.StatusIdle}, store.ActionRetryLater},
		{store.Update{Epoch: 1, To: store.StatusDead}, store.ActionDeadLetter},
		{store.Update{Epoch: 1, To: store.StatusFenced}, store.ActionFence},
		{store.Update{Epoch: 1, Reclaim: true, To: store.StatusIdle}, store.ActionReclaim},
		{store.Update{To: store.StatusCancelled}, store.ActionCancel},
		{store.Update{To: store.StatusIdle}, store.ActionRetry},
		{store.Update{To: store.StatusIdle, ResetAttempts: true}, store.ActionRequeue},
		{store.Update{To: store.StatusIdle, CompleteEffect: &store.EffectDone{}}, store.ActionResolve},
		{store.Update{To: store.StatusCompleted}, store.ActionResume},
	}
	for _, c := range cases {
		rule, err := c.u.Rule()
		if err != nil || rule.Action != c.want {
			t.Errorf("%+v: %v %v, want %s", c.u, rule, err, c.want)
		}
	}
	for _, u := range []store.Update{{To: store.StatusErrored}, {Epoch: 1, To: store.StatusCancelled}, {Epoch: 1}, {}} {
		if _, err := u.Rule(); !errors.Is(err, store.ErrInvalidUpdate) {
			t.Errorf("%+v: %v, want ErrInvalidUpdate", u, err)
		}
	}
}

// The table's own rules: no action leads to running (only a claim does),
// an error is always set or cleared, attempt and sweeper actions are
// epoch-guarded from running, and every status is reached by some action
// or by admission and claim.
func TestTransitionsWellFormed(t *testing.T) {
	reached := map[store.Status]bool{store.StatusIdle: true, store.StatusRunning: true}
	seen := map[store.Action]bool{}
	for _, r := range store.Transitions {
		if seen[r.Action] {
			t.Errorf("%s: two rules", r.Action)
		}
		seen[r.Action] = true
		if len(r.From) == 0 || len(r.To) == 0 || r.Note == "" || r.Doc == "" {
			t.Errorf("%s: incomplete rule %+v", r.Action, r)
		}
		if r.Error == store.Keep {
			t.Errorf("%s: keeps the error; a transition sets or clears it", r.Action)
		}
		for _, to := range append(slices.Clone(r.To), r.Fallback) {
			if to == store.StatusRunning {
				t.Errorf("%s leads to running", r.Action)
			}
			if to != "" && !to.Valid() {
				t.Errorf("%s leads to unknown status %q", r.Action, to)
			}
			reached[to] = true
		}
		if (r.Actor == store.ActorOperator) != (r.Guard == store.GuardStatus) {
			t.Errorf("%s: actor %s with guard %s", r.Action, r.Actor, r.Guard)
		}
		if r.Guard != store.GuardStatus && !slices.Equal(r.From, []store.Status{store.StatusRunning}) {
			t.Errorf("%s: an epoch guard applies to running runs only, not %v", r.Action, r.From)
		}
		if r.Fallback != "" && (!r.FollowUp || r.FallbackNote == "") {
			t.Errorf("%s: a fallback without a follow-up or its note", r.Action)
		}
	}
	for _, st := range store.Statuses {
		if !reached[st] {
			t.Errorf("no action leads to %s", st)
		}
	}
}

// A wait that found a kept signal for its key (Facts.Signalled) leaves the
// run idle and due at once, noted "signalled", with no wait key; without
// one it leaves the run waiting for the signal until its deadline.
func TestApplyWaitSignalled(t *testing.T) {
	u := updateFor(store.ActionWait, "")
	for _, signalled := range []bool{false, true} {
		r := runIn(store.StatusRunning)
		rule, _ := u.Rule()
		note, err := rule.Apply(&r, &u, store.Facts{Signalled: signalled})
		if err != nil {
			t.Fatal(err)
		}
		want := store.Run{Status: store.StatusWaiting, RetryAt: u.RetryAt, WaitKey: "sig", Attempts: 1}
		wantNote := "waiting"
		if signalled {
			want.Status, want.RetryAt, want.WaitKey, wantNote = store.StatusIdle, time.Time{}, "", "signalled"
		}
		if r.Status != want.Status || !r.RetryAt.Equal(want.RetryAt) || r.WaitKey != want.WaitKey || r.Attempts != want.Attempts || note != wantNote {
			t.Errorf("signalled %v: %s until %s on %q, %d attempts, note %q; want %s until %s on %q, %d, %q", signalled,
				r.Status, r.RetryAt, r.WaitKey, r.Attempts, note, want.Status, want.RetryAt, want.WaitKey, want.Attempts, wantNote)
		}
		if !r.CompletedAt.IsZero() || r.Output != nil || r.Error != "" {
			t.Errorf("signalled %v: completed at %s, output %s, error %q", signalled, r.CompletedAt, r.Output, r.Error)
		}
	}
}
