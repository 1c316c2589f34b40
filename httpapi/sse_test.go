package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella/httpapi"
)

// stuckWriter is the ResponseWriter of a client that stops reading: once
// stuck, a write blocks as on a full socket until the write deadline the
// handler set is in the past, and then fails for good, as a broken HTTP/1
// connection does. With honest=false it ignores deadlines and blocks until
// released, like a slow client that still reads now and then.
type stuckWriter struct {
	mu       sync.Mutex
	hdr      http.Header
	out      bytes.Buffer
	stuck    bool
	honest   bool
	broken   bool
	deadline time.Time
	aborted  bool          // a deadline was set in the past: how a kick aborts a write
	changed  chan struct{} // closed when deadline or stuck changes
	blocked  chan struct{} // closed when a write first blocks
	once     sync.Once
}

func newStuckWriter(honest bool) *stuckWriter {
	return &stuckWriter{hdr: http.Header{}, honest: honest, changed: make(chan struct{}), blocked: make(chan struct{})}
}

func (w *stuckWriter) Header() http.Header { return w.hdr }
func (w *stuckWriter) WriteHeader(int)     {}
func (w *stuckWriter) Flush()              {}

// SetWriteDeadline is found by http.ResponseController.
func (w *stuckWriter) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	w.deadline = t
	if !t.After(time.Now()) {
		w.aborted = true
	}
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
	return nil
}

func (w *stuckWriter) setStuck(v bool) {
	w.mu.Lock()
	w.stuck = v
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
}

// pastDeadline reports whether the handler set a deadline in the past
// (which is how a kick aborts a write).
func (w *stuckWriter) pastDeadline() (bool, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.deadline.IsZero() && !w.deadline.After(time.Now()), w.changed
}

func (w *stuckWriter) Write(p []byte) (int, error) {
	for {
		w.mu.Lock()
		switch {
		case w.broken:
			w.mu.Unlock()
			return 0, errors.New("connection broken")
		case !w.stuck:
			n, _ := w.out.Write(p)
			w.mu.Unlock()
			return n, nil
		case w.honest && !w.deadline.IsZero() && !w.deadline.After(time.Now()):
			w.broken = true
			w.mu.Unlock()
			return 0, os.ErrDeadlineExceeded
		}
		ch, until := w.changed, time.Until(w.deadline)
		if !w.honest || w.deadline.IsZero() {
			until = time.Hour
		}
		w.mu.Unlock()
		w.once.Do(func() { close(w.blocked) })
		select {
		case <-ch:
		case <-time.After(until):
		}
	}
}

func (w *stuckWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.String()
}

// serveEvents runs the events handler on w in the background; the
// returned channel is closed when it returns.
func serveEvents(t *testing.T, h http.Handler, w http.ResponseWriter) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(w, httptest.NewRequest("GET", "/api/events", nil).WithContext(ctx))
	}()
	return done
}

func returned(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a safety net: the handler must return on its own
		t.Fatalf("%s: the handler is still serving", what)
	}
}

// TestSSEClientThatDoesNotRead: a client whose writes block is kicked once
// more than SubscriberQueue events wait for it: its blocked write is
// aborted (not left to the write timeout, which a socket buffer can keep
// from ever firing), the handler returns, and its place is free for
// another client.
func TestSSEClientThatDoesNotRead(t *testing.T) {
	f := newFixtureWith(t, nil, httpapi.Options{Replay: 64, SubscriberQueue: 32, MaxSubscribers: 1, Keepalive: time.Hour})
	w := newStuckWriter(true)
	done := serveEvents(t, f.h, w)
	ctx := context.Background()
	// The stream starts with its hello frame, events or not. Emitting while
	// waiting for it would let more than SubscriberQueue events queue up
	// before the handler (slow to be scheduled on a loaded machine) writes
	// it: the client would be kicked before its hello, and the loop would
	// never end.
	for !strings.Contains(w.String(), "event: hello") {
		select {
		case <-done:
			t.Fatalf("the stream ended before its hello: %s", w.String())
		default:
			time.Sleep(time.Millisecond)
		}
	}
	w.setStuck(true)
	for i := 0; ; i++ {
		select {
		case <-done:
		default:
			if _, err := f.eng.EmitAndWait(ctx, "order:placed", nil); err != nil {
				t.Fatal(err)
			}
			if i < 1000 {
				continue
			}
		}
		break
	}
	returned(t, done, "a client that does not read")
	w.mu.Lock()
	aborted := w.aborted
	w.mu.Unlock()
	if !aborted {
		t.Fatal("the stream was not aborted because the client fell behind (it ended by its write timeout)")
	}
	// Its place is free: another client connects.
	w2 := newStuckWriter(true)
	done2 := serveEvents(t, f.h, w2)
	for !strings.Contains(w2.String(), "event: hello") {
		select {
		case <-done2:
			t.Fatalf("the next client was refused: %s", w2.String())
		default:
			time.Sleep(time.Millisecond)
		}
	}
}

// TestSSESlowClientGetsReset: a client that falls too far behind but
// still accepts data is sent a reset event before it is disconnected.
func TestSSESlowClientGetsReset(t *testing.T) {
	f := newFixtureWith(t, nil, httpapi.Options{Replay: 64, SubscriberQueue: 8, Keepalive: time.Hour})
	w := newStuckWriter(false)
	w.setStuck(true) // the hello frame blocks
	done := serveEvents(t, f.h, w)
	<-w.blocked
	ctx := context.Background()
	for {
		if past, _ := w.pastDeadline(); past { // kicked: the write is being aborted
			break
		}
		if _, err := f.eng.EmitAndWait(ctx, "order:placed", nil); err != nil {
			t.Fatal(err)
		}
	}
	w.setStuck(false) // the client reads again
	returned(t, done, "a kicked slow client")
	out := w.String()
	if !strings.Contains(out, "event: hello") || !strings.HasSuffix(out, "\n\n") || !strings.Contains(out, "event: reset\ndata: {\"reason\":\"this client fell more than 8 events behind") {
		t.Fatalf("the stream ends with %q, want a reset", out[max(0, len(out)-200):])
	}
}

// TestSSESubscriberCap: past MaxSubscribers, a client gets 503 BUSY with
// Retry-After; when one leaves, the next is served.
func TestSSESubscriberCap(t *testing.T) {
	f := newFixtureWith(t, nil, httpapi.Options{MaxSubscribers: 2, Keepalive: time.Hour})
	srv := httptest.NewServer(f.api)
	// A cleanup, not a defer: it runs after the streams' bodies are closed
	// (cleanups run last first), so a failing test does not hang on a stream.
	t.Cleanup(srv.Close)
	defer f.api.Close() // ends the streams first
	connect(t, srv.URL+"/api/events", "")
	c2 := connect(t, srv.URL+"/api/events", "")
	resp, err := http.Get(srv.URL + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third client: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	c2.body.Close()
	for { // the server notices the closed stream when it next writes
		if _, err := f.eng.EmitAndWait(context.Background(), "order:placed", nil); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(srv.URL + "/api/events")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 200 {
			break
		}
	}
}

// BenchmarkSSESlowClients: the server's heap with 300 clients that ask for
// the full replay of a full ring (4,096 events) and never read, all
// admitted (MaxSubscribers 300). BenchmarkWorstRequests/sse-300 runs the
// same clients against the default limits.
func BenchmarkSSESlowClients(b *testing.B) {
	eng, _, _ := worstEngine(b, 0)
	api := httpapi.New(eng, httpapi.Options{MaxSubscribers: 300})
	srv := httptest.NewServer(api)
	defer srv.Close()
	defer api.Close()
	slowSSEClients(b, eng, srv.URL)
}
