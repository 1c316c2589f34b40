package yella

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/yella-go/yella/store"
)

// EmitOption configures one emission.
type EmitOption func(*emitOpts)

type emitOpts struct {
	key      string
	priority *int
	delay    time.Duration // Delay
	at       time.Time     // StartAt
	group    string        // Singleton, Debounce
	policy   store.GroupPolicy
	window   time.Duration // Debounce
}

// MaxGroupKeyBytes bounds the key of Singleton and Debounce.
const MaxGroupKeyBytes = 512

// MaxIdempotencyKeyBytes bounds an emission's idempotency key: every store
// keeps it, and indexes it with the event and the process, as text (an
// entry of a PostgreSQL index holds at most about 2.7 KB). Hash a longer
// key, or one that is not text, before passing it.
const MaxIdempotencyKeyBytes = 512

// Singleton admits a run for a listening process only when no run of that
// process emitted with the same key is idle, running or waiting: at most
// one run per key is to run at a time (a sync per user, a rebuild per
// document). An emission refused this way admits nothing for the process
// and names the run that stood in (Emission.Grouped, ReasonGrouped); once
// that run ended (completed, failed, cancelled...), the next emission runs.
func Singleton(key string) EmitOption {
	return func(o *emitOpts) { o.group, o.policy, o.window = key, store.GroupSingleton, 0 }
}

// Debounce runs only the latest of a burst of emissions with the same key:
// the run starts window after the emission, and an emission with the same
// key before it started replaces its payload and context and moves its
// start to window after itself (Emission.Grouped names it,
// ReasonGrouped), so a burst runs once, with its latest event, once it has
// been quiet for window. Once the run started, the next emission admits a
// new run. Per listening process; Delay or StartAt, if later, wins over
// the window.
func Debounce(key string, window time.Duration) EmitOption {
	return func(o *emitOpts) { o.group, o.policy, o.window = key, store.GroupDebounce, window }
}

// Delay admits the runs now and starts them no earlier than d from now:
// they wait idle, with their start time as RetryAt, and keep it across
// restarts. A negative d is refused. See also StartAt.
func Delay(d time.Duration) EmitOption { return func(o *emitOpts) { o.delay, o.at = d, time.Time{} } }

// StartAt admits the runs now and starts them no earlier than t (at once
// when t has passed). The last of Delay and StartAt given wins.
func StartAt(t time.Time) EmitOption { return func(o *emitOpts) { o.at, o.delay = t, 0 } }

// IdempotencyKey makes the emission idempotent: for each (event, key), each
// listening process is admitted at most once while the key is kept, that is
// as long as its run exists and, once retention has pruned the run, until
// Config.KeyRetention (7 days by default) has passed since the emission.
// Repeats return the runs admitted before in Emission.Existing (and, for
// runs already pruned, in Emission.Pruned too). A process dropped at its
// cap does not consume the key. The key must be valid UTF-8 without a NUL
// byte, at most MaxIdempotencyKeyBytes; an emission with another is
// refused (CodeInvalidConfig).
func IdempotencyKey(key string) EmitOption { return func(o *emitOpts) { o.key = key } }

// Reason says why an emission admitted no new run.
type Reason string

// Reasons for an emission that admitted nothing.
const (
	// ReasonDuplicate: every listener was admitted before under the
	// idempotency key (see Emission.Existing).
	ReasonDuplicate Reason = "duplicate"
	// ReasonAtCapacity: every listener not admitted before is at its
	// concurrency cap (see Emission.Dropped).
	ReasonAtCapacity Reason = "at-capacity"
	// ReasonProcessed: every listener was admitted before under the
	// idempotency key and each of those runs has since completed and been
	// pruned by retention; the key is kept (Config.KeyRetention), so the
	// event is not processed again. Emission.Existing and Emission.Pruned
	// name the pruned runs.
	ReasonProcessed Reason = "already-processed"
	// ReasonGrouped: for every listener a run emitted with the same
	// Singleton or Debounce key stood in (see Emission.Grouped).
	ReasonGrouped Reason = "grouped"
)

// Emission reports what an Emit did.
type Emission struct {
	Runs     []string // ids of the runs admitted now, one per listener
	Existing []string // runs admitted earlier under the same idempotency key
	// Pruned lists the runs of Existing that retention has deleted since
	// they completed: Engine.Run no longer finds them.
	Pruned []string
	// Dropped lists the processes at their cap (Process.Overflow) for which
	// nothing was admitted: the event is lost for them unless emitted
	// again. Err turns it into an error.
	Dropped []string
	// Grouped lists the runs emitted earlier with the same Singleton or
	// Debounce key that stood in for this emission's (a debounced run now
	// carries this emission's payload and start time).
	Grouped []string
	Reason  Reason // why no run was admitted now; "" if some were
}

// Err returns an error with CodeDropped (errors.Is(err, ErrDropped)) naming
// the processes for which the event was dropped at their cap, or nil when
// none was. Emit itself does not fail on a drop, because the runs of other
// listeners were admitted; check Err when every listener matters.
func (em Emission) Err() error {
	if len(em.Dropped) == 0 {
		return nil
	}
	return &Error{Code: CodeDropped, Op: "emit", Msg: fmt.Sprintf("event dropped for %s: at the concurrency cap", strings.Join(em.Dropped, ", "))}
}

// Emit admits one run per process listening to event, atomically, and
// returns their ids. The payload is encoded as JSON (nil for none); it must
// fit Config.MaxPayloadBytes and Config.MaxPayloadDepth, and its strings
// must be valid UTF-8. Emitting before Start admits the runs; they
// execute once the engine starts.
//
// Errors: CodeUnknownEvent when no process listens, CodePayloadTooLarge,
// CodeInvalidPayload, CodeSchemaValidationFailed when a listener's
// Process.Validate refuses the payload, CodeStopped after Stop, CodeUnavailable when the
// store fails. On error nothing is admitted.
func (e *Engine) Emit(ctx context.Context, event string, payload any, opts ...EmitOption) (Emission, error) {
	em, _, err := e.emit(ctx, nil, event, payload, opts, false)
	return em, err
}

// emit is Emit, also returning what the store knows of the pruned runs.
// via, if not nil, admits instead of the store, in a caller's transaction
// (EmitTx): its runs are not announced. The runs of a waited emission
// (EmitAndWait) are always queued: its caller waits on the queue.
func (e *Engine) emit(ctx context.Context, via store.Admitter, event string, payload any, opts []EmitOption, waited bool) (Emission, []store.Run, error) {
	var o emitOpts
	for _, opt := range opts {
		opt(&o)
	}
	if err := e.emitting("emit"); err != nil {
		return Emission{}, nil, err
	}
	adm, err := e.admission(event, payload, o)
	if err != nil {
		err.Op = "emit"
		return Emission{}, nil, err
	}
	admit := e.store.Admit
	if via != nil {
		admit = via.Admit
	}
	res, serr := admit(ctx, *adm)
	if serr != nil {
		return Emission{}, nil, storeErr("emit", "", serr)
	}
	if via == nil {
		e.admitted(adm, res, !waited)
	}
	return emissionOf(res), res.Pruned, nil
}

// emitting refuses an emission once the engine is stopping.
func (e *Engine) emitting(op string) error {
	if e.isState(stateStopping) || e.isState(stateStopped) {
		return &Error{Code: CodeStopped, Op: op, Msg: "engine is stopped"}
	}
	return nil
}

// admission checks an event and its payload and builds its admission: one
// new run per listener. The error has no Op: the caller sets it.
func (e *Engine) admission(event string, payload any, o emitOpts) (*store.Admission, *Error) {
	if p := o.priority; p != nil && (*p < -store.MaxPriority || *p > store.MaxPriority) {
		return nil, &Error{Code: CodeInvalidConfig, Field: "Priority", Msg: fmt.Sprintf("priority must be between %d and %d, got %d", -store.MaxPriority, store.MaxPriority, *p)}
	}
	if o.delay < 0 {
		return nil, &Error{Code: CodeInvalidConfig, Field: "Delay", Msg: fmt.Sprintf("delay must not be negative, got %v", o.delay)}
	}
	if o.policy != store.GroupNone && (o.group == "" || len(o.group) > MaxGroupKeyBytes || checkKey("", "", o.group) != nil) {
		return nil, &Error{Code: CodeInvalidConfig, Field: "Group", Msg: fmt.Sprintf("a Singleton or Debounce key must be 1 to %d bytes of UTF-8 without NUL, got %d bytes", MaxGroupKeyBytes, len(o.group))}
	}
	if len(o.key) > MaxIdempotencyKeyBytes || !isText(o.key) {
		return nil, &Error{Code: CodeInvalidConfig, Field: "IdempotencyKey", Msg: fmt.Sprintf("an idempotency key must be at most %d bytes of UTF-8 without NUL, got %d bytes %s", MaxIdempotencyKeyBytes, len(o.key), quote(o.key[:min(len(o.key), 40)]))}
	}
	if o.window < 0 {
		return nil, &Error{Code: CodeInvalidConfig, Field: "Debounce", Msg: fmt.Sprintf("debounce window must not be negative, got %v", o.window)}
	}
	targets := e.listeners(event)
	if len(targets) == 0 {
		return nil, &Error{Code: CodeUnknownEvent, Msg: "no process listens to " + quote(event)}
	}
	enc, err := e.encodePayload(payload)
	if err != nil {
		return nil, err.(*Error)
	}
	if verr := validatePayload(event, targets, enc); verr != nil {
		return nil, verr
	}
	a := &store.Admission{Event: event, Payload: enc, IdempotencyKey: o.key, Now: e.clock.Now(), NotBefore: o.at}
	if o.delay > 0 {
		a.NotBefore = a.Now.Add(o.delay)
	}
	if w := a.Now.Add(o.window); o.window > 0 && w.After(a.NotBefore) {
		a.NotBefore = w
	}
	a.Runs = newRuns(targets, a, o.priority)
	for i := range a.Runs {
		a.Runs[i].GroupKey, a.Runs[i].Group = o.group, o.policy
	}
	return a, nil
}

// emissionOf reports what an admission did.
func emissionOf(res store.AdmitResult) Emission {
	em := Emission{Runs: runIDs(res.Admitted), Existing: runIDs(res.Existing), Pruned: runIDs(res.Pruned), Grouped: runIDs(res.Grouped)}
	em.Existing = append(em.Existing, em.Pruned...)
	for _, d := range res.Dropped {
		em.Dropped = append(em.Dropped, d.Process)
	}
	switch {
	case len(em.Runs) > 0:
	case len(em.Dropped) > 0:
		em.Reason = ReasonAtCapacity
	case len(res.Grouped) > 0 && len(res.Existing) == 0 && len(res.Pruned) == 0:
		em.Reason = ReasonGrouped
	case len(res.Existing) == 0:
		em.Reason = ReasonProcessed
	default:
		em.Reason = ReasonDuplicate
	}
	return em
}

func (e *Engine) publishDrop(event, process, correlation string) {
	e.publish(Event{Type: RunDropped, EventName: event, Process: process, CorrelationID: correlation,
		Code: CodeDropped, Error: "process " + process + " is at its concurrency cap"})
	e.drops.note(e, process, event)
}

// EmitAndWait emits and waits until every run of the chains it admitted
// (and, for a repeated idempotency key, of the runs admitted before) is
// finished: completed, deferred, errored, dead, fenced or cancelled. It
// returns the root runs as they ended. A run waiting for a signal or a
// time is waited for too. A run admitted before and already
// pruned by retention, or pruned once its chain ended before this call read
// it, is returned as the store kept it: ID, Process, Event,
// IdempotencyKey, CreatedAt and Status completed. Delayed retries are
// waited for; ctx bounds the wait (an error with CodeDrainTimeout).
func (e *Engine) EmitAndWait(ctx context.Context, event string, payload any, opts ...EmitOption) ([]Run, error) {
	em, pruned, err := e.emit(ctx, nil, event, payload, opts, true)
	if err != nil {
		return nil, err
	}
	ids := append(append([]string(nil), em.Runs...), em.Existing[:len(em.Existing)-len(pruned)]...)
	out := make([]Run, 0, len(ids)+len(pruned))
	for _, id := range ids {
		r, err := e.store.Run(ctx, id)
		if err != nil {
			return nil, storeErr("emit and wait", id, err)
		}
		if err := e.waitShared(ctx, r.CorrelationID); err != nil {
			return nil, err
		}
		if err := e.waitChain(ctx, r.CorrelationID); err != nil {
			return nil, err
		}
		ended, err := e.store.Run(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			// Retention pruned it once its chain ended (only a completed
			// run is pruned): returned as a pruned run is.
			ended = store.Run{ID: r.ID, Process: r.Process, Event: r.Event, IdempotencyKey: r.IdempotencyKey,
				CreatedAt: r.CreatedAt, Status: store.StatusCompleted}
		case err != nil:
			return nil, storeErr("emit and wait", id, err)
		}
		out = append(out, runOf(ended))
	}
	return append(out, runsOf(pruned)...), nil
}

// encodePayload encodes v as JSON and checks it: at most
// Config.MaxPayloadBytes, nested at most Config.MaxPayloadDepth deep, and
// valid UTF-8 in every string, so that whatever is admitted reads back
// with any strict JSON parser. nil encodes to nil (no payload); a
// json.RawMessage is used as it is once checked. The check is one pass over
// the encoded bytes.
func (e *Engine) encodePayload(v any) (json.RawMessage, error) {
	var b []byte
	raw := false
	switch x := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		b, raw = x, true
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, &Error{Code: CodeInvalidPayload, Msg: "payload is not JSON-encodable", Err: err}
		}
	}
	if len(b) > e.cfg.MaxPayloadBytes {
		return nil, &Error{Code: CodePayloadTooLarge, Msg: fmt.Sprintf("payload exceeds max size: %d bytes > %d", len(b), e.cfg.MaxPayloadBytes)}
	}
	if err := e.checkPayload(b); err != nil {
		return nil, err
	}
	if raw {
		b = append([]byte(nil), b...)
	}
	return b, nil
}

// checkPayload refuses JSON that is malformed, holds invalid UTF-8 or
// nests deeper than Config.MaxPayloadDepth, with CodeInvalidPayload.
func (e *Engine) checkPayload(b []byte) error {
	pe := checkJSON(b, e.cfg.MaxPayloadDepth)
	switch {
	case pe == nil:
		return nil
	case pe.deep:
		return &Error{Code: CodeInvalidPayload, Msg: fmt.Sprintf("payload nests deeper than %d levels (at byte %d)", e.cfg.MaxPayloadDepth, pe.off)}
	case pe.what == "invalid UTF-8":
		return &Error{Code: CodeInvalidPayload, Msg: fmt.Sprintf("payload is not valid UTF-8 (byte 0x%02x at offset %d, in a string)", b[pe.off], pe.off)}
	}
	return &Error{Code: CodeInvalidPayload, Msg: fmt.Sprintf("payload is not valid JSON: %s at byte %d", pe.what, pe.off)}
}

// newRuns builds the new runs of an admission, one per listener.
func newRuns(targets []*registered, a *store.Admission, priority *int) []store.NewRun {
	out := make([]store.NewRun, len(targets))
	for i, p := range targets {
		out[i] = p.newRun(a, priority)
	}
	return out
}

// newID returns a time-ordered UUID (v7), so ids sort by creation.
func newID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

func quote(s string) string { return fmt.Sprintf("%q", s) }
