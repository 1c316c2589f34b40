package dashboard_test

import (
	"context"
	"io"
	"net/http/httptest"
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
	h, err := dashboard.NewAt(eng, dashboard.Options{Brand: "Yella"}, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	return func(target string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
		b, _ := io.ReadAll(w.Result().Body)
		return w.Code, string(b)
	}, tickRun
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
		`<tr data-schedule-error="no listener"><td colspan="7" class="err">Last tick failed: emit: no process listens to &#34;nobody:listens&#34;</td></tr>`,
		`<tr data-schedule-error="bad-payload"><td colspan="7" class="err">Last tick failed: `,
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
