package yella

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/yella-go/yella/store"
)

// Metrics is a snapshot of the engine's counters and queues.
type Metrics struct {
	// Queue counts persisted runs by status (including work of other engine
	// instances sharing the store).
	Queue map[Status]int64
	// Totals count lifecycle events since this engine was created.
	Totals Totals
	// Processes has one entry per registered process.
	Processes map[string]ProcessMetrics
	// Dispatcher is this engine's in-memory view of its work.
	Dispatcher DispatcherMetrics
}

// Totals are lifecycle counters since the engine was created.
type Totals struct {
	Admitted, Dropped, Started, Completed, Failed int64
	Retries, DeadLetters, Fenced, Resumes         int64
	Cancels, ManualRetries, Requeues              int64
	DepthExceeded, LeaseReclaims, InternalErrors  int64
	EffectsCompleted, EffectsFailed               int64
	EffectsReplayed, EffectsResolved              int64
	// Pruned counts finished runs deleted by retention (Config.Retention);
	// a run counted in Completed may since have been pruned.
	Pruned int64
}

// ProcessMetrics describes one process.
type ProcessMetrics struct {
	Event       string
	Concurrency int   // 0: no cap
	QueueLimit  int   // runs that may wait beyond the cap (0 without a cap)
	InFlight    int   // attempts executing in this engine now
	Dropped     int64 // events dropped at the cap since the engine was created
}

// DispatcherMetrics is this engine's view of its runs.
type DispatcherMetrics struct {
	Slots   int // fleet concurrency
	Ready   int // idle and due, queued in memory for a slot: at most about Config.MaxQueued (Metrics.Queue counts the runs waiting in the store too)
	Delayed int // idle, waiting for a retry delay; and waiting runs with a deadline (Sleep, WaitFor with a timeout)
	Running int // executing
	// RateLimited and KeyLimited count the idle, due runs held back by a
	// rate limit (Process.RateLimit) or by their key's concurrency bound
	// (Process.KeyConcurrency). With a shared store the store holds them
	// back when it claims, and both stay 0.
	RateLimited int
	KeyLimited  int
}

type counters struct {
	admitted, dropped, started, completed, failed     atomic.Int64
	retries, dead, fenced, resumes                    atomic.Int64
	cancels, manualRetries, requeues                  atomic.Int64
	depth, reclaims, internalErrors                   atomic.Int64
	effCompleted, effFailed, effReplayed, effResolved atomic.Int64
	pruned                                            atomic.Int64

	mu    sync.Mutex
	drops map[string]int64
}

func (m *counters) record(ev *Event) {
	switch ev.Type {
	case RunAdmitted:
		m.admitted.Add(1)
	case RunDropped:
		m.dropped.Add(1)
		m.mu.Lock()
		if m.drops == nil {
			m.drops = map[string]int64{}
		}
		m.drops[ev.Process]++
		m.mu.Unlock()
	case RunStarted:
		m.started.Add(1)
	case RunCompleted:
		m.completed.Add(1)
	case RunFailed:
		m.failed.Add(1)
	case RunRetryScheduled:
		m.retries.Add(1)
	case RunDeadLettered:
		m.dead.Add(1)
	case RunFenced:
		m.fenced.Add(1)
	case RunResumed:
		m.resumes.Add(1)
	case RunCancelled:
		m.cancels.Add(1)
	case RunRetried:
		m.manualRetries.Add(1)
	case RunRequeued:
		m.requeues.Add(1)
	case RunDepthExceeded:
		m.depth.Add(1)
	case LeaseReclaimed:
		m.reclaims.Add(1)
	case InternalError:
		m.internalErrors.Add(1)
	case EffectCompleted:
		m.effCompleted.Add(1)
	case EffectFailed:
		m.effFailed.Add(1)
	case EffectReplayed:
		m.effReplayed.Add(1)
	case EffectResolved:
		m.effResolved.Add(1)
	}
}

func (m *counters) totals() Totals {
	return Totals{
		Admitted: m.admitted.Load(), Dropped: m.dropped.Load(), Started: m.started.Load(),
		Completed: m.completed.Load(), Failed: m.failed.Load(), Retries: m.retries.Load(),
		DeadLetters: m.dead.Load(), Fenced: m.fenced.Load(), Resumes: m.resumes.Load(),
		Cancels: m.cancels.Load(), ManualRetries: m.manualRetries.Load(), Requeues: m.requeues.Load(),
		DepthExceeded: m.depth.Load(), LeaseReclaims: m.reclaims.Load(), InternalErrors: m.internalErrors.Load(),
		EffectsCompleted: m.effCompleted.Load(), EffectsFailed: m.effFailed.Load(),
		EffectsReplayed: m.effReplayed.Load(), EffectsResolved: m.effResolved.Load(), Pruned: m.pruned.Load(),
	}
}

// Metrics returns a snapshot. Queue comes from the store; the rest is in
// memory. The returned value shares nothing with the engine.
func (e *Engine) Metrics(ctx context.Context) (Metrics, error) {
	q, err := e.store.Counts(ctx)
	if err != nil {
		return Metrics{}, storeErr("metrics", "", err)
	}
	st := e.disp.Stats()
	m := Metrics{
		Queue:     queueOf(q),
		Totals:    e.metrics.totals(),
		Processes: map[string]ProcessMetrics{},
		Dispatcher: DispatcherMetrics{Slots: e.cfg.Concurrency, Ready: st.Ready, Delayed: st.Delayed, Running: st.Running,
			RateLimited: st.RateWait, KeyLimited: st.KeyWait},
	}
	e.metrics.mu.Lock()
	drops := maps.Clone(e.metrics.drops)
	e.metrics.mu.Unlock()
	e.regMu.RLock()
	for name, p := range e.procs {
		m.Processes[name] = ProcessMetrics{
			Event: p.On, Concurrency: p.Concurrency, QueueLimit: p.queueLimit(),
			InFlight: st.ByProcess[name], Dropped: drops[name],
		}
	}
	e.regMu.RUnlock()
	return m, nil
}

// queueOf converts the store's counts by status.
func queueOf(q map[store.Status]int64) map[Status]int64 {
	out := make(map[Status]int64, len(q))
	for s, n := range q {
		out[Status(s)] = n
	}
	return out
}
