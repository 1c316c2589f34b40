package dashboard

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/yella-go/yella"
)

// window is an overview time window and the bucket its charts use.
type window struct {
	Name   string
	Span   time.Duration
	Bucket time.Duration
}

var windows = []window{
	{"1h", time.Hour, time.Minute},
	{"6h", 6 * time.Hour, 5 * time.Minute},
	{"24h", 24 * time.Hour, 20 * time.Minute},
	{"7d", 7 * 24 * time.Hour, 3 * time.Hour},
}

// card is one status count on the overview.
type card struct {
	Status yella.Status
	Count  int64
	URL    string
}

type replication struct {
	LastSync time.Time
	Lag      time.Duration
	Err      string
	OK       bool
	Stalled  string
}

type windowTab struct {
	Name   string
	URL    string
	Active bool
}

// overviewData is the overview page.
type overviewData struct {
	layout
	Window     window
	Windows    []windowTab
	Cards      []card
	Summary    yella.BucketStats
	Throughput sparkline
	P95        sparkline
	Recent     runTable
	Root       bool
	RootURL    string
	Errors     []yella.ErrorRecord
	Totals     yella.Totals
	Dispatcher yella.DispatcherMetrics
	Repl       *replication
}

var cardStatuses = []yella.Status{yella.StatusRunning, yella.StatusIdle, yella.StatusWaiting, yella.StatusDeferred, yella.StatusCompleted,
	yella.StatusErrored, yella.StatusDead, yella.StatusFenced, yella.StatusCancelled}

func (s *server) overview(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		s.errorPage(w, r, http.StatusBadRequest, "Bad request", "The query string is malformed.")
		return
	}
	win := windows[0]
	if v := q.Get("window"); v != "" {
		found := false
		for _, c := range windows {
			if c.Name == v {
				win, found = c, true
			}
		}
		if !found {
			s.errorPage(w, r, http.StatusBadRequest, "Bad request", "window must be 1h, 6h, 24h or 7d.")
			return
		}
	}
	root, err := parseFlag(q.Get("root"))
	if err != nil {
		s.errorPage(w, r, http.StatusBadRequest, "Bad request", "root must be 1 or 0.")
		return
	}
	ctx := r.Context()
	d := &overviewData{layout: s.newLayout(r, "overview", "Overview"), Window: win, Root: root}
	m, err := s.eng.Metrics(ctx)
	if err != nil {
		s.engineError(w, r, err)
		return
	}
	d.Queue, d.Totals, d.Dispatcher = m.Queue, m.Totals, m.Dispatcher
	for _, st := range cardStatuses {
		d.Cards = append(d.Cards, card{Status: st, Count: m.Queue[st], URL: runsFilter{Status: st, Limit: defPageLimit}.url("/runs")})
	}
	// A live refresh asks for one fragment: only its data is read.
	frag := q.Get("fragment")
	if frag == "" || frag == "charts" || frag == "errors" {
		rep, err := s.eng.Observability(ctx, yella.ObservabilityQuery{From: d.Now.Add(-win.Span), To: d.Now, Bucket: win.Bucket, ErrorLimit: 10})
		if err != nil {
			s.engineError(w, r, err)
			return
		}
		d.Summary, d.Errors = rep.Summary, rep.RecentErrors
		d.Throughput, d.P95 = throughputLine(rep), p95Line(rep)
	}
	if frag == "" || frag == "recent" {
		page, err := s.eng.Runs(ctx, yella.RunQuery{RootOnly: root, Limit: 10})
		if err != nil {
			s.engineError(w, r, err)
			return
		}
		d.Recent = runTable{Runs: page.Runs, Now: d.Now, Fresh: true, Compact: true, Empty: "No runs yet. Emit an event to start one."}
	}
	for _, c := range windows {
		d.Windows = append(d.Windows, windowTab{Name: c.Name, URL: overviewURL(c.Name, root), Active: c.Name == win.Name})
	}
	d.RootURL = overviewURL(win.Name, !root)
	if f := s.opts.ReplicationStatus; f != nil {
		r := f()
		d.Repl = &replication{LastSync: r.LastSync, Lag: r.Lag, Err: r.LastError, OK: r.OK && r.Stalled == "", Stalled: r.Stalled}
	}
	s.render(w, r, http.StatusOK, "overview", d)
}

func overviewURL(win string, root bool) string {
	v := url.Values{}
	if win != windows[0].Name {
		v.Set("window", win)
	}
	if root {
		v.Set("root", "1")
	}
	if len(v) == 0 {
		return "/"
	}
	return "/?" + v.Encode()
}

// countsJSON serves the queue counts for the navigation badges, which the
// live-update script refreshes without reloading a fragment.
func (s *server) countsJSON(w http.ResponseWriter, r *http.Request) {
	m, err := s.eng.Metrics(r.Context())
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]string{"error": "metrics unavailable", "code": string(yella.CodeOf(err))})
		return
	}
	queue := map[string]int64{}
	var total int64
	for _, st := range cardStatuses {
		queue[string(st)] = m.Queue[st]
		total += m.Queue[st]
	}
	json.NewEncoder(w).Encode(struct {
		Queue    map[string]int64 `json:"queue"`
		Total    int64            `json:"total"`
		InFlight int              `json:"inFlight"`
	}{queue, total, m.Dispatcher.Running})
}

// processRow is one process on the processes page.
type processRow struct {
	yella.Process
	QueueLimit int
	InFlight   int
	Dropped    int64
	RunsURL    string
}

// unregisteredRow is a process with waiting runs in the store that the
// engine serving the dashboard does not have.
type unregisteredRow struct {
	Name    string
	Waiting int64
	RunsURL string
}

type processesData struct {
	layout
	Rows         []processRow
	Unregistered []unregisteredRow
	Graph        graphView
}

// unregisteredScan is how many of the oldest idle runs the processes page
// reads to find processes this engine does not have: their runs are never
// started here, so they stay among the oldest.
const unregisteredScan = 1000

// unregistered lists the processes without a handler here among the
// oldest unregisteredScan idle runs, with their idle runs counted.
func (s *server) unregistered(r *http.Request) ([]unregisteredRow, error) {
	known := s.registered()
	seen := map[string]bool{}
	var out []unregisteredRow
	q := yella.RunQuery{Status: []yella.Status{yella.StatusIdle}, Order: yella.OldestFirst, Limit: 100}
	for n := 0; n < unregisteredScan; {
		page, err := s.eng.Runs(r.Context(), q)
		if err != nil {
			return nil, err
		}
		for _, run := range page.Runs {
			if !known[run.Process] && !seen[run.Process] {
				seen[run.Process] = true
				out = append(out, unregisteredRow{Name: run.Process,
					RunsURL: runsFilter{Process: run.Process, Status: yella.StatusIdle, Limit: defPageLimit}.url("/runs")})
			}
		}
		n += len(page.Runs)
		if q.Cursor = page.Next; q.Cursor == "" {
			break
		}
	}
	for i := range out {
		page, err := s.eng.Runs(r.Context(), yella.RunQuery{Process: out[i].Name, Status: []yella.Status{yella.StatusIdle}, Limit: 1, WithTotal: true})
		if err != nil {
			return nil, err
		}
		out[i].Waiting = page.Total
	}
	slices.SortFunc(out, func(a, b unregisteredRow) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *server) processes(w http.ResponseWriter, r *http.Request) {
	d := &processesData{layout: s.newLayout(r, "processes", "Processes")}
	m, err := s.eng.Metrics(r.Context())
	if err != nil {
		s.engineError(w, r, err)
		return
	}
	for _, p := range s.eng.Processes() {
		pm := m.Processes[p.Name]
		d.Rows = append(d.Rows, processRow{Process: p, QueueLimit: p.Overflow.QueueLimit(), InFlight: pm.InFlight,
			Dropped: pm.Dropped, RunsURL: runsFilter{Process: p.Name, Limit: defPageLimit}.url("/runs")})
	}
	if d.Unregistered, err = s.unregistered(r); err != nil {
		s.engineError(w, r, err)
		return
	}
	d.Graph = newGraph(s.eng.Graph(), m.Processes)
	s.render(w, r, http.StatusOK, "processes", d)
}
