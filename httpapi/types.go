package httpapi

import (
	"encoding/json"
	"time"

	"github.com/yella-go/yella"
)

// The JSON shapes of the API. Field names are stable: they are part of
// the API (golden files in testdata guard them). Times are RFC 3339 in
// UTC; absent times and empty strings are omitted.

// Run is a run as the API returns it.
type Run struct {
	ID             string          `json:"id"`
	Seq            int64           `json:"seq"`
	Process        string          `json:"process"`
	Event          string          `json:"event"`
	CorrelationID  string          `json:"correlationId"`
	ParentID       string          `json:"parentId,omitempty"`
	Depth          int             `json:"depth"`
	Status         yella.Status    `json:"status"`
	State          yella.State     `json:"state"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Context        json.RawMessage `json:"context,omitempty"`
	Output         json.RawMessage `json:"output,omitempty"`
	Error          string          `json:"error,omitempty"`
	ErrorCode      string          `json:"errorCode,omitempty"`
	Then           string          `json:"then,omitempty"`
	IdempotencyKey string          `json:"idempotencyKey,omitempty"`
	Attempts       int             `json:"attempts"`
	Epoch          int64           `json:"epoch"`
	RetryAt        *time.Time      `json:"retryAt,omitempty"`
	LeaseOwner     string          `json:"leaseOwner,omitempty"`
	LeaseExpires   *time.Time      `json:"leaseExpires,omitempty"`
	CreatedAt      time.Time       `json:"createdAt"`
	StartedAt      *time.Time      `json:"startedAt,omitempty"`
	CompletedAt    *time.Time      `json:"completedAt,omitempty"`
	Version        string          `json:"version,omitempty"`
	// Priority is the run's priority (yella.Priority,
	// Process.Priority); absent when 0.
	Priority int `json:"priority,omitempty"`
	// RateLimit is the rate limit the run counts against and its key in
	// it (Process.RateLimit); absent for none.
	RateLimit *FlowKey `json:"rateLimit,omitempty"`
	// KeyConcurrency is the per-key concurrency bound the run counts
	// against and its key (Process.KeyConcurrency); absent for none.
	KeyConcurrency *FlowKey `json:"keyConcurrency,omitempty"`
	// Signal is, for a waiting run, the signal key it waits for
	// (yella.WaitFor; POST /api/signals sends one); absent while it
	// sleeps, and for other runs. A waiting run's retryAt is its wait's
	// deadline (absent: none).
	Signal string `json:"signal,omitempty"`
	// Waiting says why an idle run the serving engine holds has not
	// started ("slot", "retry", "process cap", "key concurrency", "rate
	// limit"; yella.Run.Waiting), and WaitingUntil when a rate limit lets
	// it start. For a waiting run it is "signal" or "sleep", until
	// WaitingUntil (absent: no deadline), since WaitingSince, in the wait
	// whose stored effect key is WaitKey. Only the run detail has them.
	Waiting      string     `json:"waiting,omitempty"`
	WaitingUntil *time.Time `json:"waitingUntil,omitempty"`
	WaitingSince *time.Time `json:"waitingSince,omitempty"`
	WaitKey      string     `json:"waitKey,omitempty"`
	// NoHandler is true when the engine serving the API has no process of
	// this name: it leaves the run as it is, so an idle one waits until a
	// process of that name is registered (here or in another engine on
	// the same store).
	NoHandler bool `json:"noHandler,omitempty"`
}

// FlowKey is a flow limit a run counts against and the run's key in it.
// The key is always present: "" is one key like any other (the single key
// of a limit without a key function).
type FlowKey struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

func flowKey(name, key string) *FlowKey {
	if name == "" {
		return nil
	}
	return &FlowKey{Name: name, Key: key}
}

func ts(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// handlers is the set of processes registered with the engine, taken once
// per request.
type handlers map[string]bool

func (a *API) handlers() handlers {
	h := handlers{}
	for _, p := range a.eng.Processes() {
		h[p.Name] = true
	}
	return h
}

func (h handlers) runOf(r yella.Run) Run {
	return Run{NoHandler: !h[r.Process], ID: r.ID, Seq: r.Seq, Process: r.Process, Event: r.Event, CorrelationID: r.CorrelationID, ParentID: r.ParentID,
		Depth: r.Depth, Status: r.Status, State: r.State(), Payload: r.Payload, Context: r.Context, Output: r.Output,
		Error: r.Error, ErrorCode: string(r.ErrorCode), Then: r.Then, IdempotencyKey: r.IdempotencyKey, Attempts: r.Attempts,
		Epoch: r.Epoch, RetryAt: ts(r.RetryAt), LeaseOwner: r.Owner, LeaseExpires: ts(r.LeaseExpires),
		CreatedAt: r.CreatedAt.UTC(), StartedAt: ts(r.StartedAt), CompletedAt: ts(r.CompletedAt), Version: r.Version,
		Priority: r.Priority, RateLimit: flowKey(r.RateLimit, r.RateKey), KeyConcurrency: flowKey(r.ConcurrencyLimit, r.ConcurrencyKey),
		Signal: r.Signal, Waiting: r.Waiting, WaitingUntil: ts(r.WaitingUntil), WaitingSince: ts(r.WaitingSince), WaitKey: r.WaitKey}
}

// RunPage is GET /api/runs.
type RunPage struct {
	Runs  []Run  `json:"runs"`
	Next  string `json:"next,omitempty"` // cursor of the next page
	Total *int64 `json:"total,omitempty"`
}

// TimelineEntry is one transition of a run.
type TimelineEntry struct {
	N       int          `json:"n"`
	At      time.Time    `json:"at"`
	Status  yella.Status `json:"status"`
	Attempt int          `json:"attempt"`
	Error   string       `json:"error,omitempty"`
	Code    string       `json:"code,omitempty"`
	Note    string       `json:"note,omitempty"`
}

// Effect is one effect record of a run.
type Effect struct {
	Key         string          `json:"key"`
	Status      string          `json:"status"`
	Output      json.RawMessage `json:"output,omitempty"`
	Error       string          `json:"error,omitempty"`
	Epoch       int64           `json:"epoch"`
	StartedAt   time.Time       `json:"startedAt"`
	CompletedAt *time.Time      `json:"completedAt,omitempty"`
}

// RunDetail is GET /api/runs/{id}.
type RunDetail struct {
	Run      Run             `json:"run"`
	Timeline []TimelineEntry `json:"timeline"`
	Effects  []Effect        `json:"effects"`
}

// Admitted is a run created by an emission or a resume.
type Admitted struct {
	ID      string       `json:"id"`
	Process string       `json:"process"`
	Status  yella.Status `json:"status"`
}

// Emitted is POST /api/emit.
type Emitted struct {
	Runs     []Admitted `json:"runs"`               // admitted now
	Existing []string   `json:"existing,omitempty"` // admitted earlier under the same idempotency key
	Dropped  []string   `json:"dropped,omitempty"`  // processes at their cap
	// Grouped are the runs emitted earlier with the same singleton or
	// debounce key that stood in for this emission's (yella.Emission
	// Grouped): a debounced run now carries this emission's payload and
	// start time.
	Grouped []string     `json:"grouped,omitempty"`
	Reason  yella.Reason `json:"reason,omitempty"` // why nothing was admitted ("grouped": a run stood in for every listener)
}

// Signalled is the answer of POST /api/signals and POST
// /api/runs/{id}/signal: what the signal did (yella.SignalResult).
type Signalled struct {
	// RunID is the run whose wait the signal ended (it runs again);
	// absent when none was waiting.
	RunID string `json:"runId,omitempty"`
	// Kept: no run was waiting for the key; the signal is kept for the
	// next wait on it (yella.Config.SignalRetention). False with no RunID
	// when the engine keeps no signals.
	Kept bool `json:"kept"`
}

// Process is one process with its live figures: a registered one, or one
// that has waiting runs in the store but no handler in this engine.
type Process struct {
	Name string `json:"name"`
	// Registered is false for a process seen in the store (among the
	// oldest waiting runs, see UnregisteredScan) that this engine does not
	// have: its runs wait as they are.
	Registered  bool     `json:"registered"`
	Waiting     int64    `json:"waiting,omitempty"` // idle runs of an unregistered process
	On          string   `json:"on,omitempty"`
	Emits       []string `json:"emits,omitempty"`
	Concurrency int      `json:"concurrency"`
	QueueLimit  int      `json:"queueLimit"`
	InFlight    int      `json:"inFlight"`
	Dropped     int64    `json:"dropped"`
}

// Edge links a process to one listening to an event it emits.
type Edge struct {
	From  string `json:"from"`
	Event string `json:"event"`
	To    string `json:"to"`
}

// Processes is GET /api/processes.
type Processes struct {
	Processes []Process `json:"processes"`
	Edges     []Edge    `json:"edges"`
}

// Span is one run of a trace.
type Span struct {
	RunID     string       `json:"runId"`
	ParentID  string       `json:"parentId,omitempty"`
	Process   string       `json:"process"`
	Event     string       `json:"event"`
	Status    yella.Status `json:"status"`
	Level     int          `json:"level"`
	Attempts  int          `json:"attempts"`
	QueuedAt  time.Time    `json:"queuedAt"`
	StartedAt *time.Time   `json:"startedAt,omitempty"`
	EndedAt   *time.Time   `json:"endedAt,omitempty"`
	RunningMs float64      `json:"runningMs"`
}

// Gap is a wait between a run's end and its follow-ups' admission.
type Gap struct {
	ParentID   string    `json:"parentId"`
	ChildIDs   []string  `json:"childIds"`
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
	DurationMs float64   `json:"durationMs"`
}

// Trace is GET /api/runs/{id}/trace.
type Trace struct {
	CorrelationID string     `json:"correlationId"`
	Start         *time.Time `json:"start,omitempty"`
	End           *time.Time `json:"end,omitempty"`
	DurationMs    float64    `json:"durationMs"`
	ExecutionMs   float64    `json:"executionMs"`
	PausedMs      float64    `json:"pausedMs"`
	Spans         []Span     `json:"spans"`
	Gaps          []Gap      `json:"gaps"`
	// More counts the chain's runs the trace leaves out: it covers the
	// oldest yella.MaxTraceRuns.
	More int `json:"more,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func traceOf(t yella.Trace) Trace {
	out := Trace{CorrelationID: t.CorrelationID, Start: ts(t.Start), End: ts(t.End), DurationMs: ms(t.End.Sub(t.Start)),
		ExecutionMs: ms(t.Execution), PausedMs: ms(t.Paused), Spans: []Span{}, Gaps: []Gap{}, More: t.More}
	for _, s := range t.Spans {
		out.Spans = append(out.Spans, Span{RunID: s.RunID, ParentID: s.ParentID, Process: s.Process, Event: s.Event, Status: s.Status,
			Level: s.Level, Attempts: s.Attempts, QueuedAt: s.QueuedAt.UTC(), StartedAt: ts(s.StartedAt), EndedAt: ts(s.EndedAt), RunningMs: ms(s.Running)})
	}
	for _, g := range t.Gaps {
		out.Gaps = append(out.Gaps, Gap{ParentID: g.ParentID, ChildIDs: g.ChildIDs, Start: g.Start.UTC(), End: g.End.UTC(), DurationMs: ms(g.End.Sub(g.Start))})
	}
	return out
}

// Health is GET /api/health.
type Health struct {
	// Status is "ok"; "degraded" while replication is stalled;
	// "store-down" (with HTTP 503, and Store set) while the engine's
	// store calls fail.
	Status        string                 `json:"status"`
	Version       string                 `json:"version,omitempty"`
	Owner         string                 `json:"owner"`
	UptimeSeconds float64                `json:"uptimeSeconds"`
	Queue         map[yella.Status]int64 `json:"queue"`
	Replication   *Replication           `json:"replication,omitempty"`
	Store         *StoreDown             `json:"store,omitempty"`
}

// StoreDown is the store outage the engine is in (yella.StoreHealth).
type StoreDown struct {
	Since     time.Time `json:"since"`     // when the store calls began to fail
	LastError string    `json:"lastError"` // the last failure
	Failures  int64     `json:"failures"`  // failed calls since the engine was created
}

// Replication is the state of off-box replication, when it is on.
type Replication struct {
	LastSync   *time.Time `json:"lastSync,omitempty"`
	LagSeconds float64    `json:"lagSeconds"`
	LastError  string     `json:"lastError,omitempty"`
	Stalled    string     `json:"stalled,omitempty"` // why replication is stalled
}

// Duration summarises durations in milliseconds.
type Duration struct {
	Count int64   `json:"count"`
	AvgMs float64 `json:"avgMs"`
	MinMs float64 `json:"minMs"`
	MaxMs float64 `json:"maxMs"`
	P50Ms float64 `json:"p50Ms"`
	P95Ms float64 `json:"p95Ms"`
	P99Ms float64 `json:"p99Ms"`
}

func durationOf(d yella.DurationStats) Duration {
	return Duration{Count: d.Count, AvgMs: ms(d.Avg), MinMs: ms(d.Min), MaxMs: ms(d.Max), P50Ms: ms(d.P50), P95Ms: ms(d.P95), P99Ms: ms(d.P99)}
}

// Bucket is one time bucket of an observability report.
type Bucket struct {
	Start             time.Time `json:"start"`
	Admitted          int64     `json:"admitted"`
	Dropped           int64     `json:"dropped"`
	Started           int64     `json:"started"`
	Completed         int64     `json:"completed"`
	Failed            int64     `json:"failed"`
	Retried           int64     `json:"retried"`
	DeadLetters       int64     `json:"deadLetters"`
	Fenced            int64     `json:"fenced"`
	Resumed           int64     `json:"resumed"`
	Cancelled         int64     `json:"cancelled"`
	SuccessRate       *float64  `json:"successRate,omitempty"` // absent when nothing finished
	RunDuration       Duration  `json:"runDuration"`
	EffectsCompleted  int64     `json:"effectsCompleted"`
	EffectsFailed     int64     `json:"effectsFailed"`
	EffectsReplayed   int64     `json:"effectsReplayed"`
	EffectDuration    Duration  `json:"effectDuration"`
	LeaseReclaims     int64     `json:"leaseReclaims"`
	InternalErrors    int64     `json:"internalErrors"`
	EffectSuccessRate *float64  `json:"effectSuccessRate,omitempty"`
}

func rate(r float64) *float64 {
	if r < 0 {
		return nil
	}
	return &r
}

func bucketOf(b yella.BucketStats) Bucket {
	return Bucket{Start: b.Start.UTC(), Admitted: b.Runs.Admitted, Dropped: b.Runs.Dropped, Started: b.Runs.Started,
		Completed: b.Runs.Completed, Failed: b.Runs.Failed, Retried: b.Runs.Retried, DeadLetters: b.Runs.DeadLetters,
		Fenced: b.Runs.Fenced, Resumed: b.Runs.Resumed, Cancelled: b.Runs.Cancelled, SuccessRate: rate(b.Runs.SuccessRate),
		RunDuration: durationOf(b.Runs.Duration), EffectsCompleted: b.Effects.Completed, EffectsFailed: b.Effects.Failed,
		EffectsReplayed: b.Effects.Replayed, EffectDuration: durationOf(b.Effects.Duration), EffectSuccessRate: rate(b.Effects.SuccessRate),
		LeaseReclaims: b.System.LeaseReclaims, InternalErrors: b.System.InternalErrors}
}

// ErrorRecord is a recent error.
type ErrorRecord struct {
	At        time.Time `json:"at"`
	Kind      string    `json:"kind"` // run, effect, internal
	Process   string    `json:"process,omitempty"`
	RunID     string    `json:"runId,omitempty"`
	EffectKey string    `json:"effectKey,omitempty"`
	Context   string    `json:"context,omitempty"`
	Message   string    `json:"message"`
}

// Observability is GET /api/observability.
type Observability struct {
	From         time.Time     `json:"from"`
	To           time.Time     `json:"to"`
	BucketMs     float64       `json:"bucketMs"`
	Summary      Bucket        `json:"summary"`
	Buckets      []Bucket      `json:"buckets"`
	RecentErrors []ErrorRecord `json:"recentErrors"`
}

// Event is one lifecycle event on the SSE stream.
type Event struct {
	ID            int64           `json:"id"`
	Type          yella.EventType `json:"type"`
	At            time.Time       `json:"at"`
	RunID         string          `json:"runId,omitempty"`
	CorrelationID string          `json:"correlationId,omitempty"`
	ParentID      string          `json:"parentId,omitempty"`
	Process       string          `json:"process,omitempty"`
	EventName     string          `json:"event,omitempty"`
	Status        yella.Status    `json:"status,omitempty"`
	Attempt       int             `json:"attempt,omitempty"`
	Error         string          `json:"error,omitempty"`
	Code          yella.Code      `json:"code,omitempty"`
	DurationMs    float64         `json:"durationMs,omitempty"`
	EffectKey     string          `json:"effectKey,omitempty"`
	Children      []string        `json:"children,omitempty"`
	Context       string          `json:"context,omitempty"`
}

func eventOf(id int64, e yella.Event) Event {
	return Event{ID: id, Type: e.Type, At: e.At.UTC(), RunID: e.RunID, CorrelationID: e.CorrelationID, ParentID: e.ParentID,
		Process: e.Process, EventName: e.EventName, Status: e.Status, Attempt: e.Attempt, Error: e.Error, Code: e.Code,
		DurationMs: ms(e.Duration), EffectKey: e.EffectKey, Children: e.Children, Context: e.Context}
}

// ErrorBody is every error response: {"error": {"code", "message"}}.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Metrics is GET /api/metrics: the engine's counters since it started and
// the queue by status.
type Metrics struct {
	Queue      map[yella.Status]int64     `json:"queue"`
	Totals     Totals                     `json:"totals"`
	Processes  map[string]ProcessCounters `json:"processes"`
	Dispatcher Dispatcher                 `json:"dispatcher"`
}

// Totals are the engine's lifecycle counters.
type Totals struct {
	Admitted         int64 `json:"admitted"`
	Dropped          int64 `json:"dropped"`
	Started          int64 `json:"started"`
	Completed        int64 `json:"completed"`
	Failed           int64 `json:"failed"`
	Retries          int64 `json:"retries"`
	DeadLetters      int64 `json:"deadLetters"`
	Fenced           int64 `json:"fenced"`
	Resumes          int64 `json:"resumes"`
	Cancels          int64 `json:"cancels"`
	ManualRetries    int64 `json:"manualRetries"`
	Requeues         int64 `json:"requeues"`
	DepthExceeded    int64 `json:"depthExceeded"`
	LeaseReclaims    int64 `json:"leaseReclaims"`
	InternalErrors   int64 `json:"internalErrors"`
	EffectsCompleted int64 `json:"effectsCompleted"`
	EffectsFailed    int64 `json:"effectsFailed"`
	EffectsReplayed  int64 `json:"effectsReplayed"`
	EffectsResolved  int64 `json:"effectsResolved"`
	Pruned           int64 `json:"pruned"`
}

// ProcessCounters are one process's live figures.
type ProcessCounters struct {
	Event       string `json:"event"`
	Concurrency int    `json:"concurrency"`
	QueueLimit  int    `json:"queueLimit"`
	InFlight    int    `json:"inFlight"`
	Dropped     int64  `json:"dropped"`
}

// Dispatcher is this engine's in-memory view of its work.
type Dispatcher struct {
	Slots int `json:"slots"`
	Ready int `json:"ready"`
	// Delayed are the idle runs waiting for their retry, and the waiting
	// runs with a deadline (a sleep, a wait for a signal with a timeout).
	Delayed int `json:"delayed"`
	Running int `json:"running"`
	// RateLimited and KeyLimited are the due runs held back by a rate
	// limit or by their key's concurrency bound (GET /api/limits says
	// which). With a shared store the store holds them back when it
	// claims, and both stay 0.
	RateLimited int `json:"rateLimited"`
	KeyLimited  int `json:"keyLimited"`
}

func metricsOf(m yella.Metrics) Metrics {
	t := m.Totals
	out := Metrics{Queue: m.Queue, Processes: map[string]ProcessCounters{},
		Totals: Totals{Admitted: t.Admitted, Dropped: t.Dropped, Started: t.Started, Completed: t.Completed, Failed: t.Failed,
			Retries: t.Retries, DeadLetters: t.DeadLetters, Fenced: t.Fenced, Resumes: t.Resumes, Cancels: t.Cancels,
			ManualRetries: t.ManualRetries, Requeues: t.Requeues, DepthExceeded: t.DepthExceeded, LeaseReclaims: t.LeaseReclaims,
			InternalErrors: t.InternalErrors, EffectsCompleted: t.EffectsCompleted, EffectsFailed: t.EffectsFailed,
			EffectsReplayed: t.EffectsReplayed, EffectsResolved: t.EffectsResolved, Pruned: t.Pruned},
		Dispatcher: Dispatcher{Slots: m.Dispatcher.Slots, Ready: m.Dispatcher.Ready, Delayed: m.Dispatcher.Delayed, Running: m.Dispatcher.Running,
			RateLimited: m.Dispatcher.RateLimited, KeyLimited: m.Dispatcher.KeyLimited}}
	for name, p := range m.Processes {
		out.Processes[name] = ProcessCounters{Event: p.Event, Concurrency: p.Concurrency, QueueLimit: p.QueueLimit, InFlight: p.InFlight, Dropped: p.Dropped}
	}
	return out
}

// Nodes is GET /api/nodes: the engine processes that share the store. On
// a single-node store (SQLite, memory) Shared is false and Nodes is empty:
// the engine serving the API is the database's only one.
type Nodes struct {
	Shared bool `json:"shared"`
	// Self is the owner id of the engine serving the API.
	Self string `json:"self"`
	// Note says, on a single-node store, why no node is listed.
	Note  string `json:"note,omitempty"`
	Nodes []Node `json:"nodes"`
}

// Node is one engine process on a shared store. Its times are the
// database's, the clock that decides whether it is gone.
type Node struct {
	Owner         string    `json:"owner"`
	JoinedAt      time.Time `json:"joinedAt"`
	LastHeartbeat time.Time `json:"lastHeartbeat"`
	// HeartbeatAgeSeconds is how long ago LastHeartbeat was.
	HeartbeatAgeSeconds float64 `json:"heartbeatAgeSeconds"`
	// State is live, or gone: its heartbeat is older than the store's
	// bound, and the runs it still holds are being taken over.
	State string `json:"state"`
	// Self: the engine serving the API.
	Self bool `json:"self,omitempty"`
	// Running is how many runs it holds; ByProcess splits them by process.
	Running   int64            `json:"running"`
	ByProcess map[string]int64 `json:"byProcess,omitempty"`
}

// Limits is GET /api/limits: every flow limit the engine's processes
// declare, each with the keys holding the most runs back (at most top=
// of them, the most waiting first).
type Limits struct {
	// Local is true when the waiting keys are this engine's own view
	// (SQLite, memory). On a shared store it is false, Note says why, and
	// no key is listed: the store holds runs back when a node claims.
	Local bool   `json:"local"`
	Note  string `json:"note,omitempty"`
	// Rate and Key are in name order; empty when no process declares one.
	Rate []RateLimit `json:"rate"`
	Key  []KeyLimit  `json:"key"`
}

// RateLimit is one rate limit: Limit starts per Per for each key, Burst
// at once.
type RateLimit struct {
	Name  string `json:"name"`
	Limit int    `json:"limit"`
	// Per is the period as a Go duration ("1m0s"); PerMs the same in
	// milliseconds.
	Per       string   `json:"per"`
	PerMs     float64  `json:"perMs"`
	Burst     int      `json:"burst"`
	Processes []string `json:"processes"`
	// Waiting are the keys holding runs back, the most waiting first.
	Waiting []RateKeyWait `json:"waiting"`
}

// RateKeyWait is a key of a rate limit with runs waiting for it.
type RateKeyWait struct {
	Key     string `json:"key"`
	Waiting int    `json:"waiting"`
	// Next is when the key next lets a run start (the engine's clock).
	Next *time.Time `json:"next,omitempty"`
}

// KeyLimit is one per-key concurrency bound: at most Max runs of a key
// run at once.
type KeyLimit struct {
	Name      string   `json:"name"`
	Max       int      `json:"max"`
	Processes []string `json:"processes"`
	// Waiting are the keys at their bound with runs waiting, the most
	// waiting first.
	Waiting []ConcurrencyKeyWait `json:"waiting"`
}

// ConcurrencyKeyWait is a key at its concurrency bound with runs waiting.
type ConcurrencyKeyWait struct {
	Key     string `json:"key"`
	Running int    `json:"running"`
	Waiting int    `json:"waiting"`
}

func limitsOf(l yella.Limits) Limits {
	out := Limits{Local: l.Local, Rate: []RateLimit{}, Key: []KeyLimit{}}
	if !l.Local {
		out.Note = SharedLimitsNote
	}
	for _, r := range l.Rate {
		rl := RateLimit{Name: r.Name, Limit: r.Limit, Per: r.Per.String(), PerMs: ms(r.Per), Burst: r.Burst,
			Processes: append([]string{}, r.Processes...), Waiting: []RateKeyWait{}}
		for _, k := range r.Waiting {
			rl.Waiting = append(rl.Waiting, RateKeyWait{Key: k.Key, Waiting: k.Waiting, Next: ts(k.Next)})
		}
		out.Rate = append(out.Rate, rl)
	}
	for _, k := range l.Key {
		kl := KeyLimit{Name: k.Name, Max: k.Max, Processes: append([]string{}, k.Processes...), Waiting: []ConcurrencyKeyWait{}}
		for _, w := range k.Waiting {
			kl.Waiting = append(kl.Waiting, ConcurrencyKeyWait{Key: w.Key, Running: w.Running, Waiting: w.Waiting})
		}
		out.Key = append(out.Key, kl)
	}
	return out
}

// Schedule is one schedule of GET /api/schedules (yella.ScheduleInfo).
type Schedule struct {
	Name      string     `json:"name"`
	Cron      string     `json:"cron"`
	Location  string     `json:"location"`
	Event     string     `json:"event"`
	CatchUpMs int64      `json:"catchUpMs"`
	Next      *time.Time `json:"next,omitempty"`
	Last      *time.Time `json:"last,omitempty"`
	LastRuns  []string   `json:"lastRuns,omitempty"`
	Error     string     `json:"error,omitempty"`
	// Paused: the schedule is paused (POST /api/schedules/{name}/pause)
	// since PausedAt, on every engine of the store: its ticks are skipped,
	// and not caught up once it is resumed. As the serving engine last
	// read it: at its latest tick, or at a pause or resume it made.
	Paused   bool       `json:"paused"`
	PausedAt *time.Time `json:"pausedAt,omitempty"`
}

func scheduleOf(s yella.ScheduleInfo) Schedule {
	return Schedule{Name: s.Name, Cron: s.Cron, Location: s.Location, Event: s.Event, CatchUpMs: s.CatchUp.Milliseconds(),
		Next: ts(s.Next), Last: ts(s.Last), LastRuns: s.LastRuns, Error: s.Err, Paused: s.Paused, PausedAt: ts(s.PausedAt)}
}
