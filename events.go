package yella

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yella-go/yella/store"
)

// EventType names a lifecycle event. Its value is "<subject>:<what
// happened>", in the past tense for every change of a run, an effect or a
// lease (internal:error reports a failure rather than a change), and the
// constant's name spells the same words: RunDeadLettered is
// "run:dead-lettered", EffectResolved is "effect:resolved". Server-Sent
// Events streams (package httpapi) use the value as the event name.
type EventType string

// Lifecycle events. Every state change the engine or an operator makes is
// published; none is silent. EventTypes lists them all.
const (
	// RunAdmitted: a run was created by an emission, a follow-up or Resume.
	RunAdmitted EventType = "run:admitted"
	// RunDropped: a process was at its cap and its overflow policy admitted
	// nothing more; no run was created for it (Event.Process names it).
	RunDropped EventType = "run:dropped"
	// RunStarted: an attempt started (once per attempt).
	RunStarted EventType = "run:started"
	// RunCompleted: the run completed, or was deferred (Event.Status says
	// which); Event.Children lists the follow-up runs it admitted.
	RunCompleted EventType = "run:completed"
	// RunFailed: an attempt ended the run errored, dead-letter or fenced
	// (Event.Status says which). A cancelled run is not failed.
	RunFailed EventType = "run:failed"
	// RunRetryScheduled: an attempt failed and the retry policy scheduled
	// another; the run is idle again.
	RunRetryScheduled EventType = "run:retry-scheduled"
	// RunDeadLettered: the retry budget is exhausted; RunFailed follows.
	RunDeadLettered EventType = "run:dead-lettered"
	// RunFenced: an effect of unknown outcome stopped the run; RunFailed
	// follows.
	RunFenced EventType = "run:fenced"
	// RunDepthExceeded: a follow-up would have been deeper than
	// Config.MaxChainDepth, so the run failed; RunFailed follows.
	RunDepthExceeded EventType = "run:depth-exceeded"
	// RunResumed: a deferred run released its follow-up (Engine.Resume).
	RunResumed EventType = "run:resumed"
	// RunCancelled: an operator cancelled the run (Engine.Cancel).
	RunCancelled EventType = "run:cancelled"
	// RunRetried: an operator sent the run back to idle (Engine.Retry).
	RunRetried EventType = "run:retried"
	// RunRequeued: an operator requeued a dead letter with a fresh retry
	// budget (Engine.RequeueDead, Engine.RequeueAllDead).
	RunRequeued EventType = "run:requeued"
	// RunWaiting: an attempt ended at a wait (Sleep, WaitFor); the run is
	// waiting, holding no slot (or idle at once when a signal was kept for
	// it: RunSignalled follows).
	RunWaiting EventType = "run:waiting"
	// RunSignalled: a signal ended the run's wait (Engine.Signal); it runs
	// again.
	RunSignalled EventType = "run:signalled"
	// RunWaitEnded: an operator ended the run's wait without a signal
	// (Engine.EndWait); it runs again.
	RunWaitEnded EventType = "run:wait-ended"
	// EffectCompleted: an effect's body returned and its result was stored.
	EffectCompleted EventType = "effect:completed"
	// EffectFailed: an effect's body returned an error, stored for the
	// attempt; the next attempt runs it again.
	EffectFailed EventType = "effect:failed"
	// EffectReplayed: a completed effect returned its stored result
	// without running its body.
	EffectReplayed EventType = "effect:replayed"
	// EffectResolved: a started effect whose outcome a crash left unknown
	// was recorded as done: by an operator for a fenced run
	// (Engine.CompleteEffect), or by the effect's Reconcile function.
	EffectResolved EventType = "effect:resolved"
	// LeaseReclaimed: a run whose lease expired (its engine stopped
	// heartbeating) was taken back for another attempt or the dead letters.
	LeaseReclaimed EventType = "lease:reclaimed"
	// InternalError: the engine absorbed a failure of its own (a claim,
	// heartbeat or retention sweep the store refused, say) and carries on;
	// Event.Context says where and Event.Error what. A panicking subscriber
	// is counted and recorded but not published, so it cannot recurse.
	InternalError EventType = "internal:error"
)

// EventTypes returns every lifecycle event type, in the order of their
// declaration. Consumers of the event stream can check their lists
// against it.
func EventTypes() []EventType {
	return []EventType{
		RunAdmitted, RunDropped, RunStarted, RunCompleted, RunFailed, RunRetryScheduled,
		RunDeadLettered, RunFenced, RunDepthExceeded, RunResumed, RunCancelled, RunRetried,
		RunRequeued, RunWaiting, RunSignalled, RunWaitEnded, EffectCompleted, EffectFailed, EffectReplayed, EffectResolved,
		LeaseReclaimed, InternalError,
	}
}

// Event is one lifecycle event. Fields that do not apply are empty.
type Event struct {
	Type          EventType
	At            time.Time
	RunID         string
	CorrelationID string
	ParentID      string
	Process       string
	EventName     string // the run's event
	Status        Status // the run's status after the event
	Attempt       int
	Error         string
	Code          Code
	Duration      time.Duration // the attempt's (or effect's) duration
	EffectKey     string
	Children      []string // follow-up runs admitted (run:completed, run:resumed)
	Context       string   // where an internal error happened
}

func (ev Event) String() string {
	s := fmt.Sprintf("%s %s", ev.Type, ev.RunID)
	if ev.Error != "" {
		s += ": " + ev.Error
	}
	return s
}

type subscribers struct {
	mu   sync.Mutex
	next int
	list atomic.Pointer[[]subscriber]
}

type subscriber struct {
	id int
	fn func(Event)
}

// Subscribe calls fn with every lifecycle event from now on, synchronously,
// in the goroutine that caused it: fn must be quick and must not block
// (hand events to a channel or a buffer if it needs to). A panicking fn is
// reported as an internal error and does not affect the run. The returned
// function unsubscribes.
func (e *Engine) Subscribe(fn func(Event)) (unsubscribe func()) {
	s := &e.subs
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	id := s.next
	var cur []subscriber
	if p := s.list.Load(); p != nil {
		cur = *p
	}
	next := append(append([]subscriber(nil), cur...), subscriber{id, fn})
	s.list.Store(&next)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		var kept []subscriber
		for _, sub := range *s.list.Load() {
			if sub.id != id {
				kept = append(kept, sub)
			}
		}
		s.list.Store(&kept)
	}
}

// publish records an event in the metrics and rollups, then delivers it.
func (e *Engine) publish(ev Event) {
	if ev.At.IsZero() {
		ev.At = e.clock.Now()
	}
	e.metrics.record(&ev)
	e.observe(&ev)
	p := e.subs.list.Load()
	if p == nil {
		return
	}
	for _, sub := range *p {
		e.deliver(sub.fn, ev)
	}
}

func (e *Engine) deliver(fn func(Event), ev Event) {
	defer func() {
		if r := recover(); r != nil {
			// Counted and recorded, but not published: a subscriber that
			// panics on internal errors must not recurse.
			msg := fmt.Sprintf("subscriber panicked on %s: %v", ev.Type, r)
			e.metrics.internalErrors.Add(1)
			now := e.clock.Now()
			e.rec.Count(now, "", obsInternal, 1)
			e.rec.Error(store.ErrorRecord{At: now, Kind: "internal", Context: "subscriber", RunID: ev.RunID, Message: msg})
			e.log.Error("event subscriber panicked", "event", ev.Type, "panic", r)
		}
	}()
	fn(ev)
}

// internalError reports a failure the engine absorbed: logged, counted,
// recorded for operators and published.
func (e *Engine) internalError(where string, err error) {
	e.log.Error("internal error", "context", where, "err", err)
	e.publish(Event{Type: InternalError, Context: where, Error: err.Error()})
}
