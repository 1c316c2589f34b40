package store

import "time"

// Flow control: the rules that decide the order in which due idle runs
// start (priority) and which of them may start now (rate limits and
// per-key concurrency). A single-process engine applies them in memory
// when it dispatches; a shared store applies them in ClaimNext, across
// every node. Both use the functions below, so the rules are the same.

// PriorityStep is what one priority level is worth: a run of priority p
// starts as though it had been admitted p × PriorityStep earlier. So a
// run of higher priority overtakes the runs of lower priority admitted up
// to that long before it, and no run waits forever behind later runs of
// higher priority: once it has waited (p' − p) × PriorityStep, runs of
// priority p' admitted after that start after it.
const PriorityStep = time.Minute

// MaxPriority bounds a run's priority, up or down: ±10,000 levels is
// about a week of head start.
const MaxPriority = 10_000

// Rank is the start order of a due idle run: lower first, ties broken by
// Seq. It is the admission time, in Unix nanoseconds, moved earlier by
// the run's priority. A zero createdAt counts as the Unix epoch.
func Rank(createdAt time.Time, priority int) int64 {
	var at int64
	if !createdAt.IsZero() {
		at = createdAt.UnixNano()
	}
	return at - int64(priority)*int64(PriorityStep)
}

// Rate is a rate limit, applied by GCRA (the generic cell rate
// algorithm, a token bucket kept as one time per key): a key allows
// Burst starts at once, then one per Interval. Over any span of time d,
// a key starts at most Burst + d/Interval runs; with Burst 1 no span of
// Interval × n holds more than n starts.
type Rate struct {
	Interval time.Duration // Period / Rate: one start per Interval
	Burst    int           // starts allowed at once; at least 1
}

// Zero reports whether r limits nothing.
func (r Rate) Zero() bool { return r.Interval <= 0 }

// Allow decides a start of a key whose theoretical arrival time is tat
// (zero: the key has started nothing that still counts) at now. When the
// start is allowed it returns the key's new tat, to be kept with the
// claim; when it is not, at is the earliest time it will be.
func (r Rate) Allow(tat, now time.Time) (ok bool, next, at time.Time) {
	if r.Zero() {
		return true, tat, time.Time{}
	}
	if tat.Before(now) {
		tat = now
	}
	tolerance := time.Duration(max(r.Burst, 1)-1) * r.Interval
	if allowAt := tat.Add(-tolerance); allowAt.After(now) {
		return false, tat, allowAt
	}
	return true, tat.Add(r.Interval), time.Time{}
}

// Flow is what ClaimNext needs to know of a process's flow limits. Its
// runs carry the keys (Run.RateKey, Run.ConcurrencyKey) the engine took
// from them at admission; processes that share a named limit share its
// keys and declare the same Flow for it.
type Flow struct {
	// Rate limits the starts of each rate key (zero: no rate limit).
	Rate Rate
	// KeyConcurrency bounds the running runs of each concurrency key,
	// counted across every process whose runs carry that key (0: none).
	KeyConcurrency int
}
