package dashboard

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/yella-go/yella"
)

// Limits of the runs page's query string.
const (
	maxNameLen   = 200
	maxPageLimit = 200
	defPageLimit = 50
)

// runsFilter is the runs page's query string, validated.
type runsFilter struct {
	Status  yella.Status // "" for all
	Process string
	Event   string
	Root    bool
	Oldest  bool
	Limit   int
	Cursor  string
	Page    int // 1-based, for display only
}

// badRequest is a query-string problem shown as a 400 page.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

// parseRunsFilter reads a runs query string. Unknown parameters are
// ignored; a malformed value is an error (a 400 page), never a silent
// default, so a link always shows what it says.
func parseRunsFilter(raw string) (runsFilter, error) {
	f := runsFilter{Limit: defPageLimit, Page: 1}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return f, badRequest{"The query string is malformed: " + err.Error()}
	}
	name := func(key string) (string, error) {
		v := q.Get(key)
		if len(v) > maxNameLen || !utf8.ValidString(v) || containsNUL(v) {
			return "", badRequest{fmt.Sprintf("%s must be valid text of at most %d bytes", key, maxNameLen)}
		}
		return v, nil
	}
	if s := q.Get("status"); s != "" && s != "all" {
		if !yella.Status(s).Valid() {
			return f, badRequest{"Unknown status " + quote(s) + "."}
		}
		f.Status = yella.Status(s)
	}
	if f.Process, err = name("process"); err != nil {
		return f, err
	}
	if f.Event, err = name("event"); err != nil {
		return f, err
	}
	if f.Root, err = parseFlag(q.Get("root")); err != nil {
		return f, badRequest{"root must be 1 or 0."}
	}
	switch q.Get("order") {
	case "", "newest":
	case "oldest":
		f.Oldest = true
	default:
		return f, badRequest{"order must be newest or oldest."}
	}
	if f.Limit, err = intParam(q, "limit", defPageLimit, 1, maxPageLimit); err != nil {
		return f, err
	}
	if f.Page, err = intParam(q, "page", 1, 1, 1_000_000_000); err != nil {
		return f, err
	}
	if f.Cursor, err = name("cursor"); err != nil {
		return f, err
	}
	return f, nil
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

func parseFlag(v string) (bool, error) {
	switch v {
	case "", "0", "false", "off":
		return false, nil
	case "1", "true", "on":
		return true, nil
	}
	return false, fmt.Errorf("bad flag %q", v)
}

func intParam(q url.Values, key string, def, lo, hi int) (int, error) {
	v := q.Get(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badRequest{fmt.Sprintf("%s must be a whole number from %d to %d.", key, lo, hi)}
	}
	return n, nil
}

func (f runsFilter) query() yella.RunQuery {
	q := yella.RunQuery{Process: f.Process, Event: f.Event, RootOnly: f.Root, Limit: f.Limit, Cursor: f.Cursor}
	if f.Status != "" {
		q.Status = []yella.Status{f.Status}
	}
	if f.Oldest {
		q.Order = yella.OldestFirst
	}
	return q
}

// url is the canonical address of the filter on path; only values that
// differ from the defaults are written.
func (f runsFilter) url(path string) string {
	v := url.Values{}
	if f.Status != "" {
		v.Set("status", string(f.Status))
	}
	if f.Process != "" {
		v.Set("process", f.Process)
	}
	if f.Event != "" {
		v.Set("event", f.Event)
	}
	if f.Root {
		v.Set("root", "1")
	}
	if f.Oldest {
		v.Set("order", "oldest")
	}
	if f.Limit != defPageLimit {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Cursor != "" {
		v.Set("cursor", f.Cursor)
		v.Set("page", strconv.Itoa(f.Page))
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// firstPage is f without its cursor.
func (f runsFilter) firstPage() runsFilter { f.Cursor, f.Page = "", 1; return f }

// tab is one status filter tab.
type tab struct {
	Label  string
	URL    string
	Active bool
	Count  int64
	Status yella.Status
	Counts bool // Count is meaningful (no other filter narrows the list)
}

// runTable is the data of the shared runs table partial.
type runTable struct {
	Runs    []yella.Run
	Now     time.Time
	Errors  bool   // show the error column
	Requeue bool   // a requeue button per row
	Next    string // where a row action returns to
	Empty   string // what to say when there are no runs
	Fresh   bool   // rows new to the browser are highlighted (live lists)
	Compact bool   // fewer columns, for a half-width panel
}

type runsData struct {
	layout
	F         runsFilter
	Tabs      []tab
	Table     runTable
	Total     int64
	From, To  int64
	NextURL   string
	FirstURL  string
	Processes []string
	Events    []string
	Live      bool // the first page of newest runs: new runs appear live
}

var tabStatuses = []yella.Status{yella.StatusRunning, yella.StatusIdle, yella.StatusWaiting, yella.StatusDeferred, yella.StatusCompleted, yella.StatusErrored, yella.StatusDead, yella.StatusFenced, yella.StatusCancelled}

func (s *server) runs(w http.ResponseWriter, r *http.Request) {
	f, err := parseRunsFilter(r.URL.RawQuery)
	if err != nil {
		s.errorPage(w, r, http.StatusBadRequest, "Bad filter", err.Error())
		return
	}
	d := &runsData{layout: s.newLayout(r, "runs", "Runs"), F: f}
	narrowed := f.Process != "" || f.Event != "" || f.Root
	q := f.query()
	q.WithTotal = narrowed || d.Queue == nil
	page, err := s.eng.Runs(r.Context(), q)
	if err != nil {
		s.engineError(w, r, err)
		return
	}
	d.Total = page.Total
	if !q.WithTotal { // the store's counters answer without a count query
		for st, n := range d.Queue {
			if f.Status == "" || st == f.Status {
				d.Total += n
			}
		}
	}
	all := f.firstPage()
	all.Status = ""
	d.Tabs = append(d.Tabs, tab{Label: "All", URL: all.url("/runs"), Active: f.Status == "", Counts: !narrowed, Count: sum(d.Queue)})
	for _, st := range tabStatuses {
		t := all
		t.Status = st
		d.Tabs = append(d.Tabs, tab{Label: statusLabel(st), URL: t.url("/runs"), Active: f.Status == st,
			Counts: !narrowed, Count: d.Queue[st], Status: st})
	}
	d.Table = runTable{Runs: page.Runs, Now: d.Now, Next: f.url("/runs"), Fresh: true,
		Empty: "No runs match this filter."}
	d.From = int64(f.Page-1)*int64(f.Limit) + 1
	d.To = d.From + int64(len(page.Runs)) - 1
	if page.Next != "" {
		n := f
		n.Cursor, n.Page = page.Next, f.Page+1
		d.NextURL = n.url("/runs")
	}
	if f.Cursor != "" {
		d.FirstURL = f.firstPage().url("/runs")
	}
	d.Processes, d.Events = s.names(f.Process, f.Event)
	d.Live = f.Cursor == "" && !f.Oldest
	s.render(w, r, http.StatusOK, "runs", d)
}

func sum(q map[yella.Status]int64) int64 {
	var n int64
	for _, v := range q {
		n += v
	}
	return n
}

// names lists the registered process names and events, sorted, plus the
// current filter values when they are not registered (old runs).
func (s *server) names(process, event string) (procs, events []string) {
	for _, p := range s.eng.Processes() {
		procs = append(procs, p.Name)
		if !slices.Contains(events, p.On) {
			events = append(events, p.On)
		}
	}
	if process != "" && !slices.Contains(procs, process) {
		procs = append(procs, process)
	}
	if event != "" && !slices.Contains(events, event) {
		events = append(events, event)
	}
	slices.Sort(procs)
	slices.Sort(events)
	return procs, events
}

// deadData is the dead letters page.
type deadData struct {
	layout
	F        runsFilter
	Table    runTable
	NextURL  string
	FirstURL string
	Groups   []deadGroup
	Total    int64
	Fenced   int64
	Bulk     int64  // what "requeue all" requeues: all, or the filtered process's
	Here     string // this page, to come back to
}

type deadGroup struct {
	Process string
	Count   int64
}

func (s *server) dead(w http.ResponseWriter, r *http.Request) {
	f, err := parseRunsFilter(r.URL.RawQuery)
	if err != nil {
		s.errorPage(w, r, http.StatusBadRequest, "Bad filter", err.Error())
		return
	}
	f.Status, f.Event, f.Root = yella.StatusDead, "", false
	d := &deadData{layout: s.newLayout(r, "dead", "Dead letters"), F: f}
	ctx := r.Context()
	q := f.query()
	q.WithTotal = f.Process != ""
	page, err := s.eng.Runs(ctx, q)
	if err != nil {
		s.engineError(w, r, err)
		return
	}
	for _, p := range s.eng.Processes() {
		pg, err := s.eng.Runs(ctx, yella.RunQuery{Process: p.Name, Status: []yella.Status{yella.StatusDead}, Limit: 1, WithTotal: true})
		if err != nil {
			s.engineError(w, r, err)
			return
		}
		if pg.Total > 0 {
			d.Groups = append(d.Groups, deadGroup{Process: p.Name, Count: pg.Total})
		}
	}
	d.Total, d.Fenced = d.Queue[yella.StatusDead], d.Queue[yella.StatusFenced]
	d.Bulk = d.Total
	if f.Process != "" {
		d.Bulk = page.Total
	}
	here := f
	here.Status = ""
	d.Here = here.firstPage().url("/dead")
	d.Table = runTable{Runs: page.Runs, Now: d.Now, Errors: true, Requeue: true, Next: here.url("/dead"),
		Empty: "No dead letters. Runs land here when their retry budget is exhausted."}
	if page.Next != "" {
		n := here
		n.Cursor, n.Page = page.Next, f.Page+1
		d.NextURL = n.url("/dead")
	}
	if f.Cursor != "" {
		d.FirstURL = here.firstPage().url("/dead")
	}
	s.render(w, r, http.StatusOK, "dead", d)
}
