package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
)

// waitFixture is the fixture with two processes whose runs wait, and one
// run of each waiting: approve waits for the signal "approve:<name>" for
// at most an hour and completes with its payload (or "timed out");
// cool-off sleeps a day and completes with "rested". The fake clock does
// not move, so their waits end only by a signal or an operator. (f.drain
// would wait for the sleep: the tests wait for statuses instead.)
type waitFixture struct {
	*fixture
	approve, cool string
}

func newWaitFixture(t *testing.T) *waitFixture {
	t.Helper()
	f := &waitFixture{fixture: newFixture(t)}
	for _, p := range []yella.Process{
		{Name: "approve", On: "approval:requested", Run: func(c *yella.Ctx) yella.Result {
			var in struct{ Name string }
			if err := c.Decode(&in); err != nil {
				return c.Fail(err)
			}
			got, ok, err := yella.WaitFor[json.RawMessage](c, "approval", "approve:"+in.Name, time.Hour)
			if err != nil {
				return c.Error(err)
			}
			if !ok {
				return c.OK("timed out")
			}
			return c.OK(got)
		}},
		{Name: "cool-off", On: "cool:off", Run: func(c *yella.Ctx) yella.Result {
			if err := yella.Sleep(c, "cool", 24*time.Hour); err != nil {
				return c.Error(err)
			}
			return c.OK("rested")
		}},
	} {
		if err := f.eng.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	f.approve = f.waiting("approval:requested", "a")
	f.cool = f.waiting("cool:off", "nap")
	return f
}

// waiting emits event with {"name": name} and returns its run once it
// waits.
func (f *waitFixture) waiting(event, name string) string {
	f.t.Helper()
	em, err := f.eng.Emit(context.Background(), event, map[string]string{"name": name})
	if err != nil || len(em.Runs) != 1 {
		f.t.Fatalf("emit %s: %+v %v", event, em, err)
	}
	f.until(em.Runs[0], yella.StatusWaiting)
	return em.Runs[0]
}

// until waits until run id has status st and returns it.
func (f *waitFixture) until(id string, st yella.Status) yella.Run {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second) // a bound for a broken test, not a timing
	for {
		r, err := f.eng.Run(context.Background(), id)
		if err == nil && r.Status == st {
			return r
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("run %s: %s (%v), want %s", id, r.Status, err, st)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestWaitingRunPages: a waiting run's page says what it waits for (the
// signal's key, or a sleep), since and until when, and offers Signal (for
// a signal), End wait and Cancel; the runs page has a waiting tab with its
// count, and the overview counts waiting runs (golden run-waiting.html).
func TestWaitingRunPages(t *testing.T) {
	f := newWaitFixture(t)
	r := f.get("/runs/" + f.approve)
	if r.Code != 200 {
		t.Fatalf("run page: %d", r.Code)
	}
	contains(t, "a run waiting for a signal", r.Body, `id="run-waiting">the signal <code>approve:a</code> <span class="muted">in wait</span> <code>approval</code>`,
		`id="run-waiting-since">`, `id="run-waiting-until">`, `class="callout callout-waiting"`, `data-action="signal"`, `id="signal-payload"`,
		`action="/runs/`+f.approve+`/signal"`, `data-action="end-wait"`, `action="/runs/`+f.approve+`/end-wait"`, `data-action="cancel"`,
		`<span class="badge st-waiting">waiting</span>`, `<span class="badge eff-waiting">waiting</span>`)
	golden(t, "run-waiting.html", normalise(r.Body))

	r = f.get("/runs/" + f.cool)
	contains(t, "a sleeping run", r.Body, `id="run-waiting">its sleep to end`, "Sleeping until", `data-action="end-wait"`, `data-action="cancel"`,
		"its sleep returns as if its time had come")
	if strings.Contains(r.Body, `data-action="signal"`) {
		t.Error("a sleeping run offers to signal it")
	}
	// Other runs offer neither.
	for _, id := range []string{f.ok, f.deferred, f.failed} {
		if body := f.get("/runs/" + id).Body; strings.Contains(body, `data-action="signal"`) || strings.Contains(body, `data-action="end-wait"`) {
			t.Errorf("run %s offers wait actions", id)
		}
	}

	r = f.get("/runs?status=waiting")
	contains(t, "the waiting tab", r.Body, `href="/runs?status=waiting" aria-current="page" class="tab-waiting">waiting <span class="pill">2</span>`,
		`data-run-id="`+f.approve+`"`, `data-run-id="`+f.cool+`"`, "Showing 1–2 of 2 runs")
	if strings.Contains(r.Body, `data-run-id="`+f.ok+`"`) {
		t.Error("the waiting tab lists a completed run")
	}
	contains(t, "the overview", f.get("/").Body, `<a class="card card-waiting" href="/runs?status=waiting"><span class="card-n">2</span>`)
	var counts struct {
		Queue map[string]int64 `json:"queue"`
		Total int64            `json:"total"`
	}
	if err := json.Unmarshal([]byte(f.get("/ui/counts.json").Body), &counts); err != nil || counts.Queue["waiting"] != 2 || counts.Total != 8 {
		t.Errorf("counts: %+v %v", counts, err)
	}
}

// TestWaitActions: Signal ends the wait with the payload typed (empty for
// null), End wait ends a sleep or a wait for a signal (as timed out),
// Cancel cancels a waiting run; bad JSON re-renders the form with the
// input kept; a run in the wrong state gets an error flash, an unknown
// run the 404 page, and a cross-site form is refused.
func TestWaitActions(t *testing.T) {
	f := newWaitFixture(t)
	page := f.redirected(f.post("/runs/"+f.approve+"/signal", url.Values{"payload": {`{"by": "ada"}`}}), "/runs/"+f.approve)
	contains(t, "after signal", page.Body, `class="flash flash-ok"`, "Signalled run")
	if r := f.until(f.approve, yella.StatusCompleted); string(r.Output) != `{"by":"ada"}` {
		t.Errorf("signalled run: output %s", r.Output)
	}
	empty := f.waiting("approval:requested", "empty")
	f.redirected(f.post("/runs/"+empty+"/signal", url.Values{"payload": {"  "}}), "/runs/"+empty)
	if r := f.until(empty, yella.StatusCompleted); string(r.Output) != `null` {
		t.Errorf("signalled with no payload: output %s", r.Output)
	}

	bad := f.waiting("approval:requested", "bad")
	r := f.post("/runs/"+bad+"/signal", url.Values{"payload": {`{"by": ada}`}})
	if r.Code != http.StatusBadRequest {
		t.Fatalf("signal with bad JSON: %d", r.Code)
	}
	contains(t, "signal with bad JSON", r.Body, "Not valid JSON", `{&#34;by&#34;: ada}</textarea>`, `id="signal-error"`, `aria-invalid="true"`)
	f.want(bad, yella.StatusWaiting)
	r = f.post("/runs/"+bad+"/signal", url.Values{"payload": {`"` + strings.Repeat("x", 2<<20) + `"`}})
	if r.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("an oversized signal form: %d", r.Code)
	}
	f.want(bad, yella.StatusWaiting)

	page = f.redirected(f.post("/runs/"+f.cool+"/signal", nil), "/runs/"+f.cool)
	contains(t, "signal a sleeping run", page.Body, `class="flash flash-error"`, "Not done:", "sleeping, not waiting for a signal")
	f.want(f.cool, yella.StatusWaiting)
	page = f.redirected(f.post("/runs/"+f.cool+"/end-wait", nil), "/runs/"+f.cool)
	contains(t, "after end wait", page.Body, `class="flash flash-ok"`, "Ended the wait of run")
	if r := f.until(f.cool, yella.StatusCompleted); string(r.Output) != `"rested"` {
		t.Errorf("ended sleep: output %s", r.Output)
	}
	page = f.redirected(f.post("/runs/"+bad+"/end-wait", nil), "/runs/"+bad)
	contains(t, "end a wait for a signal", page.Body, "Ended the wait of run")
	if r := f.until(bad, yella.StatusCompleted); string(r.Output) != `"timed out"` {
		t.Errorf("ended wait: output %s", r.Output)
	}
	page = f.redirected(f.post("/runs/"+f.ok+"/end-wait", nil), "/runs/"+f.ok)
	contains(t, "end the wait of a completed run", page.Body, `class="flash flash-error"`, "Not done:")
	page = f.redirected(f.post("/runs/"+f.ok+"/signal", nil), "/runs/"+f.ok)
	contains(t, "signal a completed run", page.Body, `class="flash flash-error"`, "Not done:")

	gone := f.waiting("approval:requested", "gone")
	page = f.redirected(f.post("/runs/"+gone+"/cancel", nil), "/runs/"+gone)
	contains(t, "after cancel", page.Body, "Cancelled run", "CANCELLED")
	f.want(gone, yella.StatusCancelled)

	for _, target := range []string{"/runs/no-such-run/signal", "/runs/no-such-run/end-wait"} {
		if r := f.post(target, nil); r.Code != 404 || !strings.Contains(r.Body, "Run not found") {
			t.Errorf("POST %s: %d", target, r.Code)
		}
	}
	cross := f.waiting("approval:requested", "cross")
	for _, target := range []string{"/runs/" + cross + "/signal", "/runs/" + cross + "/end-wait"} {
		req := httptest.NewRequest("POST", target, strings.NewReader("payload=1"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://evil.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		if r := f.do(req); r.Code != http.StatusForbidden {
			t.Errorf("POST %s cross-site: %d", target, r.Code)
		}
		if r := f.get(target); r.Code != http.StatusMethodNotAllowed {
			t.Errorf("GET %s: %d", target, r.Code)
		}
	}
	f.want(cross, yella.StatusWaiting)
}
