package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/yella-go/yella"
)

func (a *API) health(w http.ResponseWriter, r *http.Request) {
	if sh := a.eng.StoreHealth(); !sh.Up { // the engine's claims and writes fail: not ok, whatever a read may answer
		a.reply(w, r, http.StatusServiceUnavailable, Health{Status: "store-down", Version: a.opts.Version, Owner: a.eng.Owner(),
			UptimeSeconds: time.Since(a.started).Seconds(), Store: &StoreDown{Since: sh.Since.UTC(), LastError: sh.LastError, Failures: sh.Failures}})
		return
	}
	m, err := a.eng.Metrics(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	h := Health{Status: "ok", Version: a.opts.Version, Owner: a.eng.Owner(), UptimeSeconds: time.Since(a.started).Seconds(), Queue: m.Queue}
	if a.opts.Replication != nil {
		r := a.opts.Replication()
		h.Replication = &Replication{LastSync: ts(r.LastSync), LagSeconds: r.Lag.Seconds(), LastError: r.LastError, Stalled: r.Stalled}
		if r.Stalled != "" {
			h.Status = "degraded"
		}
	}
	a.reply(w, r, http.StatusOK, h)
}

func (a *API) processes(w http.ResponseWriter, r *http.Request) {
	m, err := a.eng.Metrics(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := Processes{Processes: []Process{}, Edges: []Edge{}}
	for _, p := range a.eng.Processes() {
		pm := m.Processes[p.Name]
		out.Processes = append(out.Processes, Process{Name: p.Name, Registered: true, On: p.On, Emits: p.Emits, Concurrency: p.Concurrency,
			QueueLimit: pm.QueueLimit, InFlight: pm.InFlight, Dropped: pm.Dropped})
	}
	waiting, err := a.unregistered(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	for name, n := range waiting {
		out.Processes = append(out.Processes, Process{Name: name, Waiting: n})
	}
	sort.Slice(out.Processes, func(i, j int) bool { return out.Processes[i].Name < out.Processes[j].Name })
	for _, e := range a.eng.Graph().Edges {
		out.Edges = append(out.Edges, Edge{From: e.From, Event: e.Event, To: e.To})
	}
	a.reply(w, r, http.StatusOK, out)
}

// SingleNodeNote is GET /api/nodes's note on a store that is not shared.
const SingleNodeNote = "single-node store: the engine serving this API is the database's only one; several servers share a PostgreSQL database"

// ParseNodeQuery reads GET /api/nodes's query string: limit (1 to
// yella.MaxNodeLimit; default yella.DefaultNodeLimit). Anything else is an
// error.
func ParseNodeQuery(v url.Values) (limit int, err error) {
	for k, vals := range v {
		if k != "limit" {
			return 0, fmt.Errorf("unknown parameter %q (nodes takes limit)", k)
		}
		if len(vals) > 1 {
			return 0, fmt.Errorf("limit is given %d times", len(vals))
		}
		n, err := strconv.Atoi(vals[0])
		if err != nil || n < 1 || n > yella.MaxNodeLimit {
			return 0, fmt.Errorf("limit must be a number from 1 to %d, got %q", yella.MaxNodeLimit, vals[0])
		}
		limit = n
	}
	return limit, nil
}

func (a *API) nodes(w http.ResponseWriter, r *http.Request) {
	limit, err := ParseNodeQuery(r.URL.Query())
	if err != nil {
		a.fail(w, r, badRequest("INVALID_QUERY", err.Error()))
		return
	}
	list, err := a.eng.Nodes(r.Context(), limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := Nodes{Shared: list.Shared, Self: list.Self, Nodes: []Node{}}
	if !list.Shared {
		out.Note = SingleNodeNote
	}
	for _, n := range list.Nodes {
		state := "live"
		if n.Gone {
			state = "gone"
		}
		out.Nodes = append(out.Nodes, Node{Owner: n.Owner, JoinedAt: n.JoinedAt.UTC(), LastHeartbeat: n.Seen.UTC(),
			HeartbeatAgeSeconds: n.Age.Seconds(), State: state, Self: n.Self, Running: n.Running, ByProcess: n.ByProcess})
	}
	a.reply(w, r, http.StatusOK, out)
}

// SharedLimitsNote is GET /api/limits's note on a shared store.
const SharedLimitsNote = "shared store: the store holds runs back when a node claims them, so no node sees the waiting keys; the limits hold across every node"

// Bounds of GET /api/limits's top= (the keys listed per limit).
const (
	DefaultLimitsTop = 10
	MaxLimitsTop     = 100
)

// ParseLimitsQuery reads GET /api/limits's query string: top, the keys
// listed per limit (1 to MaxLimitsTop; default DefaultLimitsTop).
// Anything else is an error.
func ParseLimitsQuery(v url.Values) (top int, err error) {
	top = DefaultLimitsTop
	for k, vals := range v {
		if k != "top" {
			return 0, fmt.Errorf("unknown parameter %q (limits takes top)", k)
		}
		if len(vals) > 1 {
			return 0, fmt.Errorf("top is given %d times", len(vals))
		}
		n, err := strconv.Atoi(vals[0])
		if err != nil || n < 1 || n > MaxLimitsTop {
			return 0, fmt.Errorf("top must be a number from 1 to %d, got %q", MaxLimitsTop, vals[0])
		}
		top = n
	}
	return top, nil
}

func (a *API) limits(w http.ResponseWriter, r *http.Request) {
	top, err := ParseLimitsQuery(r.URL.Query())
	if err != nil {
		a.fail(w, r, badRequest("INVALID_QUERY", err.Error()))
		return
	}
	a.reply(w, r, http.StatusOK, limitsOf(a.eng.Limits(top)))
}

func (a *API) schedules(w http.ResponseWriter, r *http.Request) {
	out := []Schedule{}
	for _, s := range a.eng.Schedules() {
		out = append(out, scheduleOf(s))
	}
	a.reply(w, r, http.StatusOK, out)
}

// schedule is the serving engine's schedule name, if it has one.
// Schedules are never removed from an engine, so one found stays.
func (a *API) schedule(name string) (yella.ScheduleInfo, bool) {
	for _, s := range a.eng.Schedules() {
		if s.Name == name {
			return s, true
		}
	}
	return yella.ScheduleInfo{}, false
}

// scheduleAction pauses (pause) or resumes the schedule named in the path
// and answers with it as listed. Both are idempotent: pausing a paused
// schedule keeps the time of its first pause. A name the serving engine
// has no schedule by is 404 SCHEDULE_NOT_FOUND: schedules are declared in
// code, per engine.
func (a *API) scheduleAction(pause bool) http.HandlerFunc {
	do := a.eng.ResumeSchedule
	if pause {
		do = a.eng.PauseSchedule
	}
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		var err error
		if _, ok := a.schedule(name); !ok {
			err = &apiError{http.StatusNotFound, "SCHEDULE_NOT_FOUND", "no schedule named " + strconv.Quote(logged(name)) + " on this engine"}
		} else {
			err = do(r.Context(), name)
		}
		a.logMutation(r, nil, err, "schedule", logged(name))
		if err != nil {
			a.fail(w, r, err)
			return
		}
		s, _ := a.schedule(name)
		a.reply(w, r, http.StatusOK, scheduleOf(s))
	}
}

// UnregisteredScan is how many of the oldest waiting (idle) runs the
// processes listing reads to find processes this engine does not have.
// Their runs are never started here, so they stay among the oldest.
const UnregisteredScan = 1000

// unregistered finds the processes without a handler here among the
// oldest UnregisteredScan idle runs, with how many idle runs each has.
func (a *API) unregistered(r *http.Request) (map[string]int64, error) {
	h := a.handlers()
	out := map[string]int64{}
	q := yella.RunQuery{Status: []yella.Status{yella.StatusIdle}, Order: yella.OldestFirst, Limit: readBatch}
	for seen := 0; seen < UnregisteredScan; {
		page, err := a.eng.Runs(r.Context(), q)
		if err != nil {
			return nil, err
		}
		for _, run := range page.Runs {
			if _, ok := out[run.Process]; !ok && !h[run.Process] {
				out[run.Process] = 0
			}
		}
		seen += len(page.Runs)
		if q.Cursor = page.Next; q.Cursor == "" {
			break
		}
	}
	for name := range out {
		page, err := a.eng.Runs(r.Context(), yella.RunQuery{Process: name, Status: []yella.Status{yella.StatusIdle}, Limit: 1, WithTotal: true})
		if err != nil {
			return nil, err
		}
		out[name] = page.Total
	}
	return out, nil
}

// ParseRunQuery reads a run listing's query string: status (repeated or
// comma-separated; a repeated value counts once, and at most
// MaxFilterValues distinct values), state, process, event, root
// (true/false), order (newest/oldest), limit (1–1000), cursor and total
// (true/false). Unknown parameters and malformed values are errors, so a
// typo does not silently list everything.
func ParseRunQuery(v url.Values) (yella.RunQuery, error) {
	var q yella.RunQuery
	seen := map[yella.Status]bool{}
	for k, vals := range v {
		if len(vals) > 1 && k != "status" {
			return q, fmt.Errorf("%s is given %d times", k, len(vals))
		}
		val := vals[0]
		switch k {
		case "status":
			for _, s := range vals {
				for _, one := range strings.Split(s, ",") {
					st := yella.Status(strings.TrimSpace(one))
					if st == "" || seen[st] {
						continue
					}
					if len(seen) == MaxFilterValues {
						return q, fmt.Errorf("status has more than %d distinct values", MaxFilterValues)
					}
					seen[st] = true
					q.Status = append(q.Status, st)
				}
			}
		case "state":
			q.State = yella.State(val)
		case "process":
			q.Process = val
		case "event":
			q.Event = val
		case "correlation":
			q.CorrelationID = val
		case "cursor":
			q.Cursor = val
		case "root", "total":
			b, err := strconv.ParseBool(val)
			if err != nil {
				return q, fmt.Errorf("%s must be true or false, got %q", k, val)
			}
			if k == "root" {
				q.RootOnly = b
			} else {
				q.WithTotal = b
			}
		case "order":
			switch val {
			case "newest", "":
				q.Order = yella.NewestFirst
			case "oldest":
				q.Order = yella.OldestFirst
			default:
				return q, fmt.Errorf("order must be newest or oldest, got %q", val)
			}
		case "limit":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 || n > yella.MaxPageSize {
				return q, fmt.Errorf("limit must be a number from 1 to %d, got %q", yella.MaxPageSize, val)
			}
			q.Limit = n
		default:
			return q, fmt.Errorf("unknown parameter %q (known: status, state, process, event, correlation, root, order, limit, cursor, total)", k)
		}
	}
	return q, nil
}

func (a *API) runs(w http.ResponseWriter, r *http.Request) {
	q, ok := a.runQuery(w, r)
	if !ok {
		return
	}
	a.writeRuns(w, r, q, nil)
}

// runQuery parses a run listing's query, answering 400 (and false) for
// a bad one.
func (a *API) runQuery(w http.ResponseWriter, r *http.Request) (yella.RunQuery, bool) {
	q, err := ParseRunQuery(r.URL.Query())
	if err == nil && q.Limit > a.opts.MaxPageSize {
		err = fmt.Errorf("limit must be a number from 1 to %d on this server, got %d", a.opts.MaxPageSize, q.Limit)
	}
	if err != nil {
		a.fail(w, r, badRequest("INVALID_QUERY", err.Error()))
		return q, false
	}
	return q, true
}

// writeRuns answers a page of the runs q selects: {"runs": [...],
// "next": cursor, "total": n}. The page is read readBatch runs at a time
// and encoded as it comes, so a read holds at most readBatch runs
// whatever the page's size. If none is found and empty is set, it
// answers empty's error instead.
func (a *API) writeRuns(w http.ResponseWriter, r *http.Request, q yella.RunQuery, empty error) {
	want := q.Limit
	if want == 0 {
		want = min(yella.DefaultPageSize, a.opts.MaxPageSize)
	}
	h := a.handlers()
	b := a.newBody(r)
	b.raw(`{"runs":[`)
	var next string
	var total *int64
	for n := 0; n < want && b.err == nil; {
		bq := q
		bq.Limit, bq.WithTotal = min(want-n, readBatch), q.WithTotal && n == 0
		page, err := a.eng.Runs(r.Context(), bq)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if n == 0 && len(page.Runs) == 0 && empty != nil {
			a.fail(w, r, empty)
			return
		}
		if bq.WithTotal {
			total = &page.Total
		}
		for _, run := range page.Runs {
			if n > 0 {
				b.raw(",")
			}
			b.value(h.runOf(run))
			n++
		}
		next, q.Cursor = page.Next, page.Next
		if next == "" {
			break
		}
	}
	b.raw("]")
	if next != "" {
		b.raw(`,"next":`)
		b.value(next)
	}
	if total != nil {
		b.raw(`,"total":`)
		b.value(*total)
	}
	b.raw("}")
	a.send(w, r, http.StatusOK, b)
}

func (a *API) run(w http.ResponseWriter, r *http.Request) {
	ctx, id := r.Context(), r.PathValue("id")
	run, err := a.eng.Run(ctx, id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	tl, err := a.eng.Timeline(ctx, run.ID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	effs, err := a.eng.Effects(ctx, run.ID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// The shape of RunDetail, encoded piece by piece.
	h := a.handlers()
	b := a.newBody(r)
	b.raw(`{"run":`)
	b.value(h.runOf(run))
	b.raw(`,"timeline":[`)
	for i, t := range tl {
		if i > 0 {
			b.raw(",")
		}
		b.value(TimelineEntry{N: t.N, At: t.At.UTC(), Status: t.Status, Attempt: t.Attempt, Error: t.Error, Code: string(t.Code), Note: t.Note})
	}
	b.raw(`],"effects":[`)
	for i, e := range effs {
		if i > 0 {
			b.raw(",")
		}
		b.value(Effect{Key: e.Key, Status: string(e.Status), Output: e.Output, Error: e.Error, Epoch: e.Epoch,
			StartedAt: e.StartedAt.UTC(), CompletedAt: ts(e.CompletedAt)})
	}
	b.raw("]}")
	a.send(w, r, http.StatusOK, b)
}

// chain lists the runs of the chain of the run id names (or of the
// chain whose correlation id it is), oldest first, as a page of a run
// listing: up to limit (MaxPageSize by default), with next for the rest,
// read readBatch runs at a time. A chain may have any number of runs (a
// fan-out's children), so it is never read whole.
func (a *API) chain(w http.ResponseWriter, r *http.Request) {
	q, ok := a.runQuery(w, r)
	if !ok {
		return
	}
	ctx, id := r.Context(), r.PathValue("id")
	q.CorrelationID, q.Order = id, yella.OldestFirst
	if q.Limit == 0 {
		q.Limit = a.opts.MaxPageSize
	}
	run, err := a.eng.Run(ctx, id)
	switch {
	case err == nil:
		q.CorrelationID = run.CorrelationID
		a.writeRuns(w, r, q, nil)
	case yella.CodeOf(err) == yella.CodeRunNotFound: // a chain whose root is gone, or none
		a.writeRuns(w, r, q, err)
	default:
		a.fail(w, r, err)
	}
}

func (a *API) trace(w http.ResponseWriter, r *http.Request) {
	t, err := a.eng.Trace(r.Context(), r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.reply(w, r, http.StatusOK, traceOf(t))
}

// EmitRequest is the body of POST /api/emit.
type EmitRequest struct {
	Event          string          `json:"event"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	IdempotencyKey string          `json:"idempotencyKey,omitempty"`
	// Singleton, when present, is a key (1 to yella.MaxGroupKeyBytes
	// bytes): a listening process is admitted a run only when none of its
	// runs emitted with the key is idle, running or waiting
	// (yella.Singleton). Present and empty is refused, not ignored.
	Singleton *string `json:"singleton,omitempty"`
	// Debounce, when present, runs only the latest of a burst of
	// emissions with its key (yella.Debounce). Not with Singleton.
	Debounce *DebounceRequest `json:"debounce,omitempty"`
}

// DebounceRequest is the debounce of an emission (yella.Debounce): the
// run starts Window after the emission, and an emission with the same Key
// before it started replaces its payload and moves its start to Window
// after itself.
type DebounceRequest struct {
	Key string `json:"key"` // 1 to yella.MaxGroupKeyBytes bytes
	// Window is a Go duration ("30s", "5m"), required; "0s" starts the
	// run at once, and only an emission before it started joins it.
	Window string `json:"window"`
}

// groupOption is the engine's option for the request's singleton or
// debounce (nil for neither). The keys and the window's sign are checked
// by the engine, like every emit option.
func (req *EmitRequest) groupOption() (yella.EmitOption, error) {
	invalid := func(msg string) error { return badRequest(string(yella.CodeInvalidConfig), msg) }
	switch {
	case req.Singleton != nil && req.Debounce != nil:
		return nil, invalid(`give "singleton" or "debounce", not both`)
	case req.Singleton != nil:
		return yella.Singleton(*req.Singleton), nil
	case req.Debounce == nil:
		return nil, nil
	case req.Debounce.Window == "":
		return nil, invalid(`"debounce" needs a "window", a Go duration such as "30s"`)
	}
	window, err := time.ParseDuration(req.Debounce.Window)
	if err != nil {
		return nil, invalid(fmt.Sprintf(`the debounce "window" must be a Go duration such as "30s", got %q`, logged(req.Debounce.Window)))
	}
	return yella.Debounce(req.Debounce.Key, window), nil
}

func (a *API) emit(w http.ResponseWriter, r *http.Request) {
	var req EmitRequest
	if err := decode(r, &req, false); err != nil {
		a.fail(w, r, err)
		return
	}
	if strings.TrimSpace(req.Event) == "" {
		a.fail(w, r, badRequest("MISSING_EVENT", `the "event" field is required`))
		return
	}
	var payload any
	if len(req.Payload) > 0 && string(req.Payload) != "null" {
		payload = req.Payload
	}
	var opts []yella.EmitOption
	if req.IdempotencyKey != "" {
		opts = append(opts, yella.IdempotencyKey(req.IdempotencyKey))
	}
	group, err := req.groupOption()
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if group != nil {
		opts = append(opts, group)
	}
	em, err := a.eng.Emit(r.Context(), req.Event, payload, opts...)
	// A debounce changes the runs that stood in (their payload and
	// start): they are logged too, as grouped.
	a.logMutation(r, em.Runs, err, "event", req.Event, "existing", em.Existing, "grouped", em.Grouped)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := Emitted{Runs: []Admitted{}, Existing: em.Existing, Dropped: em.Dropped, Grouped: em.Grouped, Reason: em.Reason}
	for _, id := range em.Runs {
		run, err := a.eng.Run(r.Context(), id)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		out.Runs = append(out.Runs, Admitted{ID: id, Process: run.Process, Status: run.Status})
	}
	status := http.StatusCreated
	if len(out.Runs) == 0 {
		status = http.StatusOK
	}
	a.reply(w, r, status, out)
}

// action adapts an operator action on one run (retry, requeue, cancel,
// end a wait).
func (a *API) action(do func(context.Context, string) (yella.Run, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		run, err := do(r.Context(), r.PathValue("id"))
		a.logMutation(r, []string{r.PathValue("id")}, err)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		a.reply(w, r, http.StatusOK, a.handlers().runOf(run))
	}
}

// ResumeRequest is the optional body of POST /api/runs/{id}/resume.
type ResumeRequest struct {
	// Payload replaces the held payload, or is merged into it when both
	// are JSON objects. Absent keeps the held payload.
	Payload json.RawMessage `json:"payload,omitempty"`
}

func (a *API) resume(w http.ResponseWriter, r *http.Request) {
	var req ResumeRequest
	if err := decode(r, &req, true); err != nil {
		a.fail(w, r, err)
		return
	}
	var payload any
	if len(req.Payload) > 0 {
		payload = req.Payload
	}
	runs, err := a.eng.Resume(r.Context(), r.PathValue("id"), payload)
	ids := []string{r.PathValue("id")}
	for _, run := range runs {
		ids = append(ids, run.ID)
	}
	a.logMutation(r, ids, err)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := []Admitted{}
	for _, run := range runs {
		out = append(out, Admitted{ID: run.ID, Process: run.Process, Status: run.Status})
	}
	a.reply(w, r, http.StatusOK, map[string][]Admitted{"runs": out})
}

// CompleteEffectRequest is the body of POST /api/runs/{id}/complete-effect.
type CompleteEffectRequest struct {
	Key    string          `json:"key"` // the stored key, as the run detail lists it
	Output json.RawMessage `json:"output,omitempty"`
}

func (a *API) completeEffect(w http.ResponseWriter, r *http.Request) {
	var req CompleteEffectRequest
	if err := decode(r, &req, false); err != nil {
		a.fail(w, r, err)
		return
	}
	if req.Key == "" {
		a.fail(w, r, badRequest("MISSING_KEY", `the "key" field is required`))
		return
	}
	var out any
	if len(req.Output) > 0 {
		out = req.Output
	}
	run, err := a.eng.CompleteEffect(r.Context(), r.PathValue("id"), req.Key, out)
	a.logMutation(r, []string{r.PathValue("id")}, err, "effect", req.Key)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.reply(w, r, http.StatusOK, a.handlers().runOf(run))
}

// SignalRequest is the body of POST /api/signals.
type SignalRequest struct {
	// Key is the signal key (yella.WaitFor's signal): 1 to
	// yella.MaxSignalKeyBytes bytes.
	Key string `json:"key"`
	// Payload is what the run's WaitFor returns, checked like an emitted
	// payload; absent is null.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// RunSignalRequest is the optional body of POST /api/runs/{id}/signal.
type RunSignalRequest struct {
	// Payload is what the run's WaitFor returns; absent is null.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// signal sends a signal to the run waiting for its key, or has it kept.
func (a *API) signal(w http.ResponseWriter, r *http.Request) {
	var req SignalRequest
	if err := decode(r, &req, false); err != nil {
		a.fail(w, r, err)
		return
	}
	if req.Key == "" {
		a.fail(w, r, badRequest("MISSING_KEY", `the "key" field is required`))
		return
	}
	res, err := a.eng.Signal(r.Context(), req.Key, payloadArg(req.Payload))
	a.answerSignal(w, r, res, err, "signal", logged(req.Key))
}

// signalRun ends the wait of the run in the path with a signal.
func (a *API) signalRun(w http.ResponseWriter, r *http.Request) {
	var req RunSignalRequest
	if err := decode(r, &req, true); err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.eng.SignalRun(r.Context(), r.PathValue("id"), payloadArg(req.Payload))
	a.answerSignal(w, r, res, err)
}

// answerSignal logs a signal (the run it woke, or the run in the path)
// and answers with what it did.
func (a *API) answerSignal(w http.ResponseWriter, r *http.Request, res yella.SignalResult, err error, attrs ...any) {
	runs := []string{}
	switch {
	case res.RunID != "":
		runs = append(runs, res.RunID)
	case r.PathValue("id") != "":
		runs = append(runs, r.PathValue("id"))
	}
	a.logMutation(r, runs, err, append(attrs, "kept", res.Kept)...)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.reply(w, r, http.StatusOK, Signalled{RunID: res.RunID, Kept: res.Kept})
}

// payloadArg is a request's optional JSON payload for the engine: nil
// (untyped) when absent.
func payloadArg(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return raw
}

// logged bounds a client's string in the mutation log: a refused key can
// be as long as the body.
func logged(s string) string {
	if len(s) > yella.MaxSignalKeyBytes {
		return s[:yella.MaxSignalKeyBytes] + "…"
	}
	return s
}

// ResolveFencedRequest is the body of POST /api/fenced/resolve.
type ResolveFencedRequest struct {
	Process   string `json:"process,omitempty"`   // "" for every process
	EffectKey string `json:"effectKey,omitempty"` // the stored key of the started effect; "" for any
	// Action is "retry" (the effect's body runs again) or "complete-effect"
	// (recorded as done with Output).
	Action string          `json:"action"`
	Output json.RawMessage `json:"output,omitempty"`
	// Apply carries the action out; without it the answer is a preview
	// and nothing changes.
	Apply bool `json:"apply,omitempty"`
	Limit int  `json:"limit,omitempty"` // runs looked at, oldest first (default 1000, at most 10000)
}

func (a *API) resolveFenced(w http.ResponseWriter, r *http.Request) {
	var req ResolveFencedRequest
	if err := decode(r, &req, false); err != nil {
		a.fail(w, r, err)
		return
	}
	act := yella.FencedAction{Apply: req.Apply}
	switch req.Action {
	case "retry":
	case "complete-effect":
		act.Complete = true
		if len(req.Output) > 0 {
			act.Output = req.Output
		}
	default:
		a.fail(w, r, badRequest("INVALID_ACTION", fmt.Sprintf(`"action" must be "retry" or "complete-effect", got %q`, req.Action)))
		return
	}
	plan, err := a.eng.ResolveFenced(r.Context(), yella.FencedQuery{Process: req.Process, EffectKey: req.EffectKey, Limit: req.Limit}, act)
	if req.Apply {
		var ids []string
		for _, it := range plan.Items {
			if it.Done {
				ids = append(ids, it.RunID)
			}
		}
		a.logMutation(r, ids, err, "action", req.Action, "process", req.Process, "effect", req.EffectKey)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if plan.Items == nil {
		plan.Items = []yella.FencedItem{}
	}
	a.reply(w, r, http.StatusOK, plan)
}

func (a *API) requeueAll(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		if k != "process" {
			a.fail(w, r, badRequest("INVALID_QUERY", fmt.Sprintf("unknown parameter %q (known: process)", k)))
			return
		}
	}
	n, err := a.requeueAllDead(r, q.Get("process"))
	if n == 0 && err == nil {
		a.logMutation(r, nil, nil, "process", q.Get("process"))
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.reply(w, r, http.StatusOK, map[string]int{"requeued": n})
}

func (a *API) metrics(w http.ResponseWriter, r *http.Request) {
	m, err := a.eng.Metrics(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.reply(w, r, http.StatusOK, metricsOf(m))
}

// ParseObservabilityQuery reads window (a Go duration such as 1h, ending
// now or at to), from and to (RFC 3339), bucket (a duration) and process.
func ParseObservabilityQuery(v url.Values, now time.Time) (yella.ObservabilityQuery, error) {
	var q yella.ObservabilityQuery
	var window time.Duration
	for k, vals := range v {
		if len(vals) > 1 {
			return q, fmt.Errorf("%s is given %d times", k, len(vals))
		}
		val := vals[0]
		var err error
		switch k {
		case "window", "bucket":
			var d time.Duration
			d, err = time.ParseDuration(val)
			if err == nil && d <= 0 {
				err = fmt.Errorf("must be positive")
			}
			if k == "window" {
				window = d
			} else {
				q.Bucket = d
			}
		case "from", "to":
			var t time.Time
			t, err = time.Parse(time.RFC3339, val)
			if k == "from" {
				q.From = t
			} else {
				q.To = t
			}
		case "process":
			q.Process = val
		case "errors":
			q.ErrorLimit, err = strconv.Atoi(val)
			if err == nil && (q.ErrorLimit < 1 || q.ErrorLimit > 500) {
				err = fmt.Errorf("must be from 1 to 500")
			}
		default:
			return q, fmt.Errorf("unknown parameter %q (known: window, from, to, bucket, process, errors)", k)
		}
		if err != nil {
			return q, fmt.Errorf("%s=%q: %v", k, val, err)
		}
	}
	if window > 0 {
		if !q.From.IsZero() {
			return q, fmt.Errorf("give window or from, not both")
		}
		if q.To.IsZero() {
			q.To = now
		}
		q.From = q.To.Add(-window)
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return q, fmt.Errorf("from must be before to")
	}
	return q, nil
}

func (a *API) observability(w http.ResponseWriter, r *http.Request) {
	q, err := ParseObservabilityQuery(r.URL.Query(), time.Now())
	if err != nil {
		a.fail(w, r, badRequest("INVALID_QUERY", err.Error()))
		return
	}
	rep, err := a.eng.Observability(r.Context(), q)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := Observability{From: rep.From.UTC(), To: rep.To.UTC(), BucketMs: ms(rep.BucketSize), Summary: bucketOf(rep.Summary),
		Buckets: []Bucket{}, RecentErrors: []ErrorRecord{}}
	for _, b := range rep.Buckets {
		out.Buckets = append(out.Buckets, bucketOf(b))
	}
	for _, e := range rep.RecentErrors {
		out.RecentErrors = append(out.RecentErrors, ErrorRecord{At: e.At.UTC(), Kind: e.Kind, Process: e.Process, RunID: e.RunID,
			EffectKey: e.EffectKey, Context: e.Context, Message: e.Message})
	}
	a.reply(w, r, http.StatusOK, out)
}
