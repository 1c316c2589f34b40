package yella

import (
	"errors"
	"strings"

	"github.com/yella-go/yella/store"
)

// Code is a stable, machine-readable error code. Codes are stored on failed
// runs (Run.ErrorCode) and carried by the *Error values the engine returns.
type Code string

// Error codes. They are stable: runs keep them (Run.ErrorCode) and the
// HTTP API and the CLI show them, so a code never changes its meaning.
const (
	CodePayloadTooLarge    Code = "PAYLOAD_TOO_LARGE"
	CodeChainDepthExceeded Code = "CHAIN_DEPTH_EXCEEDED"
	CodeHandlerTimeout     Code = "HANDLER_TIMEOUT"
	// CodeHandlerNotFound is not produced any more: a run whose process an
	// engine does not have is left as it is. Runs ended by earlier versions
	// may carry it.
	CodeHandlerNotFound          Code = "HANDLER_NOT_FOUND"
	CodeSchemaValidationFailed   Code = "SCHEMA_VALIDATION_FAILED"
	CodeProcessAlreadyRegistered Code = "PROCESS_ALREADY_REGISTERED"
	CodeDrainTimeout             Code = "DRAIN_TIMEOUT"
	CodeGracefulStopTimeout      Code = "GRACEFUL_STOP_TIMEOUT"
	CodeLeaseExpired             Code = "LEASE_EXPIRED"
	CodeRunNotFound              Code = "RUN_NOT_FOUND"
	CodeInvalidRunState          Code = "INVALID_RUN_STATE"
	CodeInvalidConfig            Code = "INVALID_CONFIG"

	// CodeUnknownEvent: an event no registered process listens to.
	CodeUnknownEvent Code = "UNKNOWN_EVENT"
	// CodeInvalidPayload: a payload, output or context value that cannot be
	// encoded as JSON.
	CodeInvalidPayload Code = "INVALID_PAYLOAD"
	// CodeStopped: the engine is stopping or stopped.
	CodeStopped Code = "ENGINE_STOPPED"
	// CodeNotStarted: an operation that needs a started engine.
	CodeNotStarted Code = "ENGINE_NOT_STARTED"
	// CodeCancelled: the run was cancelled by an operator.
	CodeCancelled Code = "CANCELLED"
	// CodeNotAdmitted: a follow-up event admitted no run.
	CodeNotAdmitted Code = "NOT_ADMITTED"
	// CodeDropped: an emitted event was dropped for a process at its
	// concurrency cap (Process.Overflow); see Emission.Err.
	CodeDropped Code = "DROPPED"
	// CodeEffectFenced: an effect was found started by an attempt that is
	// gone; its outcome is unknown.
	CodeEffectFenced Code = "EFFECT_FENCED"
	// CodeEffectInProgress: the same effect key was called twice at once
	// within one attempt.
	CodeEffectInProgress Code = "EFFECT_IN_PROGRESS"
	// CodeFenced: a write on behalf of an attempt that no longer owns its run
	// (cancelled, timed out, reclaimed, or the engine stopped).
	CodeFenced Code = "FENCED"
	// CodeUnavailable: the store failed; the operation may succeed later.
	CodeUnavailable Code = "UNAVAILABLE"
	// CodeInvalidQuery: a malformed run query (status, order, cursor…).
	CodeInvalidQuery Code = "INVALID_QUERY"
	// CodePanic: the handler panicked.
	CodePanic Code = "HANDLER_PANIC"
	// CodeInvalidSignal: a signal key that is empty, longer than
	// MaxSignalKeyBytes, or holds invalid UTF-8 or a NUL byte.
	CodeInvalidSignal Code = "INVALID_SIGNAL"
)

// Error is the error type of every engine API. Test it with errors.Is
// against the Err… values (which compare by Code) or read its Code.
type Error struct {
	Code  Code
	Op    string // the API that failed, e.g. "emit", "cancel"
	Field string // for CodeInvalidConfig: the offending field
	Msg   string
	Err   error // underlying cause, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	if e.Msg != "" {
		b.WriteString(e.Msg)
	} else {
		b.WriteString(strings.ToLower(strings.ReplaceAll(string(e.Code), "_", " ")))
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same Code (and, if the
// target names one, the same Field).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Field == "" || t.Field == e.Field) && t.Msg == "" && t.Op == ""
}

// Sentinel errors for errors.Is. They match any *Error with their Code.
var (
	ErrPayloadTooLarge  = &Error{Code: CodePayloadTooLarge}
	ErrInvalidPayload   = &Error{Code: CodeInvalidPayload}
	ErrUnknownEvent     = &Error{Code: CodeUnknownEvent}
	ErrRunNotFound      = &Error{Code: CodeRunNotFound}
	ErrInvalidRunState  = &Error{Code: CodeInvalidRunState}
	ErrInvalidConfig    = &Error{Code: CodeInvalidConfig}
	ErrDuplicateProcess = &Error{Code: CodeProcessAlreadyRegistered}
	ErrStopped          = &Error{Code: CodeStopped}
	ErrNotStarted       = &Error{Code: CodeNotStarted}
	ErrDrainTimeout     = &Error{Code: CodeDrainTimeout}
	ErrStopTimeout      = &Error{Code: CodeGracefulStopTimeout}
	ErrFenced           = &Error{Code: CodeFenced}
	ErrEffectFenced     = &Error{Code: CodeEffectFenced}
	ErrEffectInProgress = &Error{Code: CodeEffectInProgress}
	ErrNotAdmitted      = &Error{Code: CodeNotAdmitted}
	ErrDropped          = &Error{Code: CodeDropped}
	ErrHandlerTimeout   = &Error{Code: CodeHandlerTimeout}
	ErrCancelled        = &Error{Code: CodeCancelled}
	ErrUnavailable      = &Error{Code: CodeUnavailable}
	ErrInvalidQuery     = &Error{Code: CodeInvalidQuery}
)

// CodeOf returns the Code of the first *Error in err's chain, or "".
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// storeErr translates a store error for the API op on run id.
func storeErr(op, id string, err error) error {
	var se *store.StatusError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return &Error{Code: CodeInvalidRunState, Op: op, Msg: "run " + id + " is " + string(se.Status)}
	case errors.Is(err, store.ErrNotFound):
		return &Error{Code: CodeRunNotFound, Op: op, Msg: "run not found: " + id}
	case errors.Is(err, store.ErrFenced):
		return &Error{Code: CodeFenced, Op: op, Msg: "run " + id + " is no longer owned by this attempt"}
	case errors.Is(err, store.ErrNotAdmitted):
		return &Error{Code: CodeNotAdmitted, Op: op, Msg: "follow-up event of run " + id + " admitted no run"}
	case errors.Is(err, store.ErrClosed):
		return &Error{Code: CodeStopped, Op: op, Msg: "store closed", Err: err}
	}
	return &Error{Code: CodeUnavailable, Op: op, Err: err}
}
