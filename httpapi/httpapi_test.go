package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/httpguard"
	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// fixture is an engine on a memory store and a fake clock, with runs in
// every interesting state, behind the API.
type fixture struct {
	st   *memstore.Store
	eng  *yella.Engine
	api  *httpapi.API
	h    http.Handler
	ids  map[string]string // name → run id
	clk  *clock.Fake
	stop func()
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, nil, httpapi.Options{Version: "test", Keepalive: time.Hour})
}

// newFixtureWith is newFixture with the store wrapped by wrap (if not nil)
// and the API built with opts.
func newFixtureWith(t *testing.T, wrap func(store.Store) store.Store, opts httpapi.Options) *fixture {
	t.Helper()
	clk := clock.NewFake(t0)
	st := memstore.New()
	var engStore store.Store = st
	if wrap != nil {
		engStore = wrap(st)
	}
	eng, err := yella.New(yella.Config{Store: engStore, Clock: clk, Owner: "test-engine", MaxPayloadBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	procs := []yella.Process{
		{Name: "take-order", On: "order:placed", Emits: []string{"order:taken"}, Run: func(c *yella.Ctx) yella.Result {
			out, err := yella.Effect(c, "reserve", func(context.Context) (string, error) { return "reserved", nil })
			if err != nil {
				return c.Error(err)
			}
			return c.OK(map[string]string{"stock": out}, yella.Then("order:taken"))
		}},
		{Name: "ship", On: "order:taken", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }},
		{Name: "validate", On: "bad:input", Run: func(c *yella.Ctx) yella.Result { return c.Fail(errors.New("rejected: no sku")) }},
		{Name: "flaky", On: "flaky", Retry: &yella.Retry{Max: 0}, Run: func(c *yella.Ctx) yella.Result { return c.Error(errors.New("downstream 503")) }},
		{Name: "draft", On: "post:drafted", Emits: []string{"post:approved"}, Run: func(c *yella.Ctx) yella.Result {
			return c.Defer("post:approved", map[string]string{"title": "Launch"})
		}},
		{Name: "publish", On: "post:approved", Run: func(c *yella.Ctx) yella.Result { return c.OK("published") }},
		{Name: "capped", On: "capped", Concurrency: 1, Overflow: yella.Drop, Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }},
	}
	for _, p := range procs {
		if err := eng.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(eng, opts)
	f := &fixture{st: st, eng: eng, api: api, h: api, ids: map[string]string{}, clk: clk}
	for _, e := range [][2]string{{"order", "order:placed"}, {"bad", "bad:input"}, {"dead", "flaky"}, {"deferred", "post:drafted"}} {
		name, ev := e[0], e[1]
		runs, err := eng.EmitAndWait(ctx, ev, map[string]string{"name": name}, yella.IdempotencyKey(name))
		if err != nil {
			t.Fatal(err)
		}
		f.ids[name] = runs[0].ID
	}
	if err := eng.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	f.stop = func() {
		api.Close()
		eng.Stop(ctx)
	}
	t.Cleanup(f.stop)
	return f
}

func (f *fixture) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: content type %q", method, path, ct)
	}
	return w.Code, w.Body.String()
}

var (
	uuidRE   = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	uptimeRE = regexp.MustCompile(`"uptimeSeconds": [0-9.e-]+`)
)

// normalise replaces run ids by their names (or by order of appearance)
// and the uptime by a placeholder, so golden files are stable.
func (f *fixture) normalise(s string) string {
	names := map[string]string{}
	for n, id := range f.ids {
		names[id] = "<" + n + ">"
	}
	s = uuidRE.ReplaceAllStringFunc(s, func(id string) string {
		if n, ok := names[id]; ok {
			return n
		}
		names[id] = fmt.Sprintf("<run-%d>", len(names)-len(f.ids)+1)
		return names[id]
	})
	return uptimeRE.ReplaceAllString(s, `"uptimeSeconds": "<uptime>"`)
}

// indent indents a compact response for its golden file, which is then
// easy to review.
func indent(t *testing.T, body string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(body), "", "  "); err != nil {
		t.Fatalf("not JSON: %v: %s", err, body)
	}
	return buf.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden.json")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from %s (UPDATE_GOLDEN=1 rewrites it):\n%s", name, path, got)
	}
}

// TestShapes pins the JSON shape of every read route with golden files.
func TestShapes(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct{ name, path string }{
		{"health", "/api/health"},
		{"processes", "/api/processes"},
		{"nodes-single", "/api/nodes"},
		{"runs", "/api/runs?root=true&order=oldest&total=true"},
		{"runs-page", "/api/runs?limit=2&order=oldest"},
		{"run", "/api/runs/" + f.ids["order"]},
		{"chain", "/api/runs/" + f.ids["order"] + "/chain"},
		{"trace", "/api/runs/" + f.ids["deferred"] + "/trace"},
		{"metrics", "/api/metrics"},
		{"observability", "/api/observability?from=2026-03-01T08:30:00Z&to=2026-03-01T09:30:00Z&bucket=30m"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := f.do(t, "GET", c.path, "")
			if code != 200 {
				t.Fatalf("%s: %d %s", c.path, code, body)
			}
			golden(t, c.name, f.normalise(indent(t, body)))
		})
	}
}

func errCode(t *testing.T, body string) string {
	t.Helper()
	var e httpapi.ErrorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("not the error shape: %s", body)
	}
	return e.Error.Code
}

// TestRoutes covers each route's happy path and its error cases.
func TestRoutes(t *testing.T) {
	f := newFixture(t)
	id := f.ids
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string // error code, or a substring of the body on success
	}{
		{"unknown route", "GET", "/api/nope", "", 404, "NOT_FOUND"},
		{"wrong method", "DELETE", "/api/runs", "", 405, "METHOD_NOT_ALLOWED"},
		{"GET on a POST route", "GET", "/api/emit", "", 405, "METHOD_NOT_ALLOWED"},
		{"runs by status", "GET", "/api/runs?status=errored,dead-letter", "", 200, `"validate"`},
		{"runs bad status", "GET", "/api/runs?status=bogus", "", 400, "INVALID_QUERY"},
		{"runs bad limit", "GET", "/api/runs?limit=0", "", 400, "INVALID_QUERY"},
		{"runs unknown param", "GET", "/api/runs?stauts=idle", "", 400, "INVALID_QUERY"},
		{"runs bad cursor", "GET", "/api/runs?cursor=zzz", "", 400, "INVALID_QUERY"},
		{"run unknown", "GET", "/api/runs/no-such-run", "", 404, "RUN_NOT_FOUND"},
		{"chain unknown", "GET", "/api/runs/no-such-run/chain", "", 404, "RUN_NOT_FOUND"},
		{"trace unknown", "GET", "/api/runs/no-such-run/trace", "", 404, "RUN_NOT_FOUND"},
		{"emit", "POST", "/api/emit", `{"event":"order:placed","payload":{"sku":"A1"}}`, 201, `"take-order"`},
		{"emit duplicate key", "POST", "/api/emit", `{"event":"order:placed","idempotencyKey":"order"}`, 200, `"duplicate"`},
		{"emit at cap", "POST", "/api/emit", `{"event":"capped"}`, 201, `"capped"`},
		{"emit bad json", "POST", "/api/emit", `{"event":`, 400, "BAD_JSON"},
		{"emit no body", "POST", "/api/emit", ``, 400, "BAD_JSON"},
		{"emit unknown field", "POST", "/api/emit", `{"event":"x","evnt":"y"}`, 400, "BAD_JSON"},
		{"emit two values", "POST", "/api/emit", `{"event":"order:placed"} {}`, 400, "BAD_JSON"},
		{"emit missing event", "POST", "/api/emit", `{"payload":{}}`, 400, "MISSING_EVENT"},
		{"emit unknown event", "POST", "/api/emit", `{"event":"nobody:listens"}`, 422, "UNKNOWN_EVENT"},
		{"emit payload too large", "POST", "/api/emit", `{"event":"order:placed","payload":"` + strings.Repeat("x", 5000) + `"}`, 413, "PAYLOAD_TOO_LARGE"},
		{"retry errored", "POST", "/api/runs/" + id["bad"] + "/retry", "", 200, `"status":"idle"`},
		{"retry completed", "POST", "/api/runs/" + id["order"] + "/retry", "", 409, "INVALID_RUN_STATE"},
		{"retry unknown", "POST", "/api/runs/no-such-run/retry", "", 404, "RUN_NOT_FOUND"},
		{"requeue dead", "POST", "/api/runs/" + id["dead"] + "/requeue", "", 200, `"status":"idle"`},
		{"requeue completed", "POST", "/api/runs/" + id["order"] + "/requeue", "", 409, "INVALID_RUN_STATE"},
		{"cancel completed", "POST", "/api/runs/" + id["order"] + "/cancel", "", 409, "INVALID_RUN_STATE"},
		{"resume bad json", "POST", "/api/runs/" + id["deferred"] + "/resume", `{"payload":`, 400, "BAD_JSON"},
		{"resume", "POST", "/api/runs/" + id["deferred"] + "/resume", `{"payload":{"by":"ana"}}`, 200, `"publish"`},
		{"resume twice", "POST", "/api/runs/" + id["deferred"] + "/resume", ``, 409, "INVALID_RUN_STATE"},
		{"resume not deferred", "POST", "/api/runs/" + id["order"] + "/resume", ``, 409, "INVALID_RUN_STATE"},
		{"complete effect missing key", "POST", "/api/runs/" + id["order"] + "/complete-effect", `{}`, 400, "MISSING_KEY"},
		{"complete effect not fenced", "POST", "/api/runs/" + id["order"] + "/complete-effect", `{"key":"str:reserve","output":"x"}`, 409, "INVALID_RUN_STATE"},
		{"requeue all", "POST", "/api/dead-letters/requeue?process=flaky", "", 200, `"requeued"`},
		{"requeue all bad param", "POST", "/api/dead-letters/requeue?proc=flaky", "", 400, "INVALID_QUERY"},
		{"resolve fenced preview", "POST", "/api/fenced/resolve", `{"action":"retry"}`, 200, `{"items":[],"applied":0,"more":false}`},
		{"resolve fenced apply, none", "POST", "/api/fenced/resolve", `{"action":"complete-effect","output":1,"process":"flaky","apply":true}`, 200, `"applied":0`},
		{"resolve fenced bad action", "POST", "/api/fenced/resolve", `{"action":"delete"}`, 400, "INVALID_ACTION"},
		{"resolve fenced no action", "POST", "/api/fenced/resolve", `{}`, 400, "INVALID_ACTION"},
		{"resolve fenced unknown field", "POST", "/api/fenced/resolve", `{"action":"retry","proces":"x"}`, 400, "BAD_JSON"},
		{"resolve fenced bad limit", "POST", "/api/fenced/resolve", `{"action":"retry","limit":100000}`, 400, "INVALID_QUERY"},
		{"observability bad window", "GET", "/api/observability?window=-1h", "", 400, "INVALID_QUERY"},
		{"observability both", "GET", "/api/observability?window=1h&from=2026-01-01T00:00:00Z", "", 400, "INVALID_QUERY"},
		{"observability reversed", "GET", "/api/observability?from=2026-03-02T00:00:00Z&to=2026-03-01T00:00:00Z", "", 400, "INVALID_QUERY"},
		{"events bad since", "GET", "/api/events?since=x", "", 400, "INVALID_QUERY"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, r)
			if w.Code != c.status {
				t.Fatalf("status %d, want %d: %s", w.Code, c.status, w.Body.String())
			}
			switch {
			case c.status >= 400 && c.code != "":
				if got := errCode(t, w.Body.String()); got != c.code {
					t.Fatalf("code %s, want %s", got, c.code)
				}
			case c.code != "" && !strings.Contains(w.Body.String(), c.code):
				t.Fatalf("body lacks %s: %s", c.code, w.Body.String())
			}
		})
	}
}

// TestGuarded runs the API behind the guard the yella command uses: a
// token is required when set, and a cross-origin POST is refused.
func TestGuarded(t *testing.T) {
	f := newFixture(t)
	g, err := httpguard.New(httpguard.Options{Token: "t0ken-0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	h := g.Handler(f.api)
	for _, c := range []struct {
		name   string
		auth   string
		origin string
		want   int
	}{
		{"no token", "", "", 401},
		{"wrong token", "Bearer nope", "", 401},
		{"token, cross-origin", "Bearer t0ken-0123456789abcdef", "https://evil.example", 403},
		{"token, same origin", "Bearer t0ken-0123456789abcdef", "http://127.0.0.1:3400", 201},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/api/emit", strings.NewReader(`{"event":"order:placed"}`))
			r.Host = "127.0.0.1:3400"
			if c.auth != "" {
				r.Header.Set("Authorization", c.auth)
			}
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
				r.Header.Set("Sec-Fetch-Site", map[bool]string{true: "same-origin", false: "cross-site"}[strings.Contains(c.origin, "127.0.0.1")])
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != c.want {
				t.Fatalf("status %d, want %d: %s", w.Code, c.want, w.Body.String())
			}
		})
	}
}

// sseClient reads frames from an SSE response.
type sseClient struct {
	sc   *bufio.Scanner
	body io.Closer
}

type frame struct{ id, event, data string }

func (c *sseClient) next(t *testing.T) frame {
	t.Helper()
	var f frame
	for c.sc.Scan() {
		line := c.sc.Text()
		switch {
		case line == "":
			if f.event != "" || f.data != "" {
				return f
			}
		case strings.HasPrefix(line, "id: "):
			f.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			f.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			f.data = line[6:]
		}
	}
	t.Fatalf("stream ended: %v", c.sc.Err())
	return f
}

func connect(t *testing.T, url, lastID string) *sseClient {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	t.Cleanup(func() { resp.Body.Close() })
	c := &sseClient{sc: bufio.NewScanner(resp.Body), body: resp.Body}
	if f := c.next(t); f.event != "hello" {
		t.Fatalf("first frame %+v, want hello", f)
	}
	return c
}

// TestEvents: the stream carries lifecycle events with ids, replays what a
// reconnecting client missed, and tells a client whose id is too old.
func TestEvents(t *testing.T) {
	f := newFixture(t)
	srv := httptest.NewServer(f.api)
	// A cleanup, not a defer: it runs after the streams' bodies are closed
	// (cleanups run last first), so a failing test does not hang on a stream.
	t.Cleanup(srv.Close)
	c := connect(t, srv.URL+"/api/events", "")
	ctx := context.Background()
	if _, err := f.eng.EmitAndWait(ctx, "order:placed", nil); err != nil {
		t.Fatal(err)
	}
	var seen []string
	var lastID string
	for len(seen) < 4 {
		fr := c.next(t)
		var ev httpapi.Event
		if err := json.Unmarshal([]byte(fr.data), &ev); err != nil {
			t.Fatal(err)
		}
		if fr.id != fmt.Sprint(ev.ID) || fr.event != string(ev.Type) || ev.At.IsZero() {
			t.Fatalf("frame %+v does not match its data", fr)
		}
		seen = append(seen, fr.event)
		if len(seen) == 2 {
			lastID = fr.id
		}
	}
	if seen[0] != "run:admitted" || seen[1] != "run:started" {
		t.Fatalf("events %v, want run:admitted then run:started first", seen)
	}
	// A reconnect with Last-Event-ID replays from the event after it.
	c2 := connect(t, srv.URL+"/api/events", lastID)
	if fr := c2.next(t); fr.event != seen[2] {
		t.Fatalf("replay starts with %s, want %s", fr.event, seen[2])
	}
	// An id from before this server started gets a reset first.
	c3 := connect(t, srv.URL+"/api/events", "1")
	if fr := c3.next(t); fr.event != "reset" {
		t.Fatalf("stale id: first frame %+v, want reset", fr)
	}
	// Close ends the streams.
	f.api.Close()
	for c.sc.Scan() {
	}
}

// FuzzParseRunQuery: any query string parses or is refused with a clear
// error; a parsed query never makes the engine fail with anything but an
// invalid-query error.
func FuzzParseRunQuery(f *testing.F) {
	for _, s := range []string{"status=idle&limit=10", "status=errored,dead-letter&root=true&order=oldest", "limit=0", "cursor=s12&total=1",
		"state=bogus", "status=%00", "order=sideways", "limit=99999999999999999999", "process=a&process=b", "%zz", "root=maybe"} {
		f.Add(s)
	}
	eng, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		f.Fatal(err)
	}
	eng.Register(yella.Process{Name: "p", On: "e", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := httpapi.ParseRunQuery(v)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if _, err := eng.Runs(context.Background(), q); err != nil && yella.CodeOf(err) != yella.CodeInvalidQuery {
			t.Fatalf("query %q: %v", raw, err)
		}
	})
}

// TestDeepNestingIsCheap: a deeply nested payload costs its own size in
// every response, not the square of its depth (indented output would).
// The run is stored directly, as one admitted before any depth limit.
func TestDeepNestingIsCheap(t *testing.T) {
	f := newFixture(t)
	payload := strings.Repeat("[", 2000) + strings.Repeat("]", 2000)
	res, err := f.st.Admit(context.Background(), store.Admission{Event: "webhook", Payload: json.RawMessage(payload),
		Runs: []store.NewRun{{ID: "deep-run", Process: "webhook-sink"}}, Now: t0})
	if err != nil || len(res.Admitted) != 1 {
		t.Fatal(res, err)
	}
	for _, path := range []string{"/api/runs/deep-run", "/api/runs/deep-run/chain", "/api/runs?process=webhook-sink"} {
		code, body := f.do(t, "GET", path, "")
		if len(body) > len(payload)+2048 {
			t.Fatalf("%s: %d bytes for a %d-byte payload", path, len(body), len(payload))
		}
		if code != 200 || !strings.Contains(body, payload) {
			t.Fatalf("%s: %d, payload missing", path, code)
		}
	}
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestMutationsLogged: every mutation through the API is logged at info
// level with who made it, the route and the run ids, including each run
// of a bulk requeue, and refused ones with their code.
func TestMutationsLogged(t *testing.T) {
	var logs syncBuffer
	f := newFixtureWith(t, nil, httpapi.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	g, err := httpguard.New(httpguard.Options{Token: "t0ken-0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	h := g.Handler(f.api)
	do := func(path, body string) string {
		r := httptest.NewRequest("POST", path, strings.NewReader(body))
		r.Host, r.RemoteAddr = "127.0.0.1:3400", "10.1.2.3:4444"
		r.Header.Set("Authorization", "Bearer t0ken-0123456789abcdef")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Body.String()
	}
	var dead []string
	for range 2 {
		runs, err := f.eng.EmitAndWait(context.Background(), "flaky", nil)
		if err != nil {
			t.Fatal(err)
		}
		dead = append(dead, runs[0].ID)
	}
	emitted := do("/api/emit", `{"event":"order:placed"}`)
	do("/api/runs/"+f.ids["bad"]+"/retry", "")
	do("/api/runs/"+f.ids["order"]+"/cancel", "")
	do("/api/dead-letters/requeue?process=flaky", "")
	lines := logs.lines(t, "api mutation")
	if len(lines) != 4 {
		t.Fatalf("%d mutation lines, want 4: %v", len(lines), lines)
	}
	want := []struct {
		route string
		runs  []string
		ok    bool
	}{
		{"POST /api/emit", []string{uuidRE.FindString(emitted)}, true},
		{"POST /api/runs/{id}/retry", []string{f.ids["bad"]}, true},
		{"POST /api/runs/{id}/cancel", []string{f.ids["order"]}, false},
		{"POST /api/dead-letters/requeue", append([]string{f.ids["dead"]}, dead...), true},
	}
	for i, w := range want {
		l := lines[i]
		if l["level"] != "INFO" || l["who"] != "token" || l["remote"] != "10.1.2.3:4444" || l["route"] != w.route || l["ok"] != w.ok {
			t.Errorf("line %d: %v, want %s by token, ok %v", i, l, w.route, w.ok)
		}
		if got := fmt.Sprint(l["runs"]); got != fmt.Sprint(w.runs) {
			t.Errorf("line %d: runs %s, want %v", i, got, w.runs)
		}
	}
	if lines[2]["code"] != "INVALID_RUN_STATE" {
		t.Errorf("a refused cancel is logged with code %v", lines[2]["code"])
	}
}

// TestNoHandler: runs of a process the serving engine does not have are
// marked noHandler, and the processes listing names that process with its
// waiting runs, so an operator sees why they wait.
func TestNoHandler(t *testing.T) {
	f := newFixture(t)
	for _, id := range []string{"legacy-1", "legacy-2"} {
		if _, err := f.st.Admit(context.Background(), store.Admission{Event: "legacy:sync", Payload: json.RawMessage(`{}`),
			Runs: []store.NewRun{{ID: id, Process: "legacy-sync"}}, Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	var run httpapi.RunDetail
	_, body := f.do(t, "GET", "/api/runs/legacy-1", "")
	if err := json.Unmarshal([]byte(body), &run); err != nil || !run.Run.NoHandler || run.Run.Status != yella.StatusIdle {
		t.Fatalf("run of an unregistered process: %s", body)
	}
	_, body = f.do(t, "GET", "/api/runs/"+f.ids["order"], "")
	if strings.Contains(body, "noHandler") {
		t.Fatalf("a registered process's run is marked: %s", body)
	}
	var page httpapi.RunPage
	_, body = f.do(t, "GET", "/api/runs?status=idle", "")
	if err := json.Unmarshal([]byte(body), &page); err != nil || len(page.Runs) != 2 || !page.Runs[0].NoHandler || !page.Runs[1].NoHandler {
		t.Fatalf("listing: %s", body)
	}
	var procs httpapi.Processes
	_, body = f.do(t, "GET", "/api/processes", "")
	if err := json.Unmarshal([]byte(body), &procs); err != nil {
		t.Fatal(err)
	}
	var found *httpapi.Process
	for i, p := range procs.Processes {
		if !p.Registered {
			if found != nil {
				t.Fatalf("two unregistered processes: %s", body)
			}
			found = &procs.Processes[i]
		}
	}
	if found == nil || found.Name != "legacy-sync" || found.Waiting != 2 {
		t.Fatalf("processes: %s", body)
	}
}
