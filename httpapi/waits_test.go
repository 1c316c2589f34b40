package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
)

// waitProcesses are processes whose runs wait: approve waits for the
// signal "approve:<name>" for at most an hour and completes with the
// signal's payload (or "timed out"); cool-off sleeps a day and completes
// with "rested". The fixtures' fake clock does not move unless a test
// moves it, so their waits end only by a signal or an operator.
func waitProcesses() []yella.Process {
	return []yella.Process{
		{Name: "approve", On: "approval:requested", Run: func(c *yella.Ctx) yella.Result {
			var in struct {
				Name string `json:"name"`
			}
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
	}
}

// newWaitFixture is newFixture with waitProcesses registered.
func newWaitFixture(t *testing.T, opts httpapi.Options) *fixture {
	t.Helper()
	if opts.Version == "" {
		opts.Version, opts.Keepalive = "test", time.Hour
	}
	f := newFixtureWith(t, nil, opts)
	for _, p := range waitProcesses() {
		if err := f.eng.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// waiting emits event with {"name": name} (its idempotency key) and
// returns the run once it waits; f.ids names it name.
func (f *fixture) waiting(t *testing.T, name, event string) string {
	t.Helper()
	em, err := f.eng.Emit(context.Background(), event, map[string]string{"name": name}, yella.IdempotencyKey(name))
	if err != nil || len(em.Runs) != 1 {
		t.Fatalf("emit %s: %+v %v", event, em, err)
	}
	f.ids[name] = em.Runs[0]
	waitStatus(t, f.eng, em.Runs[0], yella.StatusWaiting)
	return em.Runs[0]
}

// waitStatus waits until run id has status st and returns it.
func waitStatus(t testing.TB, eng *yella.Engine, id string, st yella.Status) yella.Run {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second) // a bound for a broken test, not a timing
	for {
		r, err := eng.Run(context.Background(), id)
		if err == nil && r.Status == st {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: %s (%v), want %s", id, r.Status, err, st)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestWaitShapes pins the JSON of waiting runs: the run detail of a run
// waiting for a signal (signal, waiting, waitingUntil, waitingSince,
// waitKey) and of a sleeping one, and a listing filtered on status
// waiting, where each run says what it waits for (signal, retryAt).
func TestWaitShapes(t *testing.T) {
	f := newWaitFixture(t, httpapi.Options{})
	approve := f.waiting(t, "approve-a", "approval:requested")
	cool := f.waiting(t, "cool-a", "cool:off")
	for _, c := range []struct{ name, path string }{
		{"run-waiting", "/api/runs/" + approve},
		{"run-sleeping", "/api/runs/" + cool},
		{"runs-waiting", "/api/runs?status=waiting&order=oldest&total=true"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := f.do(t, "GET", c.path, "")
			if code != 200 {
				t.Fatalf("%s: %d %s", c.path, code, body)
			}
			golden(t, c.name, f.normalise(indent(t, body)))
		})
	}
	// The state filter idle takes the waiting runs in too (waiting refines idle).
	var page httpapi.RunPage
	_, body := f.do(t, "GET", "/api/runs?state=idle&process=approve", "")
	if err := json.Unmarshal([]byte(body), &page); err != nil || len(page.Runs) != 1 || page.Runs[0].State != yella.StateIdle {
		t.Fatalf("state=idle: %s", body)
	}
}

// TestSignalRoutes covers the signal and end-wait routes, in order: each
// happy path with what it did to the run, and every refusal with its
// status and code.
func TestSignalRoutes(t *testing.T) {
	f := newWaitFixture(t, httpapi.Options{})
	byKey := f.waiting(t, "a", "approval:requested")
	byRun := f.waiting(t, "b", "approval:requested")
	ended := f.waiting(t, "c", "approval:requested")
	cancelled := f.waiting(t, "d", "approval:requested")
	sleeper := f.waiting(t, "nap", "cool:off")
	big := `"` + strings.Repeat("x", 5000) + `"`
	cases := []struct {
		name, path, body string
		status           int
		want             string // error code, or a substring of the body on success
	}{
		{"signal by key", "/api/signals", `{"key":"approve:a","payload":{"by":"ana"}}`, 200, `{"runId":"` + byKey + `","kept":false}`},
		{"signal kept", "/api/signals", `{"key":"approve:later","payload":"early"}`, 200, `{"kept":true}`},
		{"signal no payload", "/api/signals", `{"key":"approve:nobody"}`, 200, `{"kept":true}`},
		{"signal missing key", "/api/signals", `{"payload":1}`, 400, "MISSING_KEY"},
		{"signal empty key", "/api/signals", `{"key":""}`, 400, "MISSING_KEY"},
		{"signal key too long", "/api/signals", `{"key":"` + strings.Repeat("k", yella.MaxSignalKeyBytes+1) + `"}`, 400, "INVALID_SIGNAL"},
		{"signal key at the bound", "/api/signals", `{"key":"` + strings.Repeat("k", yella.MaxSignalKeyBytes) + `"}`, 200, `"kept":true`},
		{"signal payload too large", "/api/signals", `{"key":"approve:b","payload":` + big + `}`, 413, "PAYLOAD_TOO_LARGE"},
		{"signal payload invalid UTF-8", "/api/signals", "{\"key\":\"approve:b\",\"payload\":\"\xff\"}", 400, "INVALID_PAYLOAD"},
		{"signal bad json", "/api/signals", `{"key":`, 400, "BAD_JSON"},
		{"signal no body", "/api/signals", ``, 400, "BAD_JSON"},
		{"signal unknown field", "/api/signals", `{"key":"approve:b","runId":"x"}`, 400, "BAD_JSON"},
		{"signal two values", "/api/signals", `{"key":"approve:b"} {}`, 400, "BAD_JSON"},
		{"signal key not a string", "/api/signals", `{"key":7}`, 400, "BAD_JSON"},
		{"run signal unknown run", "/api/runs/no-such-run/signal", `{"payload":1}`, 404, "RUN_NOT_FOUND"},
		{"run signal not waiting", "/api/runs/" + f.ids["order"] + "/signal", ``, 409, "INVALID_RUN_STATE"},
		{"run signal sleeping", "/api/runs/" + sleeper + "/signal", ``, 409, "INVALID_RUN_STATE"},
		{"run signal bad json", "/api/runs/" + byRun + "/signal", `{"payload":`, 400, "BAD_JSON"},
		{"run signal unknown field", "/api/runs/" + byRun + "/signal", `{"key":"approve:b"}`, 400, "BAD_JSON"},
		{"run signal payload too large", "/api/runs/" + byRun + "/signal", `{"payload":` + big + `}`, 413, "PAYLOAD_TOO_LARGE"},
		{"run signal", "/api/runs/" + byRun + "/signal", `{"payload":{"by":"bo"}}`, 200, `{"runId":"` + byRun + `","kept":false}`},
		{"run signal twice", "/api/runs/" + byRun + "/signal", `{"payload":{"by":"bo"}}`, 409, "INVALID_RUN_STATE"},
		{"end wait", "/api/runs/" + ended + "/end-wait", ``, 200, `"status":"idle"`},
		{"end wait twice", "/api/runs/" + ended + "/end-wait", ``, 409, "INVALID_RUN_STATE"},
		{"end wait of a sleep", "/api/runs/" + sleeper + "/end-wait", ``, 200, `"status":"idle"`},
		{"end wait not waiting", "/api/runs/" + f.ids["order"] + "/end-wait", ``, 409, "INVALID_RUN_STATE"},
		{"end wait unknown", "/api/runs/no-such-run/end-wait", ``, 404, "RUN_NOT_FOUND"},
		{"cancel waiting", "/api/runs/" + cancelled + "/cancel", ``, 200, `"status":"cancelled"`},
		{"GET on signals", "/api/signals", ``, 405, "METHOD_NOT_ALLOWED"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := "POST"
			if strings.HasPrefix(c.name, "GET ") {
				method = "GET"
			}
			code, body := f.do(t, method, c.path, c.body)
			if code != c.status {
				t.Fatalf("status %d, want %d: %s", code, c.status, body)
			}
			if c.status >= 400 {
				if got := errCode(t, body); got != c.want {
					t.Fatalf("code %s, want %s: %s", got, c.want, body)
				}
			} else if !strings.Contains(body, c.want) {
				t.Fatalf("body lacks %s: %s", c.want, body)
			}
		})
	}
	// What the signals did: each run ran again and its WaitFor returned
	// the payload as sent, or the timeout for an ended wait; the sleep
	// returned as if its time had come.
	for id, want := range map[string]string{byKey: `{"by":"ana"}`, byRun: `{"by":"bo"}`, ended: `"timed out"`, sleeper: `"rested"`} {
		if r := waitStatus(t, f.eng, id, yella.StatusCompleted); string(r.Output) != want {
			t.Errorf("run %s: output %s, want %s", id, r.Output, want)
		}
	}
	// A kept signal reaches the next wait on its key at once.
	later := f.emitOne(t, "approval:requested", "later")
	if r := waitStatus(t, f.eng, later, yella.StatusCompleted); string(r.Output) != `"early"` {
		t.Errorf("the kept signal: output %s", r.Output)
	}
	if r, _ := f.eng.Run(context.Background(), cancelled); r.Status != yella.StatusCancelled {
		t.Errorf("cancelled waiting run is %s", r.Status)
	}
}

// emitOne emits event with {"name": name} and returns its one run.
func (f *fixture) emitOne(t *testing.T, event, name string) string {
	t.Helper()
	em, err := f.eng.Emit(context.Background(), event, map[string]string{"name": name})
	if err != nil || len(em.Runs) != 1 {
		t.Fatalf("emit %s: %+v %v", event, em, err)
	}
	return em.Runs[0]
}

// TestSignalsLogged: signals and ended waits are mutations: each is logged
// with the route, the run it woke (or the run in the path), the key and
// whether it was kept, refused ones with their code; an oversized key is
// logged cut to the bound.
func TestSignalsLogged(t *testing.T) {
	var logs syncBuffer
	f := newWaitFixture(t, httpapi.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	a := f.waiting(t, "a", "approval:requested")
	nap := f.waiting(t, "nap", "cool:off")
	long := strings.Repeat("k", 3*yella.MaxSignalKeyBytes)
	for _, req := range [][2]string{
		{"/api/signals", `{"key":"approve:a"}`},
		{"/api/signals", `{"key":"approve:z"}`},
		{"/api/signals", `{"key":"` + long + `"}`},
		{"/api/runs/" + nap + "/signal", ``},
		{"/api/runs/" + nap + "/end-wait", ``},
	} {
		f.do(t, "POST", req[0], req[1])
	}
	lines := logs.lines(t, "api mutation")
	want := []struct {
		route, runs, key string
		ok, kept         bool
		code             string
	}{
		{"POST /api/signals", "[" + a + "]", "approve:a", true, false, ""},
		{"POST /api/signals", "[]", "approve:z", true, true, ""},
		{"POST /api/signals", "[]", long[:yella.MaxSignalKeyBytes] + "…", false, false, "INVALID_SIGNAL"},
		{"POST /api/runs/{id}/signal", "[" + nap + "]", "", false, false, "INVALID_RUN_STATE"},
		{"POST /api/runs/{id}/end-wait", "[" + nap + "]", "", true, false, ""},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d mutation lines, want %d: %v", len(lines), len(want), lines)
	}
	for i, w := range want {
		l := lines[i]
		if l["route"] != w.route || fmt.Sprint(l["runs"]) != w.runs || l["ok"] != w.ok || l["who"] != "unguarded" {
			t.Errorf("line %d: %v, want %s on %s, ok %v", i, l, w.route, w.runs, w.ok)
		}
		if w.key != "" && l["signal"] != w.key {
			t.Errorf("line %d: signal %.40q…, want %.40q…", i, l["signal"], w.key)
		}
		if strings.Contains(w.route, "signal") && l["kept"] != w.kept {
			t.Errorf("line %d: kept %v, want %v", i, l["kept"], w.kept)
		}
		if w.code != "" && l["code"] != w.code {
			t.Errorf("line %d: code %v, want %s", i, l["code"], w.code)
		}
	}
}

// FuzzSignalRequest sends arbitrary bodies to POST /api/signals and POST
// /api/runs/{id}/signal of an engine on a memory store with a run waiting
// for the key "approve:f" (another is started whenever a signal ends its
// wait): every answer is in the error shape or a Signalled, never a 500;
// a refused signal changes nothing; an acknowledged one ended the wait of
// the run it names, whose wait now holds the payload as sent, and kept is
// true only when no run was waiting. The signal payload is what the
// engine checks: its size, nesting and UTF-8.
func FuzzSignalRequest(f *testing.F) {
	for _, s := range []string{`{"key":"approve:f","payload":{"by":"ana"}}`, `{"key":"approve:f"}`, `{"key":"approve:f","payload":null}`,
		`{"key":"approve:other","payload":[1,2]}`, `{"key":""}`, `{"key":"approve:f","payload":"` + strings.Repeat("x", 5000) + `"}`,
		`{"key":"approve:f","payload":` + nested(200) + `}`, "{\"key\":\"approve:f\",\"payload\":\"\xff\"}", `{"payload":{}}`, `{"key":`, `[]`, ``} {
		f.Add(false, []byte(s))
		f.Add(true, []byte(s))
	}
	clk := clock.NewFake(t0)
	st := memstore.New()
	eng, err := yella.New(yella.Config{Store: st, Clock: clk, MaxPayloadBytes: 4096})
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range waitProcesses() {
		if err := eng.Register(p); err != nil {
			f.Fatal(err)
		}
	}
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		f.Fatal(err)
	}
	api := httpapi.New(eng, httpapi.Options{})
	f.Cleanup(func() {
		api.Close()
		eng.Stop(ctx)
	})
	var waiter string // the run waiting for approve:f
	next := func(t *testing.T) {
		em, err := eng.Emit(ctx, "approval:requested", map[string]string{"name": "f"})
		if err != nil {
			t.Fatal(err)
		}
		waiter = em.Runs[0]
		if waitStatus(t, eng, waiter, yella.StatusWaiting).Signal != "approve:f" {
			t.Fatal("the waiter waits for another key")
		}
	}
	f.Fuzz(func(t *testing.T, byRun bool, body []byte) {
		if waiter == "" {
			next(t)
		}
		path := "/api/signals"
		if byRun {
			path = "/api/runs/" + waiter + "/signal"
		}
		w := httptest.NewRecorder()
		api.ServeHTTP(w, httptest.NewRequest("POST", path, bytes.NewReader(body)))
		checkAnswer(t, path, w.Code, w.Body.Bytes())
		r, err := eng.Run(ctx, waiter)
		if err != nil {
			t.Fatal(err)
		}
		if w.Code != 200 {
			if r.Status != yella.StatusWaiting {
				t.Fatalf("a refused signal (%d %s) ended the wait: %s", w.Code, w.Body, r.Status)
			}
			return
		}
		var out httpapi.Signalled
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("answer: %v: %s", err, w.Body)
		}
		if out.RunID == "" {
			if byRun || !out.Kept || r.Status != yella.StatusWaiting {
				t.Fatalf("signal %s answered %s while %s", body, w.Body, r.Status)
			}
			var req httpapi.SignalRequest
			if json.Unmarshal(body, &req) != nil || req.Key == "approve:f" {
				t.Fatalf("signal %s kept while a run waits for it", body)
			}
			return
		}
		if out.RunID != waiter || out.Kept {
			t.Fatalf("signal %s answered %s; the waiter is %s", body, w.Body, waiter)
		}
		var req httpapi.RunSignalRequest
		var sent json.RawMessage
		if byRun {
			if len(bytes.TrimSpace(body)) > 0 {
				json.Unmarshal(body, &req)
			}
			sent = req.Payload
		} else {
			var kreq httpapi.SignalRequest
			json.Unmarshal(body, &kreq)
			sent = kreq.Payload
		}
		effs, err := st.Effects(ctx, waiter)
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Signal json.RawMessage `json:"signal"`
		}
		for _, e := range effs {
			if e.Key == "str:approval" && e.Status == store.EffectCompleted {
				json.Unmarshal(e.Output, &rec)
			}
		}
		if rec.Signal == nil || !sameValue(sent, rec.Signal) {
			t.Fatalf("signal %s: the wait holds %s", body, rec.Signal)
		}
		next(t)
	})
}

// sameValue reports whether two JSON texts hold the same value ("null"
// and absent are both null); unlike a byte comparison it ignores the
// escapes an encoder chose.
func sameValue(a, b json.RawMessage) bool {
	decode := func(raw json.RawMessage) (any, bool) {
		if len(bytes.TrimSpace(raw)) == 0 {
			return nil, true
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		return v, dec.Decode(&v) == nil
	}
	va, oka := decode(a)
	vb, okb := decode(b)
	return oka && okb && reflect.DeepEqual(va, vb)
}
