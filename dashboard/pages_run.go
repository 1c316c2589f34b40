package dashboard

import (
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/yella-go/yella"
)

// maxChainRows bounds the chain list on a run page, and the runs read
// for it (a wide fan-out can have thousands of runs): the oldest are
// listed; the trace page shows them all.
const maxChainRows = 200

// maxRetraced bounds the timelines a trace page reads to draw retried
// runs attempt by attempt.
const maxRetraced = 100

// runData is the run detail page.
type runData struct {
	layout
	Run      yella.Run
	Took     time.Duration // the latest attempt
	Payload  jsonView
	Output   jsonView
	Context  jsonView
	Timeline []timelineRow
	Effects  []effectView
	Chain    []chainRow
	More     int // chain runs not listed
	Can      actions
	Form     actionForm // a re-rendered action form after bad input
	// FormOrphan: Form has an error but its form is not on the page (the
	// run changed meanwhile), so the error is shown on its own.
	FormOrphan bool
}

type timelineRow struct {
	yella.TimelineEntry
	Offset time.Duration // since admission
}

type effectView struct {
	yella.EffectRecord
	Out  jsonView
	Took time.Duration
}

type chainRow struct {
	Run     yella.Run
	Level   int
	Current bool
}

// actions are the buttons that fit a run's status.
type actions struct {
	Retry, Requeue, Cancel, Resume bool
	Started                        []string // effects a fenced run left started: each can be completed
	// Signal: the run waits for a signal, which the page can send it;
	// EndWait: it waits (for a signal or a sleep), which can be ended.
	Signal, EndWait bool
}

// actionForm keeps what an operator typed into the resume, signal or
// complete-effect form when it has to be shown again with an error.
type actionForm struct {
	Action string // resume, signal, complete-effect
	Key    string
	Input  string
	Error  string
}

func actionsFor(r yella.Run, effs []yella.EffectRecord) actions {
	var a actions
	switch r.Status {
	case yella.StatusIdle, yella.StatusRunning:
		a.Cancel = true
	case yella.StatusWaiting:
		a.Cancel, a.EndWait, a.Signal = true, true, r.Signal != ""
	case yella.StatusDeferred:
		a.Resume = true
	case yella.StatusErrored, yella.StatusCancelled:
		a.Retry = true
	case yella.StatusDead:
		a.Retry, a.Requeue = true, true
	case yella.StatusFenced:
		a.Retry = true
		for _, e := range effs {
			if e.Status == "started" {
				a.Started = append(a.Started, e.Key)
			}
		}
	}
	return a
}

func (s *server) run(w http.ResponseWriter, r *http.Request) {
	s.renderRun(w, r, http.StatusOK, actionForm{})
}

// renderRun renders the run page; form, when set, re-shows an action form
// with the operator's input and an error (status is then 400).
func (s *server) renderRun(w http.ResponseWriter, r *http.Request, status int, form actionForm) {
	d, err := s.runData(r)
	if err != nil {
		s.engineError(w, r, err)
		return
	}
	d.Form = form
	shown := form.Action == "resume" && d.Can.Resume || form.Action == "signal" && d.Can.Signal ||
		form.Action == "complete-effect" && slices.Contains(d.Can.Started, form.Key)
	d.FormOrphan = form.Error != "" && !shown
	s.render(w, r, status, "run", d)
}

func (s *server) runData(r *http.Request) (*runData, error) {
	ctx, id := r.Context(), r.PathValue("id")
	if len(id) > maxNameLen {
		return nil, &yella.Error{Code: yella.CodeRunNotFound}
	}
	run, err := s.eng.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	tl, err := s.eng.Timeline(ctx, id)
	if err != nil {
		return nil, err
	}
	effs, err := s.eng.Effects(ctx, id)
	if err != nil {
		return nil, err
	}
	// The chain's oldest runs, not the whole chain: a fan-out may have
	// any number of runs, each with its payload and output.
	chain, err := s.eng.Runs(ctx, yella.RunQuery{CorrelationID: run.CorrelationID, Order: yella.OldestFirst, Limit: maxChainRows, WithTotal: true})
	if err != nil {
		return nil, err
	}
	d := &runData{layout: s.newLayout(r, "runs", "Run "+shortID(id)), Run: run,
		Payload: prettyJSON(run.Payload), Output: prettyJSON(run.Output), Context: prettyJSON(run.Context),
		Can: actionsFor(run, effs)}
	if !run.StartedAt.IsZero() && run.Status.Final() {
		d.Took = sinceOrZero(run.StartedAt, run.CompletedAt)
	}
	for _, t := range tl {
		d.Timeline = append(d.Timeline, timelineRow{TimelineEntry: t, Offset: sinceOrZero(run.CreatedAt, t.At)})
	}
	for _, e := range effs {
		d.Effects = append(d.Effects, effectView{EffectRecord: e, Out: prettyJSON(e.Output), Took: sinceOrZero(e.StartedAt, e.CompletedAt)})
	}
	d.Chain = chainTree(chain.Runs, id)
	d.More = max(int(chain.Total)-len(chain.Runs), 0)
	return d, nil
}

// chainTree orders a chain depth-first along parent links, each run
// followed by its follow-ups, with its level in the tree.
func chainTree(runs []yella.Run, current string) []chainRow {
	byID := map[string]bool{}
	for _, r := range runs {
		byID[r.ID] = true
	}
	kids := map[string][]int{}
	var roots []int
	for i, r := range runs {
		if r.ParentID != "" && byID[r.ParentID] && r.ParentID != r.ID {
			kids[r.ParentID] = append(kids[r.ParentID], i)
		} else {
			roots = append(roots, i)
		}
	}
	out := make([]chainRow, 0, len(runs))
	seen := map[int]bool{}
	var walk func(i, level int)
	walk = func(i, level int) {
		if seen[i] {
			return
		}
		seen[i] = true
		out = append(out, chainRow{Run: runs[i], Level: min(level, 12), Current: runs[i].ID == current})
		for _, k := range kids[runs[i].ID] {
			walk(k, level+1)
		}
	}
	for _, i := range roots {
		walk(i, 0)
	}
	for i := range runs { // parent cycles (never expected): still listed
		walk(i, 0)
	}
	return out
}

// traceData is the trace page: a chain as a Gantt chart.
type traceData struct {
	layout
	Trace  yella.Trace
	Chart  gantt
	Queued time.Duration // summed waiting before first starts
	Wall   time.Duration
	Runs   int
	Active bool // some span still running or queued
}

func (s *server) trace(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if len(id) > maxNameLen {
		s.engineError(w, r, &yella.Error{Code: yella.CodeRunNotFound})
		return
	}
	tr, err := s.eng.Trace(r.Context(), id)
	if err != nil {
		s.engineError(w, r, err)
		return
	}
	d := &traceData{layout: s.newLayout(r, "trace", "Trace "+shortID(tr.CorrelationID)), Trace: tr, Runs: len(tr.Spans)}
	// Spans carry the first start and the last end only; a run that ran
	// more than once is drawn attempt by attempt from its timeline.
	runs := map[string][]interval{}
	for _, sp := range tr.Spans {
		if sp.Attempts < 2 || len(runs) >= maxRetraced {
			continue
		}
		tl, err := s.eng.Timeline(r.Context(), sp.RunID)
		if err != nil {
			s.engineError(w, r, err)
			return
		}
		runs[sp.RunID] = attempts(tl)
	}
	d.Chart = newGantt(tr, runs, d.Now)
	for _, sp := range tr.Spans {
		if !sp.Status.Final() {
			d.Active = true
		}
		if !sp.StartedAt.IsZero() {
			d.Queued += sinceOrZero(sp.QueuedAt, sp.StartedAt)
		}
	}
	d.Wall = d.Chart.Wall
	s.render(w, r, http.StatusOK, "trace", d)
}

// pickerData lists recent chains to trace.
type pickerData struct {
	layout
	Roots []yella.Run
	ID    string
}

// tracePicker lists the newest root runs; ?id= jumps to a chain.
func (s *server) tracePicker(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		s.errorPage(w, r, http.StatusBadRequest, "Bad request", "The query string is malformed.")
		return
	}
	if id := q.Get("id"); id != "" {
		s.redirect(w, r, "/trace/"+url.PathEscape(id))
		return
	}
	d := &pickerData{layout: s.newLayout(r, "trace", "Trace")}
	page, err := s.eng.Runs(r.Context(), yella.RunQuery{RootOnly: true, Limit: 25})
	if err != nil {
		s.engineError(w, r, err)
		return
	}
	d.Roots = page.Runs
	s.render(w, r, http.StatusOK, "tracepicker", d)
}
