package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/yella-go/yella"
)

// broker keeps the latest lifecycle events in a ring and wakes the SSE
// clients. The engine's subscriber only appends under a mutex, so a slow
// client never slows the engine: a client that falls behind the ring is
// told so (a "reset" frame) and continues from the oldest kept event.
//
// Ids start at the server's start time in microseconds and increase by one
// per event, so an id from before a restart is older than every id of this
// process: a client reconnecting with one gets a reset, not a wrong replay.
type broker struct {
	mu    sync.Mutex
	ring  []Event // ring[i%len] holds id first+i
	first int64   // id of the oldest kept event
	next  int64   // id of the next event
	wake  chan struct{}
	unsub func()
}

func newBroker(eng *yella.Engine, size int) *broker {
	start := time.Now().UnixMicro()
	b := &broker{ring: make([]Event, size), first: start, next: start, wake: make(chan struct{})}
	b.unsub = eng.Subscribe(b.add)
	return b
}

func (b *broker) add(e yella.Event) {
	b.mu.Lock()
	id := b.next
	b.ring[id%int64(len(b.ring))] = eventOf(id, e)
	b.next++
	if b.next-b.first > int64(len(b.ring)) {
		b.first = b.next - int64(len(b.ring))
	}
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}

// since copies the kept events after id (all kept events when id < 0, none
// when id is -2 meaning "from now"), reports whether some were lost in
// between, and returns the channel closed by the next event.
func (b *broker) since(id int64, out []Event) ([]Event, bool, int64, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	from := id + 1
	lost := from < b.first || from > b.next
	if lost {
		from = b.first
	}
	for i := from; i < b.next; i++ {
		out = append(out, b.ring[i%int64(len(b.ring))])
	}
	return out, lost, b.next - 1, b.wake
}

func (b *broker) now() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.next - 1
}

// serve streams events as SSE frames: "id", "event" (the lifecycle event
// type) and "data" (the Event JSON). With a Last-Event-ID header (sent by
// EventSource on reconnect) or ?since=<id> it first replays the kept
// events after that id. A comment frame every keepalive keeps proxies
// from closing an idle stream.
func (a *API) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	last := a.broker.now()
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		last = -1
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			last = n
		}
	} else if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			a.fail(w, r, badRequest("INVALID_QUERY", "since must be an event id"))
			return
		}
		last = n
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc.SetWriteDeadline(time.Time{}) // the stream outlives the server's write timeout
	write := func(s string) bool {
		rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprint(w, s); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write(fmt.Sprintf("retry: 2000\nevent: hello\ndata: {\"at\":%q}\n\n", time.Now().UTC().Format(time.RFC3339Nano))) {
		return
	}
	keep := time.NewTicker(a.opts.Keepalive)
	defer keep.Stop()
	var buf []Event
	for {
		evs, lost, newest, wake := a.broker.since(last, buf[:0])
		buf = evs
		if lost {
			if !write(fmt.Sprintf("event: reset\ndata: {\"reason\":\"events were missed; reload the state\",\"last\":%d}\n\n", newest)) {
				return
			}
		}
		if len(evs) > 0 {
			var frame []byte
			for _, e := range evs {
				data, _ := json.Marshal(e)
				frame = fmt.Appendf(frame, "id: %d\nevent: %s\ndata: %s\n\n", e.ID, e.Type, data)
			}
			if !write(string(frame)) {
				return
			}
			last = evs[len(evs)-1].ID
		} else if lost {
			last = newest
		}
		select {
		case <-r.Context().Done():
			return
		case <-a.done:
			return
		case <-keep.C:
			if !write(": keepalive\n\n") {
				return
			}
		case <-wake:
		}
	}
}
