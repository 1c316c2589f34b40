package httpx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/yellatest"
)

// fakeLimiter records the holds it is asked for.
type fakeLimiter struct {
	mu    sync.Mutex
	holds []hold
}

type hold struct {
	key   string
	until time.Time
}

func (l *fakeLimiter) HoldUntil(key string, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holds = append(l.holds, hold{key, until})
}

func (l *fakeLimiter) all() []hold {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]hold(nil), l.holds...)
}

// misbehaving is a downstream that misbehaves on purpose, by path:
//
//	/status/N          answers N, with ?retry-after=V as Retry-After and
//	                   ?body=B as the body
//	/size/N            answers 200 with N bytes
//	/hang              never answers (until the client gives up)
//	/slowbody          answers 200 and part of the body, then stalls
//	/reset             closes the connection without an answer
//	/cut               sends the headers and half the promised body, then
//	                   closes the connection
//	/echo              answers 200 with the request's method, headers it
//	                   is asked for (?h=Name) and body
type misbehaving struct {
	mu    sync.Mutex
	calls map[string]int
	keys  []string // Idempotency-Key of every call
}

func newMisbehaving(t *testing.T) (*misbehaving, *httptest.Server) {
	m := &misbehaving{calls: map[string]int{}}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return m, srv
}

func (m *misbehaving) count(path string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[path]
}

func (m *misbehaving) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.calls[r.URL.Path]++
	m.keys = append(m.keys, r.Header.Get("Idempotency-Key"))
	m.mu.Unlock()
	q := r.URL.Query()
	switch {
	case strings.HasPrefix(r.URL.Path, "/status/"):
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		if v := q.Get("retry-after"); v != "" {
			w.Header().Set("Retry-After", v)
		}
		w.Header().Set("X-Request-Id", "req-1")
		w.WriteHeader(n)
		io.WriteString(w, q.Get("body"))
	case strings.HasPrefix(r.URL.Path, "/size/"):
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/size/"))
		w.Write([]byte(strings.Repeat("x", n)))
	case r.URL.Path == "/hang":
		<-r.Context().Done()
	case r.URL.Path == "/slowbody":
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case r.URL.Path == "/reset":
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.(*net.TCPConn).SetLinger(0) // RST, not FIN
			conn.Close()
		}
	case r.URL.Path == "/cut":
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err == nil {
			buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + strings.Repeat("y", 50))
			buf.Flush()
			conn.Close()
		}
	case r.URL.Path == "/echo":
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s|", r.Method)
		for _, h := range q["h"] {
			fmt.Fprintf(w, "%s=%s|", h, r.Header.Get(h))
		}
		w.Write(b)
	default:
		http.NotFound(w, r)
	}
}

// The classification of every status class, Retry-After form, body bound
// and broken connection, with the Limiter's holds.
func TestCallClassifies(t *testing.T) {
	_, srv := newMisbehaving(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	date := now.Add(90 * time.Second).Format(http.TimeFormat)
	past := now.Add(-time.Hour).Format(http.TimeFormat)
	host := strings.TrimPrefix(srv.URL, "http://")
	type want struct {
		ok         bool
		status     int
		retryable  bool
		retryAfter time.Duration
		hold       time.Duration // -1: no hold
		msg        string        // in the error
	}
	for _, tc := range []struct {
		path string
		opts []Option
		want want
	}{
		{"/status/200?body=fine", nil, want{ok: true, status: 200, hold: -1}},
		{"/status/201", nil, want{ok: true, status: 201, hold: -1}},
		{"/status/204", nil, want{ok: true, status: 204, hold: -1}},
		{"/status/408", nil, want{status: 408, retryable: true, hold: -1}},
		{"/status/425", nil, want{status: 425, retryable: true, hold: -1}},
		{"/status/429", nil, want{status: 429, retryable: true, hold: DefaultHold}},
		{"/status/429?retry-after=7", nil, want{status: 429, retryable: true, retryAfter: 7 * time.Second, hold: 7 * time.Second, msg: "retry after 7s"}},
		{"/status/429?retry-after=" + strings.ReplaceAll(date, " ", "%20"), nil, want{status: 429, retryable: true, retryAfter: 90 * time.Second, hold: 90 * time.Second}},
		{"/status/429?retry-after=" + strings.ReplaceAll(past, " ", "%20"), nil, want{status: 429, retryable: true, hold: 0}},
		{"/status/429?retry-after=soon", nil, want{status: 429, retryable: true, hold: DefaultHold}},
		{"/status/500?body=oops", nil, want{status: 500, retryable: true, hold: -1, msg: "oops"}},
		{"/status/502", nil, want{status: 502, retryable: true, hold: -1}},
		{"/status/503", nil, want{status: 503, retryable: true, hold: -1}},
		{"/status/503?retry-after=30", nil, want{status: 503, retryable: true, retryAfter: 30 * time.Second, hold: 30 * time.Second}},
		{"/status/504", nil, want{status: 504, retryable: true, hold: -1}},
		{"/status/500?retry-after=5", nil, want{status: 500, retryable: true, retryAfter: 5 * time.Second, hold: -1}},
		{"/status/400?body=missing%20field%20amount", nil, want{status: 400, hold: -1, msg: "400 Bad Request: missing field amount"}},
		{"/status/401", nil, want{status: 401, hold: -1}},
		{"/status/404", nil, want{status: 404, hold: -1}},
		{"/status/409", nil, want{status: 409, hold: -1}},
		{"/status/422?retry-after=5", nil, want{status: 422, hold: -1}}, // permanent: no wait to honour
		{"/status/501", nil, want{status: 501, hold: -1}},
		{"/status/302", nil, want{status: 302, hold: -1}}, // no Location: not followed
		{"/status/429?retry-after=3", []Option{Limiter(nil, "")}, want{status: 429, retryable: true, retryAfter: 3 * time.Second, hold: -1}},
		{"/status/429?retry-after=3", []Option{Limiter(nil, "payments")}, want{status: 429, retryable: true, retryAfter: 3 * time.Second, hold: -1}},
		{"/size/1048576", nil, want{ok: true, status: 200, hold: -1}},
		{"/size/1048577", nil, want{status: 200, hold: -1, msg: "response body exceeds 1048576 bytes (httpx.MaxBody)"}},
		{"/size/11", []Option{MaxBody(10)}, want{status: 200, hold: -1, msg: "exceeds 10 bytes"}},
		{"/size/10", []Option{MaxBody(10)}, want{ok: true, status: 200, hold: -1}},
		{"/hang", []Option{Timeout(20 * time.Millisecond)}, want{retryable: true, hold: -1, msg: "no complete response within 20ms (httpx.Timeout)"}},
		// The headers must arrive within the timeout and the body must not:
		// the timeout is long enough for headers on a loaded machine.
		{"/slowbody", []Option{Timeout(time.Second)}, want{status: 200, retryable: true, hold: -1, msg: "reading the response body: no complete response within 1s (httpx.Timeout)"}},
		{"/reset", nil, want{retryable: true, hold: -1}},
		{"/cut", nil, want{status: 200, retryable: true, hold: -1, msg: "reading the response body"}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			lim := &fakeLimiter{}
			opts := append([]Option{Client(srv.Client()), Limiter(lim, ""), KeepHeaders("X-Request-Id")}, tc.opts...)
			o := newConfig(opts)
			o.now = func() time.Time { return now }
			r, err := o.call(context.Background(), Request{URL: srv.URL + tc.path})
			w := tc.want
			if w.ok {
				if err != nil {
					t.Fatalf("error %v, want success", err)
				}
				if r.Status != w.status {
					t.Errorf("status %d, want %d", r.Status, w.status)
				}
			} else {
				var e *connector.Error
				if !errors.As(err, &e) {
					t.Fatalf("error %v (%T), want a *connector.Error", err, err)
				}
				if e.Status != w.status || e.Retryable != w.retryable || e.RetryAfter != w.retryAfter {
					t.Errorf("status %d retryable %v retry after %s, want %d %v %s (%v)", e.Status, e.Retryable, e.RetryAfter, w.status, w.retryable, w.retryAfter, err)
				}
				if e.RetryDelay() != w.retryAfter {
					t.Errorf("RetryDelay %s, want %s", e.RetryDelay(), w.retryAfter)
				}
				if !strings.Contains(err.Error(), w.msg) {
					t.Errorf("error %q does not contain %q", err, w.msg)
				}
				if !strings.HasPrefix(err.Error(), "GET "+srv.URL+strings.SplitN(tc.path, "?", 2)[0]) {
					t.Errorf("error %q does not start with the call", err)
				}
				if strings.Contains(err.Error(), "?") {
					t.Errorf("error %q quotes the URL's query", err)
				}
			}
			holds := lim.all()
			switch {
			case w.hold < 0 && len(holds) != 0:
				t.Errorf("holds %v, want none", holds)
			case w.hold >= 0 && len(holds) != 1:
				t.Errorf("holds %v, want one of %s", holds, w.hold)
			case w.hold >= 0 && (holds[0].key != host || !holds[0].until.Equal(now.Add(w.hold))):
				t.Errorf("hold %v, want %s until now+%s", holds[0], host, w.hold)
			}
		})
	}
}

func TestLimiterKey(t *testing.T) {
	_, srv := newMisbehaving(t)
	lim := &fakeLimiter{}
	_, err := Call(context.Background(), Request{URL: srv.URL + "/status/429?retry-after=2"}, Client(srv.Client()), Limiter(lim, "payments"))
	if !connector.Retryable(err) {
		t.Fatalf("error %v, want retryable", err)
	}
	if h := lim.all(); len(h) != 1 || h[0].key != "payments" {
		t.Errorf("holds %v, want one under payments", h)
	}
}

func TestErrorBodyIsBoundedAndOneLine(t *testing.T) {
	_, srv := newMisbehaving(t)
	long := strings.Repeat("é\n", 600) // 1800 bytes, multi-byte runes, newlines
	_, err := Call(context.Background(), Request{URL: srv.URL + "/status/400?body=" + strings.ReplaceAll(long, "\n", "%0A")}, Client(srv.Client()))
	var e *connector.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v, want a *connector.Error", err)
	}
	if len(e.Body) > errorBodyLen+len("…") || !utf8.ValidString(e.Body) || strings.Contains(e.Body, "\n") || !strings.HasSuffix(e.Body, "…") {
		t.Errorf("body %q: want at most %d bytes of valid UTF-8 on one line, marked as cut", e.Body, errorBodyLen)
	}
}

func TestRequestShape(t *testing.T) {
	_, srv := newMisbehaving(t)
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"get", Request{URL: srv.URL + "/echo?h=Content-Type"}, "GET|Content-Type=|"},
		{"post body", Request{URL: srv.URL + "/echo?h=X-A", Header: http.Header{"X-A": {"1"}}, Body: []byte("raw")}, "POST|X-A=1|raw"},
		{"json", Request{URL: srv.URL + "/echo?h=Content-Type", JSON: map[string]int{"n": 1}}, `POST|Content-Type=application/json|{"n":1}`},
		{"put", Request{Method: "PUT", URL: srv.URL + "/echo", Body: []byte("x")}, "PUT|x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Call(context.Background(), tc.req, Client(srv.Client()))
			if err != nil || string(r.Body) != tc.want {
				t.Errorf("got %q, %v; want %q", r.Body, err, tc.want)
			}
		})
	}
	_, err := Call(context.Background(), Request{URL: srv.URL, JSON: func() {}}, Client(srv.Client()))
	if err == nil || connector.Retryable(err) || !strings.Contains(err.Error(), "does not encode as JSON") {
		t.Errorf("unencodable JSON: %v, want a permanent error", err)
	}
	_, err = Call(context.Background(), Request{URL: "::not a url"})
	if err == nil || connector.Retryable(err) {
		t.Errorf("bad URL: %v, want a permanent error", err)
	}
}

// run runs one process on a yellatest kit until idle and returns the run.
func run(t *testing.T, retry *yella.Retry, fn func(c *yella.Ctx) yella.Result) (*yellatest.Kit, yella.Run) {
	t.Helper()
	k := yellatest.Start(t, yella.Config{Retry: retry}, yella.Process{Name: "call", On: "go", Run: fn})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	em, err := k.Engine.Emit(ctx, "go", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.RunUntilIdle(ctx); err != nil {
		t.Fatal(err)
	}
	return k, k.Run(t, em.Runs[0])
}

// The idempotency key is the effect's, the same on the call's retry, in the
// header named.
func TestIdempotencyKeyHeader(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		opts         []Option
		own          string // the request's own key, kept
	}{
		{"default", "Idempotency-Key", nil, ""},
		{"custom", "X-Dedup", []Option{IdempotencyHeader("X-Dedup")}, ""},
		{"none", "", []Option{IdempotencyHeader("")}, ""},
		{"own key kept", "Idempotency-Key", nil, "order-42"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var seen []http.Header
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, r.Header.Clone())
				n := len(seen)
				mu.Unlock()
				if n == 1 {
					w.WriteHeader(http.StatusBadGateway)
				}
			}))
			defer srv.Close()
			_, r := run(t, &yella.Retry{Max: 1}, func(c *yella.Ctx) yella.Result {
				req := Request{URL: srv.URL, Body: []byte("{}")}
				if tc.own != "" {
					req.Header = http.Header{"Idempotency-Key": {tc.own}}
				}
				_, err := Do(c, "post", req, append(tc.opts, Client(srv.Client()))...)
				return connector.Outcome(c, err)
			})
			if r.Status != yella.StatusCompleted || len(seen) != 2 {
				t.Fatalf("status %s after %d calls, want completed after 2", r.Status, len(seen))
			}
			k1, k2 := seen[0].Get(tc.header), seen[1].Get(tc.header)
			if tc.header == "" {
				for _, h := range seen {
					if h.Get("Idempotency-Key") != "" {
						t.Errorf("a key was sent: %v", h)
					}
				}
				return
			}
			if tc.own != "" {
				if k1 != tc.own || k2 != tc.own {
					t.Errorf("keys %q, %q: want the request's own %q", k1, k2, tc.own)
				}
				return
			}
			if k1 == "" || k1 != k2 || !strings.Contains(k1, r.ID) {
				t.Errorf("keys %q, %q: want the same key, naming run %s", k1, k2, r.ID)
			}
		})
	}
}

// A completed call is replayed, not sent again, when a later step fails and
// the run is retried.
func TestCompletedCallNotResent(t *testing.T) {
	m, srv := newMisbehaving(t)
	var bodies []string
	_, r := run(t, &yella.Retry{Max: 2}, func(c *yella.Ctx) yella.Result {
		resp, err := Do(c, "post", Request{URL: srv.URL + "/echo", Body: []byte("hello")}, Client(srv.Client()))
		if err != nil {
			return connector.Outcome(c, err)
		}
		bodies = append(bodies, string(resp.Body))
		if c.Attempt() < 3 {
			return c.Error(errors.New("a later step failed"))
		}
		return c.OK(resp.Status)
	})
	if r.Status != yella.StatusCompleted || r.Attempts != 3 {
		t.Fatalf("run %s after %d attempts", r.Status, r.Attempts)
	}
	if n := m.count("/echo"); n != 1 {
		t.Errorf("%d calls, want 1", n)
	}
	if strings.Join(bodies, ",") != "POST|hello,POST|hello,POST|hello" {
		t.Errorf("responses seen %q, want the stored one three times", bodies)
	}
}

// A 429 with Retry-After delays the run's retry past the policy's 1 ms
// backoff; a permanent status fails the run without a retry.
func TestOutcomeOfRetryAfterAndPermanent(t *testing.T) {
	m, srv := newMisbehaving(t)
	clock := yellatest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var at []time.Time // when each attempt ran, on the engine's fake clock
	k := yellatest.Start(t, yella.Config{Clock: clock, Retry: &yella.Retry{Max: 3, Backoff: yella.Fixed(time.Millisecond)}},
		yella.Process{Name: "call", On: "go", Run: func(c *yella.Ctx) yella.Result {
			at = append(at, clock.Now())
			path := "/status/429?retry-after=120"
			if c.Attempt() > 1 {
				path = "/status/200"
			}
			_, err := Do(c, yella.MakeKey("call", strconv.Itoa(c.Attempt())), Request{URL: srv.URL + path}, Client(srv.Client()))
			return connector.Outcome(c, err)
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	em, err := k.Engine.Emit(ctx, "go", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.RunUntilIdle(ctx); err != nil {
		t.Fatal(err)
	}
	r := k.Run(t, em.Runs[0])
	if r.Status != yella.StatusCompleted || r.Attempts != 2 || len(at) != 2 {
		t.Fatalf("run %s after %d attempts, want completed after 2", r.Status, r.Attempts)
	}
	if d := at[1].Sub(at[0]); d < 120*time.Second {
		t.Errorf("retried %s after the 429, want at least its Retry-After of 2m0s", d)
	}

	_, r = run(t, &yella.Retry{Max: 3}, func(c *yella.Ctx) yella.Result {
		_, err := Do(c, "bad", Request{URL: srv.URL + "/status/422?body=amount%20must%20be%20positive"}, Client(srv.Client()))
		return connector.Outcome(c, err)
	})
	if r.Status != yella.StatusErrored || r.Attempts != 1 || !strings.Contains(r.Error, "amount must be positive") {
		t.Errorf("run %s after %d attempts (%q), want errored after 1 naming the body", r.Status, r.Attempts, r.Error)
	}
	if n := m.count("/status/422"); n != 1 {
		t.Errorf("%d calls of a permanent failure, want 1", n)
	}
}

type thing struct {
	ID   string `json:"id"`
	Size int    `json:"size"`
}

func TestDoJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			io.WriteString(w, "<html>not json</html>")
			return
		}
		io.WriteString(w, `{"id":"t1","size":3,"ignored":"x"}`)
	}))
	defer srv.Close()
	var got thing
	_, r := run(t, &yella.Retry{Max: 2}, func(c *yella.Ctx) yella.Result {
		v, err := DoJSON[thing](c, "get", Request{URL: srv.URL + "/ok"}, Client(srv.Client()))
		got = v
		return connector.Outcome(c, err)
	})
	if r.Status != yella.StatusCompleted || got != (thing{"t1", 3}) {
		t.Errorf("run %s, decoded %+v", r.Status, got)
	}
	_, r = run(t, &yella.Retry{Max: 2}, func(c *yella.Ctx) yella.Result {
		_, err := DoJSON[thing](c, "get", Request{URL: srv.URL + "/bad"}, Client(srv.Client()))
		return connector.Outcome(c, err)
	})
	if r.Status != yella.StatusErrored || r.Attempts != 1 || !strings.Contains(r.Error, "not json") {
		t.Errorf("run %s after %d attempts (%q), want errored at once quoting the body", r.Status, r.Attempts, r.Error)
	}
}

// The stored result is compact: kept headers only, and no body with
// DropBody.
func TestStoredResult(t *testing.T) {
	_, srv := newMisbehaving(t)
	k, r := run(t, nil, func(c *yella.Ctx) yella.Result {
		resp, err := Do(c, "a", Request{URL: srv.URL + "/status/200?body=abc"}, Client(srv.Client()), KeepHeaders("x-request-id", "X-Absent"))
		if err != nil {
			return c.Fail(err)
		}
		_, err = Do(c, "b", Request{URL: srv.URL + "/size/1000"}, Client(srv.Client()), DropBody())
		if err != nil {
			return c.Fail(err)
		}
		return c.OK(resp)
	})
	if string(r.Output) != `{"status":200,"header":{"X-Request-Id":"req-1"},"body":"YWJj"}` {
		t.Errorf("output %s", r.Output)
	}
	eff := k.ExpectEffect(t, r.ID, yella.EffectStatusCompleted, "b")
	if string(eff.Output) != `{"status":200}` {
		t.Errorf("stored %s, want the status only", eff.Output)
	}
}

// A reader that fails after some bytes, for the fuzz target.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF && f.err != nil {
		return n, f.err
	}
	return n, err
}

// FuzzFinish feeds arbitrary responses (status, Retry-After, body, a
// failed read) to the classification: it never panics, succeeds exactly on
// a 2xx within the bound, and its errors are bounded and consistent.
func FuzzFinish(f *testing.F) {
	f.Add(200, "", []byte("ok"), false, int64(10))
	f.Add(429, "120", []byte("slow down"), false, int64(10))
	f.Add(503, "Wed, 21 Oct 2015 07:28:00 GMT", []byte{0xff, 0xfe}, false, int64(1))
	f.Add(200, "", []byte("0123456789a"), false, int64(10))
	f.Add(500, "-1", []byte("x"), true, int64(0))
	f.Add(99, "99999999999999999999", []byte(""), false, int64(5))
	f.Fuzz(func(t *testing.T, status int, retryAfter string, body []byte, failRead bool, maxBody int64) {
		if maxBody < 0 || maxBody > 1<<16 {
			return
		}
		lim := &fakeLimiter{}
		o := newConfig([]Option{MaxBody(maxBody), Limiter(lim, "k")})
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		o.now = func() time.Time { return now }
		var rd io.Reader = strings.NewReader(string(body))
		if failRead {
			rd = &failingReader{r: rd, err: errors.New("connection reset")}
		}
		resp := &http.Response{StatusCode: status, Header: http.Header{"Retry-After": {retryAfter}}, Body: io.NopCloser(rd)}
		r, err := o.finish("GET x", "h", resp, func(err error) error { return err })
		wantOK := !failRead && status >= 200 && status < 300 && int64(len(body)) <= maxBody
		if (err == nil) != wantOK {
			t.Fatalf("status %d, body %d bytes of %d, failed read %v: error %v", status, len(body), maxBody, failRead, err)
		}
		if err == nil {
			if r.Status != status || string(r.Body) != string(body) {
				t.Fatalf("response %+v", r)
			}
			return
		}
		var e *connector.Error
		if !errors.As(err, &e) {
			t.Fatalf("error %T", err)
		}
		if len(e.Body) > errorBodyLen+len("…") || !utf8.ValidString(e.Body) {
			t.Fatalf("error body %q", e.Body)
		}
		if e.RetryAfter < 0 || (!e.Retryable && e.RetryAfter != 0) {
			t.Fatalf("retry after %s, retryable %v", e.RetryAfter, e.Retryable)
		}
		if !failRead && e.Retryable != RetryableStatus(status) {
			t.Fatalf("status %d: retryable %v", status, e.Retryable)
		}
		if h := lim.all(); len(h) > 1 || (len(h) == 1 && (h[0].until.Before(now) || (status != 429 && status != 503))) {
			t.Fatalf("status %d: holds %v", status, h)
		}
	})
}
