package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/memstore"
)

var testNow = time.Unix(1_700_000_000, 0)

// engine is an engine with one process per event, never started: Emit
// admits, and the runs stay queued for inspection.
func engine(t testing.TB, events ...string) *yella.Engine {
	t.Helper()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		err := eng.Register(yella.Process{Name: "on-" + strings.ReplaceAll(ev, ":", "-"), On: ev, Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
		if err != nil {
			t.Fatal(err)
		}
	}
	return eng
}

func runsOf(t *testing.T, eng *yella.Engine, event string) []yella.Run {
	t.Helper()
	page, err := eng.Runs(context.Background(), yella.RunQuery{Event: event, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return page.Runs
}

func newHandler(t *testing.T, em Emitter, opts Options) *Handler {
	t.Helper()
	if opts.Sources == nil {
		opts.Sources = map[string]Source{
			"stripe": {Verifier: Stripe{Secrets: []string{"whsec_test"}}, Event: "payment:received"},
			"github": {Verifier: GitHub{Secrets: []string{"gh"}}, Event: "github:{type}"},
			"slack":  {Verifier: Slack{Secrets: []string{"sl"}}, Event: "slack:command"},
		}
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return testNow }
	}
	h, err := New(em, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// post sends a request through a mux that mounts h as yella serve does.
func post(h http.Handler, method, path, body string, hdr http.Header) *httptest.ResponseRecorder {
	mux := http.NewServeMux()
	mux.Handle("/hooks/{name}", h)
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, v := range hdr {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	return w
}

func stripeReq(secret string, ts int64, body string) http.Header {
	return headers("Stripe-Signature", stripeHeader(secret, ts, body), "Content-Type", "application/json")
}

// A provider's retry of an event (same id; Stripe signs each attempt anew)
// admits nothing new and is answered 200 with the runs of the first.
func TestRetryAdmitsOnce(t *testing.T) {
	eng := engine(t, "payment:received")
	h := newHandler(t, eng, Options{})
	body := `{"id":"evt_42","type":"charge.succeeded","amount":1200}`
	first := post(h, "POST", "/hooks/stripe", body, stripeReq("whsec_test", testNow.Unix(), body))
	if first.Code != http.StatusAccepted {
		t.Fatalf("first delivery: %d %s", first.Code, first.Body)
	}
	var r1, r2 Response
	json.Unmarshal(first.Body.Bytes(), &r1)
	if len(r1.Runs) != 1 || r1.ID != "evt_42" || r1.Event != "payment:received" {
		t.Fatalf("first answer %+v", r1)
	}
	for i, ts := range []int64{testNow.Unix(), testNow.Unix() - 60} { // the same request, then a re-signed retry
		again := post(h, "POST", "/hooks/stripe", body, stripeReq("whsec_test", ts, body))
		if again.Code != http.StatusOK {
			t.Fatalf("repeat %d: %d %s", i, again.Code, again.Body)
		}
		json.Unmarshal(again.Body.Bytes(), &r2)
		if len(r2.Runs) != 0 || len(r2.Existing) != 1 || r2.Existing[0] != r1.Runs[0] {
			t.Fatalf("repeat %d answer %+v, want existing %v", i, r2, r1.Runs)
		}
	}
	runs := runsOf(t, eng, "payment:received")
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	if runs[0].IdempotencyKey != "stripe:evt_42" || string(runs[0].Payload) != body {
		t.Fatalf("run key %q payload %s", runs[0].IdempotencyKey, runs[0].Payload)
	}
	want := map[string]uint64{"stripe/admitted": 1, "stripe/duplicate": 2}
	checkCounts(t, h, want)
}

func checkCounts(t *testing.T, h *Handler, want map[string]uint64) {
	t.Helper()
	got := map[string]uint64{}
	for _, c := range h.Counts() {
		got[c.Source+"/"+c.Outcome] = c.N
	}
	if len(got) != len(want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("counts %v, want %v", got, want)
		}
	}
}

// Every refused request gets its status and outcome, admits nothing, and
// is counted.
func TestRefusals(t *testing.T) {
	eng := engine(t, "payment:received", "github:push", "slack:command")
	h := newHandler(t, eng, Options{MaxBody: 256})
	body := `{"id":"evt_1","type":"charge.succeeded"}`
	now := testNow.Unix()
	big := `{"id":"evt_big","pad":"` + strings.Repeat("x", 300) + `"}`
	for _, tc := range []struct {
		name, method, path, body string
		hdr                      http.Header
		status                   int
		outcome                  string
	}{
		{"tampered body", "POST", "/hooks/stripe", `{"id":"evt_1","type":"charge.refunded"}`, stripeReq("whsec_test", now, body), 401, OutcomeBadSignature},
		{"wrong secret", "POST", "/hooks/stripe", body, stripeReq("whsec_other", now, body), 401, OutcomeBadSignature},
		{"stale timestamp", "POST", "/hooks/stripe", body, stripeReq("whsec_test", now-301, body), 401, OutcomeStale},
		{"future timestamp", "POST", "/hooks/stripe", body, stripeReq("whsec_test", now+301, body), 401, OutcomeStale},
		{"missing signature", "POST", "/hooks/stripe", body, headers("Content-Type", "application/json"), 400, OutcomeMissingHeader},
		{"missing delivery id", "POST", "/hooks/github", body, headers("X-Hub-Signature-256", "sha256="+signHex("gh", body)), 400, OutcomeMissingHeader},
		{"malformed signature header", "POST", "/hooks/stripe", body, headers("Stripe-Signature", "nonsense"), 400, OutcomeMalformed},
		{"unknown source", "POST", "/hooks/paypal", body, stripeReq("whsec_test", now, body), 404, OutcomeUnknownSource},
		{"wrong method", "GET", "/hooks/stripe", "", nil, 405, OutcomeMethodNotAllowed},
		{"oversize body", "POST", "/hooks/stripe", big, stripeReq("whsec_test", now, big), 413, OutcomeTooLarge},
		{"no listener for the type", "POST", "/hooks/github", body, headers("X-Hub-Signature-256", "sha256="+signHex("gh", body), "X-GitHub-Delivery", "d1", "X-GitHub-Event", "star"), 422, OutcomeUnroutable},
		{"no type for the template", "POST", "/hooks/github", body, headers("X-Hub-Signature-256", "sha256="+signHex("gh", body), "X-GitHub-Delivery", "d1"), 400, OutcomeMalformed},
		// Its id is the emission's idempotency key, which no store keeps
		// over yella.MaxIdempotencyKeyBytes: the sender's error, not one
		// to retry.
		{"delivery id too long", "POST", "/hooks/github", body, headers("X-Hub-Signature-256", "sha256="+signHex("gh", body), "X-GitHub-Delivery", strings.Repeat("d", yella.MaxIdempotencyKeyBytes), "X-GitHub-Event", "push"), 400, OutcomeMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := count(h, tc.outcome)
			w := post(h, tc.method, tc.path, tc.body, tc.hdr)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			var e struct {
				Error struct{ Code, Message string }
			}
			if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error.Message == "" {
				t.Fatalf("error body %s", w.Body)
			}
			if count(h, tc.outcome) != before+1 {
				t.Fatalf("outcome %s not counted: %v", tc.outcome, h.Counts())
			}
			if tc.status == 405 && w.Header().Get("Allow") != "POST" {
				t.Fatalf("Allow %q", w.Header().Get("Allow"))
			}
		})
	}
	for _, ev := range []string{"payment:received", "github:push", "slack:command"} {
		if n := len(runsOf(t, eng, ev)); n != 0 {
			t.Fatalf("%d runs of %s admitted by refused requests", n, ev)
		}
	}
}

func count(h *Handler, outcome string) uint64 {
	var n uint64
	for _, c := range h.Counts() {
		if c.Outcome == outcome {
			n += c.N
		}
	}
	return n
}

// countingReader is an endless body that counts what was read of it.
type countingReader struct{ n int64 }

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	c.n += int64(len(p))
	return len(p), nil
}

// A body past the cap is refused having read at most one byte past it,
// whether or not it announced its length.
func TestBodyNeverReadPastCap(t *testing.T) {
	em := &fakeEmitter{}
	h := newHandler(t, em, Options{MaxBody: 1000})
	for _, announce := range []bool{false, true} {
		body := &countingReader{}
		r := httptest.NewRequest("POST", "/hooks/stripe", io.LimitReader(body, 1<<30))
		r.ContentLength = -1
		if announce {
			r.ContentLength = 1 << 30
		}
		r.Header.Set("Stripe-Signature", "t=1,v1=00")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("announce %v: status %d", announce, w.Code)
		}
		// io.ReadAll reads in chunks of at least 512 bytes, through the
		// LimitReader of MaxBody+1: never more than that in all.
		if body.n > 1001 {
			t.Fatalf("announce %v: read %d bytes of the body, cap 1000", announce, body.n)
		}
		if announce && body.n != 0 {
			t.Fatalf("an announced oversize body was read (%d bytes)", body.n)
		}
	}
	if em.calls() != 0 {
		t.Fatal("an oversize body was emitted")
	}
}

// fakeEmitter records emissions and answers what it is told.
type fakeEmitter struct {
	mu      sync.Mutex
	n       int
	em      yella.Emission
	err     error
	entered chan struct{} // if set, signalled on entry
	release chan struct{} // if set, waited for
}

func (f *fakeEmitter) Emit(ctx context.Context, event string, payload any, opts ...yella.EmitOption) (yella.Emission, error) {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.release != nil {
		<-f.release
	}
	return f.em, f.err
}

func (f *fakeEmitter) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// Failures of admission are answered 503 with Retry-After (the provider
// retries), except the sender's own mistakes.
func TestAdmissionFailures(t *testing.T) {
	body := `{"id":"evt_1","type":"x"}`
	for _, tc := range []struct {
		name    string
		em      yella.Emission
		err     error
		status  int
		outcome string
	}{
		{"dropped at a cap", yella.Emission{Runs: []string{"r1"}, Dropped: []string{"billing"}}, nil, 503, OutcomeAtCapacity},
		{"store unavailable", yella.Emission{}, &yella.Error{Code: yella.CodeUnavailable, Msg: "disk I/O error"}, 503, OutcomeEmitFailed},
		{"engine stopped", yella.Emission{}, &yella.Error{Code: yella.CodeStopped}, 503, OutcomeEmitFailed},
		{"payload too large", yella.Emission{}, &yella.Error{Code: yella.CodePayloadTooLarge}, 413, OutcomeTooLarge},
		{"invalid payload", yella.Emission{}, &yella.Error{Code: yella.CodeInvalidPayload}, 400, OutcomeMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			h := newHandler(t, &fakeEmitter{em: tc.em, err: tc.err}, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
			w := post(h, "POST", "/hooks/stripe", body, stripeReq("whsec_test", testNow.Unix(), body))
			if w.Code != tc.status || count(h, tc.outcome) != 1 {
				t.Fatalf("status %d (want %d), counts %v: %s", w.Code, tc.status, h.Counts(), w.Body)
			}
			if (tc.status == 503) != (w.Header().Get("Retry-After") != "") {
				t.Fatalf("Retry-After %q with status %d", w.Header().Get("Retry-After"), w.Code)
			}
			if strings.Contains(w.Body.String(), "disk I/O") {
				t.Fatalf("an internal error reached the sender: %s", w.Body)
			}
			if tc.status == 503 && (!strings.Contains(log.String(), "level=WARN") || tc.err != nil && !strings.Contains(log.String(), tc.err.Error())) {
				t.Fatalf("the operator is not told: %q", log.String())
			}
		})
	}
}

// Past MaxInFlight requests in progress, more are refused at once with
// 503 and Retry-After.
func TestInFlightBounded(t *testing.T) {
	em := &fakeEmitter{entered: make(chan struct{}), release: make(chan struct{})}
	h := newHandler(t, em, Options{MaxInFlight: 1})
	body := `{"id":"evt_1","type":"x"}`
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- post(h, "POST", "/hooks/stripe", body, stripeReq("whsec_test", testNow.Unix(), body)) }()
	<-em.entered // the first holds the only slot
	w := post(h, "POST", "/hooks/stripe", body, stripeReq("whsec_test", testNow.Unix(), body))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || count(h, OutcomeBusy) != 1 {
		t.Fatalf("second request: %d %v", w.Code, h.Counts())
	}
	close(em.release)
	if first := <-done; first.Code != http.StatusOK { // the fake admits nothing: a repeat
		t.Fatalf("first request: %d %s", first.Code, first.Body)
	}
	if em.calls() != 1 {
		t.Fatalf("%d emissions, want 1", em.calls())
	}
}

// Payloads: JSON as JSON, a form as an object of its fields, text as a
// string. Slack's handshake is answered and admits nothing.
func TestPayloadsAndHandshake(t *testing.T) {
	eng := engine(t, "slack:command")
	h := newHandler(t, eng, Options{})
	ts := strconv.FormatInt(testNow.Unix(), 10)
	slackHdr := func(body, ctype string) http.Header {
		return headers("X-Slack-Signature", "v0="+signHex("sl", "v0:", ts, ":", body), "X-Slack-Request-Timestamp", ts, "Content-Type", ctype)
	}
	form := "command=%2Fdeploy&text=api+v2&trigger_id=t1&channel_id=C1&channel_id=C2"
	if w := post(h, "POST", "/hooks/slack", form, slackHdr(form, "application/x-www-form-urlencoded")); w.Code != 202 {
		t.Fatalf("form: %d %s", w.Code, w.Body)
	}
	challenge := `{"type":"url_verification","challenge":"3eZbrw1aB"}`
	w := post(h, "POST", "/hooks/slack", challenge, slackHdr(challenge, "application/json"))
	if w.Code != 200 || strings.TrimSpace(w.Body.String()) != `{"challenge":"3eZbrw1aB"}` {
		t.Fatalf("challenge: %d %s", w.Code, w.Body)
	}
	text := "plain text, signed"
	if w := post(h, "POST", "/hooks/slack", text, slackHdr(text, "text/plain")); w.Code != 202 {
		t.Fatalf("text: %d %s", w.Code, w.Body)
	}
	got := map[string]bool{}
	for _, r := range runsOf(t, eng, "slack:command") {
		got[string(r.Payload)] = true
	}
	want := []string{`{"channel_id":["C1","C2"],"command":"/deploy","text":"api v2","trigger_id":"t1"}`, `"plain text, signed"`}
	if len(got) != len(want) {
		t.Fatalf("payloads %v, want %v", got, want)
	}
	for _, p := range want {
		if !got[p] {
			t.Fatalf("payloads %v, want %v", got, want)
		}
	}
	checkCounts(t, h, map[string]uint64{"slack/admitted": 2, "slack/handshake": 1})
}

// The collector exports every outcome of every source, from zero.
func TestCollector(t *testing.T) {
	h := newHandler(t, &fakeEmitter{}, Options{})
	post(h, "POST", "/hooks/nope", "", nil)
	post(h, "POST", "/hooks/stripe", "", nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(h.Collector())
	want := `
# HELP yella_webhook_requests_total Webhook requests by source and outcome (admitted, duplicate, bad-signature, stale, ...).
# TYPE yella_webhook_requests_total counter
yella_webhook_requests_total{outcome="unknown-source",source=""} 1
yella_webhook_requests_total{outcome="missing-header",source="stripe"} 1
yella_webhook_requests_total{outcome="admitted",source="stripe"} 0
`
	if n := testutil.CollectAndCount(h.Collector()); n != 1+3*len(outcomes) {
		t.Fatalf("%d series, want %d", n, 1+3*len(outcomes))
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			buf.WriteString(`yella_webhook_requests_total{outcome="` + labels["outcome"] + `",source="` + labels["source"] + `"} ` +
				strconv.FormatFloat(m.Counter.GetValue(), 'f', -1, 64) + "\n")
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(want), "\n")[2:] {
		if !strings.Contains(buf.String(), line+"\n") {
			t.Fatalf("missing %q in\n%s", line, buf.String())
		}
	}
}

func TestNewValidates(t *testing.T) {
	ok := Source{Verifier: GitHub{Secrets: []string{"s"}}, Event: "e"}
	for _, tc := range []struct {
		name string
		em   Emitter
		srcs map[string]Source
	}{
		{"nil emitter", nil, map[string]Source{"a": ok}},
		{"no sources", &fakeEmitter{}, nil},
		{"empty name", &fakeEmitter{}, map[string]Source{"": ok}},
		{"slash in name", &fakeEmitter{}, map[string]Source{"a/b": ok}},
		{"no verifier", &fakeEmitter{}, map[string]Source{"a": {Event: "e"}}},
		{"no event", &fakeEmitter{}, map[string]Source{"a": {Verifier: ok.Verifier}}},
		{"no secret", &fakeEmitter{}, map[string]Source{"a": {Verifier: Stripe{}, Event: "e"}}},
	} {
		if _, err := New(tc.em, Options{Sources: tc.srcs}); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	if _, err := New(&fakeEmitter{}, Options{Sources: map[string]Source{"a": ok}}); err != nil {
		t.Fatal(err)
	}
}
