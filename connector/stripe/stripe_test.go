package stripe

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/connector/httpx"
	"github.com/yella-go/yella/yellatest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClassify(t *testing.T) {
	errJSON := func(typ, code string) string {
		return `{"error":{"type":"` + typ + `","code":"` + code + `","message":"m","decline_code":"dc"}}`
	}
	for _, tc := range []struct {
		name      string
		status    int
		body      string
		header    http.Header
		isNil     bool // httpx's own classification applies
		retryable bool
		code      string
	}{
		{"ok", 200, `{"id":"ch_1"}`, nil, true, false, ""},
		{"card", 402, errJSON("card_error", "card_declined"), nil, false, false, "card_error"},
		{"invalid", 400, errJSON("invalid_request_error", "parameter_missing"), nil, false, false, "invalid_request_error"},
		{"not found", 404, errJSON("invalid_request_error", "resource_missing"), nil, false, false, "invalid_request_error"},
		{"auth", 401, errJSON("authentication_error", ""), nil, false, false, "authentication_error"},
		{"idempotency", 400, errJSON("idempotency_error", ""), nil, false, false, "idempotency_error"},
		{"rate limit", 429, errJSON("rate_limit_error", "rate_limit"), nil, false, true, "rate_limit_error"},
		{"rate limit type on 400", 400, errJSON("rate_limit_error", ""), nil, false, true, "rate_limit_error"},
		{"429 without JSON", 429, "slow down", nil, false, true, ""},
		{"api error", 500, errJSON("api_error", ""), nil, false, true, "api_error"},
		{"api error type on 402", 402, errJSON("api_error", ""), nil, false, true, "api_error"},
		{"lock timeout", 409, errJSON("invalid_request_error", "lock_timeout"), nil, false, true, "invalid_request_error"},
		{"conflict without JSON", 409, "", nil, false, true, ""},
		{"502 page", 502, "<html>bad gateway</html>", nil, true, false, ""},
		{"unknown type 503", 503, errJSON("new_kind_of_error", ""), nil, false, true, "new_kind_of_error"},
		{"unknown type 400", 400, errJSON("new_kind_of_error", ""), nil, false, false, "new_kind_of_error"},
		{"should retry overrides", 400, errJSON("invalid_request_error", ""), http.Header{"Stripe-Should-Retry": {"true"}}, false, true, "invalid_request_error"},
		{"should not retry overrides", 500, errJSON("api_error", ""), http.Header{"Stripe-Should-Retry": {"false"}}, false, false, "api_error"},
		{"should retry without JSON", 400, "", http.Header{"Stripe-Should-Retry": {"true"}}, false, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = http.Header{}
			}
			e := Classify(&httpx.Response{Status: tc.status, Body: []byte(tc.body)}, h)
			if tc.isNil {
				if e != nil {
					t.Fatalf("got %+v, want nil", e)
				}
				return
			}
			if e == nil {
				t.Fatal("got nil")
			}
			if e.Retryable != tc.retryable || e.Code != tc.code {
				t.Errorf("retryable %v code %q, want %v %q", e.Retryable, e.Code, tc.retryable, tc.code)
			}
			var ae *APIError
			if tc.code != "" && (!errors.As(e, &ae) || ae.Message != "m" || ae.DeclineCode != "dc") {
				t.Errorf("APIError %+v not reachable", ae)
			}
		})
	}
}

// FuzzClassify: any response body is classified without panicking, and
// only a 2xx succeeds.
func FuzzClassify(f *testing.F) {
	f.Add(402, []byte(`{"error":{"type":"card_error","code":"card_declined"}}`), "")
	f.Add(500, []byte(`{"error":null}`), "true")
	f.Add(200, []byte(`{`), "false")
	f.Fuzz(func(t *testing.T, status int, body []byte, shouldRetry string) {
		e := Classify(&httpx.Response{Status: status, Body: body}, http.Header{"Stripe-Should-Retry": {shouldRetry}})
		ok := status >= 200 && status < 300
		if ok && e != nil {
			t.Fatalf("status %d classified as a failure: %+v", status, e)
		}
		if !ok && e == nil && (status == 409 || status == 429 || shouldRetry == "true" || shouldRetry == "false") {
			t.Fatalf("status %d (Stripe-Should-Retry %q) left to the default", status, shouldRetry)
		}
		if e != nil && shouldRetry == "true" && !e.Retryable || e != nil && shouldRetry == "false" && e.Retryable {
			t.Fatalf("Stripe-Should-Retry %q not honoured: %+v", shouldRetry, e)
		}
	})
}

type charge struct {
	ID       string            `json:"id"`
	Amount   int               `json:"amount"`
	Currency string            `json:"currency"`
	Metadata map[string]string `json:"metadata"`
}

type fakeLimiter struct {
	mu   sync.Mutex
	keys []string
}

func (l *fakeLimiter) HoldUntil(key string, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, key)
}

// chargeRun runs a process that charges amount through Post and returns the
// run and the charges it saw.
func chargeRun(t *testing.T, cl *Client, params func(c *yella.Ctx) url.Values) (yella.Run, []charge) {
	t.Helper()
	var seen []charge
	k := yellatest.Start(t, yella.Config{Retry: &yella.Retry{Max: 4, Backoff: yella.Fixed(time.Second)}}, yella.Process{Name: "pay", On: "order", Run: func(c *yella.Ctx) yella.Result {
		ch, err := Post[charge](c, cl, "charge", "/v1/charges", params(c))
		if err != nil {
			return connector.Outcome(c, err)
		}
		seen = append(seen, ch)
		return c.OK(ch.ID)
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	em, err := k.Engine.Emit(ctx, "order", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.RunUntilIdle(ctx); err != nil {
		t.Fatal(err)
	}
	return k.Run(t, em.Runs[0]), seen
}

func fixed(v url.Values) func(*yella.Ctx) url.Values { return func(*yella.Ctx) url.Values { return v } }

var order = url.Values{"amount": {"1000"}, "currency": {"eur"}, "metadata[order]": {"42"}}

func TestCharge(t *testing.T) {
	f, srv := newFakeStripe(t)
	r, seen := chargeRun(t, &Client{Key: "sk_test_good", BaseURL: srv.URL, HTTP: srv.Client()}, fixed(order))
	if r.Status != yella.StatusCompleted || string(r.Output) != `"ch_1"` {
		t.Fatalf("run %s %s (%s)", r.Status, r.Output, r.Error)
	}
	if len(seen) != 1 || seen[0].Amount != 1000 || seen[0].Currency != "eur" || seen[0].Metadata["order"] != "42" {
		t.Errorf("charge %+v", seen)
	}
	req, charges, keys := f.counts()
	if req != 1 || charges != 1 || !strings.Contains(keys[0], r.ID) {
		t.Errorf("%d requests, %d charges, keys %q", req, charges, keys)
	}
}

// The charge is made but the connection drops before the answer: the
// retry sends the same Idempotency-Key, Stripe replays the stored charge,
// and exactly one charge exists.
func TestDroppedAnswerReplayedByKey(t *testing.T) {
	f, srv := newFakeStripe(t)
	f.dropAfterCharge()
	r, seen := chargeRun(t, &Client{Key: "sk_test_good", BaseURL: srv.URL, HTTP: srv.Client()}, fixed(order))
	req, charges, keys := f.counts()
	if r.Status != yella.StatusCompleted || r.Attempts != 2 || string(r.Output) != `"ch_1"` {
		t.Fatalf("run %s after %d attempts: %s (%s)", r.Status, r.Attempts, r.Output, r.Error)
	}
	if req != 2 || charges != 1 || keys[0] != keys[1] || keys[0] == "" {
		t.Errorf("%d requests, %d charges, keys %q: want 2 requests with one key, 1 charge", req, charges, keys)
	}
	if len(seen) != 1 || seen[0].ID != "ch_1" {
		t.Errorf("seen %+v", seen)
	}
}

// Each of Stripe's failures ends the run as the mapping says: retried
// (with the same key) until it succeeds, or failed at once.
func TestFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		inject  func(f *fakeStripe)
		key     string
		params  func(*yella.Ctx) url.Values
		status  yella.Status
		calls   int
		inError string
		holds   int
	}{
		{name: "card declined", params: fixed(url.Values{"amount": {"402"}, "currency": {"eur"}}), status: yella.StatusErrored, calls: 1, inError: "card_error/card_declined/insufficient_funds: Your card has insufficient funds."},
		{name: "missing param", params: fixed(url.Values{"currency": {"eur"}}), status: yella.StatusErrored, calls: 1, inError: "invalid_request_error/parameter_missing (param amount)"},
		{name: "bad key", key: "sk_test_bad", params: fixed(order), status: yella.StatusErrored, calls: 1, inError: "401 Unauthorized (authentication_error)"},
		{name: "key reused with other parameters", params: func(c *yella.Ctx) url.Values {
			return url.Values{"amount": {"10" + strings.Repeat("0", c.Attempt())}, "currency": {"eur"}}
		}, inject: func(f *fakeStripe) { f.dropAfterCharge() }, status: yella.StatusErrored, calls: 2, inError: "idempotency_error"},
		{name: "rate limited", inject: func(f *fakeStripe) { f.failNext(429, "rate_limit_error", "rate_limit") }, params: fixed(order), status: yella.StatusCompleted, calls: 2, holds: 1},
		{name: "api error", inject: func(f *fakeStripe) {
			f.failNext(500, "api_error", "")
			f.failNext(503, "api_error", "")
		}, params: fixed(order), status: yella.StatusCompleted, calls: 3},
		{name: "lock timeout", inject: func(f *fakeStripe) { f.failNext(409, "invalid_request_error", "lock_timeout") }, params: fixed(order), status: yella.StatusCompleted, calls: 2},
		{name: "should not retry", inject: func(f *fakeStripe) { f.failNext(500, "api_error", "", "Stripe-Should-Retry", "false") }, params: fixed(order), status: yella.StatusErrored, calls: 1, inError: "500 Internal Server Error (api_error)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := newFakeStripe(t)
			if tc.inject != nil {
				tc.inject(f)
			}
			key := tc.key
			if key == "" {
				key = "sk_test_good"
			}
			lim := &fakeLimiter{}
			r, _ := chargeRun(t, &Client{Key: key, BaseURL: srv.URL, HTTP: srv.Client(), Limiter: lim}, tc.params)
			req, _, keys := f.counts()
			if r.Status != tc.status || req != tc.calls {
				t.Errorf("run %s after %d calls (%s), want %s after %d", r.Status, req, r.Error, tc.status, tc.calls)
			}
			if !strings.Contains(r.Error, tc.inError) {
				t.Errorf("error %q does not contain %q", r.Error, tc.inError)
			}
			for _, k := range keys {
				if k != keys[0] {
					t.Errorf("keys %q differ", keys)
				}
			}
			if len(lim.keys) != tc.holds || (tc.holds > 0 && lim.keys[0] != "stripe") {
				t.Errorf("limiter holds %q, want %d under stripe", lim.keys, tc.holds)
			}
		})
	}
}

func TestRequestShape(t *testing.T) {
	var got *http.Request
	var body string
	srv := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(context.Background())
		r.ParseForm()
		body = r.Form.Encode()
		w.Write([]byte(`{"id":"pi_1"}`))
	})
	k := yellatest.Start(t, yella.Config{}, yella.Process{Name: "p", On: "e", Run: func(c *yella.Ctx) yella.Result {
		_, err := Post[map[string]any](c, &Client{Key: "sk_x", BaseURL: srv.URL + "/", HTTP: srv.Client(), Version: "2024-06-20"}, "pi", "/v1/payment_intents", url.Values{"amount": {"5"}})
		return connector.Outcome(c, err)
	}})
	k.Engine.Emit(context.Background(), "e", nil)
	if err := k.RunUntilIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got == nil {
		t.Fatal("no request")
	}
	if got.Method != "POST" || got.URL.Path != "/v1/payment_intents" || got.Header.Get("Authorization") != "Bearer sk_x" ||
		got.Header.Get("Stripe-Version") != "2024-06-20" || !strings.HasPrefix(got.Header.Get("Idempotency-Key"), "yella-") || body != "amount=5" {
		t.Errorf("request %s %s %v body %q", got.Method, got.URL, got.Header, body)
	}
}

func httpServer(t *testing.T, fn http.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(fn)
	t.Cleanup(srv.Close)
	return srv
}

func TestGet(t *testing.T) {
	var got []string
	srv := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.String()+" "+r.Header.Get("Authorization"))
		if r.URL.Path == "/v1/charges/ch_missing" {
			writeErr(w, 404, map[string]string{"type": "invalid_request_error", "code": "resource_missing", "message": "No such charge"})
			return
		}
		w.Write([]byte(`{"id":"ch_1","amount":7}`))
	})
	var ch charge
	var missing error
	k := yellatest.Start(t, yella.Config{}, yella.Process{Name: "p", On: "e", Run: func(c *yella.Ctx) yella.Result {
		cl := &Client{Key: "sk_x", BaseURL: srv.URL, HTTP: srv.Client()}
		var err error
		if ch, err = Get[charge](c, cl, "read", "/v1/charges/ch_1", url.Values{"expand[]": {"customer"}}); err != nil {
			return c.Fail(err)
		}
		_, missing = Get[charge](c, cl, "missing", "/v1/charges/ch_missing", nil)
		return c.OK(nil)
	}})
	k.Engine.Emit(context.Background(), "e", nil)
	if err := k.RunUntilIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ch.ID != "ch_1" || ch.Amount != 7 {
		t.Errorf("charge %+v", ch)
	}
	var ae *APIError
	if connector.Retryable(missing) || !errors.As(missing, &ae) || ae.Code != "resource_missing" {
		t.Errorf("missing charge: %v, want a permanent resource_missing", missing)
	}
	if strings.Join(got, ",") != "GET /v1/charges/ch_1?expand%5B%5D=customer Bearer sk_x,GET /v1/charges/ch_missing Bearer sk_x" {
		t.Errorf("requests %q", got)
	}
}
