package yella

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"
)

// Ctx is what a handler receives: the run it executes and the durable
// operations it may perform. It is a context.Context that is cancelled when
// the run is cancelled, times out, loses its lease or the engine is stopped
// hard; pass it to any call that takes a context.
//
// After cancellation every durable operation (SetContext, Effect) fails with
// a fenced error, and the handler's result is ignored (a timeout counts as a
// thrown error). A Ctx must not be used after the handler returns.
type Ctx struct {
	context.Context
	a *attempt
}

// RunID is the id of the run being executed.
func (c *Ctx) RunID() string { return c.a.run.ID }

// CorrelationID is the id shared by every run of this chain (the root
// run's id).
func (c *Ctx) CorrelationID() string { return c.a.run.CorrelationID }

// ParentID is the id of the run whose follow-up event created this one, or
// "" for a root run.
func (c *Ctx) ParentID() string { return c.a.run.ParentID }

// Event is the name of the event that created this run.
func (c *Ctx) Event() string { return c.a.run.Event }

// Process is the name of the process executing.
func (c *Ctx) Process() string { return c.a.run.Process }

// Attempt is the 1-based number of this execution of the run since it was
// admitted (or last requeued from the dead letters).
func (c *Ctx) Attempt() int { return c.a.run.Attempts }

// Depth is the run's depth in its chain (0 for a root run).
func (c *Ctx) Depth() int { return c.a.run.Depth }

// Payload returns the raw JSON payload (nil when emitted without one).
func (c *Ctx) Payload() json.RawMessage { return c.a.run.Payload }

// Decode unmarshals the payload into v.
func (c *Ctx) Decode(v any) error {
	p := c.a.run.Payload
	if p == nil {
		p = json.RawMessage("null")
	}
	if err := json.Unmarshal(p, v); err != nil {
		return fmt.Errorf("decode payload of %s: %w", c.a.run.Event, err)
	}
	return nil
}

// Logger returns the engine's logger with the run's identifiers attached.
func (c *Ctx) Logger() *slog.Logger {
	return c.a.e.log.With("run", c.a.run.ID, "process", c.a.run.Process, "attempt", c.a.run.Attempts)
}

// SetContext stores key = value in the run's context map, durably, before
// returning. Follow-up runs start with a copy of the context as it is when
// this run completes; retries of this run see it too. Setting nil stores
// JSON null. A value is refused like a payload (CodeInvalidPayload) when it
// nests deeper than Config.MaxPayloadDepth or holds invalid UTF-8.
func (c *Ctx) SetContext(key string, value any) error {
	b, err := json.Marshal(value)
	if err != nil {
		return &Error{Code: CodeInvalidPayload, Op: "set context", Msg: "value of " + key + " is not JSON-encodable", Err: err}
	}
	if err := c.a.e.checkPayload(b); err != nil {
		err.(*Error).Op = "set context"
		return err
	}
	return c.a.setVar(key, b)
}

// GetContext decodes the context value of key into v and reports whether
// the key exists.
func (c *Ctx) GetContext(key string, v any) (bool, error) {
	c.a.mu.Lock()
	raw, ok := c.a.vars[key]
	c.a.mu.Unlock()
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("decode context %s: %w", key, err)
	}
	return true, nil
}

// ContextMap returns a copy of the run's context map.
func (c *Ctx) ContextMap() map[string]json.RawMessage {
	c.a.mu.Lock()
	defer c.a.mu.Unlock()
	return maps.Clone(c.a.vars)
}

// Result is what a handler returns; build it with Ctx.OK, Ctx.Fail,
// Ctx.Error or Ctx.Defer. The zero Result is treated as a thrown error.
type Result struct {
	kind      resultKind
	output    any
	then      string
	thenDelay time.Duration
	err       error
	code      Code
}

type resultKind int

const (
	resultNone resultKind = iota
	resultOK
	resultDefer
	resultFail
	resultError
)

// ResultOption refines a Result.
type ResultOption func(*Result)

// Then makes a successful result emit event as a follow-up in the same
// chain: one child run per listener, with the result's output as payload
// and a copy of this run's context. Admission is atomic with the completion.
func Then(event string) ResultOption { return func(r *Result) { r.then = event } }

// ThenAfter starts the follow-up runs of Then no earlier than d after the
// run completes: they are admitted with the completion and wait idle,
// across restarts, until then. A negative d counts as 0.
func ThenAfter(d time.Duration) ResultOption { return func(r *Result) { r.thenDelay = max(d, 0) } }

// WithCode attaches a machine-readable code to a failure.
func WithCode(code Code) ResultOption { return func(r *Result) { r.code = code } }

// OK completes the run with output (nil for none).
func (c *Ctx) OK(output any, opts ...ResultOption) Result {
	r := Result{kind: resultOK, output: output}
	for _, o := range opts {
		o(&r)
	}
	return r
}

// Defer completes the run but holds the follow-up event until an operator
// or program calls Engine.Resume (an approval gate). payload becomes the
// follow-up's payload, merged with or replaced by the one given to Resume.
func (c *Ctx) Defer(event string, payload any) Result {
	return Result{kind: resultDefer, output: payload, then: event}
}

// Fail ends the run as errored, permanently: it is never retried. Use it for
// failures a retry cannot fix (bad input, a rejection).
func (c *Ctx) Fail(err error, opts ...ResultOption) Result {
	if err == nil {
		err = errors.New("failed")
	}
	r := Result{kind: resultFail, err: err}
	for _, o := range opts {
		o(&r)
	}
	return r
}

// Error ends this attempt with a retryable error: the run is retried by its
// retry policy, and goes to the dead letters when the policy is exhausted.
// If err, or an error it wraps, has a method RetryDelay() time.Duration
// that returns d > 0 (a downstream's Retry-After, as connector.Error
// carries it), the retry runs no earlier than d from now, even when the
// policy's backoff is shorter; the retry count is unchanged.
func (c *Ctx) Error(err error) Result {
	if err == nil {
		err = errors.New("error")
	}
	return Result{kind: resultError, err: err, code: CodeOf(err)}
}

// Handle adapts a handler that takes a typed payload. A payload that does
// not decode into In fails the run permanently with
// CodeSchemaValidationFailed before fn runs.
func Handle[In any](fn func(c *Ctx, in In) Result) func(*Ctx) Result {
	return func(c *Ctx) Result {
		var in In
		if err := c.Decode(&in); err != nil {
			return c.Fail(err, WithCode(CodeSchemaValidationFailed))
		}
		return fn(c, in)
	}
}
