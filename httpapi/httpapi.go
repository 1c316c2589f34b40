// Package httpapi is Yella's JSON HTTP API: runs (filtered, paged), run
// detail with timeline and effects, chains and traces, processes and the
// event graph, the nodes sharing the store, the flow limits (rate limits
// and per-key concurrency) with the keys holding runs back, the cron
// schedules (listed, paused and resumed), emit (with an idempotency key,
// a singleton or a debounce key), signals (to the run waiting for a key,
// or to one waiting run), the operator actions (retry, requeue, cancel,
// resume, complete an effect, end a wait), metrics, observability, and a
// Server-Sent Events stream of lifecycle events with replay.
//
// Every route lives under /api/. Errors are {"error": {"code", "message"}}
// with a stable code; statusOf maps them to HTTP statuses in one table.
// Responses are compact JSON (indentation would grow with the square of a
// payload's nesting depth), and every read is bounded: see Options.
// The package adds no authentication: serve it behind the guard the yella
// command puts in front of it (bearer token, Host allowlist, same-origin
// mutations, body limit).
package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/yella-go/yella"
)

// Defaults of the API's limits (see Options).
const (
	DefaultMaxPageSize      = yella.MaxPageSize
	DefaultMaxResponseBytes = 16 << 20
	DefaultQueryTimeout     = 10 * time.Second
	DefaultMaxHeavyReads    = 4
	DefaultMaxSubscribers   = 64
	DefaultReplay           = 4096
)

// MaxFilterValues bounds the distinct values of one run filter (status=a,b,…);
// repeated values count once.
const MaxFilterValues = 16

// Options configures the API. The zero value means defaults; a value of
// zero or less for a limit means its default.
type Options struct {
	// Version is reported by the health route.
	Version string
	// Logger receives request errors and one info line per mutation (who,
	// route, run ids). Defaults to discarding them.
	Logger *slog.Logger
	// Replay is how many recent lifecycle events the SSE stream keeps for
	// clients that reconnect, in one ring shared by every client. Defaults
	// to DefaultReplay (4096).
	Replay int
	// Keepalive is the interval of SSE comment frames. Defaults to 15s.
	Keepalive time.Duration
	// MaxSubscribers bounds the SSE clients connected at once; more are
	// answered 503 BUSY with Retry-After. Defaults to DefaultMaxSubscribers
	// (64).
	MaxSubscribers int
	// SubscriberQueue is how many events may wait for one SSE client (sent
	// by the engine, not yet written to it). A client further behind, such
	// as one that stopped reading, is sent a "reset" event if it still
	// accepts data and is disconnected; EventSource reconnects and replays.
	// The waiting events are read from the shared ring, never copied per
	// client. Defaults to Replay; at most Replay.
	SubscriberQueue int
	// MaxPageSize is the largest limit= a run listing accepts. Defaults to
	// DefaultMaxPageSize (1000, also the maximum).
	MaxPageSize int
	// MaxResponseBytes bounds one JSON response. A read whose answer would
	// be larger stops and fails with 422 RESPONSE_TOO_LARGE, whose message
	// says to ask for less. Defaults to DefaultMaxResponseBytes (16 MiB).
	MaxResponseBytes int
	// QueryTimeout bounds one read: its context, passed down to the store,
	// is cancelled after it, which stops the query, and the read fails with
	// 503 TIMEOUT. Defaults to DefaultQueryTimeout (10s).
	QueryTimeout time.Duration
	// MaxHeavyReads bounds the reads that query runs (listings, a run, a
	// chain, a trace, observability, processes) running at once; more are
	// answered 503 BUSY with Retry-After at once. Defaults to
	// DefaultMaxHeavyReads (4).
	MaxHeavyReads int
	// Replication, when set, reports off-box replication for the health
	// route. While it is stalled the health status is "degraded".
	Replication func() ReplicationState
}

// ReplicationState is the state of off-box replication the health route
// reports.
type ReplicationState struct {
	LastSync  time.Time     // the last successful sync; zero before the first
	Lag       time.Duration // the time since LastSync
	LastError string        // the last error while failing; "" when healthy
	Stalled   string        // why replication is stalled; "" when it is not
}

// withDefaults fills the zero (or negative) fields.
func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Replay, DefaultReplay)
	def(&o.MaxSubscribers, DefaultMaxSubscribers)
	def(&o.SubscriberQueue, o.Replay)
	o.SubscriberQueue = min(o.SubscriberQueue, o.Replay)
	def(&o.MaxPageSize, DefaultMaxPageSize)
	o.MaxPageSize = min(o.MaxPageSize, yella.MaxPageSize)
	def(&o.MaxResponseBytes, DefaultMaxResponseBytes)
	def(&o.MaxHeavyReads, DefaultMaxHeavyReads)
	if o.Keepalive <= 0 {
		o.Keepalive = 15 * time.Second
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = DefaultQueryTimeout
	}
	return o
}

// API serves the routes. Create it with New; Close it when the server
// shuts down, which ends the SSE streams.
type API struct {
	eng     *yella.Engine
	opts    Options
	mux     *http.ServeMux
	broker  *broker
	heavy   chan struct{} // a slot per heavy read in progress
	started time.Time
	done    chan struct{}
	once    sync.Once
}

// New returns the API of eng. It subscribes to eng's lifecycle events at
// once, so the SSE replay buffer fills from the start.
func New(eng *yella.Engine, opts Options) *API {
	opts = opts.withDefaults()
	a := &API{eng: eng, opts: opts, mux: http.NewServeMux(), heavy: make(chan struct{}, opts.MaxHeavyReads),
		started: time.Now(), done: make(chan struct{})}
	a.broker = newBroker(eng, opts.Replay, opts.SubscriberQueue, opts.MaxSubscribers)
	a.routes()
	return a
}

// Close ends the SSE streams and stops listening to the engine.
func (a *API) Close() {
	a.once.Do(func() {
		close(a.done)
		a.broker.unsub()
	})
}

// ServeHTTP implements http.Handler.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

func (a *API) routes() {
	routes := []struct {
		pattern string
		h       http.HandlerFunc
	}{
		{"GET /api/health", a.read(false, a.health)},
		{"GET /api/processes", a.read(true, a.processes)},
		{"GET /api/nodes", a.read(true, a.nodes)},
		{"GET /api/limits", a.read(false, a.limits)},
		{"GET /api/schedules", a.read(false, a.schedules)},
		{"POST /api/schedules/{name}/pause", a.scheduleAction(true)},
		{"POST /api/schedules/{name}/resume", a.scheduleAction(false)},
		{"GET /api/runs", a.read(true, a.runs)},
		{"GET /api/runs/{id}", a.read(true, a.run)},
		{"GET /api/runs/{id}/chain", a.read(true, a.chain)},
		{"GET /api/runs/{id}/trace", a.read(true, a.trace)},
		{"POST /api/emit", a.emit},
		{"POST /api/runs/{id}/retry", a.action(a.eng.Retry)},
		{"POST /api/runs/{id}/requeue", a.action(a.eng.RequeueDead)},
		{"POST /api/runs/{id}/cancel", a.action(a.eng.Cancel)},
		{"POST /api/runs/{id}/resume", a.resume},
		{"POST /api/runs/{id}/complete-effect", a.completeEffect},
		{"POST /api/runs/{id}/signal", a.signalRun},
		{"POST /api/runs/{id}/end-wait", a.action(a.eng.EndWait)},
		{"POST /api/signals", a.signal},
		{"POST /api/dead-letters/requeue", a.requeueAll},
		{"POST /api/fenced/resolve", a.resolveFenced},
		{"GET /api/metrics", a.read(false, a.metrics)},
		{"GET /api/observability", a.read(true, a.observability)},
		{"GET /api/events", a.events},
	}
	known := http.NewServeMux() // the routes alone, to tell 404 from 405
	for _, r := range routes {
		a.mux.HandleFunc(r.pattern, r.h)
		known.HandleFunc(r.pattern, r.h)
	}
	a.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pat := known.Handler(probe); pat != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			a.fail(w, r, &apiError{http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", r.Method + " is not allowed on " + r.URL.Path})
			return
		}
		a.fail(w, r, &apiError{http.StatusNotFound, "NOT_FOUND", "no such route: " + r.Method + " " + r.URL.Path})
	})
}

// apiError is an error the API answers with directly.
type apiError struct {
	status        int
	code, message string
}

func (e *apiError) Error() string { return e.message }

func badRequest(code, msg string) *apiError { return &apiError{http.StatusBadRequest, code, msg} }

// statusOf is the one table from engine error codes to HTTP statuses.
var statusOf = map[yella.Code]int{
	yella.CodeRunNotFound:            http.StatusNotFound,
	yella.CodeInvalidRunState:        http.StatusConflict,
	yella.CodeNotAdmitted:            http.StatusConflict,
	yella.CodeInvalidPayload:         http.StatusBadRequest,
	yella.CodeInvalidQuery:           http.StatusBadRequest,
	yella.CodeSchemaValidationFailed: http.StatusBadRequest,
	yella.CodeInvalidConfig:          http.StatusBadRequest,
	yella.CodeInvalidSignal:          http.StatusBadRequest,
	yella.CodePayloadTooLarge:        http.StatusRequestEntityTooLarge,
	yella.CodeUnknownEvent:           http.StatusUnprocessableEntity,
	yella.CodeChainDepthExceeded:     http.StatusUnprocessableEntity,
	yella.CodeStopped:                http.StatusServiceUnavailable,
	yella.CodeNotStarted:             http.StatusServiceUnavailable,
	yella.CodeUnavailable:            http.StatusServiceUnavailable,
}

// fail writes err as the JSON error body. Engine errors keep their code;
// anything else is an internal error whose detail is logged, not sent.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	var body ErrorBody
	status := http.StatusInternalServerError
	ae := a.limitError(r, err)
	var tooBig *http.MaxBytesError
	switch {
	case ae != nil || errors.As(err, &ae):
		status, body.Error.Code, body.Error.Message = ae.status, ae.code, ae.message
	case errors.As(err, &tooBig):
		status, body.Error.Code, body.Error.Message = http.StatusRequestEntityTooLarge, "BODY_TOO_LARGE", err.Error()
	case yella.CodeOf(err) != "":
		code := yella.CodeOf(err)
		body.Error.Code, body.Error.Message = string(code), err.Error()
		if s, ok := statusOf[code]; ok {
			status = s
		}
	default:
		body.Error.Code, body.Error.Message = "INTERNAL", "internal error"
	}
	if status >= 500 && ae == nil && r.Context().Err() == nil {
		a.opts.Logger.Error("api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// decode reads a JSON body into v: one object, no unknown fields. An empty
// body is allowed when optional.
func decode(r *http.Request, v any, optional bool) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, io.EOF) && optional:
		return nil
	case errors.Is(err, io.EOF):
		return badRequest("BAD_JSON", "a JSON body is required")
	case errors.As(err, &tooBig):
		return err
	case err != nil:
		return badRequest("BAD_JSON", "invalid JSON body: "+err.Error())
	}
	if dec.More() {
		return badRequest("BAD_JSON", "invalid JSON body: more than one value")
	}
	return nil
}
