package store

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Action names one transition of the run lifecycle: what an actor does to a
// run. Every Update names one (see Update.Action); the rule of the
// transition table for that action says which runs it applies to and what
// it writes.
type Action string

// Actions. Attempt actions end an attempt the engine holds (Update.Epoch);
// the sweeper reclaims an attempt whose holder is gone; operator actions
// need no lease.
const (
	ActionComplete   Action = "complete"    // the handler succeeded
	ActionDefer      Action = "defer"       // the handler succeeded and holds its follow-up
	ActionFail       Action = "fail"        // the handler failed for good
	ActionRetryLater Action = "retry-later" // the attempt failed (or was abandoned) within the retry budget
	ActionDeadLetter Action = "dead-letter" // the attempt failed (or was abandoned) past the retry budget
	ActionFence      Action = "fence"       // the attempt met an effect of unknown outcome
	ActionHandBack   Action = "hand-back"   // no handler for the run in this engine
	ActionReclaim    Action = "reclaim"     // the attempt's holder is gone
	ActionCancel     Action = "cancel"
	ActionRetry      Action = "manual-retry"
	ActionRequeue    Action = "requeue" // a dead letter with a fresh retry budget
	ActionResolve    Action = "resolve-effect"
	ActionResume     Action = "resume"
	ActionWait       Action = "wait"     // the handler waits for a signal or a time
	ActionEndWait    Action = "end-wait" // an operator ends a wait without a signal
)

// Actor is who performs an action.
type Actor string

// Actors.
const (
	// ActorAttempt: the engine, ending an attempt it holds.
	ActorAttempt Actor = "attempt"
	// ActorSweeper: the engine, for an attempt whose holder is gone.
	ActorSweeper Actor = "sweeper"
	// ActorOperator: a person or program, through the engine's API.
	ActorOperator Actor = "operator"
)

// Guard is the precondition of a rule beyond its from-statuses.
type Guard string

// Guards.
const (
	// GuardStatus: the run's status is one of the rule's From, else a
	// *StatusError.
	GuardStatus Guard = "status"
	// GuardEpoch: the run is running at Update.Epoch, else ErrFenced.
	GuardEpoch Guard = "epoch"
	// GuardReclaim: GuardEpoch, and the lease is abandoned: expired at
	// Update.Now or held by an owner the store knows is gone (Facts.OwnerGone),
	// else ErrFenced. A lease renewed meanwhile is left alone.
	GuardReclaim Guard = "reclaim"
)

// Write says what a transition does to one field of a run.
type Write uint8

// Writes.
const (
	Keep  Write = iota // unchanged
	Set                // set from the update
	Clear              // cleared
)

func (w Write) String() string {
	switch w {
	case Set:
		return "set"
	case Clear:
		return "cleared"
	}
	return "kept"
}

// EffectWrite says what a transition does to the run's effect records.
type EffectWrite uint8

// Effect writes.
const (
	EffectsKept EffectWrite = iota
	// EffectsClearStarted deletes the effects left started, so their bodies
	// run again, and the records of waits that did not end with a signal
	// (EffectWaiting), so those waits begin again.
	EffectsClearStarted
	// EffectsComplete records Update.CompleteEffect as completed.
	EffectsComplete
	// EffectsWait records Update.Wait as a waiting record (EffectWaiting),
	// or, when the store consumed a kept signal for it (Facts.Signalled),
	// as completed with the signal's payload.
	EffectsWait
)

// Rule is one row of the transition table: an action, who performs it, the
// runs it applies to and what it writes. Every transition also clears the
// lease, sets CompletedAt to Update.Now when the new status is final and
// clears it otherwise, sets WaitKey to the signal of the update's wait
// when the run is left waiting and clears it otherwise, stores
// Update.Version when not empty, and appends one timeline entry (the
// update's note, or the rule's).
type Rule struct {
	Action Action
	Actor  Actor
	Guard  Guard
	// From lists the statuses the action applies to.
	From []Status
	// To lists the statuses the action may lead to; the update picks one
	// (Update.To) when there are several, else it is the first.
	To []Status
	// Output, Then, Error (with its code) and RetryAt: kept, set from the
	// update (an empty value clears) or cleared.
	Output, Then, Error, RetryAt Write
	// ResetAttempts sets the attempt count to 0: a fresh retry budget.
	ResetAttempts bool
	// RefundAttempt lowers the attempt count by one: the attempt ended at
	// a wait, not in a failure, so it spends none of the retry budget.
	RefundAttempt bool
	// Signalled is the status the run moves to instead, with RetryAt
	// cleared and the note "signalled", when the store found a kept signal
	// for the update's wait (Facts.Signalled); "" for rules without a wait.
	Signalled Status
	Effects   EffectWrite
	// FollowUp: the update may carry a follow-up admission (Update.Children)
	// committed with it.
	FollowUp bool
	// Fallback is the status a run moves to instead when its follow-up
	// admits no run, with Update.NoChildren's error; "" refuses the update
	// with ErrNotAdmitted instead (and so does any rule when the update sets
	// RequireChildren or carries no NoChildren).
	Fallback Status
	// FallbackNote is the timeline note of the fallback when the update's
	// NoChildren gives none.
	FallbackNote string
	// Note is the timeline note when the update gives none.
	Note string
	// Doc says in a few words what the action is for.
	Doc string
}

var attemptFrom = []Status{StatusRunning}

// Transitions is the transition table every store obeys: one rule per
// action, in lifecycle order. Apply is its reference implementation;
// the conformance suite checks every store against it.
var Transitions = []Rule{
	{Action: ActionComplete, Actor: ActorAttempt, Guard: GuardEpoch, From: attemptFrom, To: []Status{StatusCompleted},
		Output: Set, Then: Set, Error: Clear, RetryAt: Clear, FollowUp: true, Fallback: StatusErrored, FallbackNote: "failed", Note: "completed",
		Doc: "the handler succeeded; its follow-up runs are admitted with it"},
	{Action: ActionDefer, Actor: ActorAttempt, Guard: GuardEpoch, From: attemptFrom, To: []Status{StatusDeferred},
		Output: Set, Then: Set, Error: Clear, RetryAt: Clear, Note: "deferred",
		Doc: "the handler succeeded and holds its follow-up event until resumed"},
	{Action: ActionFail, Actor: ActorAttempt, Guard: GuardEpoch, From: attemptFrom, To: []Status{StatusErrored},
		Error: Set, RetryAt: Clear, Note: "failed",
		Doc: "the handler failed for good (or its follow-up cannot be admitted)"},
	{Action: ActionRetryLater, Actor: ActorAttempt, Guard: GuardEpoch, From: attemptFrom, To: []Status{StatusIdle},
		Output: Clear, Error: Set, RetryAt: Set, Note: "retry scheduled",
		Doc: "the attempt failed or was abandoned within the retry budget: run again, not before the retry time"},
	{Action: ActionDeadLetter, Actor: ActorAttempt, Guard: GuardEpoch, From: attemptFrom, To: []Status{StatusDead},
		Error: Set, RetryAt: Clear, Note: "dead-letter",
		Doc: "the attempt failed or was abandoned and the retry budget is spent"},
	{Action: ActionFence, Actor: ActorAttempt, Guard: GuardEpoch, From: attemptFrom, To: []Status{StatusFenced},
		Error: Set, RetryAt: Clear, Note: "effect fenced",
		Doc: "an effect started by a gone attempt has an unknown outcome: an operator decides"},
	{Action: ActionHandBack, Actor: ActorAttempt, Guard: GuardEpoch, From: attemptFrom, To: []Status{StatusIdle},
		Output: Clear, Error: Clear, RetryAt: Clear, Note: "no handler in this engine",
		Doc: "the engine that claimed the run has no handler for it: left for one that has"},
	{Action: ActionReclaim, Actor: ActorSweeper, Guard: GuardReclaim, From: attemptFrom, To: []Status{StatusIdle, StatusDead},
		Output: Clear, Error: Set, RetryAt: Clear, Note: "lease expired",
		Doc: "the attempt's holder is gone: run again, or dead-letter past the retry budget"},
	{Action: ActionWait, Actor: ActorAttempt, Guard: GuardEpoch, From: attemptFrom, To: []Status{StatusWaiting},
		Output: Clear, Error: Clear, RetryAt: Set, RefundAttempt: true, Effects: EffectsWait, Signalled: StatusIdle, Note: "waiting",
		Doc: "the handler waits for a signal or until a time, holding no slot; a signal kept for it makes the run idle at once"},
	{Action: ActionEndWait, Actor: ActorOperator, Guard: GuardStatus, From: []Status{StatusWaiting}, To: []Status{StatusIdle},
		Error: Clear, RetryAt: Clear, Note: "wait ended",
		Doc: "an operator ends a wait without a signal: the handler runs again and finds the wait timed out"},
	{Action: ActionCancel, Actor: ActorOperator, Guard: GuardStatus, From: []Status{StatusIdle, StatusRunning, StatusWaiting}, To: []Status{StatusCancelled},
		Error: Set, RetryAt: Clear, Note: "cancelled",
		Doc: "stopped by an operator; a running attempt's later writes are fenced"},
	{Action: ActionRetry, Actor: ActorOperator, Guard: GuardStatus, From: []Status{StatusErrored, StatusDead, StatusFenced, StatusCancelled},
		To: []Status{StatusIdle}, Output: Clear, Error: Clear, RetryAt: Clear, Effects: EffectsClearStarted, Note: "manual retry",
		Doc: "run again with the attempts counted so far; started effects run again and waits begin again"},
	{Action: ActionRequeue, Actor: ActorOperator, Guard: GuardStatus, From: []Status{StatusDead}, To: []Status{StatusIdle},
		Output: Clear, Error: Clear, RetryAt: Clear, ResetAttempts: true, Effects: EffectsClearStarted, Note: "requeued from dead letter",
		Doc: "run a dead letter again with a fresh retry budget; started effects run again and waits begin again"},
	{Action: ActionResolve, Actor: ActorOperator, Guard: GuardStatus, From: []Status{StatusFenced}, To: []Status{StatusIdle},
		Output: Clear, Error: Clear, RetryAt: Clear, Effects: EffectsComplete, Note: "effect resolved",
		Doc: "the operator records the fenced effect as done; the next attempt replays it"},
	{Action: ActionResume, Actor: ActorOperator, Guard: GuardStatus, From: []Status{StatusDeferred}, To: []Status{StatusCompleted},
		Error: Clear, RetryAt: Clear, FollowUp: true, Note: "resumed",
		Doc: "release the held follow-up event; refused if it admits no run"},
}

// ErrInvalidUpdate: the update names no action of the table, picks a status
// its action cannot lead to, or carries what its action does not take.
// Nothing was changed. It is a caller's mistake, never worth a retry.
var ErrInvalidUpdate = errors.New("invalid update")

// RuleOf returns the rule of an action, or nil.
func RuleOf(a Action) *Rule {
	for i := range Transitions {
		if Transitions[i].Action == a {
			return &Transitions[i]
		}
	}
	return nil
}

// Rule returns the rule the update follows and checks the update against
// it, without looking at the run: its action (named, or inferred for an
// update that names none), its target (Update.To, one of the rule's) and
// what it carries. Stores call it first and write nothing if it fails.
func (u *Update) Rule() (*Rule, error) {
	a := u.Action
	if a == "" {
		a = u.inferAction()
	}
	r := RuleOf(a)
	switch {
	case r == nil:
		return nil, fmt.Errorf("%w: no action %q (to %q)", ErrInvalidUpdate, a, u.To)
	case u.To != "" && !slices.Contains(r.To, u.To):
		return nil, fmt.Errorf("%w: %s cannot lead to %s", ErrInvalidUpdate, a, u.To)
	case r.Guard == GuardStatus && u.Epoch != 0, r.Guard != GuardStatus && u.Epoch == 0:
		return nil, fmt.Errorf("%w: %s is guarded by %s (epoch %d)", ErrInvalidUpdate, a, r.Guard, u.Epoch)
	case u.Reclaim != (r.Guard == GuardReclaim):
		return nil, fmt.Errorf("%w: %s with Reclaim %v", ErrInvalidUpdate, a, u.Reclaim)
	case u.Children != nil && !r.FollowUp:
		return nil, fmt.Errorf("%w: %s admits no follow-up", ErrInvalidUpdate, a)
	case (u.CompleteEffect != nil) != (r.Effects == EffectsComplete):
		return nil, fmt.Errorf("%w: %s and an effect to complete", ErrInvalidUpdate, a)
	case (u.Wait != nil) != (r.Effects == EffectsWait):
		return nil, fmt.Errorf("%w: %s and a wait", ErrInvalidUpdate, a)
	case u.Wait != nil && u.Wait.Key == "":
		return nil, fmt.Errorf("%w: %s with a wait without a key", ErrInvalidUpdate, a)
	case u.NoChildren != nil && u.NoChildren.To != "" && u.NoChildren.To != r.Fallback:
		return nil, fmt.Errorf("%w: %s falls back to %q, not %s", ErrInvalidUpdate, a, r.Fallback, u.NoChildren.To)
	}
	return r, nil
}

// inferAction names the action of an update that names none, from the
// fields that used to state it: the epoch and reclaim flag (attempt and
// sweeper), the target status and what the update carries.
func (u *Update) inferAction() Action {
	if u.Reclaim {
		return ActionReclaim
	}
	if u.Epoch != 0 {
		switch u.To {
		case StatusCompleted:
			return ActionComplete
		case StatusDeferred:
			return ActionDefer
		case StatusErrored:
			return ActionFail
		case StatusIdle:
			return ActionRetryLater
		case StatusDead:
			return ActionDeadLetter
		case StatusFenced:
			return ActionFence
		case StatusWaiting:
			return ActionWait
		}
		return ""
	}
	switch u.To {
	case StatusCancelled:
		return ActionCancel
	case StatusCompleted:
		return ActionResume
	case StatusIdle:
		switch {
		case u.CompleteEffect != nil:
			return ActionResolve
		case u.ResetAttempts:
			return ActionRequeue
		}
		return ActionRetry
	}
	return ""
}

// Target is the status a run moves to under r when its follow-up (if any)
// admitted something.
func (rule *Rule) Target(u *Update) Status {
	if u.To != "" {
		return u.To
	}
	return rule.To[0]
}

// Facts is what a store knows beyond the run and the update.
type Facts struct {
	// OwnerGone: the run's lease owner is known to be gone, so its lease is
	// abandoned even if it has not expired (GuardReclaim).
	OwnerGone bool
	// Admitted is how many runs the update's follow-up admission admitted.
	Admitted int
	// Signalled: the update's wait found a kept signal for its key (and
	// consumed it): the rule's Signalled outcome applies.
	Signalled bool
}

// Check reports whether the update applies to run r under rule: nil, or
// ErrFenced, or a *StatusError naming r's status.
func (rule *Rule) Check(r *Run, u *Update, f Facts) error {
	if rule.Guard != GuardStatus {
		if r.Status != StatusRunning || r.Epoch != u.Epoch {
			return ErrFenced
		}
		if rule.Guard == GuardReclaim && r.LeaseExpires.After(u.Now) && !f.OwnerGone {
			return ErrFenced
		}
	}
	if !slices.Contains(rule.From, r.Status) || (len(u.From) > 0 && !slices.Contains(u.From, r.Status)) {
		return &StatusError{RunID: r.ID, Status: r.Status}
	}
	return nil
}

// Outcome returns the status, error, code and note the update records
// under rule, given how many runs its follow-up admitted, and whether it
// is the rule's fallback; ErrNotAdmitted if the follow-up admitted nothing
// and the update is refused.
func (rule *Rule) Outcome(u *Update, admitted int) (o Outcome, fallback bool, err error) {
	o = Outcome{To: rule.Target(u), Note: rule.Note}
	if rule.Error == Set {
		o.Error, o.ErrorCode = u.Error, u.ErrorCode
	}
	if u.Note != "" {
		o.Note = u.Note
	}
	if u.Children == nil || admitted > 0 {
		return o, false, nil
	}
	if rule.Fallback == "" || u.RequireChildren || u.NoChildren == nil {
		return o, false, ErrNotAdmitted
	}
	nc := u.NoChildren
	o = Outcome{To: rule.Fallback, Error: nc.Error, ErrorCode: nc.ErrorCode, Note: nc.Note}
	if o.Note == "" {
		o.Note = rule.FallbackNote
	}
	return o, true, nil
}

// Signal turns o, the outcome of a wait whose store found a kept signal
// for it (Facts.Signalled), into the rule's signalled outcome; other
// outcomes are returned as they are.
func (rule *Rule) Signal(o Outcome, signalled bool) Outcome {
	if !signalled || rule.Signalled == "" {
		return o
	}
	return Outcome{To: rule.Signalled, Note: "signalled"}
}

// Apply is the transition table applied to one run: the run after the
// update, or the error that refuses it (ErrInvalidUpdate, ErrFenced, a
// *StatusError, ErrNotAdmitted), in which case nothing changes. It does not
// touch effects, follow-up runs or the timeline, which a store writes
// alongside (see Rule). Payload and Context are returned as they are; the
// result shares them, and Output, with r and u.
func Apply(r Run, u Update, f Facts) (Run, error) {
	rule, err := u.Rule()
	if err != nil {
		return r, err
	}
	next := r
	if _, err := rule.Apply(&next, &u, f); err != nil {
		return r, err
	}
	return next, nil
}

// Apply checks the update against run r and, if it applies, writes into r
// what the rule says and returns the note of the timeline entry to append.
// On error r is unchanged.
func (rule *Rule) Apply(r *Run, u *Update, f Facts) (note string, err error) {
	if err := rule.Check(r, u, f); err != nil {
		return "", err
	}
	o, fallback, err := rule.Outcome(u, f.Admitted)
	if err != nil {
		return "", err
	}
	signalled := f.Signalled && rule.Signalled != ""
	o = rule.Signal(o, signalled)
	out, then := rule.Output, rule.Then
	if fallback { // the primary outcome's output is not recorded
		out, then = Keep, Keep
	}
	r.Status, r.Error, r.ErrorCode = o.To, o.Error, o.ErrorCode
	r.Output = write(out, r.Output, u.Output)
	r.Then = write(then, r.Then, u.Then)
	r.RetryAt = write(rule.RetryAt, r.RetryAt, u.RetryAt)
	if signalled {
		r.RetryAt = time.Time{}
	}
	r.WaitKey = ""
	if r.Status == StatusWaiting && u.Wait != nil {
		r.WaitKey = u.Wait.Signal
	}
	r.LeaseOwner, r.LeaseExpires = "", time.Time{}
	r.CompletedAt = time.Time{}
	if r.Status.Final() {
		r.CompletedAt = u.Now
	}
	if rule.ResetAttempts {
		r.Attempts = 0
	}
	if rule.RefundAttempt && r.Attempts > 0 {
		r.Attempts--
	}
	if u.Version != "" {
		r.Version = u.Version
	}
	return o.Note, nil
}

func write[T any](w Write, cur, v T) T {
	switch w {
	case Set:
		return v
	case Clear:
		var zero T
		return zero
	}
	return cur
}
