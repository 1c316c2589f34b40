package yella

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/yella-go/yella/store"
)

// Default and maximum page sizes of Runs.
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
)

// RunQuery selects and pages runs. Empty fields do not filter.
type RunQuery struct {
	Process       string
	Event         string
	Status        []Status // any of these; repeats are ignored
	State         State    // a raw state: adds the statuses that refine it
	RootOnly      bool
	CorrelationID string
	Order         Order
	Limit         int    // defaults to DefaultPageSize; at most MaxPageSize
	Cursor        string // RunPage.Next of the previous page
	WithTotal     bool   // also count every match (costs a count query)
}

// RunPage is one page of runs.
type RunPage struct {
	Runs  []Run
	Next  string // cursor of the next page; "" on the last page
	Total int64  // with RunQuery.WithTotal
}

func badQuery(format string, args ...any) error {
	return &Error{Code: CodeInvalidQuery, Op: "runs", Msg: fmt.Sprintf(format, args...)}
}

// filter validates q and turns it into a store filter.
func (q RunQuery) filter() (store.RunFilter, error) {
	f := store.RunFilter{Process: q.Process, Event: q.Event, RootOnly: q.RootOnly, CorrelationID: q.CorrelationID, Order: store.Order(q.Order), Limit: q.Limit}
	for _, s := range q.Status {
		if !s.Valid() {
			return f, badQuery("unknown status %q", s)
		}
		f.Statuses = append(f.Statuses, store.Status(s))
	}
	if q.State != "" {
		ss := store.StatusesOf(store.State(q.State))
		if ss == nil {
			return f, badQuery("unknown state %q", q.State)
		}
		f.Statuses = append(f.Statuses, ss...)
	}
	// A repeated status would only repeat work (and, in a store that
	// queries status by status, rows); every status at once filters nothing.
	f.Statuses = store.UniqueStatuses(f.Statuses)
	if q.Order != NewestFirst && q.Order != OldestFirst {
		return f, badQuery("unknown order %d", q.Order)
	}
	switch {
	case q.Limit < 0:
		return f, badQuery("limit must not be negative, got %d", q.Limit)
	case q.Limit == 0:
		f.Limit = DefaultPageSize
	case q.Limit > MaxPageSize:
		f.Limit = MaxPageSize
	}
	if q.Cursor != "" {
		s, ok := strings.CutPrefix(q.Cursor, "s")
		n, err := strconv.ParseInt(s, 10, 64)
		if !ok || err != nil || n <= 0 {
			return f, badQuery("malformed cursor %q", q.Cursor)
		}
		f.After = n
	}
	return f, nil
}

// Runs lists runs matching q, a page at a time, in creation order (newest
// first unless q.Order says otherwise).
func (e *Engine) Runs(ctx context.Context, q RunQuery) (RunPage, error) {
	f, err := q.filter()
	if err != nil {
		return RunPage{}, err
	}
	want := f.Limit
	f.Limit++ // one more tells whether a next page exists
	runs, err := e.store.Runs(ctx, f)
	if err != nil {
		return RunPage{}, storeErr("runs", "", err)
	}
	var p RunPage
	if len(runs) > want {
		runs = runs[:want]
		p.Next = "s" + strconv.FormatInt(runs[want-1].Seq, 10)
	}
	p.Runs = runsOf(runs)
	if q.WithTotal {
		if p.Total, err = e.store.CountRuns(ctx, f); err != nil {
			return RunPage{}, storeErr("runs", "", err)
		}
	}
	return p, nil
}

// Run returns one run.
func (e *Engine) Run(ctx context.Context, id string) (Run, error) {
	r, err := e.store.Run(ctx, id)
	if err != nil {
		return Run{}, storeErr("run", id, err)
	}
	out := runOf(r)
	if r.Status == store.StatusWaiting {
		out.Waiting, out.WaitingUntil = "sleep", r.RetryAt
		if r.WaitKey != "" {
			out.Waiting = "signal"
		}
		effs, err := e.store.Effects(ctx, id)
		if err != nil {
			return Run{}, storeErr("run", id, err)
		}
		for _, f := range effs {
			if f.Status == store.EffectWaiting {
				out.WaitingSince, out.WaitKey = f.StartedAt, f.Key
			}
		}
	}
	if r.Status == store.StatusIdle && e.node == nil {
		if why, at, ok := e.disp.Waiting(id); ok {
			out.Waiting = waitingReasons[why]
			out.WaitingUntil = at
		}
	}
	return out, nil
}

// waitingReasons names the dispatcher's places for Run.Waiting.
var waitingReasons = map[string]string{"ready": "slot", "delayed": "retry", "process": "process cap", "key": "key concurrency", "rate": "rate limit"}

// Chain returns every run of a chain, by depth then creation. id may be the
// correlation id or the id of any run in the chain. It reads every run in
// one store read, payloads and outputs included: a chain that may be wide
// (a fan-out of thousands of runs) is better listed with Runs and
// RunQuery.CorrelationID, a page at a time.
func (e *Engine) Chain(ctx context.Context, id string) ([]Run, error) {
	runs, err := e.store.Chain(ctx, id)
	if err != nil {
		return nil, storeErr("chain", id, err)
	}
	if len(runs) > 0 {
		return runsOf(runs), nil
	}
	r, err := e.store.Run(ctx, id)
	if err != nil {
		return nil, storeErr("chain", id, err)
	}
	if runs, err = e.store.Chain(ctx, r.CorrelationID); err != nil {
		return nil, storeErr("chain", id, err)
	}
	return runsOf(runs), nil
}

// Timeline returns a run's transitions in order.
func (e *Engine) Timeline(ctx context.Context, runID string) ([]TimelineEntry, error) {
	tl, err := e.store.Timeline(ctx, runID)
	if err != nil {
		return nil, storeErr("timeline", runID, err)
	}
	var out []TimelineEntry // nil for nil, as the store answered
	if tl != nil {
		out = make([]TimelineEntry, len(tl))
	}
	for i, t := range tl {
		out[i] = timelineEntryOf(t)
	}
	return out, nil
}

// Effects returns a run's effect records.
func (e *Engine) Effects(ctx context.Context, runID string) ([]EffectRecord, error) {
	if _, err := e.store.Run(ctx, runID); err != nil {
		return nil, storeErr("effects", runID, err)
	}
	effs, err := e.store.Effects(ctx, runID)
	if err != nil {
		return nil, storeErr("effects", runID, err)
	}
	var out []EffectRecord // nil for nil, as the store answered
	if effs != nil {
		out = make([]EffectRecord, len(effs))
	}
	for i, f := range effs {
		out[i] = effectRecordOf(f)
	}
	return out, nil
}

// GraphNode is a process in the event graph.
type GraphNode struct {
	Name  string
	On    string
	Emits []string
}

// GraphEdge links a process to a process listening to an event it emits.
type GraphEdge struct {
	From, Event, To string
}

// Graph is the static topology declared by Process.Emits.
type Graph struct {
	Nodes []GraphNode
	Edges []GraphEdge
}

// Graph returns the event graph of the registered processes.
func (e *Engine) Graph() Graph {
	e.regMu.RLock()
	defer e.regMu.RUnlock()
	var g Graph
	names := sortedKeys(e.procs)
	for _, n := range names {
		p := e.procs[n]
		g.Nodes = append(g.Nodes, GraphNode{Name: p.Name, On: p.On, Emits: append([]string{}, p.Emits...)})
		for _, ev := range p.Emits {
			for _, l := range e.byEvent[ev] {
				g.Edges = append(g.Edges, GraphEdge{From: p.Name, Event: ev, To: l.Name})
			}
		}
	}
	return g
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
