package yella

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yella-go/yella/store"
)

// StoreHealth is the engine's view of its store, from the writes, claims
// and heartbeats it makes: the store is down from the first of them that
// fails until the next one that succeeds. While it is down the engine
// keeps retrying with backoff (claims, heartbeats and the outcomes of
// finished attempts, which are kept until they commit), so nothing it
// acknowledged is lost; it resumes on its own when the store answers.
type StoreHealth struct {
	// Up is false while the store's last answer was a failure.
	Up bool
	// Since is when the store went down (while down) or came back (after
	// an outage); zero if it never failed.
	Since time.Time
	// LastError is the last failure, kept after the store came back.
	LastError string
	// Failures counts the store calls that failed since the engine was
	// created (each retry is one).
	Failures int64
	// Outages counts the times the store went down.
	Outages int64
}

// storeHealth tracks StoreHealth. down is read without the lock on every
// successful call, so a healthy store costs one atomic load.
type storeHealth struct {
	down atomic.Bool

	mu        sync.Mutex
	since     time.Time
	lastError string
	failures  int64
	outages   int64
}

// StoreHealth reports whether the engine's store calls succeed. An
// operator's health check (httpapi's /api/health) reports the engine
// unhealthy while Up is false.
func (e *Engine) StoreHealth() StoreHealth {
	h := &e.storeHealth
	h.mu.Lock()
	defer h.mu.Unlock()
	return StoreHealth{Up: !h.down.Load(), Since: h.since, LastError: h.lastError, Failures: h.failures, Outages: h.outages}
}

// storeFailed records a failed store call that the engine retries. The
// first failure of an outage is logged as an error; the others are
// counted and published (InternalError events) but not logged, so an
// outage costs two log lines (this one and storeOK's), not one per retry.
func (e *Engine) storeFailed(where string, err error) {
	if errors.Is(err, store.ErrClosed) {
		return // the engine is being stopped with its store
	}
	h := &e.storeHealth
	now := e.clock.Now()
	h.mu.Lock()
	h.failures++
	h.lastError = where + ": " + err.Error()
	started := !h.down.Load()
	if started {
		h.down.Store(true)
		h.since = now
		h.outages++
	}
	h.mu.Unlock()
	if started {
		e.log.Error("store unreachable: retrying with backoff until it answers", "context", where, "err", err)
	}
	e.publish(Event{Type: InternalError, Context: where, Error: err.Error()})
}

// storeOK records a successful store call: it ends an outage.
func (e *Engine) storeOK() {
	h := &e.storeHealth
	if !h.down.Load() {
		return
	}
	now := e.clock.Now()
	h.mu.Lock()
	if !h.down.Load() {
		h.mu.Unlock()
		return
	}
	h.down.Store(false)
	downFor, since, failures, last := now.Sub(h.since), h.since, h.failures, h.lastError
	h.since = now
	h.mu.Unlock()
	e.log.Info("store reachable again", "down_since", since, "down_for", downFor, "failures", failures, "last_error", last)
}
