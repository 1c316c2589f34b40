package yella

import (
	"context"
	"time"

	"github.com/yella-go/yella/internal/obs"
	"github.com/yella-go/yella/store"
)

// Rollup counter and histogram names.
const (
	obsAdmitted  = "admitted"
	obsDropped   = "dropped"
	obsStarted   = "started"
	obsCompleted = "completed"
	obsFailed    = "failed"
	obsRetried   = "retried"
	obsDead      = "dead"
	obsFenced    = "fenced"
	obsResumed   = "resumed"
	obsCancelled = "cancelled"
	obsReclaims  = "reclaims"
	obsInternal  = "internal"
	obsEffOK     = "effects.completed"
	obsEffFailed = "effects.failed"
	obsEffReplay = "effects.replayed"
	histRun      = "run"
	histEffect   = "effect"
)

// observe feeds an event into the rollups.
func (e *Engine) observe(ev *Event) {
	r, at, p := e.rec, ev.At, ev.Process
	switch ev.Type {
	case RunAdmitted:
		r.Count(at, p, obsAdmitted, 1)
	case RunDropped:
		r.Count(at, p, obsDropped, 1)
	case RunStarted:
		r.Count(at, p, obsStarted, 1)
	case RunCompleted:
		r.Count(at, p, obsCompleted, 1)
		r.Observe(at, p, histRun, ev.Duration)
	case RunFailed:
		r.Count(at, p, obsFailed, 1)
		if ev.Duration > 0 {
			r.Observe(at, p, histRun, ev.Duration)
		}
		r.Error(store.ErrorRecord{At: at, Kind: "run", Process: p, RunID: ev.RunID, Message: ev.Error})
	case RunRetryScheduled:
		r.Count(at, p, obsRetried, 1)
		if ev.Duration > 0 {
			r.Observe(at, p, histRun, ev.Duration)
		}
	case RunDeadLettered:
		r.Count(at, p, obsDead, 1)
	case RunFenced:
		r.Count(at, p, obsFenced, 1)
	case RunResumed:
		r.Count(at, p, obsResumed, 1)
	case RunCancelled:
		r.Count(at, p, obsCancelled, 1)
	case LeaseReclaimed:
		r.Count(at, p, obsReclaims, 1)
	case InternalError:
		r.Count(at, p, obsInternal, 1)
		r.Error(store.ErrorRecord{At: at, Kind: "internal", Context: ev.Context, Message: ev.Error})
	case EffectCompleted:
		r.Count(at, p, obsEffOK, 1)
		r.Observe(at, p, histEffect, ev.Duration)
	case EffectFailed:
		r.Count(at, p, obsEffFailed, 1)
		r.Observe(at, p, histEffect, ev.Duration)
		r.Error(store.ErrorRecord{At: at, Kind: "effect", Process: p, RunID: ev.RunID, EffectKey: ev.EffectKey, Message: ev.Error})
	case EffectReplayed:
		r.Count(at, p, obsEffReplay, 1)
	}
}

// ObservabilityQuery selects a time window of rollups.
type ObservabilityQuery struct {
	// From and To bound the window. To defaults to now, From to To minus 24h.
	From, To time.Time
	// Bucket is the output bucket size. Defaults by window length (1m up to
	// 1h, 5m up to 24h, 1h up to 7d, else 24h); never below the engine's
	// base bucket (Config.ObservabilityBucket), to which it is rounded up.
	Bucket time.Duration
	// Process restricts the report to one process ("" for all).
	Process string
	// ErrorLimit bounds RecentErrors. Defaults to 20.
	ErrorLimit int
}

// ObservabilityReport aggregates lifecycle events over a window.
type ObservabilityReport struct {
	From, To     time.Time
	BucketSize   time.Duration
	Summary      BucketStats // the whole window
	Buckets      []BucketStats
	RecentErrors []ErrorRecord // newest first
}

// BucketStats aggregates one bucket (or the whole window).
type BucketStats struct {
	Start   time.Time
	Runs    RunStats
	Effects EffectStats
	System  SystemStats
}

// RunStats counts run events. Duration covers every finished attempt,
// retried ones included.
type RunStats struct {
	Admitted, Dropped, Started, Completed, Failed int64
	Retried, DeadLetters, Fenced, Resumed         int64
	Cancelled                                     int64
	// SuccessRate is Completed / (Completed + Failed), or -1 when both are 0.
	SuccessRate float64
	Duration    DurationStats
}

// EffectStats counts effect events.
type EffectStats struct {
	Completed, Failed, Replayed int64
	SuccessRate                 float64 // -1 when nothing completed or failed
	Duration                    DurationStats
}

// SystemStats counts engine events.
type SystemStats struct {
	LeaseReclaims, InternalErrors int64
}

// DurationStats summarises durations. Percentiles are within 1% of a true
// sample value (a DDSketch), not bucket bounds.
type DurationStats struct {
	Count              int64
	Sum, Min, Max, Avg time.Duration
	P50, P95, P99      time.Duration
}

func durationStats(k *obs.Sketch) DurationStats {
	if k == nil || k.Count() == 0 {
		return DurationStats{}
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	q := func(p float64) time.Duration { v, _ := k.Quantile(p); return ms(v) }
	return DurationStats{
		Count: k.Count(), Sum: ms(k.Sum()), Min: ms(k.Min()), Max: ms(k.Max()),
		Avg: ms(k.Sum() / float64(k.Count())), P50: q(0.5), P95: q(0.95), P99: q(0.99),
	}
}

func rate(ok, bad int64) float64 {
	if ok+bad == 0 {
		return -1
	}
	return float64(ok) / float64(ok+bad)
}

func bucketStats(b obs.Bucket) BucketStats {
	c := b.Counts
	s := BucketStats{Start: b.Start}
	s.Runs = RunStats{
		Admitted: c[obsAdmitted], Dropped: c[obsDropped], Started: c[obsStarted], Completed: c[obsCompleted],
		Failed: c[obsFailed], Retried: c[obsRetried], DeadLetters: c[obsDead], Fenced: c[obsFenced],
		Resumed: c[obsResumed], Cancelled: c[obsCancelled],
		SuccessRate: rate(c[obsCompleted], c[obsFailed]), Duration: durationStats(b.Hists[histRun]),
	}
	s.Effects = EffectStats{
		Completed: c[obsEffOK], Failed: c[obsEffFailed], Replayed: c[obsEffReplay],
		SuccessRate: rate(c[obsEffOK], c[obsEffFailed]), Duration: durationStats(b.Hists[histEffect]),
	}
	s.System = SystemStats{LeaseReclaims: c[obsReclaims], InternalErrors: c[obsInternal]}
	return s
}

func defaultBucket(window time.Duration) time.Duration {
	switch {
	case window <= time.Hour:
		return time.Minute
	case window <= 24*time.Hour:
		return 5 * time.Minute
	case window <= 7*24*time.Hour:
		return time.Hour
	}
	return 24 * time.Hour
}

// Observability aggregates the rollups of a window: per-bucket and overall
// counts, success rates and duration percentiles, and recent errors. Rollups
// not yet flushed to the store are included.
func (e *Engine) Observability(ctx context.Context, q ObservabilityQuery) (ObservabilityReport, error) {
	if q.To.IsZero() {
		q.To = e.clock.Now()
	}
	if q.From.IsZero() {
		q.From = q.To.Add(-24 * time.Hour)
	}
	if q.From.After(q.To) {
		return ObservabilityReport{}, &Error{Code: CodeInvalidQuery, Op: "observability", Msg: "From is after To"}
	}
	if q.Bucket < 0 || q.ErrorLimit < 0 {
		return ObservabilityReport{}, &Error{Code: CodeInvalidQuery, Op: "observability", Msg: "Bucket and ErrorLimit must not be negative"}
	}
	if q.Bucket == 0 {
		q.Bucket = defaultBucket(q.To.Sub(q.From))
	}
	if q.To.Sub(q.From)/max(q.Bucket, e.rec.BucketSize()) > 10000 {
		return ObservabilityReport{}, &Error{Code: CodeInvalidQuery, Op: "observability", Msg: "window holds more than 10000 buckets; use a larger Bucket"}
	}
	if q.ErrorLimit == 0 {
		q.ErrorLimit = 20
	}
	buckets, step, err := e.rec.Query(ctx, e.store, q.From, q.To, q.Bucket, q.Process)
	if err != nil {
		return ObservabilityReport{}, storeErr("observability", "", err)
	}
	rep := ObservabilityReport{From: q.From, To: q.To, BucketSize: step}
	total := obs.Bucket{Start: q.From, Counts: map[string]int64{}, Hists: map[string]*obs.Sketch{}}
	for _, b := range buckets {
		rep.Buckets = append(rep.Buckets, bucketStats(b))
		for n, v := range b.Counts {
			total.Counts[n] += v
		}
		for n, h := range b.Hists {
			if total.Hists[n] == nil {
				total.Hists[n] = obs.NewSketch()
			}
			total.Hists[n].Merge(h)
		}
	}
	rep.Summary = bucketStats(total)
	errs, err := e.rec.Errors(ctx, e.store, q.From, q.To, q.ErrorLimit)
	if err != nil {
		return ObservabilityReport{}, storeErr("observability", "", err)
	}
	if q.Process != "" {
		kept := errs[:0]
		for _, er := range errs {
			if er.Process == q.Process {
				kept = append(kept, er)
			}
		}
		errs = kept
	}
	for _, er := range errs {
		rep.RecentErrors = append(rep.RecentErrors, errorRecordOf(er))
	}
	return rep, nil
}
