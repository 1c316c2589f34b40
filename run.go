package yella

import (
	"encoding/json"
	"time"

	"github.com/yella-go/yella/store"
)

// The types in this file are what the engine's read and operator methods
// return. The store keeps records of its own (package store, a contract
// between the engine and its storage that may change between releases);
// the engine converts them at its boundary with the *Of functions below,
// so this API stays put when storage changes.

// Status is where a run stands, as an operator sees it. It refines the raw
// State: waiting is a kind of idle; deferred is a kind of completed;
// dead-letter, fenced and cancelled are kinds of errored.
type Status string

// Run statuses.
const (
	// StatusIdle: admitted (or sent back) and waiting for an attempt,
	// possibly until Run.RetryAt.
	StatusIdle Status = "idle"
	// StatusRunning: an attempt holds the run (see Run.Owner).
	StatusRunning Status = "running"
	// StatusWaiting: an attempt ended at a wait (Sleep, WaitFor): the run
	// holds no slot until a signal (Run.Signal) arrives or its deadline
	// (Run.RetryAt; zero: none) passes; then it runs again. Engine.EndWait
	// ends the wait, Engine.Cancel the run.
	StatusWaiting Status = "waiting"
	// StatusCompleted: the handler returned Ctx.OK; final.
	StatusCompleted Status = "completed"
	// StatusDeferred: completed, holding its follow-up event (Run.Then)
	// until Engine.Resume releases it.
	StatusDeferred Status = "deferred"
	// StatusErrored: the handler failed for good (Ctx.Fail, or a thrown
	// error with no retry policy). Engine.Retry runs it again.
	StatusErrored Status = "errored"
	// StatusDead: a dead letter: the retry budget was exhausted.
	// Engine.RequeueDead runs it again with a fresh budget.
	StatusDead Status = "dead-letter"
	// StatusFenced: an effect was found started by an attempt that is gone,
	// so its outcome is unknown; no retry was spent. An operator decides:
	// Engine.Retry runs the effect again, Engine.CompleteEffect records it
	// as done.
	StatusFenced Status = "fenced"
	// StatusCancelled: stopped by Engine.Cancel while idle or running; not
	// counted as a failure. Engine.Retry runs it again.
	StatusCancelled Status = "cancelled"
)

// statuses lists every status, in the order a reader meets them.
var statuses = [...]Status{StatusIdle, StatusRunning, StatusWaiting, StatusCompleted, StatusDeferred, StatusErrored, StatusDead, StatusFenced, StatusCancelled}

// Valid reports whether s is one of the statuses above.
func (s Status) Valid() bool {
	for _, v := range statuses {
		if s == v {
			return true
		}
	}
	return false
}

// Active reports whether a run with this status is queued or executing
// (idle or running). A waiting run is neither active nor final.
func (s Status) Active() bool { return s == StatusIdle || s == StatusRunning }

// Final reports whether a run with this status is done until an operator
// acts (completed, deferred, errored, dead-letter, fenced, cancelled).
func (s Status) Final() bool { return store.Status(s).Final() }

// State returns the raw state s refines.
func (s Status) State() State { return State(store.Status(s).State()) }

// State is a run's raw lifecycle state: idle, running, completed or
// errored. Every Status refines one of them (Status.State).
type State string

// The four raw states.
const (
	StateIdle      State = "idle"
	StateRunning   State = "running"
	StateCompleted State = "completed"
	StateErrored   State = "errored"
)

// Order is the order of a run listing (RunQuery.Order).
type Order int

// Orders of a run listing: by creation, newest first (the zero value) or
// oldest first.
const (
	NewestFirst Order = iota
	OldestFirst
)

// Run is one execution record: one process's handling of one event, with
// every attempt it took. Engine.Run, Engine.Runs and the operator methods
// return it as it was stored at the time of the call.
type Run struct {
	// ID identifies the run: a UUID, version 7 (time-ordered).
	ID string
	// Seq is the run's place in creation order: unique within the store
	// and larger for later runs. Listings are ordered and paged by it.
	Seq int64
	// Process is the name of the process that handles the run.
	Process string
	// Event is the event that admitted it.
	Event string
	// CorrelationID is the id of the chain's root run, shared by every run
	// of the chain (a root run's is its own ID).
	CorrelationID string
	// ParentID is the run whose follow-up event admitted this one; "" for
	// a root run.
	ParentID string
	// Depth is the run's depth in its chain: 0 for a root run, the
	// parent's plus one for a follow-up (at most Config.MaxChainDepth).
	Depth int
	// Status is where the run stands.
	Status Status

	// Payload is the JSON the event carried; nil when emitted without one.
	Payload json.RawMessage
	// Context is the run's context map, a JSON object (Ctx.SetContext);
	// nil when empty.
	Context json.RawMessage
	// Output is what the handler returned with Ctx.OK (or Ctx.Defer's
	// payload); nil until then.
	Output json.RawMessage

	// Error is the message of the last failure: the failed or retried
	// attempt's error, a cancellation, a fenced effect. A run sent back to
	// idle by an operator, or completed, has none.
	Error string
	// ErrorCode is Error's machine-readable code, when it has one.
	ErrorCode Code
	// Then is the follow-up event: emitted on completion, or held while
	// the run is deferred.
	Then string

	// IdempotencyKey is the key the run was emitted with (IdempotencyKey);
	// root runs only.
	IdempotencyKey string
	// Attempts counts the attempts started since admission or the last
	// Engine.RequeueDead.
	Attempts int
	// RetryAt is when an idle run waiting for a retry may start again;
	// zero when it may start at once. For a waiting run it is the wait's
	// deadline (zero: none).
	RetryAt time.Time
	// Signal is, for a waiting run, the signal key it waits for
	// (Engine.Signal); "" while it sleeps, and for other runs.
	Signal string
	// Group is the Singleton or Debounce key the run was emitted with ("" for
	// none).
	Group string

	// Owner is, while the run is running, the engine instance whose attempt
	// holds it (that engine's Owner, Config.Owner); "" otherwise.
	Owner string
	// LeaseExpires is, while the run is running, when Owner's hold lapses
	// unless a heartbeat extends it: past it, the run is reclaimed as
	// abandoned (LeaseReclaimed). Zero otherwise.
	LeaseExpires time.Time
	// Epoch counts the claims of the run: every attempt's start increments
	// it, and writes made for an attempt carry it, so those of an attempt
	// that lost the run change nothing. EffectRecord.Epoch names the
	// attempt that last started an effect.
	Epoch int64

	// CreatedAt is when the run was admitted.
	CreatedAt time.Time
	// StartedAt is when its latest attempt started; zero before the first.
	StartedAt time.Time
	// CompletedAt is when it last became final (completed, deferred,
	// errored, dead-letter, fenced or cancelled); zero while active.
	CompletedAt time.Time
	// Version is the Process.Version of the latest attempt.
	Version string

	// Priority is the run's priority (Priority, Process.Priority).
	Priority int
	// RateLimit and RateKey name the rate limit the run counts against and
	// its key in it (Process.RateLimit); "" for none.
	RateLimit string
	RateKey   string
	// ConcurrencyLimit and ConcurrencyKey name the per-key concurrency
	// limit the run counts against and its key (Process.KeyConcurrency);
	// "" for none.
	ConcurrencyLimit string
	ConcurrencyKey   string

	// Waiting says, for an idle run this engine holds in its queue, why it
	// has not started: "slot" (every slot is taken), "retry" (its RetryAt
	// has not come), "process cap" (Process.Concurrency), "key
	// concurrency" (its key is at its bound) or "rate limit" (its key
	// allows no start before WaitingUntil). For a waiting run it is
	// "signal" (WaitFor) or "sleep" (Sleep), until WaitingUntil (zero: no
	// deadline), since WaitingSince, in the wait named WaitKey. Empty for
	// other runs, and, for idle runs, with a shared store, where the store
	// decides when it claims. Only Engine.Run sets them; listings leave
	// them empty.
	Waiting      string
	WaitingUntil time.Time
	WaitingSince time.Time
	WaitKey      string
}

// State returns the raw state of the run's status.
func (r Run) State() State { return r.Status.State() }

// runOf converts a stored run to a Run.
func runOf(r store.Run) Run {
	out := Run{
		ID: r.ID, Seq: r.Seq, Process: r.Process, Event: r.Event,
		CorrelationID: r.CorrelationID, ParentID: r.ParentID, Depth: r.Depth, Status: Status(r.Status),
		Payload: r.Payload, Context: r.Context, Output: r.Output,
		Error: r.Error, ErrorCode: Code(r.ErrorCode), Then: r.Then,
		IdempotencyKey: r.IdempotencyKey, Attempts: r.Attempts, RetryAt: r.RetryAt,
		Owner: r.LeaseOwner, LeaseExpires: r.LeaseExpires, Epoch: r.Epoch,
		CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, CompletedAt: r.CompletedAt, Version: r.Version,
		Priority: r.Priority, Signal: r.WaitKey, Group: r.GroupKey,
	}
	if r.RateKey != "" {
		out.RateLimit, out.RateKey = splitKey(r.RateKey)
	}
	if r.ConcurrencyKey != "" {
		out.ConcurrencyLimit, out.ConcurrencyKey = splitKey(r.ConcurrencyKey)
	}
	return out
}

// runsOf converts stored runs; nil stays nil.
func runsOf(rs []store.Run) []Run {
	if rs == nil {
		return nil
	}
	out := make([]Run, len(rs))
	for i, r := range rs {
		out[i] = runOf(r)
	}
	return out
}

// TimelineEntry is one transition of a run, in the order they happened.
type TimelineEntry struct {
	// N is the entry's 1-based position in the run's timeline.
	N int
	// At is when the transition happened.
	At time.Time
	// Status is the run's status after it.
	Status Status
	// Attempt is the run's attempt count after it.
	Attempt int
	// Error and Code are the failure the transition recorded, if any.
	Error string
	Code  Code
	// Note says what caused it: "admitted", "claimed", "retry scheduled",
	// "manual retry", "lease expired"…
	Note string
}

// timelineEntryOf converts a stored timeline entry.
func timelineEntryOf(t store.TimelineEntry) TimelineEntry {
	return TimelineEntry{N: t.N, At: t.At, Status: Status(t.Status), Attempt: t.Attempt, Error: t.Error, Code: Code(t.Code), Note: t.Note}
}

// EffectStatus is the state of one effect of a run.
type EffectStatus string

// Effect statuses.
const (
	// EffectStatusStarted: recorded before the body ran, with no result
	// yet. Found so by a later attempt, its outcome is unknown.
	EffectStatusStarted EffectStatus = "started"
	// EffectStatusCompleted: the body returned a result, stored in Output;
	// later attempts replay it.
	EffectStatusCompleted EffectStatus = "completed"
	// EffectStatusFailed: the body returned an error (Error); the next
	// attempt runs it again.
	EffectStatusFailed EffectStatus = "failed"
)

// EffectRecord is the stored record of one effect of a run (Effect).
type EffectRecord struct {
	// RunID is the run the effect belongs to.
	RunID string
	// Key is the effect's key as stored: a plain string, or a Key's
	// encoding (DecodeKey splits it into its parts). Engine.CompleteEffect
	// takes it as it is.
	Key string
	// Status is where the effect stands.
	Status EffectStatus
	// Epoch is the Run.Epoch of the attempt that last started it.
	Epoch int64
	// Output is the stored result (JSON) of a completed effect.
	Output json.RawMessage
	// Error is the error of a failed effect.
	Error string
	// StartedAt is when the effect was last started.
	StartedAt time.Time
	// CompletedAt is when it completed or failed; zero while started.
	CompletedAt time.Time
}

// effectRecordOf converts a stored effect record.
func effectRecordOf(e store.Effect) EffectRecord {
	return EffectRecord{RunID: e.RunID, Key: e.Key, Status: EffectStatus(e.Status), Epoch: e.Epoch, Output: e.Output,
		Error: e.Error, StartedAt: e.StartedAt, CompletedAt: e.CompletedAt}
}

// ErrorRecord is a recent error kept for operators (ObservabilityReport).
type ErrorRecord struct {
	// At is when the error happened.
	At time.Time
	// Kind is what failed: "run" (an attempt), "effect" or "internal" (the
	// engine itself; see InternalError).
	Kind string
	// Process, RunID and EffectKey say where, when they apply.
	Process   string
	RunID     string
	EffectKey string
	// Context is where in the engine an internal error happened.
	Context string
	// Message is the error.
	Message string
}

// errorRecordOf converts a stored error record.
func errorRecordOf(e store.ErrorRecord) ErrorRecord {
	return ErrorRecord{At: e.At, Kind: e.Kind, Process: e.Process, RunID: e.RunID, EffectKey: e.EffectKey,
		Context: e.Context, Message: e.Message}
}
