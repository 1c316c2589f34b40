package yella

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yella-go/yella/store"
)

// EventType names a lifecycle event.
type EventType string

// Lifecycle events. Every state change the engine or an operator makes is
// published; none is silent.
const (
	RunAdmitted    EventType = "run:admitted" // a run was created by an emission or a follow-up
	RunDropped     EventType = "run:drop"     // a process was at its cap; no run was created for it
	RunStart       EventType = "run:start"    // an attempt starts (once per attempt)
	RunComplete    EventType = "run:complete" // completed (or deferred)
	RunError       EventType = "run:error"    // ended errored, dead-letter or fenced
	RunRetry       EventType = "run:retry"    // an automatic retry is scheduled
	RunDead        EventType = "run:dead"     // the retry budget is exhausted (followed by run:error)
	RunFenced      EventType = "run:fenced"   // an effect of unknown outcome stopped the run (followed by run:error)
	RunResume      EventType = "run:resume"   // a deferred run released its follow-up
	RunCancel      EventType = "run:cancel"   // an operator cancelled the run (now cancelled; not a run:error)
	RunRetryAsked  EventType = "run:retry-manual"
	RunRequeue     EventType = "run:requeue" // an operator requeued a dead letter
	RunDepth       EventType = "run:depth-exceeded"
	EffectDone     EventType = "effect:resolved" // an operator recorded a fenced effect as done
	EffectComplete EventType = "effect:complete"
	EffectError    EventType = "effect:error"
	EffectReplay   EventType = "effect:replay"
	LeaseReclaim   EventType = "lease:reclaim"
	InternalError  EventType = "internal:error"
)

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
	Children      []string // follow-up runs admitted (run:complete, run:resume)
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
