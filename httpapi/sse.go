package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/yella-go/yella"
)

// broker keeps the latest lifecycle events in one ring shared by every SSE
// client and wakes the clients. The engine's subscriber only appends under
// a mutex and checks the clients' lag, so a slow client never slows the
// engine.
//
// A client reads the ring a batch at a time (sseBatch events), so it holds
// no private copy of the backlog. Its queue is the events after the last
// one it took: when that passes the queue bound (a client that stopped
// reading blocks in a write and takes nothing), the broker kicks it, which
// aborts its pending write; it gets a "reset" event if it still accepts
// data, and is disconnected.
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
	subs  map[*subscriber]struct{}
	max   int   // subscribers at once
	queue int64 // events that may wait for one subscriber
	unsub func()
}

// subscriber is one SSE client.
type subscriber struct {
	last   int64 // id of the last event taken (under broker.mu)
	kicked bool
	kick   context.CancelCauseFunc
}

// sseBatch is how many events a client takes from the ring at a time.
const sseBatch = 64

// errSlow is the cause of a kicked client's context.
var errSlow = errors.New("the client fell too far behind")

func newBroker(eng *yella.Engine, size, queue, max int) *broker {
	start := time.Now().UnixMicro()
	b := &broker{ring: make([]Event, size), first: start, next: start, wake: make(chan struct{}),
		subs: map[*subscriber]struct{}{}, max: max, queue: int64(queue)}
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
	for s := range b.subs {
		if !s.kicked && id-s.last > b.queue {
			s.kicked = true
			s.kick(errSlow)
		}
	}
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}

// subscribe registers a client that has seen the events up to last (-1:
// none; a stale or future id makes it start from the oldest kept event,
// told by a reset). It returns nil when MaxSubscribers are connected.
func (b *broker) subscribe(last int64, kick context.CancelCauseFunc) *subscriber {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.subs) >= b.max {
		return nil
	}
	s := &subscriber{last: last, kick: kick}
	b.subs[s] = struct{}{}
	return s
}

func (b *broker) unsubscribe(s *subscriber) {
	b.mu.Lock()
	delete(b.subs, s)
	b.mu.Unlock()
}

// take copies at most sseBatch events after the subscriber's last into
// out, reports whether some were lost in between (the client is then told
// to reload), and returns the channel closed by the next event.
func (b *broker) take(s *subscriber, out []Event) ([]Event, bool, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	from := s.last + 1
	lost := from < b.first || from > b.next
	if lost {
		from = b.first
	}
	if b.next-from > b.queue { // a replay longer than the queue
		from, lost = b.next-b.queue, true
	}
	for i := from; i < b.next && len(out) < sseBatch; i++ {
		out = append(out, b.ring[i%int64(len(b.ring))])
	}
	s.last = from + int64(len(out)) - 1
	return out, lost, b.wake
}

func (b *broker) now() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.next - 1
}

// sseWriteTimeout bounds one write to a client.
const sseWriteTimeout = 10 * time.Second

// events streams events as SSE frames: "id", "event" (the lifecycle event
// type) and "data" (the Event JSON). With a Last-Event-ID header (sent by
// EventSource on reconnect) or ?since=<id> it first replays the kept
// events after that id. A comment frame every keepalive keeps proxies
// from closing an idle stream. Past MaxSubscribers clients it answers 503
// BUSY; a client further behind than SubscriberQueue is disconnected.
func (a *API) events(w http.ResponseWriter, r *http.Request) {
	last, err := a.lastEventID(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ctx, kick := context.WithCancelCause(r.Context())
	defer kick(nil)
	sub := a.broker.subscribe(last, kick)
	if sub == nil {
		w.Header().Set("Retry-After", "5")
		a.fail(w, r, &apiError{http.StatusServiceUnavailable, "BUSY",
			fmt.Sprintf("%d event streams are open, the most this server serves at once; try again later", a.broker.max)})
		return
	}
	defer a.broker.unsubscribe(sub)
	st := newSSEStream(ctx, w, a.broker.queue)
	defer st.close()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if !st.write(fmt.Appendf(nil, "retry: 2000\nevent: hello\ndata: {\"at\":%q}\n\n", time.Now().UTC().Format(time.RFC3339Nano))) {
		st.slow()
		return
	}
	a.stream(st, sub)
}

// lastEventID is the id of the last event the client has seen: the
// Last-Event-ID header (-1, replay everything kept, when it is not a
// number), else ?since=, else the latest event (no replay).
func (a *API) lastEventID(r *http.Request) (int64, error) {
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n, nil
		}
		return -1, nil
	}
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, badRequest("INVALID_QUERY", "since must be an event id")
		}
		return n, nil
	}
	return a.broker.now(), nil
}

// stream sends sub's events in frames, a batch at a time, and a keepalive
// when there are none, until the client goes, is kicked or the API
// closes.
func (a *API) stream(st *sseStream, sub *subscriber) {
	keep := time.NewTicker(a.opts.Keepalive)
	defer keep.Stop()
	var buf []Event
	var frame []byte
	for {
		evs, lost, wake := a.broker.take(sub, buf[:0])
		buf, frame = evs, frame[:0]
		if lost {
			frame = fmt.Appendf(frame, "event: reset\ndata: {\"reason\":\"events were missed; reload the state\",\"last\":%d}\n\n", sub.lastSeen(evs))
		}
		for _, e := range evs {
			data, _ := json.Marshal(e)
			frame = fmt.Appendf(frame, "id: %d\nevent: %s\ndata: %s\n\n", e.ID, e.Type, data)
		}
		if len(frame) > 0 && !st.write(frame) {
			st.slow()
			return
		}
		if len(evs) == sseBatch {
			continue // more are waiting
		}
		select {
		case <-st.ctx.Done():
			st.slow()
			return
		case <-a.done:
			return
		case <-keep.C:
			if !st.write([]byte(": keepalive\n\n")) {
				st.slow()
				return
			}
		case <-wake:
		}
	}
}

// sseStream is one client's response. Every write is bounded in time, and
// a kick (ctx's cancellation) aborts a write in progress: a client that
// does not read blocks it.
type sseStream struct {
	ctx     context.Context
	w       http.ResponseWriter
	rc      *http.ResponseController
	queue   int64         // the broker's queue bound, for the reset's reason
	aborted chan struct{} // closed once a kick has aborted the writes
	stop    func() bool   // stops the abort if it has not started
}

func newSSEStream(ctx context.Context, w http.ResponseWriter, queue int64) *sseStream {
	st := &sseStream{ctx: ctx, w: w, rc: http.NewResponseController(w), queue: queue, aborted: make(chan struct{})}
	st.stop = context.AfterFunc(ctx, func() {
		defer close(st.aborted)
		st.rc.SetWriteDeadline(time.Now())
	})
	return st
}

// close waits for an abort in progress: the handler must not return while
// it still touches the response.
func (st *sseStream) close() {
	if !st.stop() {
		<-st.aborted
	}
}

// write sends p and flushes it, within sseWriteTimeout; false means the
// client is gone or kicked.
func (st *sseStream) write(p []byte) bool {
	st.rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
	if st.ctx.Err() != nil { // kicked meanwhile: the deadline just set must not stand
		return false
	}
	if _, err := st.w.Write(p); err != nil {
		return false
	}
	return st.rc.Flush() == nil
}

// slow answers a kicked client: a reset if it still accepts data.
func (st *sseStream) slow() {
	if context.Cause(st.ctx) != errSlow {
		return
	}
	<-st.aborted
	st.rc.SetWriteDeadline(time.Now().Add(time.Second))
	st.w.Write(fmt.Appendf(nil, "event: reset\ndata: {\"reason\":\"this client fell more than %d events behind; reconnect and reload the state\"}\n\n", st.queue))
	st.rc.Flush()
}

// lastSeen is the id a reset frame reports: the event before the first
// one sent after it.
func (s *subscriber) lastSeen(evs []Event) int64 {
	if len(evs) > 0 {
		return evs[0].ID - 1
	}
	return s.last
}
