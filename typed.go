package yella

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
)

// Validator is implemented by payload types that check themselves beyond
// decoding: Decodes (and so a Topic) calls Validate on every decoded
// payload, at Emit and before the handler runs.
type Validator interface {
	Validate() error
}

// DecodeOption refines how a payload is decoded for validation and for a
// Topic's handler.
type DecodeOption func(*decodeOpts)

type decodeOpts struct{ strict bool }

// Strict refuses payloads with fields the type does not have. Without it
// unknown fields are ignored, as encoding/json does.
func Strict() DecodeOption { return func(o *decodeOpts) { o.strict = true } }

// Decodes returns a Process.Validate function that accepts a payload only
// if it decodes into T (with Strict, only if it has no field T lacks) and,
// when T or *T implements Validator, only if Validate returns nil.
func Decodes[T any](opts ...DecodeOption) func(payload json.RawMessage) error {
	var o decodeOpts
	for _, opt := range opts {
		opt(&o)
	}
	return checker[T](o)
}

// checker is a Process.Validate of payloads of type T decoded with o.
func checker[T any](o decodeOpts) func(payload json.RawMessage) error {
	return func(payload json.RawMessage) error {
		_, err := decodeAs[T](payload, o)
		return err
	}
}

// decodeAs decodes payload (null when empty) into a T and validates it.
func decodeAs[T any](payload json.RawMessage, o decodeOpts) (T, error) {
	var v T
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	if o.strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(&v); err != nil {
		return v, fmt.Errorf("payload does not decode into %T: %w", v, err)
	}
	if dec.More() {
		return v, fmt.Errorf("payload holds more than one JSON value")
	}
	var check Validator
	switch x := any(&v).(type) {
	case Validator:
		check = x
	default:
		if y, ok := any(v).(Validator); ok {
			check = y
		}
	}
	if check != nil {
		if err := check.Validate(); err != nil {
			return v, fmt.Errorf("invalid %T: %w", v, err)
		}
	}
	return v, nil
}

// validatePayload checks enc against every target's Validate, naming the
// first process that refuses it. The error has no Op: the caller sets it.
func validatePayload(event string, targets []*registered, enc json.RawMessage) *Error {
	for _, p := range targets {
		if p.Validate == nil {
			continue
		}
		if err := p.Validate(enc); err != nil {
			return &Error{Code: CodeSchemaValidationFailed, Msg: fmt.Sprintf("payload of %s refused by process %s: %v", event, p.Name, err), Err: err}
		}
	}
	return nil
}

// Topic is a typed event: its name and the type of its payload. Processes
// made with Topic.Process decode the payload into T before the handler
// runs, and the engine refuses at Emit a payload that does not decode (or
// fails T's Validate), so a wrong payload is an error at the call that
// made it rather than a failed run later. A Topic is a value: declare it
// once and share it.
//
//	var orderPlaced = yella.NewTopic[Order]("order:placed")
//	eng.Register(orderPlaced.Process("bill", bill))
//	orderPlaced.Emit(ctx, eng, Order{ID: "o-1"})
//
// String event names keep working: a Topic's events are ordinary events
// named Name().
type Topic[T any] struct {
	name string
	opts decodeOpts
}

// NewTopic declares the typed event name with payload type T.
func NewTopic[T any](name string, opts ...DecodeOption) Topic[T] {
	t := Topic[T]{name: name}
	for _, opt := range opts {
		opt(&t.opts)
	}
	return t
}

// Name is the event's name.
func (t Topic[T]) Name() string { return t.name }

// Process returns a process named name that listens to the topic and runs
// fn with the decoded payload; its Validate refuses, at Emit, payloads
// that do not decode into T or fail T's Validate. Set the Process's other
// fields (caps, retry, timeout) on the returned value before registering
// it.
func (t Topic[T]) Process(name string, fn func(c *Ctx, in T) Result) Process {
	o := t.opts
	return Process{Name: name, On: t.name,
		Run: func(c *Ctx) Result {
			in, err := decodeAs[T](c.a.run.Payload, o)
			if err != nil {
				return c.Fail(fmt.Errorf("decode payload of %s: %w", t.name, err), WithCode(CodeSchemaValidationFailed))
			}
			return fn(c, in)
		},
		Validate: checker[T](o),
	}
}

// Emit admits the topic's event with payload (see Engine.Emit).
func (t Topic[T]) Emit(ctx context.Context, e *Engine, payload T, opts ...EmitOption) (Emission, error) {
	return e.Emit(ctx, t.name, payload, opts...)
}

// Event returns one event of an Engine.EmitBatch, with its idempotency key
// ("" for none).
func (t Topic[T]) Event(payload T, idempotencyKey string) BatchEvent {
	return BatchEvent{Event: t.name, Payload: payload, IdempotencyKey: idempotencyKey}
}

// Then completes the run with output and emits the topic's event as its
// follow-up, with output as the payload (see Ctx.OK and Then). A payload
// that a listener's Validate refuses fails the run instead, with
// CodeSchemaValidationFailed.
func (t Topic[T]) Then(c *Ctx, output T) Result {
	return c.OK(output, Then(t.name))
}

// Defer completes the run and holds the topic's event, with payload, until
// Engine.Resume (see Ctx.Defer).
func (t Topic[T]) Defer(c *Ctx, payload T) Result {
	return c.Defer(t.name, payload)
}
