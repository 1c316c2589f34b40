package yella

import (
	"context"
	"errors"
	"fmt"

	"github.com/yella-go/yella/store"
)

// BatchEvent is one event of EmitBatch.
type BatchEvent struct {
	Event string
	// Payload is encoded and checked as Emit's payload is.
	Payload any
	// IdempotencyKey, when not empty, makes this event idempotent as the
	// IdempotencyKey option does for Emit.
	IdempotencyKey string
	// Options are Emit's options for this event (Priority, …). An
	// IdempotencyKey option wins over the IdempotencyKey field.
	Options []EmitOption
}

// EmitBatch admits many events in one call and one store transaction:
// every run of every event, or nothing. It is how a burst (a webhook
// delivery, an import) should enter: one commit for the whole batch
// instead of one per event.
//
// The result holds one Emission per event, in order, as Emit would have
// returned it had the events been emitted one after another: an event
// whose idempotency key an earlier event of the batch (or an earlier
// emission) used reports those runs in Existing, and a process at its cap
// reports the event in Dropped, the batch's earlier runs counting toward
// the cap. A drop or a duplicate does not fail the batch.
//
// Errors: one bad event fails the whole batch before anything is
// admitted, with the code Emit would give (CodeUnknownEvent,
// CodePayloadTooLarge, CodeInvalidPayload) and a message naming the
// event's index; CodeStopped after Stop; CodeUnavailable when the store
// fails. On error nothing is admitted. An empty batch admits nothing and
// returns no error.
func (e *Engine) EmitBatch(ctx context.Context, events []BatchEvent) ([]Emission, error) {
	if err := e.emitting("emit batch"); err != nil {
		return nil, err
	}
	if len(events) == 0 {
		return nil, nil
	}
	adms := make([]store.Admission, len(events))
	for i, ev := range events {
		o := emitOpts{key: ev.IdempotencyKey}
		for _, opt := range ev.Options {
			opt(&o)
		}
		adm, err := e.admission(ev.Event, ev.Payload, o)
		if err != nil {
			err.Op = "emit batch"
			err.Msg = fmt.Sprintf("event %d (%s): %s", i, ev.Event, err.Msg)
			return nil, err
		}
		adms[i] = *adm
	}
	res, err := e.store.AdmitBatch(ctx, adms)
	if err != nil {
		var be *store.BatchError
		if errors.As(err, &be) {
			return nil, storeErr(fmt.Sprintf("emit batch (event %d)", be.Index), "", be.Err)
		}
		return nil, storeErr("emit batch", "", err)
	}
	out := make([]Emission, len(res))
	for i := range res {
		e.admitted(&adms[i], res[i], true)
		out[i] = emissionOf(res[i])
	}
	return out, nil
}
