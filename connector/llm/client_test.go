package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/connector/llm"
)

func newClient(t testing.TB, cfg llm.Config) *llm.Client {
	t.Helper()
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var hello = llm.Request{Model: "fake-model", Messages: []llm.Message{{Role: llm.RoleUser, Content: "Say hello"}}}

// A stream that arrives slowly is seen piece by piece: OnDelta gets each
// piece before the server has sent the next, and the Completion is the
// whole reply with its usage and cost.
func TestStreamsSlowly(t *testing.T) {
	pieces := []string{"Hel", "lo, ", "wor", "ld"}
	next := make(chan struct{})
	fake := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		stream(w, `{"choices":[{"index":0,"delta":{"role":"assistant"}}]}`)
		for _, p := range pieces {
			stream(w, text(p))
			select {
			case <-next: // the test saw the piece
			case <-r.Context().Done():
				return
			}
		}
		stream(w, finish("stop"), usage(12, 4), done)
	})
	cl := newClient(t, llm.Config{BaseURL: fake.URL, Prices: map[string]llm.Price{"fake-model-2026": {Input: 2.5, Output: 10}}})
	seen := make(chan string)
	req := hello
	req.OnDelta = func(s string) { seen <- s }
	type result struct {
		c   llm.Completion
		err error
	}
	res := make(chan result, 1)
	go func() {
		c, err := cl.Complete(context.Background(), req)
		res <- result{c, err}
	}()
	for _, p := range pieces {
		select {
		case got := <-seen:
			if got != p {
				t.Fatalf("OnDelta got %q, want %q", got, p)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("OnDelta never saw %q while the server waited", p)
		}
		next <- struct{}{}
	}
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := llm.Completion{ID: "chatcmpl-1", Model: "fake-model-2026",
		Message:      llm.Message{Role: "assistant", Content: "Hello, world"},
		FinishReason: "stop", Usage: llm.Usage{PromptTokens: 12, CompletionTokens: 4, TotalTokens: 16},
		CostUSD: (12*2.5 + 4*10) / 1e6}
	if !reflect.DeepEqual(r.c, want) {
		t.Errorf("completion\n got %+v\nwant %+v", r.c, want)
	}
}

// Tool calls arrive in fragments, interleaved by index (or, from some
// servers, without an index): each call's name and argument pieces are
// joined in order, and the calls are returned in index order.
func TestToolCallFragments(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks []string
		want   []llm.ToolCall
	}{
		{"by index, interleaved", []string{
			`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_","arguments":"{\"q\":"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"name":"time","arguments":"\"now\"}"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\":\"Oslo\"}"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		}, []llm.ToolCall{
			{ID: "call_a", Type: "function", Function: llm.FunctionCall{Name: "get_weather", Arguments: `{"city":"Oslo"}`}},
			{ID: "call_b", Type: "function", Function: llm.FunctionCall{Name: "get_time", Arguments: `{"q":"now"}`}},
		}},
		{"several calls in one chunk, sparse indexes", []string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"id":"c3","function":{"name":"b","arguments":"{}"}},{"index":1,"id":"c1","function":{"name":"a","arguments":"{"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"}"}}]},"finish_reason":"tool_calls"}]}`,
		}, []llm.ToolCall{
			{ID: "c1", Type: "function", Function: llm.FunctionCall{Name: "a", Arguments: "{}"}},
			{ID: "c3", Type: "function", Function: llm.FunctionCall{Name: "b", Arguments: "{}"}},
		}},
		{"no index: an id starts a call", []string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"x","type":"function","function":{"name":"f","arguments":"[1,"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"2]"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"y","type":"function","function":{"name":"g","arguments":"{}"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		}, []llm.ToolCall{
			{ID: "x", Type: "function", Function: llm.FunctionCall{Name: "f", Arguments: "[1,2]"}},
			{ID: "y", Type: "function", Function: llm.FunctionCall{Name: "g", Arguments: "{}"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				for _, c := range tc.chunks {
					stream(w, c) // one flush per fragment
				}
				stream(w, usage(5, 7), done)
			})
			got, err := newClient(t, llm.Config{BaseURL: fake.URL}).Complete(context.Background(), hello)
			if err != nil {
				t.Fatal(err)
			}
			if got.FinishReason != "tool_calls" || got.Message.Content != "" || !reflect.DeepEqual(got.Message.ToolCalls, tc.want) {
				t.Errorf("got %+v\nwant tool calls %+v", got.Message, tc.want)
			}
			// The reply goes back into the conversation as it is.
			b, _ := json.Marshal(got.Message)
			if !strings.Contains(string(b), `"content":null`) {
				t.Errorf("an assistant message with only tool calls encodes as %s, want a null content", b)
			}
		})
	}
}

// The request body is the chat completions format: optional fields only
// when set, tool definitions passed through, stream with usage; headers
// carry the key and the caller's extra headers.
func TestRequestBody(t *testing.T) {
	fake := newFake(t, reply("ok"))
	cl := newClient(t, llm.Config{BaseURL: fake.URL + "/", APIKey: "sk-test", Header: http.Header{"Openai-Project": {"p1"}}})
	temp := 0.2
	req := llm.Request{
		Model: "m",
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "Be brief."},
			{Role: llm.RoleUser, Content: "Weather?"},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Type: "function", Function: llm.FunctionCall{Name: "w", Arguments: `{}`}}}},
			{Role: llm.RoleTool, ToolCallID: "c1", Content: "sunny"},
			{Role: llm.RoleUser, ContentParts: json.RawMessage(`[{"type":"text","text":"and now?"}]`)},
		},
		Tools:       []llm.Tool{{Function: llm.Function{Name: "w", Description: "weather", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}},
		ToolChoice:  json.RawMessage(`"auto"`),
		Temperature: &temp,
		Extra:       map[string]any{"top_k": 40},
	}
	if _, err := cl.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := fake.requests()[0]
	want := `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{}"}}]},` +
		`{"role":"tool","content":"sunny","tool_call_id":"c1"},{"role":"user","content":[{"type":"text","text":"and now?"}]}],` +
		`"model":"m","stream":true,"stream_options":{"include_usage":true},"temperature":0.2,"tool_choice":"auto",` +
		`"tools":[{"type":"function","function":{"name":"w","description":"weather","parameters":{"type":"object","properties":{}}}}],"top_k":40}`
	if string(got.Raw) != want {
		t.Errorf("body\n got %s\nwant %s", got.Raw, want)
	}
	for k, v := range map[string]string{"Authorization": "Bearer sk-test", "Accept": "text/event-stream",
		"Content-Type": "application/json", "Openai-Project": "p1"} {
		if got.Header.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, got.Header.Get(k), v)
		}
	}
	if got.Path != "/v1/chat/completions" {
		t.Errorf("path %q", got.Path)
	}
	if got.Header.Get("Idempotency-Key") != "" {
		t.Errorf("Complete outside an effect sent Idempotency-Key %q", got.Header.Get("Idempotency-Key"))
	}
}

// Bad input is refused before anything is sent, with a final error that
// names the field.
func TestBadRequest(t *testing.T) {
	fake := newFake(t, reply("never"))
	cl := newClient(t, llm.Config{BaseURL: fake.URL})
	user := []llm.Message{{Role: llm.RoleUser, Content: "x"}}
	for _, tc := range []struct {
		req  llm.Request
		want string
	}{
		{llm.Request{Messages: user}, "llm.Request.Model"},
		{llm.Request{Model: "m"}, "llm.Request.Messages"},
		{llm.Request{Model: "m", Messages: []llm.Message{{Role: "robot"}}}, `role "robot"`},
		{llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleTool, Content: "x"}}}, "llm.Message.ToolCallID"},
		{llm.Request{Model: "m", Messages: user, Tools: []llm.Tool{{Function: llm.Function{Name: "f", Parameters: json.RawMessage(`{`)}}}}, "Parameters is not valid JSON"},
		{llm.Request{Model: "m", Messages: user, ToolChoice: json.RawMessage(`auto`)}, "llm.Request.ToolChoice is not valid JSON"},
		{llm.Request{Model: "m", Messages: user, Extra: map[string]any{"stream": false}}, `Extra sets "stream"`},
		{llm.Request{Model: "m", Messages: user, Extra: map[string]any{"bad": func() {}}}, `Extra["bad"]`},
	} {
		_, err := cl.Complete(context.Background(), tc.req)
		if err == nil || !strings.Contains(err.Error(), tc.want) || connector.Retryable(err) {
			t.Errorf("%+v: error %v, want a final error naming %s", tc.req, err, tc.want)
		}
	}
	if n := len(fake.requests()); n != 0 {
		t.Errorf("%d requests sent for bad input", n)
	}
	for _, base := range []string{"", "ftp://x", "localhost:8080", "http://"} {
		if _, err := llm.New(llm.Config{BaseURL: base}); err == nil || !strings.Contains(err.Error(), "Config.BaseURL") {
			t.Errorf("New with BaseURL %q: %v", base, err)
		}
	}
}

// holds is a fake connector.Limiter.
type holds struct {
	mu    sync.Mutex
	calls []hold
}

type hold struct {
	key   string
	until time.Time
}

func (h *holds) HoldUntil(key string, until time.Time) {
	h.mu.Lock()
	h.calls = append(h.calls, hold{key, until})
	h.mu.Unlock()
}

// Each status is classified: rate limits and server errors are retryable,
// with the delay the headers ask for passed to the Limiter; a bad request,
// a bad key, a forbidden or unknown model are final, with the provider's
// message and code.
func TestStatusClassification(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		header    map[string]string
		body      string
		retryable bool
		after     time.Duration
		code, msg string
	}{
		{"429 with Retry-After", 429, map[string]string{"Retry-After": "7"},
			`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, true, 7 * time.Second, "rate_limit_exceeded", "Rate limit reached"},
		{"429 with retry-after-ms", 429, map[string]string{"Retry-After-Ms": "250", "Retry-After": "1"}, `{}`, true, 250 * time.Millisecond, "", "{}"},
		{"429 with reset headers, tokens spent", 429, map[string]string{
			"X-Ratelimit-Remaining-Requests": "59", "X-Ratelimit-Reset-Requests": "6m0s",
			"X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "20ms"},
			`{"error":{"message":"tokens","type":"tokens","code":null}}`, true, 20 * time.Millisecond, "tokens", "tokens"},
		{"429 with reset headers, none spent: the longest", 429, map[string]string{
			"X-Ratelimit-Reset-Requests": "1s", "X-Ratelimit-Reset-Tokens": "1m30s"}, ``, true, 90 * time.Second, "", ""},
		{"429 with seconds as a number", 429, map[string]string{"X-Ratelimit-Reset-Requests": "1.5"}, ``, true, 1500 * time.Millisecond, "", ""},
		{"429 with a timestamp in a reset header: ignored", 429, map[string]string{"X-Ratelimit-Reset-Requests": "1764590400"}, ``, true, 0, "", ""},
		{"503 with an HTTP date", 503, map[string]string{"Retry-After": "in an hour"},
			`upstream overloaded`, true, time.Hour, "", "upstream overloaded"},
		{"500 without delay", 500, nil, `{"error":{"message":"The server had an error","type":"server_error","code":null}}`, true, 0, "server_error", "The server had an error"},
		{"502 HTML page", 502, nil, `<html>bad gateway</html>`, true, 0, "", "<html>bad gateway</html>"},
		{"408", 408, nil, ``, true, 0, "", ""},
		{"400", 400, map[string]string{"Retry-After": "5"}, `{"error":{"message":"Invalid 'messages[0].role'","type":"invalid_request_error","param":"messages","code":"invalid_value"}}`, false, 0, "invalid_value", "Invalid 'messages[0].role'"},
		{"401", 401, nil, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`, false, 0, "invalid_api_key", "Incorrect API key provided"},
		{"403", 403, nil, `{"error":{"message":"Country not supported","type":"request_forbidden","code":"unsupported_country_region_territory"}}`, false, 0, "unsupported_country_region_territory", "Country not supported"},
		{"404 with a numeric code", 404, nil, `{"error":{"message":"model 'x' not found","type":"not_found_error","code":404}}`, false, 0, "404", "model 'x' not found"},
		{"404 with a string error", 404, nil, `{"error":"model \"x\" not found, try pulling it first"}`, false, 0, "", `model "x" not found, try pulling it first`},
		{"422", 422, nil, `{"message":"bad schema"}`, false, 0, "", "bad schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				for k, v := range tc.header {
					if v == "in an hour" { // an HTTP date, taken as the response is sent
						v = time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
					}
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			lim := &holds{}
			cl := newClient(t, llm.Config{BaseURL: fake.URL, Limiter: lim})
			before := time.Now()
			_, err := cl.Complete(context.Background(), hello)
			after := time.Now()
			var e *connector.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not a connector.Error", err)
			}
			if e.Status != tc.status || e.Retryable != tc.retryable || e.Code != tc.code || e.Body != tc.msg {
				t.Errorf("got status %d retryable %v code %q body %q; want %d %v %q %q", e.Status, e.Retryable, e.Code, e.Body, tc.status, tc.retryable, tc.code, tc.msg)
			}
			// An HTTP date has whole seconds: up to a second (and the time
			// the response took) less than asked.
			if d := e.RetryAfter - tc.after; d < -2*time.Second || d > 0 || (tc.after == 0) != (e.RetryAfter == 0) {
				t.Errorf("RetryAfter %v, want %v", e.RetryAfter, tc.after)
			}
			if !strings.HasPrefix(err.Error(), "POST "+fake.URL+"/chat/completions: ") {
				t.Errorf("message %q does not name the call", err)
			}
			switch {
			case tc.after == 0 && len(lim.calls) != 0:
				t.Errorf("Limiter told %v without a delay", lim.calls)
			case tc.after > 0:
				host := strings.TrimPrefix(strings.TrimSuffix(fake.URL, "/v1"), "http://")
				if len(lim.calls) != 1 || lim.calls[0].key != host ||
					lim.calls[0].until.Before(before.Add(e.RetryAfter)) || lim.calls[0].until.After(after.Add(e.RetryAfter)) {
					t.Errorf("Limiter calls %v, want one for %s, %v after the call", lim.calls, host, e.RetryAfter)
				}
			}
		})
	}
}

// A success that used up a rate limit holds the Limiter (under the
// configured key) until the limit resets.
func TestSpentLimitHolds(t *testing.T) {
	fake := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.Header().Set("X-Ratelimit-Remaining-Requests", "0")
			w.Header().Set("X-Ratelimit-Reset-Requests", "2s")
		}
		reply("ok")(n, w, r)
	})
	lim := &holds{}
	cl := newClient(t, llm.Config{BaseURL: fake.URL, Limiter: lim, LimiterKey: "openai"})
	start := time.Now()
	for range 2 {
		if _, err := cl.Complete(context.Background(), hello); err != nil {
			t.Fatal(err)
		}
	}
	if len(lim.calls) != 1 || lim.calls[0].key != "openai" || lim.calls[0].until.Before(start.Add(2*time.Second)) {
		t.Errorf("Limiter calls %v, want one for openai, 2s on", lim.calls)
	}
}

// A stream that cannot be used is an error, never a partial success: a
// dropped connection or a stream ending early is retryable; a malformed
// chunk is retryable; an oversized stream, an invalid request reported in
// the stream and a response that is not an event stream are final.
func TestBrokenStreams(t *testing.T) {
	half := []string{text("Hel"), text("lo")}
	for _, tc := range []struct {
		name      string
		serve     func(w http.ResponseWriter)
		retryable bool
		code      string
		msg       string
	}{
		{"connection dropped mid-stream", func(w http.ResponseWriter) { stream(w, half...); drop(w) }, true, "incomplete_stream", "stream"},
		{"ends without [DONE]", func(w http.ResponseWriter) { stream(w, append(half, finish("stop"))...) }, true, "incomplete_stream", "stream ended before [DONE]"},
		{"[DONE] without finish_reason", func(w http.ResponseWriter) { stream(w, append(half, done)...) }, true, "incomplete_stream", "no finish_reason"},
		{"last event cut short", func(w http.ResponseWriter) {
			stream(w, append(half, finish("stop"))...)
			io.WriteString(w, "data: [DONE]")
		}, true, "incomplete_stream", "before [DONE]"},
		{"malformed chunk", func(w http.ResponseWriter) { stream(w, text("a"), `{"choices":[{"delta":`, finish("stop"), done) }, true, "malformed_stream", "malformed chunk"},
		{"wrong type in a chunk", func(w http.ResponseWriter) { stream(w, `{"choices":[{"index":0,"delta":{"content":42}}]}`, done) }, true, "malformed_stream", "malformed chunk"},
		{"server error in the stream", func(w http.ResponseWriter) {
			stream(w, text("a"), `{"error":{"message":"The server is overloaded","type":"server_error","code":null}}`)
		}, true, "server_error", "The server is overloaded"},
		{"error event", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: error\ndata: {\"error\":{\"message\":\"context too long\",\"type\":\"invalid_request_error\",\"code\":\"context_length_exceeded\"}}\n\n")
		}, false, "context_length_exceeded", "context too long"},
		{"too large", func(w http.ResponseWriter) {
			stream(w, text(strings.Repeat("x", 600)), text(strings.Repeat("y", 600)), finish("stop"), done)
		}, false, "too_large", "llm.Config.MaxResponseBytes"},
		{"HTML instead of a stream", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html>login</html>")
		}, false, "not_a_stream", "Config.BaseURL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t, func(_ int, w http.ResponseWriter, _ *http.Request) { tc.serve(w) })
			var d deltas
			req := hello
			req.OnDelta = d.add
			got, err := newClient(t, llm.Config{BaseURL: fake.URL, MaxResponseBytes: 1000}).Complete(context.Background(), req)
			var e *connector.Error
			if !errors.As(err, &e) {
				t.Fatalf("got %+v, %v; want a connector.Error", got, err)
			}
			if !reflect.DeepEqual(got, llm.Completion{}) {
				t.Errorf("a broken stream returned a partial completion %+v", got)
			}
			if e.Retryable != tc.retryable || e.Code != tc.code || e.Status != 200 || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q (retryable %v, code %q, status %d); want retryable %v, code %q, naming %q", err, e.Retryable, e.Code, e.Status, tc.retryable, tc.code, tc.msg)
			}
		})
	}
}

// A server that answers the streaming request with one JSON object is
// read as well.
func TestNonStreamedAnswer(t *testing.T) {
	fake := newFake(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		io.WriteString(w, `{"id":"c9","object":"chat.completion","model":"m-1","choices":[{"index":0,"message":{"role":"assistant","content":"Hi","tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	})
	var d deltas
	req := hello
	req.OnDelta = d.add
	got, err := newClient(t, llm.Config{BaseURL: fake.URL}).Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Completion{ID: "c9", Model: "m-1", FinishReason: "stop", Usage: llm.Usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4},
		Message: llm.Message{Role: "assistant", Content: "Hi", ToolCalls: []llm.ToolCall{{ID: "t", Type: "function", Function: llm.FunctionCall{Name: "f", Arguments: "{}"}}}}}
	if !reflect.DeepEqual(got, want) || d.String() != "Hi" {
		t.Errorf("got %+v (deltas %q)\nwant %+v", got, d.String(), want)
	}
}

// A connection refused is retryable, with no status.
func TestConnectionRefused(t *testing.T) {
	fake := newFake(t, reply("x"))
	url := fake.URL
	fake.srv.Close()
	_, err := newClient(t, llm.Config{BaseURL: url}).Complete(context.Background(), hello)
	var e *connector.Error
	if !errors.As(err, &e) || !e.Retryable || e.Status != 0 {
		t.Errorf("error %v, want a retryable connector.Error without status", err)
	}
}

// With IdleTimeout, a server that goes silent (before its headers, or
// half-way through the stream) fails the call as retryable.
func TestIdleTimeout(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before func(w http.ResponseWriter)
	}{
		{"before the headers", func(http.ResponseWriter) {}},
		{"mid-stream", func(w http.ResponseWriter) { stream(w, text("Hel")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
				tc.before(w)
				<-r.Context().Done() // silent until the client gives up
			})
			cl := newClient(t, llm.Config{BaseURL: fake.URL, IdleTimeout: 50 * time.Millisecond})
			got, err := cl.Complete(context.Background(), hello)
			var e *connector.Error
			if !errors.As(err, &e) || e.Code != "idle_timeout" || !e.Retryable || !strings.Contains(err.Error(), "llm.Config.IdleTimeout") {
				t.Errorf("got %+v, %v; want a retryable idle_timeout error", got, err)
			}
		})
	}
	if _, err := llm.New(llm.Config{BaseURL: "http://x", IdleTimeout: -1}); err == nil || !strings.Contains(err.Error(), "Config.IdleTimeout") {
		t.Errorf("a negative IdleTimeout: %v", err)
	}
}
