package yella

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/yella-go/yella/store"
)

// Trace is the timing of a whole chain, for a Gantt view: one span per
// run, in depth-first order of the follow-up tree, and the gaps where the
// chain waited between a parent finishing and its follow-ups being
// admitted (an approval held by a deferred run, typically).
type Trace struct {
	CorrelationID string
	Start, End    time.Time     // the earliest and latest timestamps of any span
	Spans         []Span        // depth-first: each run followed by its follow-ups
	Gaps          []Gap         // by start time
	Execution     time.Duration // the sum of every attempt's running time
	Paused        time.Duration // the sum of the gaps
	// More counts the chain's runs left out: a trace covers the oldest
	// MaxTraceRuns runs of its chain.
	More int
}

// MaxTraceRuns bounds the runs a trace covers, and so what it reads (a
// timeline per run): a chain may have any number of runs (a fan-out's
// children); a trace covers its oldest MaxTraceRuns and counts the rest
// (Trace.More).
const MaxTraceRuns = 1000

// traceBatch is how many runs a trace reads from the store at a time,
// keeping only their spans: a run's payload and output are never held
// for more than one batch.
const traceBatch = 100

// Span is one run of a traced chain.
type Span struct {
	RunID, ParentID, Process, Event string
	Status                          Status
	Level                           int       // indentation in the follow-up tree (0 for the root)
	Attempts                        int       // attempts started
	QueuedAt                        time.Time // admission
	StartedAt                       time.Time // first attempt's start; zero if it never ran
	EndedAt                         time.Time // when it became final; zero while it is not
	Running                         time.Duration
}

// Gap is a wait between a run's end and the admission of its follow-ups.
type Gap struct {
	ParentID   string
	ChildIDs   []string
	Start, End time.Time
}

// MinTraceGap is the shortest wait reported as a Gap: shorter ones are the
// ordinary cost of admitting follow-ups.
const MinTraceGap = 50 * time.Millisecond

// Trace returns the timing of the chain of runID (a run id or a
// correlation id), from each run's timeline: of its oldest MaxTraceRuns
// runs, read traceBatch at a time.
func (e *Engine) Trace(ctx context.Context, runID string) (Trace, error) {
	corr := runID
	if r, err := e.store.Run(ctx, runID); err == nil {
		corr = r.CorrelationID
	} else if !errors.Is(err, store.ErrNotFound) {
		return Trace{}, storeErr("trace", runID, err)
	}
	tr := Trace{}
	byID := map[string]*Span{}
	children := map[string][]string{}
	var order []string
	f := store.RunFilter{CorrelationID: corr, Order: store.OldestFirst}
	for len(order) < MaxTraceRuns {
		f.Limit = min(traceBatch, MaxTraceRuns-len(order))
		runs, err := e.store.Runs(ctx, f)
		if err != nil {
			return Trace{}, storeErr("trace", runID, err)
		}
		for _, sr := range runs {
			r := runOf(sr)
			tl, err := e.Timeline(ctx, r.ID)
			if err != nil {
				return Trace{}, err
			}
			sp := spanOf(r, tl)
			byID[r.ID] = &sp
			order = append(order, r.ID)
			tr.CorrelationID = r.CorrelationID
			tr.Execution += sp.Running
			f.After = sr.Seq
		}
		if len(runs) < f.Limit {
			break
		}
	}
	if len(order) == 0 {
		return Trace{}, storeErr("trace", runID, store.ErrNotFound)
	}
	if len(order) == MaxTraceRuns {
		n, err := e.store.CountRuns(ctx, store.RunFilter{CorrelationID: corr})
		if err != nil {
			return Trace{}, storeErr("trace", runID, err)
		}
		tr.More = max(int(n)-MaxTraceRuns, 0)
	}
	var roots []string
	for _, id := range order {
		p := byID[id].ParentID
		if _, ok := byID[p]; ok {
			children[p] = append(children[p], id)
		} else {
			roots = append(roots, id)
		}
	}
	var walk func(id string, level int)
	walk = func(id string, level int) {
		sp := byID[id]
		sp.Level = level
		tr.Spans = append(tr.Spans, *sp)
		for _, c := range children[id] {
			walk(c, level+1)
		}
	}
	for _, id := range roots {
		walk(id, 0)
	}
	for _, sp := range tr.Spans {
		for _, t := range []time.Time{sp.QueuedAt, sp.StartedAt, sp.EndedAt} {
			if t.IsZero() {
				continue
			}
			if tr.Start.IsZero() || t.Before(tr.Start) {
				tr.Start = t
			}
			if t.After(tr.End) {
				tr.End = t
			}
		}
		kids := children[sp.RunID]
		if len(kids) == 0 || sp.EndedAt.IsZero() {
			continue
		}
		first := byID[kids[0]].QueuedAt
		for _, c := range kids[1:] {
			if q := byID[c].QueuedAt; q.Before(first) {
				first = q
			}
		}
		if first.Sub(sp.EndedAt) >= MinTraceGap {
			tr.Gaps = append(tr.Gaps, Gap{ParentID: sp.RunID, ChildIDs: slices.Clone(kids), Start: sp.EndedAt, End: first})
			tr.Paused += first.Sub(sp.EndedAt)
		}
	}
	slices.SortFunc(tr.Gaps, func(a, b Gap) int { return a.Start.Compare(b.Start) })
	return tr, nil
}

// spanOf reads a run's timing from its timeline: admission, the first
// start, the end of the last attempt (a deferred run ends when it defers,
// not when it is resumed), and the time spent running in all attempts.
func spanOf(r Run, tl []TimelineEntry) Span {
	sp := Span{RunID: r.ID, ParentID: r.ParentID, Process: r.Process, Event: r.Event, Status: r.Status,
		Attempts: r.Attempts, QueuedAt: r.CreatedAt}
	var runningSince, lastEnd time.Time
	for _, t := range tl {
		if !runningSince.IsZero() {
			sp.Running += t.At.Sub(runningSince)
			runningSince, lastEnd = time.Time{}, t.At
		}
		if t.Status == StatusRunning {
			runningSince = t.At
			if sp.StartedAt.IsZero() {
				sp.StartedAt = t.At
			}
		}
	}
	if r.Status.Final() {
		sp.EndedAt = lastEnd
		if lastEnd.IsZero() { // it never ran: cancelled while queued
			sp.EndedAt = r.CompletedAt
		}
	}
	return sp
}
