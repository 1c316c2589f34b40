// Package store defines what the Yella engine needs from storage: the
// records it keeps and the atomic operations it performs on them.
//
// It is implemented by store/memstore, store/sqlitestore and store/pgstore
// and checked by the conformance suite in store/storetest. It is a seam
// inside this repository, not a stable extension point: methods may change
// between releases.
//
// The contract is shaped by three rules that every implementation keeps:
//
//   - Every state change is one atomic operation. Admission (idempotency,
//     per-process caps, chain links), completion together with the admission
//     of follow-up runs, and every operator action are decided inside one
//     transaction, so a crash never leaves half of one.
//   - Writes made on behalf of a running attempt carry its lease epoch.
//     A write whose epoch no longer matches (the run was cancelled, reclaimed
//     or claimed again) changes nothing and returns ErrFenced.
//   - Every transition of a run follows the transition table
//     (Transitions): an Update names its action, and the table says which
//     runs it applies to and what it writes. Apply is the table's reference
//     implementation; stores apply it or are checked against it.
//   - Times come from the caller. Stores never read the clock, so the engine's
//     clock (a fake one in tests) decides every timestamp and expiry. The
//     one exception is a store shared by several engine processes (Shared):
//     whether another process is gone is decided on the database's clock,
//     because the processes' clocks may disagree.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"
)

// Errors returned by every Store. Implementations may wrap them; callers
// test with errors.Is.
var (
	// ErrNotFound: no run (or effect) has the given id.
	ErrNotFound = errors.New("not found")
	// ErrFenced: the write carried a lease epoch that no longer owns the run,
	// or the run is no longer running. Nothing was changed.
	ErrFenced = errors.New("fenced: lease epoch no longer owns the run")
	// ErrInvalidStatus: the run's status does not allow the requested
	// transition. Nothing was changed. Wrapped in *StatusError.
	ErrInvalidStatus = errors.New("invalid run status for this operation")
	// ErrNotAdmitted: an update required follow-up runs to be admitted and
	// none were (no listener left, or every listener was at its cap).
	// Nothing was changed.
	ErrNotAdmitted = errors.New("follow-up event admitted no run")
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("store closed")
)

// BatchError reports the admission of an AdmitBatch that failed it, by its
// index; nothing of the batch was admitted. It unwraps to the admission's
// error.
type BatchError struct {
	Index int
	Err   error
}

func (e *BatchError) Error() string {
	return "admission " + strconv.Itoa(e.Index) + " of the batch: " + e.Err.Error()
}

// Unwrap returns the admission's error.
func (e *BatchError) Unwrap() error { return e.Err }

// StatusError reports a refused transition and the status that refused it.
// It unwraps to ErrInvalidStatus.
type StatusError struct {
	RunID  string
	Status Status
}

func (e *StatusError) Error() string {
	return "run " + e.RunID + " is " + string(e.Status)
}

// Unwrap returns ErrInvalidStatus.
func (e *StatusError) Unwrap() error { return ErrInvalidStatus }

// State is the coarse lifecycle state of a run: idle, running, completed
// or errored. It is derived from the run's Status, which refines it, for
// consumers that only need to know whether a run waits, runs, succeeded or
// failed.
type State string

// The four raw states.
const (
	StateIdle      State = "idle"
	StateRunning   State = "running"
	StateCompleted State = "completed"
	StateErrored   State = "errored"
)

// Status is the operator-facing classification of a run. It refines State:
// a waiting run is idle; a deferred run is completed; a dead-letter, fenced
// or cancelled run is errored.
// Stores persist the status; the state is derived from it.
type Status string

// Statuses. Waiting refines the raw state idle; deferred refines
// completed; dead-letter, fenced and cancelled refine errored.
const (
	StatusIdle    Status = "idle"
	StatusRunning Status = "running"
	// StatusWaiting: an attempt ended at a wait (a durable sleep, or a wait
	// for a signal, see Wait): no attempt holds the run until its wait
	// ends. A signal (Store.Signal) makes it idle; at its deadline
	// (Run.RetryAt; zero: none) it is claimable as an idle run is.
	StatusWaiting   Status = "waiting"
	StatusCompleted Status = "completed"
	// StatusDeferred: completed, holding a follow-up event until resumed.
	StatusDeferred Status = "deferred"
	StatusErrored  Status = "errored"
	// StatusDead: errored after its retry budget was exhausted.
	StatusDead Status = "dead-letter"
	// StatusFenced: errored because an effect was found started by an
	// attempt that is gone; its outcome is unknown and an operator decides
	// whether to run it again or record it as done.
	StatusFenced Status = "fenced"
	// StatusCancelled: stopped by an operator while idle or running. It is
	// final until an operator retries it.
	StatusCancelled Status = "cancelled"
)

// Statuses lists every status in display order.
var Statuses = []Status{StatusIdle, StatusRunning, StatusWaiting, StatusCompleted, StatusDeferred, StatusErrored, StatusDead, StatusFenced, StatusCancelled}

// State returns the raw state a status refines.
func (s Status) State() State {
	switch s {
	case StatusIdle, StatusWaiting:
		return StateIdle
	case StatusRunning:
		return StateRunning
	case StatusCompleted, StatusDeferred:
		return StateCompleted
	default:
		return StateErrored
	}
}

// Valid reports whether s is one of the defined statuses.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// UniqueStatuses returns ss without repeats, in first-seen order (ss
// itself when it has none). A filter on every status filters nothing, so a
// set holding all of Statuses comes back nil.
func UniqueStatuses(ss []Status) []Status {
	if len(ss) < 2 {
		return ss
	}
	out := make([]Status, 0, min(len(ss), len(Statuses)))
	var seen map[Status]bool // for long lists; short ones are scanned
	if len(ss) > 16 {
		seen = make(map[Status]bool, len(Statuses))
	}
	for _, s := range ss {
		if seen != nil {
			if seen[s] {
				continue
			}
			seen[s] = true
		} else if slices.Contains(out, s) {
			continue
		}
		out = append(out, s)
	}
	if len(out) == len(Statuses) && !slices.ContainsFunc(out, func(s Status) bool { return !s.Valid() }) {
		return nil
	}
	if len(out) == len(ss) {
		return ss
	}
	return out
}

// Active reports whether a run with this status is queued or executing
// (idle or running): what a process's cap counts. A waiting run is neither
// active nor final.
func (s Status) Active() bool { return s == StatusIdle || s == StatusRunning }

// Final reports whether a run with this status is done until an operator
// acts (completed, deferred, errored, dead-letter, fenced, cancelled): its
// CompletedAt is set. Idle, running and waiting runs are not final.
func (s Status) Final() bool { return s.Valid() && !s.Active() && s != StatusWaiting }

// StatusesOf returns the statuses that refine a raw state.
func StatusesOf(st State) []Status {
	switch st {
	case StateIdle:
		return []Status{StatusIdle, StatusWaiting}
	case StateRunning:
		return []Status{StatusRunning}
	case StateCompleted:
		return []Status{StatusCompleted, StatusDeferred}
	case StateErrored:
		return []Status{StatusErrored, StatusDead, StatusFenced, StatusCancelled}
	}
	return nil
}

// Run is one execution record of one process for one emission.
type Run struct {
	ID            string
	Seq           int64 // creation order, unique per store; the pagination key
	Process       string
	Event         string
	CorrelationID string // the root run's id; shared by every run of a chain
	ParentID      string // "" for a root run
	Depth         int    // 0 for a root run
	Status        Status

	Payload json.RawMessage // nil when emitted without a payload
	Context json.RawMessage // JSON object; nil means empty
	Output  json.RawMessage // result payload of a completed run

	Error     string // last error message (failed, retried, cancelled…)
	ErrorCode string // machine-readable code for Error, if any
	Then      string // follow-up event: emitted on completion, or held while deferred

	IdempotencyKey string // root runs only
	Attempts       int    // executions started since admission or the last requeue
	Epoch          int64  // lease fencing token; increases on every claim

	RetryAt      time.Time // zero: claimable at once; for a waiting run, its deadline (zero: none)
	LeaseOwner   string
	LeaseExpires time.Time

	CreatedAt   time.Time // admission time
	StartedAt   time.Time // start of the latest attempt
	CompletedAt time.Time // when it became completed/deferred/errored/dead/fenced/cancelled
	Version     string    // handler version of the latest attempt

	// Flow control, fixed at admission (see Flow): the start order's
	// priority, and the keys of the rate limit and the per-key concurrency
	// limit the run counts against ("" for none).
	Priority       int
	RateKey        string
	ConcurrencyKey string

	// WaitKey is the signal key a waiting run waits for ("" for a sleep,
	// and for a run that is not waiting).
	WaitKey string
	// GroupKey is the key of the run's group (NewRun.GroupKey; "" for
	// none), fixed at admission.
	GroupKey string
}

// State returns the raw state of the run.
func (r *Run) State() State { return r.Status.State() }

// TimelineEntry is one appended transition of a run.
type TimelineEntry struct {
	N       int // 1-based position in the run's timeline
	At      time.Time
	Status  Status
	Attempt int
	Error   string
	Code    string
	Note    string // what caused the transition: "admitted", "claimed", "retry scheduled", "manual retry", …
}

// EffectStatus is the state of a durable effect record.
type EffectStatus string

// Effect states.
const (
	EffectStarted   EffectStatus = "started"
	EffectCompleted EffectStatus = "completed"
	EffectFailed    EffectStatus = "failed"
	// EffectWaiting: the record of a wait (see Wait) that has not ended
	// with a signal. The attempt that meets it in a later attempt knows the
	// wait is over without one (its deadline passed, or an operator ended
	// it) and records its outcome: StartEffect and FinishEffect treat it as
	// they treat a started record.
	EffectWaiting EffectStatus = "waiting"
)

// Effect is the durable record of one side effect of one run.
type Effect struct {
	RunID       string
	Key         string // encoded key (see the engine's Key)
	Status      EffectStatus
	Epoch       int64 // epoch of the attempt that last started it
	Output      json.RawMessage
	Error       string
	StartedAt   time.Time
	CompletedAt time.Time
}

// NewRun is one run to create in an admission: one per listening process.
type NewRun struct {
	ID      string
	Process string
	// Limit caps the process's active (idle or running) runs at admission:
	// when it already has Limit active runs this one is dropped. 0 means no
	// cap.
	Limit int
	// Priority, RateKey and ConcurrencyKey are the run's flow control
	// (see Run).
	Priority       int
	RateKey        string
	ConcurrencyKey string
	// GroupKey, when set, groups the run with the runs of its process
	// admitted with the same key, and Group says what the admission does
	// when one of them is still to run (see GroupPolicy).
	GroupKey string
	Group    GroupPolicy
	// Start: admitted running, claimed by Admission.Start's owner, if the
	// store can (see Admission.Start).
	Start bool
}

// GroupPolicy says what an admission does when its process has a run of
// the same group key (NewRun.GroupKey) that is still to run. The group's
// run stands in for the new one: nothing is admitted for the process, and
// AdmitResult.Grouped lists that run (as it is after the admission). It is
// decided after the idempotency key and before the process's cap; with
// several runs of the group, the latest admitted stands in.
type GroupPolicy uint8

// Group policies.
const (
	// GroupNone: the run is admitted whatever else holds its key (the key
	// is only stored).
	GroupNone GroupPolicy = iota
	// GroupSingleton: a run of the group that is idle, running or waiting
	// stands in, unchanged: at most one run per key is to run at a time.
	GroupSingleton
	// GroupDebounce: a run of the group that is idle and has never started
	// (Attempts 0) takes the admission's payload, context and start time
	// (Admission.NotBefore, or at once): only the latest event of a burst
	// runs, when the burst has been quiet for its window. A group whose
	// run has started admits a new run.
	GroupDebounce
)

// Admission creates the runs of one emission atomically.
type Admission struct {
	Event          string
	Payload        json.RawMessage
	IdempotencyKey string   // "" for none; only for root emissions
	Runs           []NewRun // in registration order
	// ParentID, CorrelationID, Depth and Context describe follow-up runs.
	// For a root emission ParentID and CorrelationID are empty and every run
	// is its own root (its correlation id is its own id).
	ParentID      string
	CorrelationID string
	Depth         int
	Context       json.RawMessage
	Now           time.Time
	// NotBefore, when after Now, makes the admitted runs claimable no
	// earlier than it (their RetryAt): a delayed or scheduled emission.
	NotBefore time.Time
	// Start, if set, lets a shared store admit the follow-up runs marked
	// NewRun.Start already claimed by Start.Owner (running, at epoch 1,
	// their first attempt begun at Now), as a claim would leave them,
	// instead of idle: the engine that ends an attempt runs the next
	// stage of its chain itself, without a claim. A store starts a run
	// only if nothing at admission holds it back (no bound, flow key,
	// group key or NotBefore); it may start none (AdmitResult.Admitted
	// gives each run's status).
	Start *Start
}

// Start is the claim of follow-up runs admitted already running
// (Admission.Start).
type Start struct {
	Owner      string
	LeaseUntil time.Time
}

// Unconditional reports that every run of the admission is admitted
// whatever the store holds, so that a store may plan it without a read:
// it has at least one run and no idempotency key, and none of its runs
// has an admission bound (NewRun.Limit) or a group policy (a group key
// alone is only stored).
func (a *Admission) Unconditional() bool {
	if a.IdempotencyKey != "" || len(a.Runs) == 0 {
		return false
	}
	for i := range a.Runs {
		nr := &a.Runs[i]
		if nr.Limit > 0 || (nr.GroupKey != "" && (nr.Group == GroupSingleton || nr.Group == GroupDebounce)) {
			return false
		}
	}
	return true
}

// AdmitResult says what an admission did, process by process.
type AdmitResult struct {
	Admitted []Run    // created, idle (or running: Admission.Start), in the order of Admission.Runs
	Existing []Run    // already admitted earlier under the same idempotency key
	Dropped  []NewRun // at their cap; nothing reserved for them
	// Pruned: admitted earlier under the same idempotency key, by a run that
	// retention has since deleted (see PruneKeys). Nothing is admitted for
	// them. Only ID, Process, Event, IdempotencyKey, CreatedAt and Status
	// are set; Status is completed, the only status retention deletes.
	Pruned []Run
	// Grouped: runs of the same group key that stood in for the new ones
	// (see GroupPolicy), as they are after the admission: a debounced run
	// with its new payload and start time. Payload and Context are left
	// nil.
	Grouped []Run
}

// ClaimRequest claims idle runs for execution.
type ClaimRequest struct {
	IDs        []string
	Owner      string
	Now        time.Time
	LeaseUntil time.Time
	// RateTATs, when set, holds for each of IDs the new theoretical arrival
	// time of its rate key (Rate.Allow; zero for a run without one). It is
	// stored with the claim, so that RateStates finds it after a restart.
	RateTATs []time.Time
	// Seqs, when set, holds the seq of each of IDs as the store reported
	// it (Run.Seq, Pending.Seq), for a store that keeps what it knows of
	// recently admitted runs by seq. The IDs alone decide which runs are
	// claimed: a seq that does not belong to its id is ignored.
	Seqs []int64
}

// Lease identifies one held run in a heartbeat.
type Lease struct {
	RunID string
	Epoch int64
}

// EffectDone records a started effect as completed with its output.
type EffectDone struct {
	Key    string
	Output json.RawMessage
}

// Update is one transition of one run, applied atomically with everything
// it carries. It names its action; the transition table (Transitions, see
// Rule and Apply) states which runs the action applies to and what it
// writes, so every store decides the same way.
//
// Errors, in this order: ErrNotFound for an unknown run; ErrInvalidUpdate
// for an update its action does not allow (see Update.Rule); ErrFenced or
// a *StatusError when the run does not meet the rule's precondition;
// ErrNotAdmitted when a required follow-up admits nothing. In every case
// nothing is changed.
type Update struct {
	RunID string
	Now   time.Time
	// Action names the transition. An update that names none is given one
	// by its other fields (the epoch and reclaim flag, To and what it
	// carries), as Update.Rule describes.
	Action Action

	// Epoch is the lease epoch of the attempt: required by the attempt and
	// sweeper actions, zero for operator actions.
	Epoch int64
	// Reclaim is set for the sweeper's action (ActionReclaim), and only
	// then.
	Reclaim bool
	// From, when not empty, narrows the statuses the action applies to.
	From []Status

	// To picks the new status among those the action may lead to; "" is
	// the first of them.
	To        Status
	Output    json.RawMessage // stored by the actions that set the output
	Error     string          // stored by the actions that record an error ("" clears it)
	ErrorCode string
	Then      string    // follow-up event (complete: emitted; defer: held)
	RetryAt   time.Time // retry-later: not claimable before this time
	Note      string    // timeline note; "" is the action's
	Version   string    // handler version of the attempt, stored when not empty

	// ResetAttempts and ClearStartedEffects do nothing of their own: the
	// action decides (requeue resets attempts; manual retry and requeue
	// clear started effects). ResetAttempts names requeue for an update
	// that names no action.
	ResetAttempts       bool
	ClearStartedEffects bool
	// CompleteEffect is the effect the resolve-effect action records as done.
	CompleteEffect *EffectDone
	// Wait is the wait the wait action records (see ActionWait).
	Wait *Wait
	// Children are follow-up runs admitted in the same transaction, for
	// the actions that take a follow-up.
	Children *Admission
	// When Children admit nothing, the update is refused with
	// ErrNotAdmitted, unless its action has a fallback (Rule.Fallback),
	// RequireChildren is false and NoChildren gives the fallback's error
	// (its To, if set, must be the fallback).
	RequireChildren bool
	NoChildren      *Outcome
}

// Wait is where an attempt ended to wait: the wait action (ActionWait)
// records it as an effect record of the run in status EffectWaiting, with
// the update's RetryAt as the wait's deadline (zero: none). A signal for
// Signal, delivered by Store.Signal or found kept when the wait begins,
// completes that record with the signal's payload and makes the run idle.
type Wait struct {
	// Key is the effect key of the wait's record.
	Key string
	// Signal is the signal key waited for ("" for a sleep: only the
	// deadline ends it).
	Signal string
}

// SignalRequest delivers a signal: to the run waiting for its key that
// was admitted first (or to RunID only), or, when none waits, kept for the
// next wait for the key until KeepUntil.
type SignalRequest struct {
	Key string
	// Payload is stored as the result of the wait it ends (the wait
	// record's output).
	Payload json.RawMessage
	// RunID, when set, delivers the signal to this run only: it must be
	// waiting for Key (else ErrNotFound or a *StatusError), and the signal
	// is never kept.
	RunID string
	Now   time.Time
	// KeepUntil: when no run waits for Key, the signal is kept for a later
	// wait until this time (zero or not after Now: it is dropped).
	KeepUntil time.Time
}

// SignalResult says what a signal did.
type SignalResult struct {
	// Woken is the run the signal ended the wait of, idle now (every
	// field but Payload and Context), or nil.
	Woken *Run
	// Kept: no run waited; the signal is kept for a later wait.
	Kept bool
}

// Outcome is the status, error and note an update records.
type Outcome struct {
	To        Status
	Error     string
	ErrorCode string
	Note      string
}

// UpdateResult is the run after an update and what its follow-up admission did.
type UpdateResult struct {
	// Run is the run after the update, every field but Payload and Context,
	// which an update never changes and stores leave nil.
	Run      Run
	Children AdmitResult
}

// Pending is an idle run, or a waiting run with a deadline, as the
// dispatcher needs it.
type Pending struct {
	ID             string
	Seq            int64
	Process        string
	CorrelationID  string
	RetryAt        time.Time
	CreatedAt      time.Time
	Priority       int
	RateKey        string
	ConcurrencyKey string
	// Waiting: a waiting run, due at its deadline (RetryAt).
	Waiting bool
}

// Order of a run listing.
type Order int

// Orders. Newest first is the default.
const (
	NewestFirst Order = iota
	OldestFirst
)

// RunFilter selects runs. Empty fields do not filter.
type RunFilter struct {
	Process       string
	Event         string
	Statuses      []Status // any of these; repeats are ignored
	RootOnly      bool
	CorrelationID string // runs of the chain whose root has this id
	Order         Order
	// After is the Seq of the last run of the previous page (0: first page).
	After int64
	Limit int // required, > 0
}

// Rollup is the aggregate of lifecycle events of one process in one time
// bucket. Histograms are opaque encoded sketches owned by the engine; the
// store keeps them and hands them back.
type Rollup struct {
	Bucket  time.Time // start of the bucket
	Process string
	Counts  map[string]int64 // counter name → increment
	// Hists maps a histogram name to its encoded sketches: an added rollup
	// carries one per name, a stored rollup every sketch added to it, for the
	// engine to merge.
	Hists map[string][][]byte
}

// ErrorRecord is one recent error kept for operators.
type ErrorRecord struct {
	ID        int64
	At        time.Time
	Kind      string // run, effect, internal
	Process   string
	RunID     string
	EffectKey string
	Context   string
	Message   string
}

// PruneRequest deletes old records in one bounded batch.
type PruneRequest struct {
	// CompletedBefore prunes completed (not deferred) runs whose completion
	// is older than this, with their timelines and effects, leaves first: a
	// run with a remaining child is kept until its children are gone. A
	// pruned run's idempotency key is kept (see Store.PruneKeys). A rate
	// key's state later than CompletedBefore survives (see RateStates): a
	// run holding it is kept.
	CompletedBefore time.Time
	// ObservabilityBefore prunes rollups and error records older than this.
	ObservabilityBefore time.Time
	// SignalsBefore deletes kept signals that expired (their KeepUntil)
	// before this time: a wait never receives them anyway.
	SignalsBefore time.Time
	// Limit bounds the number of runs deleted by one call.
	Limit int
}

// Store persists runs, effects and observability. Implementations are safe
// for concurrent use.
type Store interface {
	// Admit creates the runs of one emission atomically. With an idempotency
	// key, each (event, key, process) admits at most one run while its key
	// is kept: processes admitted before are returned in Existing (or, once
	// Prune has deleted their run, in Pruned) and not admitted again, and a
	// process dropped at its cap reserves nothing, so a later emission with
	// the same key can still admit it. Follow-up admissions (ParentID set)
	// must name an existing parent.
	Admit(ctx context.Context, a Admission) (AdmitResult, error)

	// AdmitBatch creates the runs of several admissions in one
	// transaction: all of them or none. Each is decided as Admit decides
	// it, in order, and sees the runs the earlier ones admitted: a repeated
	// idempotency key finds the earlier admission's runs in Existing, and a
	// cap counts them. When one admission fails, nothing is admitted and
	// the error is a *BatchError naming it. The results are in the order
	// of as.
	AdmitBatch(ctx context.Context, as []Admission) ([]AdmitResult, error)

	// Claim moves the given idle, due runs to running for req.Owner until
	// req.LeaseUntil: the epoch and attempts increase by one and a timeline
	// entry is appended. A waiting run whose deadline (RetryAt) has passed
	// is due too: its wait is over and it is claimed as an idle run is (its
	// WaitKey cleared). Runs that are not idle or not yet due are skipped.
	// The claimed runs are returned in request order with what executing
	// them needs: identity (ID, Seq, Process, Event, CorrelationID,
	// ParentID, Depth), Payload, Context, Attempts, Epoch, Status and the
	// lease; stores may leave other fields zero.
	Claim(ctx context.Context, req ClaimRequest) ([]Run, error)

	// Update applies one conditional transition (see Update).
	Update(ctx context.Context, u Update) (UpdateResult, error)

	// SetContext replaces the context object of a run that is running at
	// epoch, else ErrFenced.
	SetContext(ctx context.Context, runID string, epoch int64, context json.RawMessage) error

	// HoldRate raises the stored state of the rate key of a run running at
	// epoch (else ErrFenced) to at least tat, as a claim's RateTATs does:
	// a downstream asked its callers to slow down, and the key's later
	// claims (RateStates, and a shared store's ClaimNext) must wait.
	HoldRate(ctx context.Context, runID string, epoch int64, tat time.Time) error

	// Heartbeat extends to until the lease of every run owner holds and
	// returns those leases, in no particular order.
	Heartbeat(ctx context.Context, owner string, now, until time.Time) ([]Lease, error)

	// Abandoned lists running runs whose lease expired at now, or whose owner
	// the store knows is gone (a single-process store that holds an exclusive
	// lock knows every owner other than self is gone), at most limit.
	Abandoned(ctx context.Context, self string, now time.Time, limit int) ([]Run, error)

	// StartEffect records an effect of a run running at epoch as started,
	// replacing a failed, started or waiting record. ErrFenced if the run is not
	// running at epoch; a completed record is never replaced (ErrFenced).
	StartEffect(ctx context.Context, runID string, epoch int64, key string, now time.Time) error

	// FinishEffect records the outcome (completed or failed) of an effect
	// started at epoch. It applies whatever the run's state is now, because
	// the side effect did happen; it is refused (ErrFenced) only when the
	// record is no longer the one started at epoch.
	FinishEffect(ctx context.Context, runID string, epoch int64, key string, status EffectStatus, output json.RawMessage, errMsg string, now time.Time) error

	// Signal delivers a signal (see SignalRequest) in one transaction:
	// the waiting run's wait record is completed with the payload, its
	// WaitKey and deadline are cleared and it becomes idle (a timeline
	// entry noted "signalled"); or, with no run waiting, the signal is
	// kept. A signal reaches at most one wait, once: a kept signal is
	// consumed by the wait action that finds it.
	Signal(ctx context.Context, req SignalRequest) (SignalResult, error)

	// PauseSchedule records schedule name as paused since now (paused; a
	// paused schedule keeps the time of its first pause), or removes the
	// record (not paused). It is the engines' shared
	// memory of a pause: it outlives them and the schedule's declaration.
	PauseSchedule(ctx context.Context, name string, paused bool, now time.Time) error
	// PausedSchedules returns the paused schedules' names with the time
	// each was paused.
	PausedSchedules(ctx context.Context) (map[string]time.Time, error)

	// Run returns one run, or ErrNotFound.
	Run(ctx context.Context, id string) (Run, error)
	// RunsByID returns the runs that exist among ids, each once, in no
	// particular order: one read for many runs (a parent's children) where
	// Run would be one each.
	RunsByID(ctx context.Context, ids []string) ([]Run, error)
	// CountEnded counts the runs that exist among ids (each once) and,
	// of them, the final ones (Status.Final): a look at many runs'
	// progress (a join's children) that reads none of their payloads or
	// outputs.
	CountEnded(ctx context.Context, ids []string) (exist, final int, err error)
	// Runs lists runs matching f in Seq order.
	Runs(ctx context.Context, f RunFilter) ([]Run, error)
	// CountRuns counts runs matching f (ignoring Order, After and Limit).
	CountRuns(ctx context.Context, f RunFilter) (int64, error)
	// Chain returns every run sharing a correlation id, by depth then Seq.
	// Only a root's id is a correlation id: the id of a follow-up run
	// names no chain (an empty result), and neither does it as
	// RunFilter.CorrelationID.
	Chain(ctx context.Context, correlationID string) ([]Run, error)
	// Timeline returns a run's transitions in order (ErrNotFound for an
	// unknown run).
	Timeline(ctx context.Context, runID string) ([]TimelineEntry, error)
	// Effects returns a run's effect records ordered by key.
	Effects(ctx context.Context, runID string) ([]Effect, error)
	// Pending lists up to limit idle runs, and waiting runs with a
	// deadline (their RetryAt), with Seq > after, by Seq: one page of the
	// dispatcher's index, loaded at start.
	Pending(ctx context.Context, after int64, limit int) ([]Pending, error)
	// Counts returns the number of runs per status (every status present).
	Counts(ctx context.Context) (map[Status]int64, error)
	// RateStates returns, for every rate key whose latest theoretical
	// arrival time stored with a claim (ClaimRequest.RateTATs) is after
	// now, that time: the state a restarted engine's rate limits resume
	// from.
	RateStates(ctx context.Context, now time.Time) (map[string]time.Time, error)

	// AddRollups adds counters and histograms to stored rollups.
	AddRollups(ctx context.Context, rs []Rollup) error
	// Rollups returns stored rollups with from <= Bucket < to.
	Rollups(ctx context.Context, from, to time.Time) ([]Rollup, error)
	// AddErrors stores error records (their ID is assigned by the store).
	AddErrors(ctx context.Context, es []ErrorRecord) error
	// Errors returns up to limit error records with from <= At <= to,
	// newest first.
	Errors(ctx context.Context, from, to time.Time, limit int) ([]ErrorRecord, error)

	// Prune deletes one batch of old records and reports how many runs it
	// deleted. The idempotency key of a deleted run is kept, in the same
	// transaction, until PruneKeys deletes it.
	Prune(ctx context.Context, p PruneRequest) (int, error)

	// PruneKeys deletes up to limit kept idempotency keys of pruned runs
	// that were admitted before the given time, and reports how many it
	// deleted. A live run's key is never deleted: it lasts as long as its
	// run, and then until PruneKeys passes its admission time.
	PruneKeys(ctx context.Context, admittedBefore time.Time, limit int) (int, error)

	// Close releases the store. Calls after Close return ErrClosed.
	Close() error
}

// EffectQueue is implemented by a store that can write an effect's end
// (FinishEffect) without its caller waiting for it. QueueFinishEffect
// returns once the write is queued; every write the same caller makes
// after that commits in the same transaction as the effect's end or in a
// later one, so the effect's end is durable before anything that follows
// it. wait returns the write's outcome, as FinishEffect would, once it is
// known (it blocks until then).
//
// An engine uses it so that the handler goes on while the effect's end is
// written: the end reaches the disk with the handler's next durable write
// (its next effect's start, or the attempt's end) instead of costing a
// commit of its own. A wrapper that embeds a store and changes its
// FinishEffect must change QueueFinishEffect as well, or the engine's
// queued writes pass it by.
type EffectQueue interface {
	QueueFinishEffect(ctx context.Context, runID string, epoch int64, key string, status EffectStatus, output json.RawMessage, errMsg string, now time.Time) (wait func() error)
}
