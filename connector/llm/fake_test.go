package llm_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeAPI is an OpenAI-compatible chat completions server whose behaviour
// each test scripts: handle answers the n-th request (1-based).
type fakeAPI struct {
	URL    string
	srv    *httptest.Server
	handle func(n int, w http.ResponseWriter, r *http.Request)

	mu   sync.Mutex
	reqs []seenRequest
}

// seenRequest is what the fake received.
type seenRequest struct {
	Path   string
	Header http.Header
	Raw    []byte
	Body   map[string]any
}

func newFake(t testing.TB, handle func(n int, w http.ResponseWriter, r *http.Request)) *fakeAPI {
	f := &fakeAPI{handle: handle}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = f.srv.URL + "/v1"
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	json.Unmarshal(raw, &body)
	f.mu.Lock()
	f.reqs = append(f.reqs, seenRequest{Path: r.URL.Path, Header: r.Header.Clone(), Raw: raw, Body: body})
	n := len(f.reqs)
	f.mu.Unlock()
	f.handle(n, w, r)
}

func (f *fakeAPI) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.reqs...)
}

// stream starts an event stream and writes events, each flushed at once.
func stream(w http.ResponseWriter, events ...string) {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/event-stream")
	}
	for _, e := range events {
		io.WriteString(w, "data: "+e+"\n\n")
	}
	w.(http.Flusher).Flush()
}

const done = "[DONE]"

// text is a chunk carrying a piece of the reply.
func text(s string) string {
	b, _ := json.Marshal(s)
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"fake-model-2026","choices":[{"index":0,"delta":{"content":` + string(b) + `},"finish_reason":null}]}`
}

// finish is the chunk that ends the reply.
func finish(reason string) string {
	return `{"id":"chatcmpl-1","model":"fake-model-2026","choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}]}`
}

// usage is the last chunk of a stream asked with include_usage.
func usage(prompt, completion int) string {
	return fmt.Sprintf(`{"id":"chatcmpl-1","model":"fake-model-2026","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, prompt, completion, prompt+completion)
}

// reply streams a whole reply made of pieces.
func reply(pieces ...string) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) {
		events := []string{`{"id":"chatcmpl-1","model":"fake-model-2026","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`}
		for _, p := range pieces {
			events = append(events, text(p))
		}
		stream(w, append(events, finish("stop"), usage(10, len(pieces)), done)...)
	}
}

// apiError answers with status and an OpenAI error body.
func apiError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":%q,"param":null,"code":%q}}`, msg, typ, code)
}

// drop ends the connection without finishing the response.
func drop(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

// joinText joins the deltas an OnDelta saw.
type deltas struct {
	mu  sync.Mutex
	got []string
}

func (d *deltas) add(s string) {
	d.mu.Lock()
	d.got = append(d.got, s)
	d.mu.Unlock()
}

func (d *deltas) String() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.got, "|")
}
