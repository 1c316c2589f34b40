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
	return e.operate(ctx, "cancel", RunCancelled, store.Update{RunID: runID, Action: store.ActionCancel, Error: cancelledMsg, ErrorCode: string(CodeCancelled)})
}

// Retry moves an errored, dead-letter, fenced or cancelled run back to
// idle. Effects left started are cleared, so their bodies run again: the
// operator accepts that they may have happened. The attempt count is kept (a dead letter
// retried this way fails straight back to the dead letters); use
// RequeueDead to restore the full retry budget.
func (e *Engine) Retry(ctx context.Context, runID string) (Run, error) {
	return e.operate(ctx, "retry", RunRetried, store.Update{RunID: runID, Action: store.ActionRetry})
}

// RequeueDead moves a dead-letter run back to idle with a fresh retry
// budget; started effects are cleared as with Retry.
func (e *Engine) RequeueDead(ctx context.Context, runID string) (Run, error) {
	return e.operate(ctx, "requeue", RunRequeued, store.Update{RunID: runID, Action: store.ActionRequeue})
}

// operate applies an operator's action to a run through the lifecycle
// pipeline and publishes event; op names it in errors.
func (e *Engine) operate(ctx context.Context, op string, event EventType, u store.Update) (Run, error) {
	u.Now = e.clock.Now()
	res, err := e.commit(ctx, &change{u: u, event: event})
	if err != nil {
		return Run{}, storeErr(op, u.RunID, err)
	}
	return runOf(res.Run), nil
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
	out, err := e.effectOutput("complete effect", output)
	if err != nil {
		return Run{}, err
	}
	return e.recordEffectDone(ctx, runID, key, out)
}

// effectOutput encodes an operator's result of an effect (nil: null).
func (e *Engine) effectOutput(op string, output any) (json.RawMessage, error) {
	out, err := e.encodePayload(output)
	if err != nil {
		err.(*Error).Op = op
		return nil, err
	}
	if out == nil {
		out = json.RawMessage("null")
	}
	return out, nil
}

// recordEffectDone records run's started effect key as done with out and
// requeues the run (CompleteEffect, once the effect is known started).
func (e *Engine) recordEffectDone(ctx context.Context, runID, key string, out json.RawMessage) (Run, error) {
	return e.operate(ctx, "complete effect", EffectResolved, store.Update{RunID: runID, Action: store.ActionResolve,
		CompleteEffect: &store.EffectDone{Key: key, Output: out}})
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
	now := e.clock.Now()
	c := &change{u: store.Update{RunID: runID, Now: now, Action: store.ActionResume}, run: &r, event: RunResumed}
	adm, ferr := e.followUp(&r, r.Then, child, r.Context, now)
	if ferr != nil {
		ferr.Op, ferr.Msg = "resume", ferr.Msg+"; run "+runID+" stays deferred"
		c.depth = ferr.Code == CodeChainDepthExceeded
		e.settle(c, nil, ferr)
		return nil, ferr
	}
	c.u.Children = adm
	res, err := e.commit(ctx, c)
	if errors.Is(err, store.ErrNotAdmitted) {
		return nil, &Error{Code: CodeNotAdmitted, Op: "resume", Msg: "every listener of " + quote(r.Then) + " is at its cap; run stays deferred"}
	}
	if err != nil {
		return nil, storeErr("resume", runID, err)
	}
	return runsOf(res.Children.Admitted), nil
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
