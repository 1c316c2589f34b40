// Package prommetrics exports an engine's metrics in the Prometheus format:
// queue depth by status, in-flight attempts and drops by process, the runs
// held back by a rate limit or a per-key concurrency bound, run and
// effect duration histograms by process and outcome, lifecycle counters,
// the SQLite writer's commits (from which batch size and commit latency
// follow), replication lag when replication is on, and on a shared store
// (PostgreSQL) its nodes, live and gone, with the runs each holds.
//
// Durations and counters by process come from the engine's lifecycle
// events; queue depths are read from the engine at scrape time, so they
// are exact whatever the scrape interval.
package prommetrics

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/yella-go/yella"
)

// WriterStats are a store writer's cumulative figures.
type WriterStats struct {
	Commits  int64         // transactions committed
	Commands int64         // state changes committed in them
	Busy     time.Duration // time spent committing
	// Deadlocks counts the transactions that met a deadlock (a shared
	// store's writers, or two nodes, waiting on each other), which the
	// database broke by failing them; their writes were tried again.
	// Always 0 with SQLite's one writer.
	Deadlocks int64
}

// ReplicationState is the state of off-box replication the exporter
// reports.
type ReplicationState struct {
	LastSync time.Time     // the last successful sync; zero before the first
	Lag      time.Duration // the time since LastSync
	Stalled  bool          // the replica stopped following the database
}

// Options configures an Exporter. Every field is optional.
type Options struct {
	// Writer reports the store writer's cumulative figures (for SQLite:
	// the store's Stats).
	Writer func() WriterStats
	// Replication reports off-box replication: the last successful sync,
	// the lag, and whether it is stalled.
	Replication func() ReplicationState
	// Gatherers are added to the exposition, such as
	// prometheus.DefaultGatherer, where Litestream registers its metrics.
	// Without any, the exporter adds the Go runtime and process metrics
	// itself (the default gatherer already has them).
	Gatherers []prometheus.Gatherer
}

// Exporter collects an engine's metrics. Create it with New and Close it
// when done (it subscribes to the engine's events).
type Exporter struct {
	eng   *yella.Engine
	opts  Options
	reg   *prometheus.Registry
	unsub func()

	runDur, effDur               *prometheus.HistogramVec
	runs, effects, drops, engine *prometheus.CounterVec
}

// Duration buckets: 1 ms to about 2 minutes, doubling; handler and effect
// latencies span that range (an HTTP call to an LLM call).
var buckets = prometheus.ExponentialBuckets(0.001, 2, 18)

// New registers the engine's collectors on a new registry.
func New(eng *yella.Engine, opts Options) *Exporter {
	x := &Exporter{eng: eng, opts: opts, reg: prometheus.NewRegistry()}
	x.runDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "yella_run_duration_seconds",
		Help: "Duration of finished handler attempts, by process and outcome (completed, failed, retried).", Buckets: buckets},
		[]string{"process", "outcome"})
	x.effDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "yella_effect_duration_seconds",
		Help: "Duration of effect bodies, by process and outcome (completed, failed).", Buckets: buckets},
		[]string{"process", "outcome"})
	x.runs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "yella_runs_total",
		Help: "Run lifecycle events by process: admitted, started, completed, failed, retried, dead_letter, fenced, resumed, cancelled, requeued, retried_manually, waiting, signalled, wait_ended."},
		[]string{"process", "event"})
	x.effects = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "yella_effects_total",
		Help: "Effect outcomes by process: completed, failed, replayed, resolved."}, []string{"process", "outcome"})
	x.drops = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "yella_drops_total",
		Help: "Events dropped because the process was at its concurrency cap."}, []string{"process"})
	x.engine = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "yella_engine_events_total",
		Help: "Engine events: lease_reclaim, internal_error, depth_exceeded."}, []string{"event"})
	x.reg.MustRegister(x.runDur, x.effDur, x.runs, x.effects, x.drops, x.engine, (*scrape)(x))
	if len(opts.Gatherers) == 0 {
		x.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	x.unsub = eng.Subscribe(x.observe)
	return x
}

// Close stops listening to the engine.
func (x *Exporter) Close() { x.unsub() }

// Registry is the exporter's registry, for adding collectors.
func (x *Exporter) Registry() *prometheus.Registry { return x.reg }

// Handler serves the exposition (text format, or OpenMetrics when asked).
func (x *Exporter) Handler() http.Handler {
	g := prometheus.Gatherers{x.reg}
	g = append(g, x.opts.Gatherers...)
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

var runEvents = map[yella.EventType]string{
	yella.RunAdmitted: "admitted", yella.RunStarted: "started", yella.RunCompleted: "completed", yella.RunFailed: "failed",
	yella.RunRetryScheduled: "retried", yella.RunDeadLettered: "dead_letter", yella.RunFenced: "fenced", yella.RunResumed: "resumed",
	yella.RunCancelled: "cancelled", yella.RunRequeued: "requeued", yella.RunRetried: "retried_manually",
	yella.RunWaiting: "waiting", yella.RunSignalled: "signalled", yella.RunWaitEnded: "wait_ended",
}

// observe runs in the engine's goroutines: counters and histograms only.
func (x *Exporter) observe(ev yella.Event) {
	p := ev.Process
	if name, ok := runEvents[ev.Type]; ok {
		x.runs.WithLabelValues(p, name).Inc()
	}
	switch ev.Type {
	case yella.RunCompleted:
		x.runDur.WithLabelValues(p, "completed").Observe(ev.Duration.Seconds())
	case yella.RunFailed, yella.RunRetryScheduled:
		if ev.Duration > 0 { // an attempt ended (not a cancel while queued)
			outcome := map[yella.EventType]string{yella.RunFailed: "failed", yella.RunRetryScheduled: "retried"}[ev.Type]
			x.runDur.WithLabelValues(p, outcome).Observe(ev.Duration.Seconds())
		}
	case yella.RunDropped:
		x.drops.WithLabelValues(p).Inc()
	case yella.EffectCompleted:
		x.effects.WithLabelValues(p, "completed").Inc()
		x.effDur.WithLabelValues(p, "completed").Observe(ev.Duration.Seconds())
	case yella.EffectFailed:
		x.effects.WithLabelValues(p, "failed").Inc()
		x.effDur.WithLabelValues(p, "failed").Observe(ev.Duration.Seconds())
	case yella.EffectReplayed:
		x.effects.WithLabelValues(p, "replayed").Inc()
	case yella.EffectResolved:
		x.effects.WithLabelValues(p, "resolved").Inc()
	case yella.LeaseReclaimed:
		x.engine.WithLabelValues("lease_reclaim").Inc()
	case yella.InternalError:
		x.engine.WithLabelValues("internal_error").Inc()
	case yella.RunDepthExceeded:
		x.engine.WithLabelValues("depth_exceeded").Inc()
	}
}

// scrape reads the engine's gauges at scrape time.
type scrape Exporter

var (
	descQueue    = prometheus.NewDesc("yella_queue_runs", "Persisted runs by status: idle, running, waiting, completed, deferred, errored, dead-letter, fenced, cancelled.", []string{"status"}, nil)
	descInFlight = prometheus.NewDesc("yella_inflight_runs", "Attempts executing in this engine, by process.", []string{"process"}, nil)
	descCap      = prometheus.NewDesc("yella_process_concurrency_limit", "Per-process concurrency cap (0: none).", []string{"process"}, nil)
	descSlots    = prometheus.NewDesc("yella_dispatcher_runs", "This engine's in-memory view: ready, delayed (idle runs waiting for their retry, and waiting runs for their deadline), running, rate_limited (due, held back by a rate limit), key_limited (due, held back by their key's concurrency bound); and slots. With a shared store the store holds runs back when it claims, and both limited kinds stay 0.", []string{"kind"}, nil)
	descCommits  = prometheus.NewDesc("yella_store_commits_total", "Store writer transactions committed.", nil, nil)
	descCommands = prometheus.NewDesc("yella_store_commands_total", "State changes committed; divided by commits, the mean batch size.", nil, nil)
	descBusy     = prometheus.NewDesc("yella_store_commit_seconds_total", "Time spent committing; divided by commits, the mean commit latency.", nil, nil)
	descDeadlock = prometheus.NewDesc("yella_store_deadlocks_total", "Store writer transactions that met a deadlock, failed by the database to break it; their writes were tried again.", nil, nil)
	descLag      = prometheus.NewDesc("yella_replication_lag_seconds", "Time since the last successful replica sync.", nil, nil)
	descLastSync = prometheus.NewDesc("yella_replication_last_sync_timestamp_seconds", "Unix time of the last successful replica sync (0: never).", nil, nil)
	descStalled  = prometheus.NewDesc("yella_replication_stalled", "1 while replication is stalled: the replica stopped following the database (the reason is in /api/health).", nil, nil)
	descUp       = prometheus.NewDesc("yella_up", "1 when the engine answered the scrape, 0 when its store failed.", nil, nil)
	descNodes    = prometheus.NewDesc("yella_nodes", "Engine processes sharing the store, by state: live, or gone (heartbeat older than the store's bound). Only on a shared store.", []string{"state"}, nil)
	descHeld     = prometheus.NewDesc("yella_node_running_runs", "Runs each node of a shared store holds (running under its owner id).", []string{"node"}, nil)
	descStoreUp  = prometheus.NewDesc("yella_store_up", "0 while the engine's store calls (claims, heartbeats, writes) fail and it retries them; 1 otherwise.", nil, nil)
	descStoreErr = prometheus.NewDesc("yella_store_failures_total", "Store calls of the engine that failed and were retried.", nil, nil)
)

// MaxNodes bounds the nodes one scrape reports (yella_node_running_runs
// has a series per node).
const MaxNodes = 100

// Describe implements prometheus.Collector.
func (s *scrape) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueue, descInFlight, descCap, descSlots, descUp, descNodes, descHeld, descStoreUp, descStoreErr} {
		ch <- d
	}
	if s.opts.Writer != nil {
		ch <- descCommits
		ch <- descCommands
		ch <- descBusy
		ch <- descDeadlock
	}
	if s.opts.Replication != nil {
		ch <- descLag
		ch <- descLastSync
		ch <- descStalled
	}
}

// nodes reports the nodes of a shared store; nothing on a single-node
// store, or when the store fails to list them.
func (s *scrape) nodes(ctx context.Context, ch chan<- prometheus.Metric) {
	list, err := s.eng.Nodes(ctx, MaxNodes)
	if err != nil || !list.Shared {
		return
	}
	live, gone := 0, 0
	for _, n := range list.Nodes {
		if n.Gone {
			gone++
		} else {
			live++
		}
		ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, float64(n.Running), n.Owner)
	}
	ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(live), "live")
	ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(gone), "gone")
}

// Collect implements prometheus.Collector: it reads the engine now.
func (s *scrape) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sh := s.eng.StoreHealth()
	ch <- prometheus.MustNewConstMetric(descStoreUp, prometheus.GaugeValue, map[bool]float64{false: 0, true: 1}[sh.Up])
	ch <- prometheus.MustNewConstMetric(descStoreErr, prometheus.CounterValue, float64(sh.Failures))
	m, err := s.eng.Metrics(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
	} else {
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1)
		for st, n := range m.Queue {
			ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(n), string(st))
		}
		for name, p := range m.Processes {
			ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(p.InFlight), name)
			ch <- prometheus.MustNewConstMetric(descCap, prometheus.GaugeValue, float64(p.Concurrency), name)
		}
		d := m.Dispatcher
		for kind, n := range map[string]int{"ready": d.Ready, "delayed": d.Delayed, "running": d.Running, "slots": d.Slots,
			"rate_limited": d.RateLimited, "key_limited": d.KeyLimited} {
			ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, float64(n), kind)
		}
		s.nodes(ctx, ch)
	}
	if s.opts.Writer != nil {
		w := s.opts.Writer()
		ch <- prometheus.MustNewConstMetric(descCommits, prometheus.CounterValue, float64(w.Commits))
		ch <- prometheus.MustNewConstMetric(descCommands, prometheus.CounterValue, float64(w.Commands))
		ch <- prometheus.MustNewConstMetric(descBusy, prometheus.CounterValue, w.Busy.Seconds())
		ch <- prometheus.MustNewConstMetric(descDeadlock, prometheus.CounterValue, float64(w.Deadlocks))
	}
	if s.opts.Replication != nil {
		r := s.opts.Replication()
		ts, stalled := 0.0, 0.0
		if !r.LastSync.IsZero() {
			ts = float64(r.LastSync.UnixNano()) / 1e9
		}
		if r.Stalled {
			stalled = 1
		}
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, r.Lag.Seconds())
		ch <- prometheus.MustNewConstMetric(descLastSync, prometheus.GaugeValue, ts)
		ch <- prometheus.MustNewConstMetric(descStalled, prometheus.GaugeValue, stalled)
	}
}
