package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/httpguard"
	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store/memstore"
)

// pausedEngine is a started engine on a memory store (pauses are durable
// in the store) and a fake clock at t0 (09:00), with the schedules
// "hourly" (@hourly, report:due) and "nightly/eu batch" (a name with a
// slash and a space), behind the API, which logs to logs.
func pausedEngine(t *testing.T, logs *syncBuffer) (*yella.Engine, *clock.Fake, *httpapi.API) {
	t.Helper()
	clk := clock.NewFake(t0)
	eng, err := yella.New(yella.Config{Store: memstore.New(), Clock: clk, Owner: "test-engine"})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(yella.Process{Name: "report", On: "report:due", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []yella.Schedule{
		{Name: "hourly", Cron: "@hourly", Event: "report:due"},
		{Name: "nightly/eu batch", Cron: "0 2 * * *", Event: "report:due"},
	} {
		if err := eng.AddSchedule(s); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(eng, httpapi.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	t.Cleanup(func() {
		api.Close()
		eng.Stop(ctx)
	})
	return eng, clk, api
}

// listed returns the schedule name of GET /api/schedules.
func listed(t *testing.T, api *httpapi.API, name string) httpapi.Schedule {
	t.Helper()
	w := httptest.NewRecorder()
	api.ServeHTTP(w, httptest.NewRequest("GET", "/api/schedules", nil))
	var all []httpapi.Schedule
	if err := json.Unmarshal(w.Body.Bytes(), &all); w.Code != 200 || err != nil {
		t.Fatalf("GET /api/schedules: %d %v %s", w.Code, err, w.Body)
	}
	for _, s := range all {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no schedule %q listed: %s", name, w.Body)
	return httpapi.Schedule{}
}

// TestSchedulePauseRoutes: POST /api/schedules/{name}/pause pauses a
// schedule (the answer and the listing say paused, since when) and its
// ticks are skipped; pausing again keeps the first pause's time; resume
// ends it and the next tick runs; both are idempotent, take an escaped
// name, answer 404 SCHEDULE_NOT_FOUND for a name the engine has no
// schedule by and 405 to GET, and each is logged with who and the
// schedule, refused ones with their code.
func TestSchedulePauseRoutes(t *testing.T) {
	var logs syncBuffer
	eng, clk, api := pausedEngine(t, &logs)
	g, err := httpguard.New(httpguard.Options{Token: "t0ken-0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	h := g.Handler(api)
	post := func(path string) (int, string) {
		t.Helper()
		r := httptest.NewRequest("POST", path, nil)
		r.Host, r.RemoteAddr = "127.0.0.1:3400", "10.1.2.3:4444"
		r.Header.Set("Authorization", "Bearer t0ken-0123456789abcdef")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	if s := listed(t, api, "hourly"); s.Paused || s.PausedAt != nil {
		t.Fatalf("a schedule never paused is listed paused: %+v", s)
	}
	code, body := post("/api/schedules/hourly/pause")
	var got httpapi.Schedule
	if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil {
		t.Fatalf("pause: %d %v %s", code, err, body)
	}
	if got.Name != "hourly" || !got.Paused || got.PausedAt == nil || !got.PausedAt.Equal(t0) {
		t.Fatalf("pause answered %s", body)
	}
	if !strings.Contains(body, `"paused":true,"pausedAt":"2026-03-01T09:00:00Z"`) {
		t.Errorf("the answer's shape: %s", body)
	}
	if s := listed(t, api, "hourly"); !s.Paused || s.PausedAt == nil || !s.PausedAt.Equal(t0) {
		t.Fatalf("the listing after a pause: %+v", s)
	}
	// The 10:00 tick is skipped while paused.
	clk.Advance(61 * time.Minute)
	if s := listed(t, api, "hourly"); s.Last != nil || len(s.LastRuns) != 0 || !s.Paused {
		t.Fatalf("a paused schedule ticked: %+v", s)
	}
	if page, err := eng.Runs(context.Background(), yella.RunQuery{Process: "report"}); err != nil || len(page.Runs) != 0 {
		t.Fatalf("runs of a paused schedule: %+v %v", page.Runs, err)
	}
	// Pausing again keeps the time of the first pause.
	if code, body := post("/api/schedules/hourly/pause"); code != 200 || !strings.Contains(body, `"pausedAt":"2026-03-01T09:00:00Z"`) {
		t.Fatalf("a second pause: %d %s", code, body)
	}
	code, body = post("/api/schedules/hourly/resume")
	got = httpapi.Schedule{}
	if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil || got.Paused || got.PausedAt != nil {
		t.Fatalf("resume: %d %v %s", code, err, body)
	}
	if !strings.Contains(body, `"paused":false`) || strings.Contains(body, "pausedAt") {
		t.Errorf("the answer's shape: %s", body)
	}
	if code, body := post("/api/schedules/hourly/resume"); code != 200 || !strings.Contains(body, `"paused":false`) {
		t.Fatalf("resuming a running schedule: %d %s", code, body)
	}
	clk.Advance(time.Hour) // the 11:00 tick runs
	if s := listed(t, api, "hourly"); s.Paused || s.Last == nil || !s.Last.Equal(t0.Add(2*time.Hour)) || len(s.LastRuns) != 1 {
		t.Fatalf("after a resume the next tick did not run: %+v", s)
	}
	// An escaped name reaches its schedule; the other one is untouched.
	odd := "/api/schedules/" + url.PathEscape("nightly/eu batch") + "/pause"
	if code, body := post(odd); code != 200 || !strings.Contains(body, `"name":"nightly/eu batch"`) || !strings.Contains(body, `"paused":true`) {
		t.Fatalf("pause %s: %d %s", odd, code, body)
	}
	if listed(t, api, "hourly").Paused {
		t.Fatal("pausing one schedule paused another")
	}
	for _, path := range []string{"/api/schedules/nope/pause", "/api/schedules/nope/resume", "/api/schedules/nightly/pause",
		"/api/schedules/" + strings.Repeat("x", 5000) + "/pause"} {
		code, body := post(path)
		if code != 404 || errCode(t, body) != "SCHEDULE_NOT_FOUND" {
			t.Errorf("POST %.60s: %d %s", path, code, body)
		}
		if len(body) > 1000 {
			t.Errorf("POST %.60s: a %d-byte answer repeats the name unbounded", path, len(body))
		}
	}
	w := httptest.NewRecorder()
	api.ServeHTTP(w, httptest.NewRequest("GET", "/api/schedules/hourly/pause", nil))
	if w.Code != 405 || w.Header().Get("Allow") != "POST" {
		t.Errorf("GET on the pause route: %d (Allow %q)", w.Code, w.Header().Get("Allow"))
	}
	lines := logs.lines(t, "api mutation")
	want := []struct {
		route, schedule string
		ok              bool
	}{
		{"POST /api/schedules/{name}/pause", "hourly", true},
		{"POST /api/schedules/{name}/pause", "hourly", true},
		{"POST /api/schedules/{name}/resume", "hourly", true},
		{"POST /api/schedules/{name}/resume", "hourly", true},
		{"POST /api/schedules/{name}/pause", "nightly/eu batch", true},
		{"POST /api/schedules/{name}/pause", "nope", false},
		{"POST /api/schedules/{name}/resume", "nope", false},
		{"POST /api/schedules/{name}/pause", "nightly", false},
		{"POST /api/schedules/{name}/pause", strings.Repeat("x", yella.MaxSignalKeyBytes) + "…", false},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d mutation lines, want %d: %v", len(lines), len(want), lines)
	}
	for i, w := range want {
		l := lines[i]
		if l["who"] != "token" || l["remote"] != "10.1.2.3:4444" || l["route"] != w.route || l["schedule"] != w.schedule || l["ok"] != w.ok ||
			fmt.Sprint(l["runs"]) != "[]" {
			t.Errorf("line %d: %.300v, want %s of %.40q, ok %v", i, l, w.route, w.schedule, w.ok)
		}
		if !w.ok && l["code"] != "SCHEDULE_NOT_FOUND" {
			t.Errorf("line %d: a refused pause is logged with code %v", i, l["code"])
		}
	}
}

// TestSchedulesPausedShape pins the listing of a paused schedule beside
// one that is not (golden file).
func TestSchedulesPausedShape(t *testing.T) {
	var logs syncBuffer
	eng, _, api := pausedEngine(t, &logs)
	if err := eng.PauseSchedule(context.Background(), "nightly/eu batch"); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	api.ServeHTTP(w, httptest.NewRequest("GET", "/api/schedules", nil))
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	golden(t, "schedules-paused", indent(t, w.Body.String()))
}

// TestEmitGroups: POST /api/emit takes "singleton" (a key) and "debounce"
// ({"key", "window"}): a second singleton emission while the first run
// waits admits nothing and names that run (grouped, reason "grouped", 200);
// a debounced burst admits one run that carries the latest payload and
// starts a window after the latest emission; a listener's grouped run and
// another listener's admitted one are both answered; emissions with
// another key or without one are not grouped; bad options are 400
// INVALID_CONFIG (an empty or oversized key, a negative, missing or
// malformed window, both options) or BAD_JSON (an unknown field), and
// admit nothing; every emission is logged with the runs it grouped into.
func TestEmitGroups(t *testing.T) {
	var logs syncBuffer
	f := newWaitFixture(t, httpapi.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	// A second listener of order:placed, so that one emission can admit
	// for one listener and be grouped for another.
	emit := func(body string) (int, httpapi.Emitted, string) {
		t.Helper()
		code, resp := f.do(t, "POST", "/api/emit", body)
		var out httpapi.Emitted
		if code < 300 {
			if err := json.Unmarshal([]byte(resp), &out); err != nil {
				t.Fatalf("emit %s: %v: %s", body, err, resp)
			}
		}
		return code, out, resp
	}
	// Singleton: the first run waits for its signal, so it stands in.
	code, first, resp := emit(`{"event":"approval:requested","payload":{"name":"s1"},"singleton":"user-7"}`)
	if code != 201 || len(first.Runs) != 1 || len(first.Grouped) != 0 || first.Reason != "" {
		t.Fatalf("first singleton emission: %d %s", code, resp)
	}
	waitStatus(t, f.eng, first.Runs[0].ID, yella.StatusWaiting)
	code, again, resp := emit(`{"event":"approval:requested","payload":{"name":"s2"},"singleton":"user-7"}`)
	if code != 200 || len(again.Runs) != 0 || fmt.Sprint(again.Grouped) != fmt.Sprint([]string{first.Runs[0].ID}) || again.Reason != yella.ReasonGrouped {
		t.Fatalf("second singleton emission: %d %s", code, resp)
	}
	if !strings.Contains(resp, `"runs":[],"grouped":["`+first.Runs[0].ID+`"],"reason":"grouped"`) {
		t.Errorf("the answer's shape: %s", resp)
	}
	if code, other, resp := emit(`{"event":"approval:requested","payload":{"name":"s3"},"singleton":"user-8"}`); code != 201 || len(other.Runs) != 1 || len(other.Grouped) != 0 {
		t.Fatalf("another singleton key: %d %s", code, resp)
	}
	if code, plain, resp := emit(`{"event":"approval:requested","payload":{"name":"s4"}}`); code != 201 || len(plain.Runs) != 1 {
		t.Fatalf("an emission without a key: %d %s", code, resp)
	}
	// Debounce: the fake clock stays, so the first run waits its window.
	code, deb, resp := emit(`{"event":"cool:off","payload":{"n":1},"debounce":{"key":"doc-7","window":"30s"}}`)
	if code != 201 || len(deb.Runs) != 1 || deb.Runs[0].Status != yella.StatusIdle {
		t.Fatalf("first debounced emission: %d %s", code, resp)
	}
	f.clk.Advance(10 * time.Second)
	code, deb2, resp := emit(`{"event":"cool:off","payload":{"n":2},"debounce":{"key":"doc-7","window":"30s"}}`)
	if code != 200 || len(deb2.Runs) != 0 || fmt.Sprint(deb2.Grouped) != fmt.Sprint([]string{deb.Runs[0].ID}) || deb2.Reason != yella.ReasonGrouped {
		t.Fatalf("second debounced emission: %d %s", code, resp)
	}
	r, err := f.eng.Run(context.Background(), deb.Runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Payload) != `{"n":2}` || !r.RetryAt.Equal(t0.Add(40*time.Second)) {
		t.Fatalf("the debounced run: payload %s, starts at %v, want {\"n\":2} at %v", r.Payload, r.RetryAt, t0.Add(40*time.Second))
	}
	// Bad options: refused before anything is admitted.
	before, err := f.eng.Runs(context.Background(), yella.RunQuery{Limit: 1000, WithTotal: true})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("k", yella.MaxGroupKeyBytes+1)
	for _, c := range []struct{ name, body, code string }{
		{"empty singleton key", `{"event":"cool:off","singleton":""}`, "INVALID_CONFIG"},
		{"oversized singleton key", `{"event":"cool:off","singleton":"` + long + `"}`, "INVALID_CONFIG"},
		{"empty debounce key", `{"event":"cool:off","debounce":{"key":"","window":"1s"}}`, "INVALID_CONFIG"},
		{"oversized debounce key", `{"event":"cool:off","debounce":{"key":"` + long + `","window":"1s"}}`, "INVALID_CONFIG"},
		{"negative window", `{"event":"cool:off","debounce":{"key":"k","window":"-1s"}}`, "INVALID_CONFIG"},
		{"missing window", `{"event":"cool:off","debounce":{"key":"k"}}`, "INVALID_CONFIG"},
		{"malformed window", `{"event":"cool:off","debounce":{"key":"k","window":"30"}}`, "INVALID_CONFIG"},
		{"window as a number", `{"event":"cool:off","debounce":{"key":"k","window":30000}}`, "BAD_JSON"},
		{"both options", `{"event":"cool:off","singleton":"a","debounce":{"key":"k","window":"1s"}}`, "INVALID_CONFIG"},
		{"unknown debounce field", `{"event":"cool:off","debounce":{"key":"k","window":"1s","windowMs":1}}`, "BAD_JSON"},
		{"debounce not an object", `{"event":"cool:off","debounce":"k"}`, "BAD_JSON"},
	} {
		code, resp := f.do(t, "POST", "/api/emit", c.body)
		if code != 400 || errCode(t, resp) != c.code {
			t.Errorf("%s: %d %s, want 400 %s", c.name, code, resp, c.code)
		}
		if len(resp) > 2000 {
			t.Errorf("%s: a %d-byte answer", c.name, len(resp))
		}
	}
	after, err := f.eng.Runs(context.Background(), yella.RunQuery{Limit: 1000, WithTotal: true})
	if err != nil {
		t.Fatal(err)
	}
	if after.Total != before.Total {
		t.Errorf("refused emissions admitted %d runs", after.Total-before.Total)
	}
	var grouped []string
	for _, l := range logs.lines(t, "api mutation") {
		if l["route"] == "POST /api/emit" && l["grouped"] != nil {
			grouped = append(grouped, fmt.Sprint(l["grouped"]))
		}
	}
	if want := []string{fmt.Sprint(again.Grouped), fmt.Sprint(deb2.Grouped)}; fmt.Sprint(grouped) != fmt.Sprint(want) {
		t.Errorf("grouped runs logged: %v, want %v", grouped, want)
	}
}

// TestEmitGroupedForOneListener: with two listeners, a singleton
// emission whose key one of them still runs is admitted for the other:
// 201, its run, and the run that stood in for the first (no reason).
func TestEmitGroupedForOneListener(t *testing.T) {
	f := newWaitFixture(t, httpapi.Options{})
	if err := f.eng.Register(yella.Process{Name: "notify", On: "approval:requested", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }}); err != nil {
		t.Fatal(err)
	}
	code, resp := f.do(t, "POST", "/api/emit", `{"event":"approval:requested","payload":{"name":"x"},"singleton":"k"}`)
	var first httpapi.Emitted
	if err := json.Unmarshal([]byte(resp), &first); code != 201 || err != nil || len(first.Runs) != 2 {
		t.Fatalf("first: %d %s", code, resp)
	}
	var waiter, notify string
	for _, r := range first.Runs {
		if r.Process == "approve" {
			waiter = r.ID
		} else {
			notify = r.ID
		}
	}
	waitStatus(t, f.eng, waiter, yella.StatusWaiting)
	waitStatus(t, f.eng, notify, yella.StatusCompleted)
	code, resp = f.do(t, "POST", "/api/emit", `{"event":"approval:requested","payload":{"name":"x"},"singleton":"k"}`)
	var second httpapi.Emitted
	if err := json.Unmarshal([]byte(resp), &second); code != 201 || err != nil {
		t.Fatalf("second: %d %s", code, resp)
	}
	if len(second.Runs) != 1 || second.Runs[0].Process != "notify" || fmt.Sprint(second.Grouped) != "["+waiter+"]" || second.Reason != "" {
		t.Fatalf("second: %s", resp)
	}
}
