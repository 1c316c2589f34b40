package yella

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yella-go/yella/internal/dispatch"
	"github.com/yella-go/yella/store"
)

// attempt is one execution of one run by this engine.
type attempt struct {
	e *Engine
	// item is the dispatcher's item, shared with the goroutine that
	// executes the attempt (Dispatcher.Start hands it over): not copied,
	// since an attempt lives as long as its handler, and 10,000 waiting
	// handlers are 10,000 attempts.
	item *dispatch.Item
	// run is the claimed run, as the claim returned it: not copied, for
	// the same reason. Nothing changes it once the attempt is prepared.
	run      *store.Run
	proc     *registered
	ctx      context.Context
	end      context.CancelCauseFunc // ends ctx: only through cancel
	started  time.Time
	trackSeq uint64
	// ended is set by the first cancel, the one whose cause ctx keeps.
	ended atomic.Bool

	// over is set by whoever finalizes the attempt first: the handler
	// returning, or an abort (timeout, cancel, lease loss, hard stop).
	over atomic.Bool

	mu        sync.Mutex
	stopTimer func() bool
	fence     *effectFenced // set when an effect of unknown outcome was met
	vars      map[string]json.RawMessage
	effects   map[string]store.Effect
	inflight  map[string]bool
	wait      *wait // set when the handler reached a wait (ErrWaiting)

	// The effect ends queued to the store (endEffect), and whether the
	// attempt's end has settled them (effectsWritten): later ones are
	// written synchronously. effMu guards both.
	effMu      sync.Mutex
	effQueued  []*queuedEnd
	effSettled bool
}

// execute claims one dispatched run and starts its handler on a goroutine
// of its own. The claim's path (the store call, the attempt's setup) is
// deep, and a goroutine's stack never shrinks back once grown past a
// quarter in use; the handler's goroutine starts with a small stack that
// only the handler's own calls grow, and 10,000 waiting handlers cost
// 10,000 small stacks.
func (e *Engine) execute(it *dispatch.Item) {
	if a := e.begin(it); a != nil {
		go a.execute()
	}
}

// execute runs the handler and records its result, unless an abort
// (timeout, cancel, lease loss, stop) decided the attempt first. Its frame
// and call's are kept small: they are under the handler's frames for as
// long as the handler runs.
func (a *attempt) execute() {
	var res Result
	a.call(&res)
	a.handlerReturned(&res)
}

// handlerReturned records the result of a handler that returned. It is not
// inlined: its frame (the path to the store) is never under the handler's.
//
//go:noinline
func (a *attempt) handlerReturned(res *Result) {
	if a.ctx.Err() != nil {
		return // aborted: aborted decides
	}
	if a.over.CompareAndSwap(false, true) {
		// The attempt ended now: read before the slot is free, since the
		// next run may start at once (and, on a fake clock, move it).
		now := a.e.clock.Now()
		a.e.disp.Vacate(a.item)
		a.finalizeAt(*res, false, now)
	}
}

// begin claims the run and prepares its attempt; nil means there is
// nothing to execute (the run is already dealt with).
func (e *Engine) begin(it *dispatch.Item) *attempt {
	if e.node != nil {
		if r, ok := e.node.take(it.ID); ok { // claimed through the shared store
			return e.prepare(it, r)
		}
	}
	if e.lookup(it.Process) == nil { // unregistered since it was queued: leave the run idle
		e.disp.Done(*it)
		return nil
	}
	now := e.clock.Now()
	req := store.ClaimRequest{IDs: []string{it.ID}, Seqs: []int64{it.Seq}, Owner: e.owner, Now: now, LeaseUntil: now.Add(e.cfg.LeaseTimeout)}
	if f := it.Flow; f != nil && !f.TAT.IsZero() {
		// The start is dated when the rate key granted it, a moment ago:
		// the recorded starts of a key then obey its limit exactly.
		req.Now, req.RateTATs = f.Granted, []time.Time{f.TAT}
	}
	runs, err := e.store.Claim(e.io, req)
	if err != nil {
		e.storeFailed("claim", err)
		if !e.isState(stateStopping) && !e.isState(stateStopped) {
			// The run is still idle in the store; try it again later rather
			// than forget it.
			it.RetryAt = now.Add(e.nextBackoff(now))
			e.enqueue(*it)
		}
		e.disp.Done(*it)
		return nil
	}
	e.resetBackoff()
	if len(runs) == 0 { // cancelled or claimed meanwhile
		e.disp.Done(*it)
		return nil
	}
	return e.prepare(it, &runs[0])
}

// nextBackoff is the wait before a claim that failed at now is tried
// again. The wait doubles once per round of failures, not once per failed
// claim: the slots whose claims fail together (a full disk fails every
// one of them) are one round, and doubling for each of fifty would reach
// the cap at once, leaving the engine idle for half a minute after the
// cause has passed. A failure at or after the end of the current wait is
// a new round.
func (e *Engine) nextBackoff(now time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.backoff == 0 || !now.Before(e.backoffSince.Add(e.backoff)) {
		e.backoff = min(max(e.backoff*2, time.Second), 30*time.Second)
		e.backoffSince = now
	}
	return e.backoff
}

func (e *Engine) resetBackoff() {
	e.mu.Lock()
	e.backoff = 0
	e.mu.Unlock()
}

// prepare sets up an attempt of a claimed run: context, effects of earlier
// attempts, timeout, abort handling, and publishes run:started.
func (e *Engine) prepare(it *dispatch.Item, r *store.Run) *attempt {
	a := &attempt{e: e, item: it, run: r, proc: e.lookup(r.Process), started: e.clock.Now()}
	// Not a child of the engine's context: a hard stop cancels the
	// attempts it tracks (track, stopAttempts), so ctx ends only through
	// cancel, which runs the abort; a child context would need a
	// registration in its parent and an AfterFunc, a few hundred bytes
	// per waiting handler.
	a.ctx, a.end = context.WithCancelCause(context.Background())
	e.track(a)
	if a.proc == nil { // unregistered between the check in begin and the claim
		a.over.Store(true)
		a.release()
		c := &change{u: store.Update{RunID: r.ID, Epoch: r.Epoch, Now: a.started, Action: store.ActionHandBack}, run: r, slot: a.item}
		if _, err := e.commit(e.io, c); err != nil && !errors.Is(err, store.ErrFenced) {
			e.internalError("hand back", err)
		}
		return nil
	}
	if len(r.Context) > 0 {
		if err := json.Unmarshal(r.Context, &a.vars); err != nil {
			e.internalError("decode context", err)
		}
	}
	if a.vars == nil {
		a.vars = map[string]json.RawMessage{}
	}
	if r.Epoch > 1 { // earlier attempts may have recorded effects
		effs, err := e.store.Effects(e.io, r.ID)
		if err != nil {
			a.over.Store(true)
			a.finalize(Result{kind: resultError, err: fmt.Errorf("load effects: %w", err), code: CodeUnavailable}, false)
			return nil
		}
		a.effects = make(map[string]store.Effect, len(effs))
		for _, f := range effs {
			a.effects[f.Key] = f
		}
	}
	timeout := e.cfg.HandlerTimeout
	if a.proc.Timeout != 0 {
		timeout = a.proc.Timeout
	}
	// An abort may start before the timer is set: if ctx has ended, the
	// abort's release has run or waits for a.mu, and no timer is needed.
	a.mu.Lock()
	if timeout > 0 && a.ctx.Err() == nil {
		a.stopTimer = e.clock.AfterFunc(timeout, func() { a.cancel(errTimeout) })
	}
	a.mu.Unlock()
	e.publish(a.event(RunStarted))
	return a
}

func (e *Engine) track(a *attempt) {
	e.mu.Lock()
	e.trackSeq++
	a.trackSeq = e.trackSeq
	e.running[a.run.ID] = a
	stopped := e.attemptsStopped
	e.mu.Unlock()
	if stopped {
		a.cancel(errStopped)
	}
}

// stopAttempts ends, with errStopped, every attempt this engine tracks
// and every one it tracks from now on: a hard stop.
func (e *Engine) stopAttempts() {
	e.stopRun(errStopped)
	e.mu.Lock()
	e.attemptsStopped = true
	as := make([]*attempt, 0, len(e.running))
	for _, a := range e.running {
		as = append(as, a)
	}
	e.mu.Unlock()
	for _, a := range as {
		a.cancel(errStopped)
	}
}

func (e *Engine) untrack(a *attempt) {
	e.mu.Lock()
	if e.running[a.run.ID] == a {
		delete(e.running, a.run.ID)
	}
	e.mu.Unlock()
}

// call runs the handler into res, turning a panic into a thrown error.
func (a *attempt) call(res *Result) {
	defer a.recovered(res)
	*res = a.proc.Run(&Ctx{Context: a.ctx, a: a})
}

// recovered turns a handler's panic into a thrown error.
func (a *attempt) recovered(res *Result) {
	if p := recover(); p != nil {
		*res = Result{kind: resultError, err: fmt.Errorf("handler panicked: %v", p), code: CodePanic}
	}
}

// abort ends the attempt early with cause.
func (a *attempt) abort(cause error) { a.cancel(cause) }

// cancel ends the attempt's context with cause, if it has not ended. The
// first cancel decides: unless it is the attempt's own end
// (errAttemptDone), aborted runs, on a goroutine of its own, since a
// caller may hold locks the abort's commit needs.
func (a *attempt) cancel(cause error) {
	if !a.ended.CompareAndSwap(false, true) {
		return
	}
	a.end(cause)
	if cause != errAttemptDone {
		go a.aborted()
	}
}

// aborted runs when the attempt's context ends early. If the handler has not
// finished, the abort decides the outcome and frees the slot; the handler
// keeps running in the background with every write fenced.
func (a *attempt) aborted() {
	cause := context.Cause(a.ctx)
	if errors.Is(cause, errAttemptDone) || !a.over.CompareAndSwap(false, true) {
		return
	}
	var ef *effectFenced
	switch {
	case errors.Is(cause, errTimeout):
		a.finalize(Result{kind: resultError, err: errors.New("handler timed out"), code: CodeHandlerTimeout}, false)
	case errors.As(cause, &ef):
		a.finalize(Result{kind: resultFail, err: ef, code: CodeEffectFenced}, true)
	case errors.Is(cause, errStopped):
		a.release()
		a.e.abandon(a.run, a.e.clock.Now(), "engine stopped", CodeStopped, false, a.item)
	default: // cancelled (already recorded) or lease lost (the new owner decides)
		a.release()
		a.e.disp.Done(*a.item)
	}
}

// release stops the attempt's timers and forgets it.
func (a *attempt) release() {
	a.mu.Lock()
	stopTimer := a.stopTimer
	a.mu.Unlock()
	if stopTimer != nil {
		stopTimer()
	}
	a.cancel(errAttemptDone)
	a.e.untrack(a)
}

// finalize records the attempt's outcome and frees its slot. Exactly one
// caller (the one that set over) runs it.
func (a *attempt) finalize(res Result, fenced bool) {
	a.finalizeAt(res, fenced, a.e.clock.Now())
}

// finalizeAt is finalize for an attempt that ended at now.
func (a *attempt) finalizeAt(res Result, fenced bool, now time.Time) {
	e := a.e
	a.release()
	c := a.decide(res, fenced, now)
	c.run, c.slot, c.persist, c.dur = a.run, a.item, true, now.Sub(a.started)
	c.before, c.written = a.effectsBefore, a.effectsWritten
	if _, err := e.commit(e.io, c); err != nil && !errors.Is(err, store.ErrFenced) {
		e.internalError("finish", err)
	}
}

// decide turns a handler's result into the change that records it.
func (a *attempt) decide(res Result, fenced bool, now time.Time) *change {
	e := a.e
	c := &change{u: store.Update{RunID: a.run.ID, Epoch: a.run.Epoch, Now: now}}
	u := &c.u
	if a.proc != nil {
		u.Version = a.proc.Version
	}
	a.mu.Lock()
	ef := a.fence
	a.mu.Unlock()
	if ef != nil { // whatever the handler made of the error, the run stops here
		res, fenced = Result{kind: resultFail, err: ef, code: CodeEffectFenced}, true
	}
	a.mu.Lock()
	w := a.wait
	a.mu.Unlock()
	if w != nil && ef == nil { // whatever the handler returned, the run waits
		u.Action, u.RetryAt, u.Wait = store.ActionWait, w.until, &store.Wait{Key: w.key, Signal: w.signal}
		c.join = w.join
		return c
	}
	failed := func(act store.Action, err error, code Code) *change {
		u.Action, u.Error, u.ErrorCode = act, err.Error(), string(code)
		return c
	}
	thrown := func(err error, code Code) *change {
		act, retryAt := e.failure(a.proc, a.run.Attempts, false, now)
		if d := retryDelay(err); act == store.ActionRetryLater && d > 0 {
			retryAt = later(retryAt, now.Add(d))
		}
		u.RetryAt = retryAt
		return failed(act, err, code)
	}
	switch res.kind {
	case resultFail:
		if fenced {
			return failed(store.ActionFence, res.err, res.code)
		}
		return failed(store.ActionFail, res.err, res.code)
	case resultError:
		return thrown(res.err, res.code)
	case resultNone:
		return thrown(errors.New("handler returned an empty Result; return c.OK, c.Fail, c.Error or c.Defer"), "")
	}
	out, err := e.encodePayload(res.output)
	if err != nil {
		return thrown(err, CodeOf(err))
	}
	u.Output, u.Then = out, res.then
	if res.kind == resultDefer {
		u.Action = store.ActionDefer
		return c
	}
	u.Action = store.ActionComplete
	if res.then == "" {
		return c
	}
	a.mu.Lock()
	vars, _ := json.Marshal(a.vars)
	a.mu.Unlock()
	adm, ferr := e.followUp(a.run, res.then, out, vars, now)
	if ferr != nil {
		c.depth = ferr.Code == CodeChainDepthExceeded
		return failed(store.ActionFail, errors.New(ferr.Msg), ferr.Code)
	}
	if res.thenDelay > 0 {
		adm.NotBefore = now.Add(res.thenDelay)
	}
	e.startHere(adm, now)
	u.Children = adm
	u.NoChildren = &store.Outcome{ErrorCode: string(CodeNotAdmitted),
		Error: "follow-up event " + res.then + " was not admitted: every listener is at its concurrency cap"}
	return c
}

// persist runs a store write, retrying transient failures with backoff so
// that a full disk or a locked file delays the engine without losing the
// outcome. It gives up on fencing and when the engine is stopped hard.
func (e *Engine) persist(op string, write func() error) error {
	wait := 100 * time.Millisecond
	for {
		err := write()
		if err == nil {
			e.storeOK()
			return nil
		}
		if permanent(err) {
			return err
		}
		e.storeFailed(op, fmt.Errorf("%w (retrying in %s)", err, wait))
		if !e.sleep(wait) {
			return err
		}
		wait = min(wait*2, 30*time.Second)
	}
}

// permanent reports that a store's error is its answer, not a failure to
// reach it: trying the write again would get the same.
func permanent(err error) bool {
	return errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrNotFound) ||
		errors.Is(err, store.ErrInvalidStatus) || errors.Is(err, store.ErrClosed) ||
		errors.Is(err, store.ErrNotAdmitted) || errors.Is(err, store.ErrInvalidUpdate)
}

// event is the event t of the attempt's run, running. Its callers set the
// rest of its fields on the copy it returns: an event passed to a function
// through a pointer it cannot see into would be allocated.
func (a *attempt) event(t EventType) Event {
	ev := runEvent(a.run)
	ev.Type = t
	ev.Status = StatusRunning
	return ev
}

func runIDs(rs []store.Run) []string {
	if len(rs) == 0 {
		return nil
	}
	ids := make([]string, len(rs))
	for i := range rs {
		ids[i] = rs[i].ID
	}
	return ids
}
