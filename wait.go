package yella

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/yella-go/yella/store"
)

// ErrWaiting is returned by Sleep, SleepUntil and WaitFor when the run has
// to wait: the handler returns (any Result; c.Error(err) reads best) and
// the attempt ends with the run waiting. It holds no slot and no goroutine
// while it waits; when the wait ends (its time comes, or its signal
// arrives) the handler runs again from the top, its completed effects and
// waits replayed, and the same call returns the wait's outcome instead.
// Once a call returned ErrWaiting, every durable operation of the attempt
// (Effect, SetContext, another wait) returns it too, and the handler's
// result is ignored.
var ErrWaiting = errors.New("the run waits: return from the handler; it runs again when the wait ends")

// MaxSignalKeyBytes bounds a signal key.
const MaxSignalKeyBytes = 512

// wait is a wait the attempt stopped at.
type wait struct {
	key, signal string
	until       time.Time
	join        *joinWatch // a Join's wait: the children it waits for
}

// The outcomes stored in a wait's record (its effect output).
var (
	sleptOutput   = json.RawMessage(`{"slept":true}`)
	timeoutOutput = json.RawMessage(`{"timeout":true}`)
)

// waitRecord is a wait's stored outcome: a signal's payload, or a
// timeout (or, for a sleep, its end).
type waitRecord struct {
	Signal  json.RawMessage `json:"signal,omitempty"`
	Timeout bool            `json:"timeout,omitempty"`
	Slept   bool            `json:"slept,omitempty"`
}

// Sleep makes the run wait d from the first time the handler reaches it,
// durably: the attempt ends (ErrWaiting), the run is waiting until then,
// holding nothing, across restarts, and the handler runs again at that
// time; Sleep then returns nil at once, on that attempt and every later one.
// key names the sleep among the run's effects and waits, as an effect key
// does. A sleep never ends early: the run is claimable at its time on the
// store's clock (the engine's, or each node's with a shared store), and an
// operator may end it early (Engine.EndWait). d <= 0 returns nil at once.
//
//	if err := yella.Sleep(c, "cool-off", 24*time.Hour); err != nil {
//		return c.Error(err)
//	}
func Sleep[K EffectKey](c *Ctx, key K, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	return SleepUntil(c, key, c.a.e.clock.Now().Add(d))
}

// SleepUntil is Sleep until t; a t not after now returns nil at once.
func SleepUntil[K EffectKey](c *Ctx, key K, t time.Time) error {
	k := encodeKey(key)
	_, err := c.a.waitStep("sleep", k, "", t, sleptOutput)
	return err
}

// WaitFor makes the run wait for a signal sent with signal as its key
// (Engine.Signal), for at most timeout (0 or less: no limit), and returns
// the signal's payload decoded into T with true, or, when the timeout
// passed first (or an operator ended the wait), the zero T with false.
// Until then it returns ErrWaiting: return from the handler, and the run
// waits, holding nothing, across restarts. A signal sent before the wait
// began is kept for it (Config.SignalRetention). Each signal ends one
// wait, once: with several runs waiting on one key, the one admitted first
// receives it. key names the wait among the run's effects and waits; the
// outcome is stored under it, so later attempts get the same answer.
//
//	approval, ok, err := yella.WaitFor[Approval](c, "approval", "order:"+id, 48*time.Hour)
//	if err != nil {
//		return c.Error(err)
//	}
func WaitFor[T any, K EffectKey](c *Ctx, key K, signal string, timeout time.Duration) (T, bool, error) {
	var zero T
	if err := checkSignalKey(signal); err != nil {
		err.Op = "wait"
		return zero, false, err
	}
	var until time.Time
	if timeout > 0 {
		until = c.a.e.clock.Now().Add(timeout)
	}
	k := encodeKey(key)
	out, err := c.a.waitStep("wait", k, signal, until, timeoutOutput)
	if err != nil {
		return zero, false, err
	}
	var rec waitRecord
	if err := json.Unmarshal(nullIfEmpty(out), &rec); err != nil {
		return zero, false, &Error{Code: CodeInvalidPayload, Op: "wait", Msg: "stored outcome of wait " + k + " does not decode", Err: err}
	}
	if rec.Signal == nil {
		return zero, false, nil
	}
	var v T
	if err := json.Unmarshal(rec.Signal, &v); err != nil {
		return zero, false, &Error{Code: CodeInvalidPayload, Op: "wait", Msg: "signal of wait " + k + " does not decode", Err: err}
	}
	return v, true, nil
}

// waitStep decides a wait of the handler: its stored outcome (replayed, or
// recorded now as over, when an earlier attempt left it waiting and the
// run was claimed again: its deadline passed or an operator ended it), or
// ErrWaiting after noting the wait for the attempt's end. A wait with no
// signal whose time has come returns over at once without recording.
func (a *attempt) waitStep(op, k, signal string, until time.Time, over json.RawMessage) (json.RawMessage, error) {
	if err := checkKey(op, "wait key", k); err != nil {
		return nil, err
	}
	a.mu.Lock()
	if err := a.fenceErr(op); err != nil {
		a.mu.Unlock()
		return nil, err
	}
	if a.inflight[k] {
		a.mu.Unlock()
		return nil, &Error{Code: CodeEffectInProgress, Op: op, Msg: "effect " + k + " is running in this attempt"}
	}
	rec, ok := a.effects[k]
	a.mu.Unlock()
	if ok && rec.Status == store.EffectCompleted {
		ev := a.event(EffectReplayed)
		ev.EffectKey = k
		a.e.publish(ev)
		return rec.Output, nil
	}
	if ok { // waiting, or started by an attempt that was recording its end
		if _, err := a.beginEffect(k, true); err != nil {
			return nil, err
		}
		if err := a.finishEffect(k, store.EffectCompleted, over, "", a.e.clock.Now()); err != nil {
			return nil, err
		}
		return over, nil
	}
	if signal == "" && !until.After(a.e.clock.Now()) {
		return over, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.fenceErr(op); err != nil {
		return nil, err
	}
	a.wait = &wait{key: k, signal: signal, until: until}
	return nil, ErrWaiting
}

// checkSignalKey refuses an empty or oversized signal key, or one no
// store can keep as text.
func checkSignalKey(key string) *Error {
	switch {
	case key == "":
		return &Error{Code: CodeInvalidSignal, Msg: "signal key is empty"}
	case len(key) > MaxSignalKeyBytes:
		return &Error{Code: CodeInvalidSignal, Msg: fmt.Sprintf("signal key is %d bytes, more than %d", len(key), MaxSignalKeyBytes)}
	case checkKey("", "", key) != nil:
		return &Error{Code: CodeInvalidSignal, Msg: "signal key holds invalid UTF-8 or a NUL byte"}
	}
	return nil
}

// SignalResult says what a signal did.
type SignalResult struct {
	// RunID is the run whose wait the signal ended ("" for none): it runs
	// again, and its WaitFor returns the payload.
	RunID string
	// Kept: no run was waiting for the key; the signal is kept for the
	// next wait on it until Config.SignalRetention has passed.
	Kept bool
}

// Signal sends payload (nil for none) to the run waiting for key
// (WaitFor), durably, once: the wait of the run admitted first among those
// waiting on key ends with it, atomically, and the run runs again. With
// no run waiting the signal is kept, for Config.SignalRetention, for the
// next wait on key, which receives it at once; each kept signal reaches
// one wait. A payload is refused like an emitted one.
func (e *Engine) Signal(ctx context.Context, key string, payload any) (SignalResult, error) {
	return e.signal(ctx, "", key, payload)
}

// SignalRun ends the wait of one waiting run with payload, as Signal does
// for the run's signal key (Run.Signal); CodeInvalidRunState when the run
// does not wait for a signal. Nothing is kept.
func (e *Engine) SignalRun(ctx context.Context, runID string, payload any) (SignalResult, error) {
	r, err := e.store.Run(ctx, runID)
	if err != nil {
		return SignalResult{}, storeErr("signal", runID, err)
	}
	if r.Status != store.StatusWaiting || r.WaitKey == "" {
		what := string(r.Status)
		if r.Status == store.StatusWaiting {
			what = "sleeping"
		}
		return SignalResult{}, &Error{Code: CodeInvalidRunState, Op: "signal", Msg: "run " + runID + " is " + what + ", not waiting for a signal"}
	}
	return e.signal(ctx, runID, r.WaitKey, payload)
}

func (e *Engine) signal(ctx context.Context, runID, key string, payload any) (SignalResult, error) {
	if err := checkSignalKey(key); err != nil {
		err.Op = "signal"
		return SignalResult{}, err
	}
	raw, err := e.encodePayload(payload)
	if err != nil {
		err.(*Error).Op = "signal"
		return SignalResult{}, err
	}
	if raw == nil {
		raw = json.RawMessage("null")
	}
	out, _ := json.Marshal(waitRecord{Signal: raw}) // raw is valid JSON
	now := e.clock.Now()
	req := store.SignalRequest{Key: key, Payload: out, RunID: runID, Now: now}
	if runID == "" && e.cfg.SignalRetention > 0 {
		req.KeepUntil = now.Add(e.cfg.SignalRetention)
	}
	res, err := e.store.Signal(ctx, req)
	if err != nil {
		return SignalResult{}, storeErr("signal", runID, err)
	}
	if res.Woken == nil {
		return SignalResult{Kept: res.Kept}, nil
	}
	e.publish(with(runEvent(res.Woken), RunSignalled))
	e.requeue(res.Woken)
	return SignalResult{RunID: res.Woken.ID}, nil
}

// EndWait ends the wait of a waiting run now, without a signal: the run
// runs again at once, its Sleep returns as if its time had come and its
// WaitFor as if it had timed out. CodeInvalidRunState for a run that is
// not waiting.
func (e *Engine) EndWait(ctx context.Context, runID string) (Run, error) {
	return e.operate(ctx, "end wait", RunWaitEnded, store.Update{RunID: runID, Action: store.ActionEndWait})
}

// waitChain waits until the dispatcher holds no run of the chain corr and
// no run of it is waiting in the store (a wait for a signal has no entry
// in the dispatcher): it waits for the chain's queue to empty, then for a
// wait to end while one is left.
func (e *Engine) waitChain(ctx context.Context, corr string) error {
	for {
		ch := e.disp.CorrelationDone(corr)
		select {
		case <-ch:
		case <-ctx.Done():
			e.disp.ForgetWaiter(corr, ch)
			return &Error{Code: CodeDrainTimeout, Op: "emit and wait", Msg: "chain " + corr + " still active", Err: ctx.Err()}
		}
		woken := e.wokenCh()
		// Runs of processes this engine does not handle are not waited for
		// (their engine may never come), unless they wait.
		waiting, here, err := e.chainState(ctx, corr)
		if err != nil {
			return storeErr("emit and wait", corr, err)
		}
		if !waiting && !here {
			return nil
		}
		if !waiting {
			// Idle or running, and not queued here a moment ago: it is
			// being queued (or ran on its way to final); look again.
			select {
			case <-time.After(time.Millisecond):
			case <-ctx.Done():
				return &Error{Code: CodeDrainTimeout, Op: "emit and wait", Msg: "chain " + corr + " still active", Err: ctx.Err()}
			}
			continue
		}
		select {
		case <-woken:
		case <-ctx.Done():
			return &Error{Code: CodeDrainTimeout, Op: "emit and wait", Msg: "chain " + corr + " still waiting", Err: ctx.Err()}
		}
	}
}

// chainState reports whether a run of the chain corr waits, and whether
// an idle or running run of it belongs to a process this engine handles.
// The chain is never read whole (a fan-out of thousands of runs with large
// payloads and outputs would cost each look all of them): its unfinished
// runs are listed a page at a time (chainPage), until one answers; a
// chain with fewer is read in one listing, one snapshot of its runs.
func (e *Engine) chainState(ctx context.Context, corr string) (waiting, here bool, err error) {
	f := store.RunFilter{CorrelationID: corr, Statuses: []store.Status{store.StatusIdle, store.StatusRunning, store.StatusWaiting}, Order: store.OldestFirst, Limit: chainPage}
	for {
		runs, err := e.store.Runs(ctx, f)
		if err != nil {
			return false, false, err
		}
		for _, r := range runs {
			switch {
			case r.Status == store.StatusWaiting:
				waiting = true
			case !r.Status.Final() && e.lookup(r.Process) != nil:
				here = true
			}
		}
		if waiting || here || len(runs) < f.Limit {
			return waiting, here, nil
		}
		f.After = runs[len(runs)-1].Seq
	}
}

// chainPage is how many runs of a chain one store read of a wait returns
// at most.
const chainPage = 100

// wokenCh returns a channel closed the next time a waiting run is queued
// again (a signal, an operator ending its wait).
func (e *Engine) wokenCh() <-chan struct{} {
	e.wokeMu.Lock()
	defer e.wokeMu.Unlock()
	if e.woke == nil {
		e.woke = make(chan struct{})
	}
	return e.woke
}

// wakeWaiters closes the channel wokenCh handed out.
func (e *Engine) wakeWaiters() {
	e.wokeMu.Lock()
	defer e.wokeMu.Unlock()
	if e.woke != nil {
		close(e.woke)
		e.woke = nil
	}
}
