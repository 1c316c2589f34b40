package yella

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/yella-go/yella/internal/dispatch"
	"github.com/yella-go/yella/store"
)

// The lifecycle pipeline. Every change of a run's status, whoever makes it,
// goes through three steps:
//
//   - decide: pure functions turn a handler's result, the retry policy or an
//     operator's request into a store.Update that names its action;
//   - apply: one store call applies it, as the transition table
//     (store.Transitions) says, atomically with the follow-up runs it admits;
//   - settle: the one place that hands runs to the dispatcher, publishes the
//     admitted, dropped and outcome events, and releases the attempt's slot.
//
// Emit, which creates runs rather than changing one, shares settle's
// admitted: the one place that indexes admitted runs and announces them.

// change is one run's change through the pipeline.
type change struct {
	u store.Update
	// run is the run as the decision saw it: the subject of the events of
	// a change refused before it reached the store.
	run *store.Run
	// slot is the attempt's dispatcher slot, released by settle (nil for
	// changes that hold none).
	slot *dispatch.Item
	// persist retries transient store failures (an attempt's outcome must
	// not be lost); otherwise the caller gets the error.
	persist bool
	dur     time.Duration // the attempt's duration, for the outcome events
	// event is the action's own event, published first: an operator's
	// action, a reclaim. Operator actions publish nothing else.
	event EventType
	// join: the attempt ended waiting in Join for these children.
	join *joinWatch
	// depth: the follow-up would exceed Config.MaxChainDepth.
	depth bool
	// before, if set, runs before each try of the change's write; its
	// error stops the try. An attempt's end writes there again the effect
	// ends it queued that failed (attempt.effectsBefore).
	before func() error
	// written, if set, runs once the store has answered, before the
	// change is settled: an attempt's end waits there for the effect ends
	// it queued (attempt.effectsWritten), whose events come first.
	written func()
}

// commit applies a decided change and settles it: the store's answer and
// error (the slot is released either way).
//
// An attempt's outcome (persist) counts as being written from before its
// store call until it is settled: a later change of the run that lands in
// between (its wait ended by a signal or a join, an operator's action)
// leaves word for that settle (supersede).
func (e *Engine) commit(ctx context.Context, c *change) (store.UpdateResult, error) {
	var res store.UpdateResult
	if c.persist {
		id := c.u.RunID
		e.mu.Lock()
		e.writing[id]++
		e.mu.Unlock()
		defer func() {
			e.mu.Lock()
			if e.writing[id]--; e.writing[id] <= 0 {
				delete(e.writing, id)
				delete(e.superseded, id)
			}
			e.mu.Unlock()
		}()
	}
	err := e.apply(ctx, c, &res)
	if c.written != nil {
		c.written()
	}
	e.settle(c, &res, err)
	return res, err
}

// apply is the pipeline's one store call.
func (e *Engine) apply(ctx context.Context, c *change, res *store.UpdateResult) error {
	if !c.persist {
		return e.update(ctx, c, res)
	}
	return e.persist("finish", func() error {
		if c.before != nil {
			if err := c.before(); err != nil {
				return err
			}
		}
		return e.update(ctx, c, res)
	})
}

// update hands c's update to the store. It is kept out of line: the call
// passes the update and its answer through the stack (a 1.8 KB frame), and
// inlined into apply and into its closure that space was reserved twice on
// the path of every attempt's end, which then outgrew the 8 KB a goroutine
// usually starts with here, so that each attempt's end grew (copied) its
// goroutine's stack.
//
//go:noinline
func (e *Engine) update(ctx context.Context, c *change, res *store.UpdateResult) (err error) {
	*res, err = e.store.Update(ctx, c.u)
	return err
}

// settle makes a change known once the store answered err: follow-up runs
// are handed to the dispatcher and announced, a run an operator ended is
// taken from it, the change's events are published, and a run that is idle
// now (a retry, a requeue) is handed to the dispatcher. The
// attempt's slot is released last, so waiters never see the chain idle in
// between.
func (e *Engine) settle(c *change, res *store.UpdateResult, err error) {
	if c.slot != nil {
		defer e.disp.Done(*c.slot)
	}
	if err != nil {
		e.refused(c, err)
		return
	}
	r := &res.Run
	if c.u.Children != nil {
		e.admitted(c.u.Children, res.Children, false)
	}
	if c.u.Epoch == 0 {
		e.supersede(r)
		if !r.Status.Active() {
			e.stop(r.ID) // an operator ended (or set aside) the run
		}
	}
	e.announce(c, r, res.Children.Admitted)
	if c.join != nil || e.joins.n.Load() > 0 {
		e.joinSettled(r, c.join)
	}
	// After its events: a retry that starts at once must not announce its
	// own outcome before this one.
	switch {
	case r.Status == store.StatusIdle && c.u.Epoch == 0:
		e.requeue(r) // sent back by an operator: queued now, in place of a wait's deadline
	case r.Status == store.StatusIdle, r.Status == store.StatusWaiting && !r.RetryAt.IsZero():
		if !e.supersededSince(r) {
			e.enqueue(itemOf(r)) // now, at its retry's time or at its wait's deadline
		}
	}
}

// supersede records that run r changed again (an operator's action, the
// end of its wait) while an attempt's outcome on it is being written or
// settled: that outcome's settle must not queue the run as the attempt
// left it (supersededSince). A run keeps its epoch until its next claim,
// so r's epoch names that attempt.
func (e *Engine) supersede(r *store.Run) {
	e.mu.Lock()
	if e.writing[r.ID] > 0 {
		e.superseded[r.ID] = r.Epoch
	}
	e.mu.Unlock()
}

// supersededSince reports whether run r, as an attempt left it, has been
// changed since (supersede). Its retry or its wait's deadline must not be
// queued then: the later change queued the run itself or took it out (a
// cancel), and it may even have run and ended already; an entry queued
// for it would stay behind until its time, keeping its chain unfinished
// (EmitAndWait waits for it), and then dispatch a run that is not due.
func (e *Engine) supersededSince(r *store.Run) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	ep, ok := e.superseded[r.ID]
	return ok && ep >= r.Epoch
}

// requeue queues run r anew: an entry queued for it earlier (a waiting
// run's deadline) is replaced by r's. A node's dispatcher holds only runs
// it claimed, never a waiting run's deadline, so an entry found there for
// r is a claim of r in its new state, made after the change that queued
// it (the node's claims run concurrently): removing it would strand a
// claimed run until its lease expired.
func (e *Engine) requeue(r *store.Run) {
	e.supersede(r)
	switch {
	case e.node != nil:
		e.enqueue(itemOf(r))
	case e.lookup(r.Process) != nil:
		e.disp.Replace(itemOf(r))
	default:
		e.disp.Remove(r.ID)
	}
	e.wakeWaiters()
}

// refused publishes what a change the store refused (or the decision
// stopped before the store) still owes: the drops of a follow-up that
// admitted no run, and a depth refusal. Its run is unchanged.
func (e *Engine) refused(c *change, err error) {
	if a := c.u.Children; a != nil && errors.Is(err, store.ErrNotAdmitted) {
		for _, nr := range a.Runs {
			e.publishDrop(a.Event, nr.Process, a.CorrelationID)
		}
	}
	if c.depth && c.run != nil {
		ev := runEvent(c.run)
		ev.Error, ev.Code = err.Error(), CodeOf(err)
		e.publish(with(ev, RunDepthExceeded))
	}
}

// admitted indexes the runs an admission created and announces them, with
// its drops: the one place that does, for emissions and follow-ups alike.
// An emission's runs (emitted) may be left in the store while the queue is
// full (queue.go); follow-ups are always queued.
func (e *Engine) admitted(a *store.Admission, res store.AdmitResult, emitted bool) {
	// Announced before they are queued: a run queued first could start,
	// and publish run:started, before its run:admitted.
	for i := range res.Admitted {
		e.publish(with(runEvent(&res.Admitted[i]), RunAdmitted))
	}
	for i := range res.Admitted {
		switch r := &res.Admitted[i]; {
		case r.Status == store.StatusRunning && e.node != nil:
			e.node.started(r) // admitted claimed by this engine (startHere)
		case emitted && r.Priority <= 0:
			e.queueEmitted(itemOf(r))
		default:
			e.enqueue(itemOf(r))
		}
	}
	for _, d := range res.Dropped {
		e.publishDrop(a.Event, d.Process, a.CorrelationID)
	}
	for i := range res.Grouped {
		if g := &res.Grouped[i]; g.Status == store.StatusIdle && g.Attempts == 0 {
			e.requeue(g) // debounced: queued for its new start
		}
	}
}

// stop takes a run an operator ended from the dispatcher, or cancels the
// attempt executing it here (its later writes are fenced).
func (e *Engine) stop(id string) {
	if e.disp.Remove(id) {
		if e.node != nil {
			e.node.forget(id)
		}
		return
	}
	e.mu.Lock()
	a := e.running[id]
	e.mu.Unlock()
	if a != nil {
		a.cancel(errCancelled)
	}
}

// announce publishes the events of a change that applied: the action's
// own event, then, for an attempt's end or a reclaim, the outcome by the
// run's new status.
func (e *Engine) announce(c *change, r *store.Run, children []store.Run) {
	ev := runEvent(r)
	ev.Duration, ev.Error, ev.Code, ev.Children = c.dur, r.Error, Code(r.ErrorCode), runIDs(children)
	if d := c.u.CompleteEffect; d != nil {
		ev.EffectKey = d.Key
	}
	if c.event != "" {
		e.publish(with(ev, c.event))
	}
	if c.u.Epoch == 0 || c.u.Action == store.ActionHandBack {
		return // an operator's action, or a run left for an engine that has its handler
	}
	if c.u.Action == store.ActionWait {
		e.publish(with(ev, RunWaiting))
		if r.Status == store.StatusIdle { // a signal was kept for it
			e.publish(with(ev, RunSignalled))
		}
		return
	}
	switch r.Status {
	case store.StatusCompleted, store.StatusDeferred:
		e.publish(with(ev, RunCompleted))
		return
	case store.StatusIdle:
		e.publish(with(ev, RunRetryScheduled))
		return
	case store.StatusDead:
		e.publish(with(ev, RunDeadLettered))
	case store.StatusFenced:
		e.publish(with(ev, RunFenced))
	default:
		if c.depth {
			e.publish(with(ev, RunDepthExceeded))
		}
	}
	e.publish(with(ev, RunFailed))
}

// failure decides where an attempt that failed (or was abandoned) goes,
// attempts being its number: retried (not before the time returned),
// dead-lettered past the retry budget, or failed for good when no retry
// policy applies. An abandoned attempt is retried at once, and without a
// policy it is retried Config.AbandonRetries times: it did not fail.
func (e *Engine) failure(p *registered, attempts int, abandoned bool, now time.Time) (store.Action, time.Time) {
	pol := e.cfg.Retry
	if p != nil && p.Retry != nil {
		pol = p.Retry
	}
	switch {
	case pol != nil && attempts <= pol.Max:
		if abandoned {
			return store.ActionRetryLater, time.Time{}
		}
		return store.ActionRetryLater, now.Add(pol.delay(attempts))
	case pol != nil:
		return store.ActionDeadLetter, time.Time{}
	case abandoned && attempts <= e.cfg.AbandonRetries:
		return store.ActionRetryLater, time.Time{}
	case abandoned:
		return store.ActionDeadLetter, time.Time{}
	}
	return store.ActionFail, time.Time{}
}

// retryDelay is the longest delay that err, or an error it wraps, asks of
// the retry through a RetryDelay() time.Duration method (a downstream's
// Retry-After, carried by a connector's error), or 0.
func retryDelay(err error) time.Duration {
	var d time.Duration
	var walk func(error, int)
	walk = func(err error, depth int) {
		if err == nil || depth > 100 {
			return
		}
		if rd, ok := err.(interface{ RetryDelay() time.Duration }); ok {
			d = max(d, rd.RetryDelay())
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap(), depth+1)
		case interface{ Unwrap() []error }:
			for _, w := range u.Unwrap() {
				walk(w, depth+1)
			}
		}
	}
	walk(err, 0)
	return d
}

// later returns the later of t and u.
func later(t, u time.Time) time.Time {
	if u.After(t) {
		return u
	}
	return t
}

// abandonment decides the change of a run whose attempt is gone: one
// attempt counted, retried within the retry budget, else dead-lettered.
// reclaim marks the sweeper's reclaim of a lease whose holder is gone,
// which a lease renewed meanwhile refuses. A run of a process this engine
// does not have is only handed back (idle): its retry policy is not known
// here, so it is not this engine's to end.
func (e *Engine) abandonment(r *store.Run, now time.Time, why string, code Code, reclaim bool) store.Update {
	p := e.lookup(r.Process)
	act, _ := e.failure(p, r.Attempts, true, now)
	if p == nil {
		act = store.ActionRetryLater
	}
	msg := why
	if reclaim && r.LeaseOwner != "" {
		msg = why + " (owner " + r.LeaseOwner + ")"
	}
	u := store.Update{RunID: r.ID, Epoch: r.Epoch, Now: now, Action: act, Error: msg, ErrorCode: string(code), Note: why}
	if reclaim {
		u.Action, u.Reclaim, u.To = store.ActionReclaim, true, store.StatusIdle
		if act == store.ActionDeadLetter {
			u.To = store.StatusDead
		}
	}
	return u
}

// followUp builds the admission of parent's follow-up event: one run per
// process listening to event, one level deeper in parent's chain, with
// payload and the context vars. It is refused, with CodeChainDepthExceeded,
// CodeNotAdmitted or CodeSchemaValidationFailed, past Config.MaxChainDepth,
// when no process listens or when a listener's Validate refuses the
// payload.
func (e *Engine) followUp(parent *store.Run, event string, payload, vars json.RawMessage, now time.Time) (*store.Admission, *Error) {
	if parent.Depth+1 > e.cfg.MaxChainDepth {
		return nil, &Error{Code: CodeChainDepthExceeded, Msg: fmt.Sprintf("max chain depth exceeded: follow-up %s would be at depth %d (limit %d)",
			event, parent.Depth+1, e.cfg.MaxChainDepth)}
	}
	targets := e.listeners(event)
	if len(targets) == 0 {
		return nil, &Error{Code: CodeNotAdmitted, Msg: "follow-up event " + event + " was not admitted: no process listens to it"}
	}
	if verr := validatePayload("follow-up "+event, targets, payload); verr != nil {
		return nil, verr
	}
	a := &store.Admission{Event: event, Payload: payload, ParentID: parent.ID,
		CorrelationID: parent.CorrelationID, Depth: parent.Depth + 1, Context: vars, Now: now}
	a.Runs = newRuns(targets, a, nil)
	return a, nil
}

// startHere asks a shared store to admit the follow-up runs of a that
// this engine runs itself already claimed by it (store.Admission.Start):
// runs of processes registered here with no running cap, flow limit or
// group key, admitted without a delay, while the engine is started. The
// next stage of a chain then starts in this engine as its parent ends,
// without waiting in the queue for a claim: a claim's write and a round
// trip less per stage. A stage so started goes ahead of idle runs of a
// higher rank: work under way is finished first.
func (e *Engine) startHere(a *store.Admission, now time.Time) {
	if e.node == nil || !a.NotBefore.IsZero() || !e.isState(stateStarted) {
		return
	}
	for i := range a.Runs {
		nr := &a.Runs[i]
		p := e.lookup(nr.Process)
		if p == nil || p.Concurrency > 0 || p.flow != (store.Flow{}) || nr.Limit > 0 || nr.GroupKey != "" {
			continue
		}
		nr.Start = true
		if a.Start == nil {
			a.Start = &store.Start{Owner: e.owner, LeaseUntil: now.Add(e.cfg.LeaseTimeout)}
		}
	}
}
