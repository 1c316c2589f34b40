package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/dashboard"
	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store/memstore"
)

// scheduledEngine is a started engine on a fake clock (t0, a Saturday)
// with four schedules: "daily-report" (weekdays at 09:00 in Paris, no
// tick yet), "every-minute" (caught up at start: its tick of 09:26 ran
// report), "no listener" (a tick emitted with no process listening) and
// "bad-payload" (a tick whose payload does not encode, so its emission
// failed). It returns the dashboard over it and the run of the caught-up
// tick.
func scheduledEngine(t *testing.T) (get func(string) (int, string), tickRun string) {
	t.Helper()
	f, tickRun := scheduledFixture(t, io.Discard)
	return func(target string) (int, string) {
		r := f.get(target)
		return r.Code, r.Body
	}, tickRun
}

// scheduledFixture is scheduledEngine as a fixture (its engine, clock and
// dashboard, which logs to logs as JSON; no runs by role).
func scheduledFixture(t *testing.T, logs io.Writer) (f *fixture, tickRun string) {
	t.Helper()
	ctx := context.Background()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	eng, err := yella.New(yella.Config{Store: memstore.New(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(yella.Process{Name: "report", On: "report:due", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []yella.Schedule{
		{Name: "daily-report", Cron: "0 9 * * 1-5", Location: paris, Event: "report:due"},
		{Name: "every-minute", Cron: "@every 1m", Event: "report:due", CatchUp: time.Hour},
		{Name: "no listener", Cron: "@hourly", Event: "nobody:listens", CatchUp: time.Hour},
		{Name: "bad-payload", Cron: "@every 5m", Event: "report:due", Payload: func() {}, CatchUp: 10 * time.Minute},
	} {
		if err := eng.AddSchedule(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Stop(ctx) })
	for _, s := range eng.Schedules() {
		if s.Name == "every-minute" && len(s.LastRuns) == 1 {
			tickRun = s.LastRuns[0]
		}
	}
	if tickRun == "" {
		t.Fatalf("the caught-up tick has no run: %+v", eng.Schedules())
	}
	deadline := time.Now().Add(10 * time.Second) // a bound for a broken test, not a timing
	for {
		m, err := eng.Metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Queue[yella.StatusCompleted] == 1 { // the nav shows the store's counts
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tick's run never completed: %+v", m.Queue)
		}
		time.Sleep(5 * time.Millisecond)
	}
	h, err := dashboard.NewAt(eng, dashboard.Options{Brand: "Yella", Logger: slog.New(slog.NewJSONHandler(logs, nil))}, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, eng: eng, clk: clk, h: h}, tickRun
}

// TestSchedulesPage: the schedules page lists each schedule (name, cron
// spec, time zone, its event linked to the event's runs, catch-up, the
// next tick as "in 7s" and absolute, the last tick with links to its
// runs, the last error); an odd name is quoted; the nav links to it; the
// fragment renders alone.
func TestSchedulesPage(t *testing.T) {
	get, tickRun := scheduledEngine(t)
	code, body := get("/schedules")
	if code != 200 {
		t.Fatalf("GET /schedules: %d", code)
	}
	golden(t, "schedules.html", normalise(body))
	contains(t, "schedules page", body,
		`<a href="/schedules" aria-current="page">Schedules</a>`,
		`<tr data-schedule="daily-report">`, `<td><code>0 9 * * 1-5</code></td>`, `<td>Europe/Paris</td>`,
		// Monday 09:00 in Paris is 08:00 UTC.
		`<time datetime="2026-03-16T08:00:00Z" data-rel title="2026-03-16 08:00:00.000 UTC">in 46h 33m</time> <span class="muted">2026-03-16 08:00:00.000</span>`,
		`<td><a href="/runs?event=report%3Adue">report:due</a></td>`,
		`<span class="muted">none yet</span>`,
		`<time datetime="2026-03-14T09:27:00Z" data-rel title="2026-03-14 09:27:00.000 UTC">in 7s</time>`,
		`<time datetime="2026-03-14T09:26:00Z" data-rel title="2026-03-14 09:26:00.000 UTC">53s ago</time>`,
		`<a class="id" href="/runs/`+tickRun+`" title="`+tickRun+`">`,
		`<td>1h</td>`,
		`<td><code>&#34;no listener&#34;</code></td>`,
		`<tr data-schedule-error="no listener"><td colspan="8" class="err">Last tick failed: emit: no process listens to &#34;nobody:listens&#34;</td></tr>`,
		`<tr data-schedule-error="bad-payload"><td colspan="8" class="err">Last tick failed: `,
		`<span class="muted" title="ticks missed while no engine ran are skipped">off</span>`)
	if i, j := strings.Index(body, `data-schedule="bad-payload"`), strings.Index(body, `data-schedule="every-minute"`); i < 0 || j < 0 || i > j {
		t.Errorf("the schedules are not listed by name")
	}
	if code, frag := get("/schedules?fragment=schedules"); code != 200 || !strings.Contains(frag, "every-minute") || strings.Contains(frag, "<html") {
		t.Errorf("schedules fragment: %d %s", code, frag)
	}
}

// TestSchedulesPageEmpty: without schedules the page says none is
// declared and that schedules are declared in code.
func TestSchedulesPageEmpty(t *testing.T) {
	f := newFixture(t)
	r := f.get("/schedules")
	if r.Code != 200 {
		t.Fatalf("GET /schedules: %d", r.Code)
	}
	golden(t, "schedules-empty.html", normalise(r.Body))
	contains(t, "schedules page without schedules", r.Body, "No schedule is declared", "declared in code by the program that embeds the engine")
	if strings.Contains(r.Body, "<table") {
		t.Errorf("the empty schedules page has a table")
	}
}

// TestSchedulePauseActions: the schedules page offers Pause (a
// same-origin POST form that asks to confirm) on each running schedule;
// pausing redirects back with a flash, and the page then shows the
// schedule paused since when, its next tick as skipped, and Resume;
// resuming ends it. The engine holds the pause (ticks skipped). An odd
// name is sent escaped; a name the engine has no schedule by is the 404
// page; a cross-origin POST is refused and a GET is 405; every action is
// logged (golden page with one schedule paused).
func TestSchedulePauseActions(t *testing.T) {
	var logs bytes.Buffer
	f, _ := scheduledFixture(t, &logs)
	page := f.get("/schedules").Body
	contains(t, "schedules page", page,
		`<form method="post" action="/schedules/daily-report/pause" class="inline" data-confirm="Pause schedule daily-report?`,
		`<button type="submit" class="btn small" data-action="pause-schedule" data-schedule="daily-report">Pause</button>`,
		`action="/schedules/no%20listener/pause" class="inline" data-confirm="Pause schedule &#34;no listener&#34;?`)
	if strings.Contains(page, "data-paused") || strings.Contains(page, `data-action="resume-schedule"`) {
		t.Errorf("a schedule is shown paused before any pause")
	}
	page = f.redirected(f.post("/schedules/daily-report/pause", url.Values{"next": {"/schedules"}}), "/schedules").Body
	contains(t, "after pause", page, `class="flash flash-ok"`, `Paused schedule daily-report: its ticks are skipped`,
		`<tr data-schedule="daily-report" data-paused>`,
		`<span class="pill pill-paused">paused</span> since <time datetime="2026-03-14T09:26:53Z" data-rel`,
		`<form method="post" action="/schedules/daily-report/resume" class="inline">`,
		`data-action="resume-schedule" data-schedule="daily-report">Resume</button>`,
		`<span class="muted">skipped while paused</span>`)
	golden(t, "schedules-paused.html", normalise(f.get("/schedules").Body))
	paused := func(name string) bool {
		for _, s := range f.eng.Schedules() {
			if s.Name == name {
				return s.Paused
			}
		}
		t.Fatalf("no schedule %q", name)
		return false
	}
	if !paused("daily-report") || paused("every-minute") {
		t.Fatalf("the engine's schedules after a pause: %+v", f.eng.Schedules())
	}
	// The every-minute schedule paused: its next tick is skipped.
	f.redirected(f.post("/schedules/every-minute/pause", nil), "/schedules")
	var last time.Time
	for _, s := range f.eng.Schedules() {
		if s.Name == "every-minute" {
			last = s.Last
		}
	}
	f.clk.Advance(2 * time.Minute)
	for _, s := range f.eng.Schedules() {
		if s.Name == "every-minute" && !s.Last.Equal(last) {
			t.Errorf("a paused schedule ticked at %v", s.Last)
		}
	}
	page = f.redirected(f.post("/schedules/daily-report/resume", url.Values{"next": {"/schedules"}}), "/schedules").Body
	contains(t, "after resume", page, `Resumed schedule daily-report: it runs again`, `action="/schedules/daily-report/pause"`)
	if paused("daily-report") || strings.Contains(page, `<tr data-schedule="daily-report" data-paused>`) {
		t.Errorf("daily-report is still paused after a resume")
	}
	f.redirected(f.post("/schedules/no%20listener/pause", nil), "/schedules")
	if !paused("no listener") {
		t.Errorf("an escaped name did not reach its schedule")
	}
	if r := f.post("/schedules/nope/pause", nil); r.Code != 404 || !strings.Contains(r.Body, "Schedule not found") {
		t.Errorf("pause of an unknown schedule: %d", r.Code)
	}
	if r := f.post("/schedules/nope/resume", nil); r.Code != 404 || !strings.Contains(r.Body, "Schedule not found") {
		t.Errorf("resume of an unknown schedule: %d", r.Code)
	}
	req := httptest.NewRequest("POST", "/schedules/every-minute/resume", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if r := f.do(req); r.Code != 403 || !paused("every-minute") {
		t.Errorf("a cross-origin resume: %d, paused %v", r.Code, paused("every-minute"))
	}
	if r := f.get("/schedules/every-minute/pause"); r.Code != 405 {
		t.Errorf("GET on the pause action: %d", r.Code)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if l["msg"] == "dashboard action" {
			got = append(got, fmt.Sprintf("%v %v %v %v", l["action"], l["schedule"], l["who"], l["ok"]))
		}
	}
	want := []string{"pause-schedule daily-report unguarded true", "pause-schedule every-minute unguarded true",
		"resume-schedule daily-report unguarded true", "pause-schedule no listener unguarded true",
		`pause-schedule "nope" unguarded false`, `resume-schedule "nope" unguarded false`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("actions logged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
