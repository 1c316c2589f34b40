package yella

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/yella-go/yella/store"
)

// Key is a composite effect key. Build it with MakeKey; a plain string is a
// key too. The encoding is unambiguous: MakeKey("a:b", "c") and
// MakeKey("a", "b:c") differ, and no plain string equals a composite key.
type Key struct{ enc string }

// MakeKey builds a composite key from parts.
func MakeKey(parts ...string) Key {
	if len(parts) == 1 {
		return Key{"str:" + parts[0]}
	}
	b, _ := json.Marshal(parts) // strings always encode
	return Key{"arr:v1:" + string(b)}
}

// String returns the encoded key as stored.
func (k Key) String() string { return k.enc }

// EffectKey is a string or a Key.
type EffectKey interface{ ~string | Key }

func encodeKey[K EffectKey](k K) string {
	switch v := any(k).(type) {
	case Key:
		return v.enc
	default:
		return "str:" + fmt.Sprint(v)
	}
}

// DecodeKey turns a stored key back into its parts, for display.
func DecodeKey(enc string) []string {
	if s, ok := strings.CutPrefix(enc, "str:"); ok {
		return []string{s}
	}
	if s, ok := strings.CutPrefix(enc, "arr:v1:"); ok {
		var parts []string
		if json.Unmarshal([]byte(s), &parts) == nil {
			return parts
		}
	}
	return []string{enc}
}

// EffectOption configures one Effect call.
type EffectOption func(*effectOpts)

type effectOpts struct {
	idempotent bool
	reconcile  func(ctx context.Context, idempotencyKey string) Reconciliation
}

// Reconciliation is what a Reconcile function found out about an effect
// whose outcome a crash left unknown: EffectDone, EffectNotDone or
// EffectUnknown.
type Reconciliation struct {
	verdict reconcileVerdict
	result  any
}

type reconcileVerdict uint8

const (
	verdictUnknown reconcileVerdict = iota
	verdictDone
	verdictNotDone
)

// EffectDone says the effect did happen, with result (which must encode
// as JSON into the effect's type): it is recorded as completed with it and
// the run goes on without running the body.
func EffectDone(result any) Reconciliation {
	return Reconciliation{verdict: verdictDone, result: result}
}

// EffectNotDone says the effect did not happen: the body runs, with the
// same EffectIdempotencyKey.
func EffectNotDone() Reconciliation { return Reconciliation{verdict: verdictNotDone} }

// EffectUnknown says the outcome cannot be told: the run is fenced for an
// operator, as without a Reconcile function.
func EffectUnknown() Reconciliation { return Reconciliation{} }

// Reconcile gives an effect a way to find out, after a crash, whether it
// happened. When an attempt finds the effect started by an attempt that is
// gone (its outcome unknown), fn is asked first, with the effect's
// EffectIdempotencyKey (a downstream that deduplicates by key can usually
// be asked for it): EffectDone records the effect as completed with the
// result fn gives, and the run continues; EffectNotDone runs the body
// again; EffectUnknown (or a panic in fn) fences the run as usual. fn runs
// only in that case, never on a first execution or a replay.
func Reconcile(fn func(ctx context.Context, idempotencyKey string) Reconciliation) EffectOption {
	return func(o *effectOpts) { o.reconcile = fn }
}

// Idempotent declares that the effect's body is safe to run again with the
// same idempotency key (EffectIdempotencyKey): an effect found started by
// an attempt that is gone is then re-run instead of fencing the run. Use it
// for APIs that deduplicate by key (payments, e-mail providers).
func Idempotent() EffectOption { return func(o *effectOpts) { o.idempotent = true } }

type idemKeyCtx struct{}

// EffectIdempotencyKey returns, inside an effect body, a key that is the same
// for every execution of that effect of that run: pass it to the downstream
// API as its idempotency key. Every effect has one, Idempotent or not: a
// body that failed (a timeout whose request may have landed) runs again on
// the next attempt, and a fenced effect that an operator re-runs runs
// again, both with the same key. Outside an effect body it is "".
func EffectIdempotencyKey(ctx context.Context) string {
	s, _ := ctx.Value(idemKeyCtx{}).(string)
	return s
}

// isText reports whether s is text every store keeps as it is: valid
// UTF-8 without a NUL byte (PostgreSQL's text refuses both).
func isText(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

// checkKey refuses a key that no store can keep as text: invalid UTF-8,
// or a NUL byte (a composite key, MakeKey, escapes any string).
func checkKey(op, what, k string) *Error {
	if !isText(k) {
		return &Error{Code: CodeInvalidPayload, Op: op, Msg: what + " " + strconv.Quote(k) + " holds invalid UTF-8 or a NUL byte (MakeKey encodes any string)"}
	}
	return nil
}

func idempotencyKey(runID, key string) string {
	sum := sha256.Sum256([]byte(key))
	return "yella-" + runID + "-" + hex.EncodeToString(sum[:8])
}

// Effect runs fn at most once per run to completion and returns its result;
// later attempts of the same run (retries, recovery after a crash) return
// the stored result without calling fn. The result must round-trip through
// JSON.
//
// The effect is recorded as started, durably, before fn runs. If an attempt
// finds it started by an attempt that is gone (a crash or timeout while fn
// ran), its outcome is unknown: the run is fenced (status fenced) for an
// operator to re-run the effect (Engine.Retry) or record it as done
// (Engine.CompleteEffect), unless the effect is Idempotent, in which case
// fn runs again with the same EffectIdempotencyKey. An error from fn is
// recorded, and the next attempt runs fn again.
func Effect[T any, K EffectKey](c *Ctx, key K, fn func(ctx context.Context) (T, error), opts ...EffectOption) (T, error) {
	var zero T
	var o effectOpts
	for _, opt := range opts {
		opt(&o)
	}
	a := c.a
	k := encodeKey(key)
	idempotent := o.idempotent
	if o.reconcile != nil && !idempotent && a.startedBefore(k) {
		switch v := a.reconcileEffect(c, k, o.reconcile); v.verdict {
		case verdictDone:
			return resolveEffect[T](a, k, v.result)
		case verdictNotDone:
			idempotent = true // the body runs again
		}
	}
	rec, err := a.beginEffect(k, idempotent)
	if err != nil {
		return zero, err
	}
	if rec != nil { // replay
		var v T
		if err := json.Unmarshal(nullIfEmpty(rec.Output), &v); err != nil {
			return zero, &Error{Code: CodeInvalidPayload, Op: "effect", Msg: "stored output of " + k + " does not decode", Err: err}
		}
		ev := a.event(EffectReplayed)
		ev.EffectKey = k
		a.e.publish(ev)
		return v, nil
	}
	ctx := context.WithValue(context.Context(c), idemKeyCtx{}, idempotencyKey(a.run.ID, k))
	start := a.e.clock.Now()
	v, ferr := callEffect(ctx, fn)
	var out json.RawMessage
	if ferr == nil {
		out, err = json.Marshal(v)
		if err != nil {
			ferr = &Error{Code: CodeInvalidPayload, Op: "effect", Msg: "output of " + k + " is not JSON-encodable", Err: err}
		}
	}
	dur := a.e.clock.Now().Sub(start)
	if err := a.endEffect(k, out, ferr, dur); err != nil {
		return zero, err
	}
	if ferr != nil {
		return zero, ferr
	}
	return v, nil
}

// endEffect records the end of effect k's body (its output, or its error
// ferr, after dur) and publishes effect:completed or effect:failed once it
// is written. A store that can queue the write (store.EffectQueue) gets it
// queued: the handler goes on at once, and its next write (its next
// effect's start, its attempt's end) commits with it or after it, so the
// effect's end is durable before anything the attempt records later, and
// costs no commit of its own. A queued write that fails for a cause that
// passes (the store unreachable) is made again before the attempt's end
// is (effectsBefore), and again after it if it failed only once the end
// was queued (effectsWritten): the side effect happened, and the run must
// not end with its effect left started. Otherwise, and after the attempt's
// end has settled (an abandoned handler that went on), the write is made
// before endEffect returns, and its error is the handler's.
func (a *attempt) endEffect(k string, out json.RawMessage, ferr error, dur time.Duration) error {
	st, msg := store.EffectCompleted, ""
	if ferr != nil {
		st, msg, out = store.EffectFailed, ferr.Error(), nil
	}
	q := &queuedEnd{key: k, status: st, out: out, msg: msg, now: a.e.clock.Now(), ferr: ferr, dur: dur, done: make(chan struct{})}
	if eq, ok := a.e.store.(store.EffectQueue); ok {
		a.effMu.Lock()
		if !a.effSettled {
			wait := eq.QueueFinishEffect(a.e.io, a.run.ID, a.run.Epoch, k, st, q.out, msg, q.now)
			a.effQueued = append(a.effQueued, q)
			a.effMu.Unlock()
			a.recordEffect(k, st, q.out, msg, q.now)
			go func() {
				q.err = wait()
				// The event is published before done is closed: the
				// attempt's end waits for done (effectsWritten), so an
				// effect's event always comes before its run's end event.
				if q.err == nil {
					a.effectEnded(q)
				}
				close(q.done)
			}()
			return nil
		}
		a.effMu.Unlock()
	}
	if err := a.finishEffect(k, st, q.out, msg, q.now); err != nil {
		return err
	}
	a.effectEnded(q)
	return nil
}

// queuedEnd is an effect's end queued to the store (endEffect).
type queuedEnd struct {
	key    string
	status store.EffectStatus
	out    json.RawMessage
	msg    string
	now    time.Time
	ferr   error // the body's error: the event is effect:failed
	dur    time.Duration
	done   chan struct{} // closed once the store has answered
	err    error         // the store's answer, read after done
	redone bool          // written again after err (attempt's end goroutine only)
}

// effectEnded publishes the event of q's end, once written.
func (a *attempt) effectEnded(q *queuedEnd) {
	if q.ferr != nil {
		ev := a.event(EffectFailed)
		ev.EffectKey, ev.Error, ev.Duration = q.key, q.ferr.Error(), q.dur
		a.e.publish(ev)
		return
	}
	ev := a.event(EffectCompleted)
	ev.EffectKey, ev.Duration = q.key, q.dur
	a.e.publish(ev)
}

// effectsBefore writes again, before each try of the attempt's end, the
// queued effect ends already known to have failed for a cause that passes;
// an error stops the end's write (which the engine tries again). Ends not
// yet answered are ahead of the attempt's end in the store's queue.
func (a *attempt) effectsBefore() error {
	a.effMu.Lock()
	qs := a.effQueued
	a.effMu.Unlock()
	for _, q := range qs {
		select {
		case <-q.done:
		default:
			continue
		}
		if q.err == nil || q.redone || permanent(q.err) {
			continue
		}
		if err := a.e.store.FinishEffect(a.e.io, a.run.ID, a.run.Epoch, q.key, q.status, q.out, q.msg, q.now); err != nil && !permanent(err) {
			return err
		}
		q.redone = true
		a.effectEnded(q)
	}
	return nil
}

// effectsWritten runs once the attempt's end is written, before it is
// settled: it makes later effect ends synchronous, waits for the queued
// ones (their events come before the end's), and writes again, until the
// store answers, those that failed only after the end was queued.
func (a *attempt) effectsWritten() {
	a.effMu.Lock()
	a.effSettled = true
	qs := a.effQueued
	a.effMu.Unlock()
	for _, q := range qs {
		<-q.done
	}
	if err := a.e.persist("effect", a.effectsBefore); err != nil {
		a.e.log.Warn("an effect's end could not be recorded", "run", a.run.ID, "err", err)
	}
}

// startedBefore reports whether k was found started by an earlier
// attempt: its outcome is unknown.
func (a *attempt) startedBefore(k string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	rec, ok := a.effects[k]
	return ok && rec.Status == store.EffectStarted && !a.inflight[k]
}

// reconcileEffect asks fn about effect k; a panic counts as unknown.
func (a *attempt) reconcileEffect(c *Ctx, k string, fn func(context.Context, string) Reconciliation) (v Reconciliation) {
	defer func() {
		if p := recover(); p != nil {
			a.e.log.Warn("reconcile panicked: the effect's outcome stays unknown", "run", a.run.ID, "effect", k, "panic", fmt.Sprint(p))
			v = EffectUnknown()
		}
	}()
	key := idempotencyKey(a.run.ID, k)
	return fn(context.WithValue(context.Context(c), idemKeyCtx{}, key), key)
}

// resolveEffect records effect k, found started by a gone attempt, as
// completed with result (a reconcile function's EffectDone), under this
// attempt's epoch, and returns result as the effect's value.
func resolveEffect[T any](a *attempt, k string, result any) (T, error) {
	var zero T
	out, err := json.Marshal(result)
	if err != nil {
		return zero, &Error{Code: CodeInvalidPayload, Op: "effect", Msg: "reconciled result of " + k + " is not JSON-encodable", Err: err}
	}
	var v T
	if err := json.Unmarshal(nullIfEmpty(out), &v); err != nil {
		return zero, &Error{Code: CodeInvalidPayload, Op: "effect", Msg: "reconciled result of " + k + " does not decode into the effect's type", Err: err}
	}
	if _, err := a.beginEffect(k, true); err != nil {
		return zero, err
	}
	if err := a.finishEffect(k, store.EffectCompleted, out, "", a.e.clock.Now()); err != nil {
		return zero, err
	}
	ev := a.event(EffectResolved)
	ev.EffectKey = k
	a.e.publish(ev)
	return v, nil
}

func nullIfEmpty(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

func callEffect[T any](ctx context.Context, fn func(context.Context) (T, error)) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &Error{Code: CodePanic, Op: "effect", Msg: fmt.Sprint(p)}
		}
	}()
	return fn(ctx)
}

// beginEffect decides what an Effect call does: replay (a stored record),
// run (nil, nil) after recording the start, or fail.
func (a *attempt) beginEffect(k string, idempotent bool) (*store.Effect, error) {
	if err := checkKey("effect", "effect key", k); err != nil {
		return nil, err
	}
	a.mu.Lock()
	if err := a.fenceErr("effect"); err != nil {
		a.mu.Unlock()
		return nil, err
	}
	if a.inflight[k] {
		a.mu.Unlock()
		return nil, &Error{Code: CodeEffectInProgress, Op: "effect", Msg: "effect " + k + " is already running in this attempt"}
	}
	if rec, ok := a.effects[k]; ok {
		switch rec.Status {
		case store.EffectCompleted:
			a.mu.Unlock()
			return &rec, nil
		case store.EffectStarted:
			if !idempotent {
				ef := &effectFenced{key: k, epoch: rec.Epoch}
				if a.fence == nil {
					a.fence = ef
				}
				a.mu.Unlock()
				a.abort(ef)
				return nil, &Error{Code: CodeEffectFenced, Op: "effect", Msg: fmt.Sprintf("effect %s was started by attempt epoch %d and its outcome is unknown", k, rec.Epoch)}
			}
		}
	}
	if a.inflight == nil {
		a.inflight = map[string]bool{}
	}
	a.inflight[k] = true
	a.mu.Unlock()
	err := a.e.store.StartEffect(a.e.io, a.run.ID, a.run.Epoch, k, a.e.clock.Now())
	if err != nil {
		a.mu.Lock()
		delete(a.inflight, k)
		a.mu.Unlock()
		return nil, a.writeErr("effect", err)
	}
	return nil, nil
}

// finishEffect records effect k's end (status st, its output or error
// message) and waits until it is written. It is recorded even if the
// attempt was aborted meanwhile: the side effect happened, and recording
// it keeps the next attempt from running it again.
func (a *attempt) finishEffect(k string, st store.EffectStatus, out json.RawMessage, msg string, now time.Time) error {
	err := a.e.store.FinishEffect(a.e.io, a.run.ID, a.run.Epoch, k, st, out, msg, now)
	if err != nil {
		a.mu.Lock()
		delete(a.inflight, k)
		a.mu.Unlock()
		return a.writeErr("effect", err)
	}
	a.recordEffect(k, st, out, msg, now)
	return nil
}

// recordEffect keeps effect k's end for the rest of the attempt: a second
// call of the same effect replays it.
func (a *attempt) recordEffect(k string, st store.EffectStatus, out json.RawMessage, msg string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.inflight, k)
	if a.effects == nil {
		a.effects = map[string]store.Effect{}
	}
	a.effects[k] = store.Effect{RunID: a.run.ID, Key: k, Status: st, Epoch: a.run.Epoch, Output: out, Error: msg, CompletedAt: now}
}

// effectFenced is the abort cause of an attempt that met an effect started
// by an attempt that is gone.
type effectFenced struct {
	key   string
	epoch int64
}

func (e *effectFenced) Error() string {
	return fmt.Sprintf("effect %s was started by attempt epoch %d and its outcome is unknown", e.key, e.epoch)
}

// fenceErr returns the error for a durable operation on an attempt that is
// over, or that reached a wait (ErrWaiting), or nil. Callers hold a.mu.
func (a *attempt) fenceErr(op string) error {
	if a.wait != nil {
		return fmt.Errorf("%s: %w", op, ErrWaiting)
	}
	if !a.over.Load() && a.ctx.Err() == nil {
		return nil
	}
	cause := context.Cause(a.ctx)
	if cause == nil || errors.Is(cause, errAttemptDone) {
		cause = errors.New("attempt finished")
	}
	return &Error{Code: CodeFenced, Op: op, Msg: "run " + a.run.ID + " is no longer owned by this attempt", Err: cause}
}

func (a *attempt) writeErr(op string, err error) error {
	if errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrNotFound) {
		return &Error{Code: CodeFenced, Op: op, Msg: "run " + a.run.ID + " is no longer owned by this attempt"}
	}
	return &Error{Code: CodeUnavailable, Op: op, Err: err}
}

func (a *attempt) setVar(key string, value json.RawMessage) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.fenceErr("set context"); err != nil {
		return err
	}
	prev, had := a.vars[key]
	a.vars[key] = value
	enc, _ := json.Marshal(a.vars) // raw values are valid JSON
	if err := a.e.store.SetContext(a.e.io, a.run.ID, a.run.Epoch, enc); err != nil {
		if had {
			a.vars[key] = prev
		} else {
			delete(a.vars, key)
		}
		return a.writeErr("set context", err)
	}
	return nil
}
