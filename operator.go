package yella

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/yella-go/yella/store"
)

// cancelledMsg is the error of a cancelled run.
const cancelledMsg = "cancelled by an operator"

// Cancel stops an idle or running run: it becomes cancelled (error code
// CodeCancelled) at once, with no retry scheduled. A running handler's
// context is cancelled and its later writes are fenced. Finished runs give
// CodeInvalidRunState. Retry runs a cancelled run again.
func (e *Engine) Cancel(ctx context.Context, runID string) (Run, error) {
	res, err := e.store.Update(ctx, store.Update{
		RunID: runID, Now: e.clock.Now(), From: []store.Status{store.StatusIdle, store.StatusRunning},
		To: store.StatusCancelled, Error: cancelledMsg, ErrorCode: string(CodeCancelled), Note: "cancelled",
	})
	if err != nil {
		return Run{}, storeErr("cancel", runID, err)
	}
	if !e.disp.Remove(runID) {
		e.mu.Lock()
		a := e.running[runID]
		e.mu.Unlock()
		if a != nil {
			a.cancel(errCancelled)
		}
	}
	ev := runEvent(&res.Run)
	ev.Error, ev.Code = cancelledMsg, CodeCancelled
	e.publish(with(ev, RunCancel))
	return res.Run, nil
}

// Retry moves an errored, dead-letter, fenced or cancelled run back to
// idle. Effects left started are cleared, so their bodies run again: the
// operator accepts that they may have happened. The attempt count is kept (a dead letter
// retried this way fails straight back to the dead letters); use
// RequeueDead to restore the full retry budget.
func (e *Engine) Retry(ctx context.Context, runID string) (Run, error) {
	return e.requeue(ctx, "retry", store.Update{
		RunID: runID, From: []store.Status{store.StatusErrored, store.StatusDead, store.StatusFenced, store.StatusCancelled},
		To: store.StatusIdle, ClearStartedEffects: true, Note: "manual retry",
	}, RunRetryAsked)
}

// RequeueDead moves a dead-letter run back to idle with a fresh retry
// budget; started effects are cleared as with Retry.
func (e *Engine) RequeueDead(ctx context.Context, runID string) (Run, error) {
	return e.requeue(ctx, "requeue", store.Update{
		RunID: runID, From: []store.Status{store.StatusDead}, To: store.StatusIdle,
		ResetAttempts: true, ClearStartedEffects: true, Note: "requeued from dead letter",
	}, RunRequeue)
}

// RequeueAllDead requeues every dead-letter run (of process, if not "") and
// returns how many were requeued. It walks the dead letters once, in
// creation order: a run that dies again meanwhile is not requeued twice.
func (e *Engine) RequeueAllDead(ctx context.Context, process string) (int, error) {
	n := 0
	var after int64
	for {
		runs, err := e.store.Runs(ctx, store.RunFilter{Process: process, Statuses: []store.Status{store.StatusDead},
			Order: store.OldestFirst, Limit: 200, After: after})
		if err != nil {
			return n, storeErr("requeue", "", err)
		}
		if len(runs) == 0 {
			return n, nil
		}
		for _, r := range runs {
			after = r.Seq
			if _, err := e.RequeueDead(ctx, r.ID); err != nil {
				if errors.Is(err, ErrInvalidRunState) {
					continue // changed meanwhile
				}
				return n, err
			}
			n++
		}
	}
}

// CompleteEffect resolves a fenced run by recording its started effect as
// done with output (the operator checked that it happened), then requeues
// the run: the next attempt replays output instead of running the effect.
// key is the stored key, as listed by Effects (Key.String()).
func (e *Engine) CompleteEffect(ctx context.Context, runID, key string, output any) (Run, error) {
	effs, err := e.store.Effects(ctx, runID)
	if err != nil {
		return Run{}, storeErr("complete effect", runID, err)
	}
	found := false
	for _, f := range effs {
		if f.Key == key {
			found = f.Status == store.EffectStarted
			break
		}
	}
	if !found {
		return Run{}, &Error{Code: CodeInvalidRunState, Op: "complete effect", Msg: fmt.Sprintf("run %s has no started effect %q", runID, key)}
	}
	out, err := e.encodePayload(output)
	if err != nil {
		err.(*Error).Op = "complete effect"
		return Run{}, err
	}
	if out == nil {
		out = json.RawMessage("null")
	}
	return e.requeue(ctx, "complete effect", store.Update{
		RunID: runID, From: []store.Status{store.StatusFenced}, To: store.StatusIdle,
		CompleteEffect: &store.EffectDone{Key: key, Output: out}, Note: "effect resolved",
	}, EffectDone)
}

func (e *Engine) requeue(ctx context.Context, op string, u store.Update, t EventType) (Run, error) {
	u.Now = e.clock.Now()
	res, err := e.store.Update(ctx, u)
	if err != nil {
		return Run{}, storeErr(op, u.RunID, err)
	}
	e.enqueue(itemOf(&res.Run))
	ev := runEvent(&res.Run)
	if u.CompleteEffect != nil {
		ev.EffectKey = u.CompleteEffect.Key
	}
	e.publish(with(ev, t))
	return res.Run, nil
}

// Resume releases the follow-up event held by a deferred run: one child run
// per listener, in the same chain, atomically with marking the run resumed
// (a second Resume fails). payload, if not nil, replaces the held payload,
// or is shallow-merged into it when both are JSON objects. If no run can be
// admitted the run stays deferred and the error says why.
func (e *Engine) Resume(ctx context.Context, runID string, payload any) ([]Run, error) {
	r, err := e.store.Run(ctx, runID)
	if err != nil {
		return nil, storeErr("resume", runID, err)
	}
	if r.Status != store.StatusDeferred {
		return nil, &Error{Code: CodeInvalidRunState, Op: "resume", Msg: "run " + runID + " is " + string(r.Status) + ", not deferred"}
	}
	child := r.Output
	if payload != nil {
		enc, err := e.encodePayload(payload)
		if err != nil {
			err.(*Error).Op = "resume"
			return nil, err
		}
		if child, err = mergePayload(r.Output, enc); err != nil {
			return nil, &Error{Code: CodeInvalidPayload, Op: "resume", Err: err}
		}
		if len(child) > e.cfg.MaxPayloadBytes {
			return nil, &Error{Code: CodePayloadTooLarge, Op: "resume", Msg: fmt.Sprintf("merged payload exceeds max size: %d bytes", len(child))}
		}
	}
	if r.Depth+1 > e.cfg.MaxChainDepth {
		ev := runEvent(&r)
		ev.Error, ev.Code = "resume would exceed the max chain depth", CodeChainDepthExceeded
		e.publish(with(ev, RunDepth))
		return nil, &Error{Code: CodeChainDepthExceeded, Op: "resume", Msg: fmt.Sprintf("follow-up of run %s would be at depth %d (limit %d)", runID, r.Depth+1, e.cfg.MaxChainDepth)}
	}
	targets := e.listeners(r.Then)
	if len(targets) == 0 {
		return nil, &Error{Code: CodeNotAdmitted, Op: "resume", Msg: "no process listens to " + quote(r.Then) + "; run stays deferred"}
	}
	now := e.clock.Now()
	res, err := e.store.Update(ctx, store.Update{
		RunID: runID, Now: now, From: []store.Status{store.StatusDeferred}, To: store.StatusCompleted,
		Output: r.Output, Then: r.Then, Note: "resumed", RequireChildren: true,
		Children: &store.Admission{Event: r.Then, Payload: child, Runs: newRuns(targets), ParentID: r.ID,
			CorrelationID: r.CorrelationID, Depth: r.Depth + 1, Context: r.Context, Now: now},
	})
	if err != nil {
		if errors.Is(err, store.ErrNotAdmitted) {
			for _, p := range targets {
				e.publishDrop(r.Then, p.Name, r.CorrelationID)
			}
			return nil, &Error{Code: CodeNotAdmitted, Op: "resume", Msg: "every listener of " + quote(r.Then) + " is at its cap; run stays deferred"}
		}
		return nil, storeErr("resume", runID, err)
	}
	for i := range res.Children.Admitted {
		e.enqueue(itemOf(&res.Children.Admitted[i]))
		e.publish(with(runEvent(&res.Children.Admitted[i]), RunAdmitted))
	}
	for _, d := range res.Children.Dropped {
		e.publishDrop(r.Then, d.Process, r.CorrelationID)
	}
	ev := runEvent(&res.Run)
	ev.Children = runIDs(res.Children.Admitted)
	e.publish(with(ev, RunResume))
	return res.Children.Admitted, nil
}

// mergePayload shallow-merges patch into base when both are JSON objects;
// otherwise patch replaces base.
func mergePayload(base, patch json.RawMessage) (json.RawMessage, error) {
	if !isObject(base) || !isObject(patch) {
		return patch, nil
	}
	var m, p map[string]json.RawMessage
	if err := json.Unmarshal(base, &m); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	for k, v := range p {
		m[k] = v
	}
	return json.Marshal(m)
}

func isObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}
