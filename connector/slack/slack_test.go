package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/connector/httpx"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/yellatest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		body      string
		isNil     bool
		retryable bool
		code      string
	}{
		{"posted", 200, `{"ok":true,"channel":"C1","ts":"1.2"}`, true, false, ""},
		{"webhook ok", 200, "ok", true, false, ""},
		{"ratelimited", 429, `{"ok":false,"error":"ratelimited"}`, false, true, "ratelimited"},
		{"ratelimited in a 200", 200, `{"ok":false,"error":"ratelimited"}`, false, true, "ratelimited"},
		{"internal_error", 200, `{"ok":false,"error":"internal_error"}`, false, true, "internal_error"},
		{"fatal_error", 200, `{"ok":false,"error":"fatal_error"}`, false, true, "fatal_error"},
		{"service_unavailable", 200, `{"ok":false,"error":"service_unavailable"}`, false, true, "service_unavailable"},
		{"request_timeout", 200, `{"ok":false,"error":"request_timeout"}`, false, true, "request_timeout"},
		{"channel_not_found", 200, `{"ok":false,"error":"channel_not_found"}`, false, false, "channel_not_found"},
		{"invalid_auth", 200, `{"ok":false,"error":"invalid_auth"}`, false, false, "invalid_auth"},
		{"not_authed", 200, `{"ok":false,"error":"not_authed"}`, false, false, "not_authed"},
		{"not_in_channel", 200, `{"ok":false,"error":"not_in_channel","warning":"x"}`, false, false, "not_in_channel"},
		{"no error named", 200, `{"ok":false}`, false, false, "unknown_error"},
		{"ok:false on a 503", 503, `{"ok":false,"error":"something_new"}`, false, true, "something_new"},
		{"ok:true on a 500", 500, `{"ok":true}`, false, true, ""},
		{"webhook invalid_payload", 400, "invalid_payload", false, false, "invalid_payload"},
		{"webhook no_service", 404, "no_service", false, false, "no_service"},
		{"webhook archived", 410, "channel_is_archived", false, false, "channel_is_archived"},
		{"webhook rollup_error", 500, "rollup_error", false, true, "rollup_error"},
		{"webhook 429", 429, "", false, true, ""},
		{"proxy page", 502, "<html>Bad Gateway</html>", false, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Classify(&httpx.Response{Status: tc.status, Body: []byte(tc.body)}, http.Header{})
			if tc.isNil {
				if e != nil {
					t.Fatalf("got %+v, want nil", e)
				}
				return
			}
			if e == nil || e.Retryable != tc.retryable || e.Code != tc.code {
				t.Errorf("got %+v, want retryable %v code %q", e, tc.retryable, tc.code)
			}
		})
	}
}

// FuzzClassify: any answer is classified without panicking; ok:false is
// never a success, and a success is a 2xx.
func FuzzClassify(f *testing.F) {
	f.Add(200, []byte(`{"ok":false,"error":"ratelimited"}`))
	f.Add(404, []byte("no_service"))
	f.Add(200, []byte(`{"ok":true}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		e := Classify(&httpx.Response{Status: status, Body: body}, http.Header{})
		var ans struct {
			OK *bool `json:"ok"`
		}
		if e == nil && (status < 200 || status > 299 || json.Unmarshal(body, &ans) == nil && ans.OK != nil && !*ans.OK) {
			t.Fatalf("status %d body %q: success", status, body)
		}
		if e != nil && len(e.Code) > 64 && !strings.HasPrefix(string(body), "{") {
			t.Fatalf("code %q", e.Code)
		}
	})
}

// fakeSlack answers chat.postMessage and an incoming webhook as Slack
// documents them, after any failures injected with failNext.
type fakeSlack struct {
	mu     sync.Mutex
	posts  []map[string]any
	calls  int
	inject []func(w http.ResponseWriter)
}

func (f *fakeSlack) failNext(status int, body string, header ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inject = append(f.inject, func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	})
}

func (f *fakeSlack) counts() (calls, posts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, len(f.posts)
}

func (f *fakeSlack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if len(f.inject) > 0 {
		inj := f.inject[0]
		f.inject = f.inject[1:]
		inj(w)
		return
	}
	var msg map[string]any
	decodeErr := json.NewDecoder(r.Body).Decode(&msg)
	switch {
	case r.URL.Path == "/services/T1/B1/s3cr3t":
		if decodeErr != nil || msg["text"] == nil && msg["blocks"] == nil {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, "invalid_payload")
			return
		}
		f.posts = append(f.posts, msg)
		io.WriteString(w, "ok")
	case strings.HasPrefix(r.URL.Path, "/services/"):
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "no_service")
	case r.URL.Path == "/api/chat.postMessage":
		answer := func(v map[string]any) { json.NewEncoder(w).Encode(v) }
		w.Header().Set("Content-Type", "application/json")
		switch auth := r.Header.Get("Authorization"); {
		case auth == "":
			answer(map[string]any{"ok": false, "error": "not_authed"})
		case auth != "Bearer xoxb-good":
			answer(map[string]any{"ok": false, "error": "invalid_auth"})
		case decodeErr != nil:
			answer(map[string]any{"ok": false, "error": "invalid_json"})
		case msg["channel"] != "C1":
			answer(map[string]any{"ok": false, "error": "channel_not_found"})
		default:
			f.posts = append(f.posts, msg)
			answer(map[string]any{"ok": true, "channel": "C1", "ts": fmt.Sprintf("1700000000.%06d", len(f.posts)), "message": msg})
		}
	default:
		http.NotFound(w, r)
	}
}

type fakeLimiter struct {
	mu    sync.Mutex
	holds []string
}

func (l *fakeLimiter) HoldUntil(key string, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holds = append(l.holds, key)
}

// post runs one process that posts through fn and returns the run and the
// fake clock's times of its attempts.
func post(t *testing.T, fn func(c *yella.Ctx) yella.Result) (yella.Run, []time.Time) {
	t.Helper()
	clock := yellatest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var at []time.Time
	k := yellatest.Start(t, yella.Config{Clock: clock, Retry: &yella.Retry{Max: 3, Backoff: yella.Fixed(time.Millisecond)}},
		yella.Process{Name: "notify", On: "alert", Run: func(c *yella.Ctx) yella.Result {
			at = append(at, clock.Now())
			return fn(c)
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	em, err := k.Engine.Emit(ctx, "alert", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.RunUntilIdle(ctx); err != nil {
		t.Fatal(err)
	}
	return k.Run(t, em.Runs[0]), at
}

func TestPostMessage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		token   string
		channel string
		inject  func(f *fakeSlack)
		status  yella.Status
		calls   int
		inError string
		holds   int
		wait    time.Duration // at least, between the first and the last attempt
	}{
		{name: "posted", token: "xoxb-good", channel: "C1", status: yella.StatusCompleted, calls: 1},
		{name: "channel_not_found", token: "xoxb-good", channel: "C404", status: yella.StatusErrored, calls: 1, inError: "(channel_not_found)"},
		{name: "invalid_auth", token: "xoxb-bad", channel: "C1", status: yella.StatusErrored, calls: 1, inError: "(invalid_auth)"},
		{name: "not_authed", channel: "C1", status: yella.StatusErrored, calls: 1, inError: "(not_authed)"},
		{name: "internal_error then posted", token: "xoxb-good", channel: "C1", inject: func(f *fakeSlack) {
			f.failNext(200, `{"ok":false,"error":"internal_error"}`)
			f.failNext(200, `{"ok":false,"error":"service_unavailable"}`)
		}, status: yella.StatusCompleted, calls: 3},
		{name: "ratelimited with Retry-After", token: "xoxb-good", channel: "C1", inject: func(f *fakeSlack) {
			f.failNext(429, `{"ok":false,"error":"ratelimited"}`, "Retry-After", "30")
		}, status: yella.StatusCompleted, calls: 2, holds: 1, wait: 30 * time.Second},
		{name: "down for good", token: "xoxb-good", channel: "C1", inject: func(f *fakeSlack) {
			for range 4 {
				f.failNext(200, `{"ok":false,"error":"fatal_error"}`)
			}
		}, status: yella.StatusDead, calls: 4, inError: "(fatal_error)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSlack{}
			srv := httptest.NewServer(f)
			defer srv.Close()
			if tc.inject != nil {
				tc.inject(f)
			}
			lim := &fakeLimiter{}
			cl := &Client{Token: tc.token, BaseURL: srv.URL + "/api", HTTP: srv.Client(), Limiter: lim}
			var got Posted
			r, at := post(t, func(c *yella.Ctx) yella.Result {
				if tc.token == "" {
					cl.Token = ""
				}
				p, err := PostMessage(c, cl, "post", Message{Channel: tc.channel, Text: "disk *full*"})
				if err != nil {
					return connector.Outcome(c, err)
				}
				got = p
				return c.OK(p)
			})
			calls, posts := f.counts()
			if r.Status != tc.status || calls != tc.calls {
				t.Fatalf("run %s after %d calls (%s), want %s after %d", r.Status, calls, r.Error, tc.status, tc.calls)
			}
			if !strings.Contains(r.Error, tc.inError) {
				t.Errorf("error %q does not contain %q", r.Error, tc.inError)
			}
			if tc.status == yella.StatusCompleted && (posts != 1 || got.Channel != "C1" || got.TS != "1700000000.000001") {
				t.Errorf("%d posts, posted %+v", posts, got)
			}
			if len(lim.holds) != tc.holds || tc.holds > 0 && lim.holds[0] != "slack" {
				t.Errorf("holds %q, want %d under slack", lim.holds, tc.holds)
			}
			if d := at[len(at)-1].Sub(at[0]); d < tc.wait {
				t.Errorf("last attempt %s after the first, want at least %s", d, tc.wait)
			}
		})
	}
}

func TestWebhook(t *testing.T) {
	for _, tc := range []struct {
		name    string
		path    string
		msg     Message
		inject  func(f *fakeSlack)
		status  yella.Status
		calls   int
		inError string
	}{
		{name: "posted", path: "/services/T1/B1/s3cr3t", msg: Message{Text: "deployed"}, status: yella.StatusCompleted, calls: 1},
		{name: "invalid_payload", path: "/services/T1/B1/s3cr3t", msg: Message{}, status: yella.StatusErrored, calls: 1, inError: "slack webhook: 400 Bad Request (invalid_payload)"},
		{name: "no_service", path: "/services/T1/B1/revoked", msg: Message{Text: "x"}, status: yella.StatusErrored, calls: 1, inError: "slack webhook: 404 Not Found (no_service)"},
		{name: "rollup_error then posted", path: "/services/T1/B1/s3cr3t", msg: Message{Text: "x"}, inject: func(f *fakeSlack) {
			f.failNext(500, "rollup_error")
		}, status: yella.StatusCompleted, calls: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSlack{}
			srv := httptest.NewServer(f)
			defer srv.Close()
			if tc.inject != nil {
				tc.inject(f)
			}
			r, _ := post(t, func(c *yella.Ctx) yella.Result {
				return connector.Outcome(c, Webhook(c, &Client{HTTP: srv.Client()}, "hook", srv.URL+tc.path, tc.msg))
			})
			calls, _ := f.counts()
			if r.Status != tc.status || calls != tc.calls {
				t.Fatalf("run %s after %d calls (%s), want %s after %d", r.Status, calls, r.Error, tc.status, tc.calls)
			}
			if !strings.Contains(r.Error, tc.inError) {
				t.Errorf("error %q does not contain %q", r.Error, tc.inError)
			}
			if strings.Contains(r.Error, "s3cr3t") || strings.Contains(r.Error, "revoked") || strings.Contains(r.Error, "127.0.0.1") {
				t.Errorf("error %q shows the webhook's URL", r.Error)
			}
		})
	}
}

// detached sends requests without their context, so a call keeps waiting
// after its engine stopped hard: the effect stays started, as after a crash.
type detached struct{ rt http.RoundTripper }

func (d detached) RoundTrip(r *http.Request) (*http.Response, error) {
	return d.rt.RoundTrip(r.WithContext(context.Background()))
}

// A post whose outcome is unknown (its engine stopped hard while Slack held
// the request) fences the run by default; with Resend it is posted again.
func TestUnknownOutcome(t *testing.T) {
	for _, tc := range []struct {
		resend bool
		status yella.Status
		calls  int
	}{
		{false, yella.StatusFenced, 1},
		{true, yella.StatusCompleted, 2},
	} {
		t.Run(fmt.Sprintf("resend=%v", tc.resend), func(t *testing.T) {
			var mu sync.Mutex
			calls := 0
			arrived, release := make(chan struct{}), make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				calls++
				n := calls
				mu.Unlock()
				if n == 1 {
					close(arrived)
					<-release
				}
				io.WriteString(w, `{"ok":true,"channel":"C1","ts":"1.1"}`)
			}))
			defer srv.Close()
			var once sync.Once
			unblock := func() { once.Do(func() { close(release) }) }
			defer unblock() // before srv.Close, which waits for the held call
			hc := &http.Client{Transport: detached{srv.Client().Transport}}
			cl := &Client{Token: "xoxb-good", BaseURL: srv.URL, HTTP: hc, Resend: tc.resend}
			proc := yella.Process{Name: "notify", On: "alert", Retry: &yella.Retry{Max: 2}, Run: func(c *yella.Ctx) yella.Result {
				_, err := PostMessage(c, cl, "post", Message{Channel: "C1", Text: "x"})
				return connector.Outcome(c, err)
			}}
			st := memstore.New()
			defer st.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			e1 := start(t, st, proc)
			em, err := e1.Emit(ctx, "alert", nil)
			if err != nil {
				t.Fatal(err)
			}
			<-arrived
			hard, cancelHard := context.WithTimeout(ctx, 10*time.Millisecond)
			e1.Stop(hard) // the handler still waits for Slack
			cancelHard()
			e2 := start(t, st, proc)
			defer e2.Stop(context.Background())
			var r yella.Run
			for r.Status != yella.StatusFenced && r.Status != yella.StatusCompleted && r.Status != yella.StatusErrored && r.Status != yella.StatusDead {
				if r, err = e2.Run(ctx, em.Runs[0]); err != nil || ctx.Err() != nil {
					t.Fatalf("run %+v, %v; want %s", r, err, tc.status)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if r.Status != tc.status {
				t.Errorf("run %s (%s), want %s", r.Status, r.Error, tc.status)
			}
			unblock()
			if err := e2.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if calls != tc.calls {
				t.Errorf("%d posts, want %d", calls, tc.calls)
			}
		})
	}
}

func start(t *testing.T, st store.Store, p yella.Process) *yella.Engine {
	t.Helper()
	e, err := yella.New(yella.Config{Store: st})
	if err == nil {
		err = e.Register(p)
	}
	if err == nil {
		err = e.Start(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
	return e
}
