package yella

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/yella-go/yella/internal/dispatch"
	"github.com/yella-go/yella/store"
)

// The dispatcher is this engine's queue of idle runs, in memory; the store
// holds every run durably from its admission. The queue need not hold them
// all: beyond Config.MaxQueued ready runs, an emitted run is left in the
// store, and the loader reads such runs back in admission order (seq), a
// page at a time, whenever the queue has room for a page. So memory stays
// bounded however large a backlog grows, and a restart does not read the
// whole backlog before it can drain it.
//
// While runs may be left in the store the queue is spilled: every run
// emitted meanwhile is left there too (else one emitted later could be
// queued ahead of one the loader has not reached, and a run with a seq
// below the loader's cursor could be passed over), and the loader holds
// the dispatcher, so Drain waits for them. A run the loader reads that is
// already queued is ignored by the dispatcher; one that started meanwhile
// finds its claim refused. Follow-ups, retries, requeues and runs with a
// priority above 0 are always queued: they are few next to the backlog and
// must not wait behind it.

// spill is the state of the queue's overflow into the store.
type spill struct {
	mu     sync.Mutex
	on     bool        // idle runs of this engine may be in the store, not queued
	from   int64       // while on: every such run has a seq >= from
	closed bool        // the loader has stopped: no new hold
	active atomic.Bool // on, for the dispatcher's Low (called under its lock)
	kick   chan struct{}
	quit   chan struct{}
	once   sync.Once
}

func (s *spill) init() {
	s.kick, s.quit = make(chan struct{}, 1), make(chan struct{})
}

// page is how many idle runs the loader reads at a time.
func (e *Engine) page() int {
	return min(pendingPage, max(e.cfg.MaxQueued/2, 1))
}

// queueEmitted queues runs an emission admitted, or leaves them in the
// store when the queue is full or spilled.
func (e *Engine) queueEmitted(items ...dispatch.Item) {
	if e.node != nil || len(items) == 0 {
		e.enqueue(items...)
		return
	}
	s := &e.spill
	s.mu.Lock()
	defer s.mu.Unlock()
	// Under s.mu: the loader ends a spill under it too, so a run is either
	// queued here or left for a page the loader has yet to read.
	if !s.on && e.disp.Ready()+len(items) <= e.cfg.MaxQueued {
		e.enqueue(items...)
		return
	}
	from := items[0].Seq
	for _, it := range items[1:] {
		from = min(from, it.Seq)
	}
	e.spillLocked(from)
}

// spillFrom notes that idle runs from seq on may be in the store and not
// queued (Start's first page, a process registered after Start).
func (e *Engine) spillFrom(seq int64) {
	e.spill.mu.Lock()
	defer e.spill.mu.Unlock()
	e.spillLocked(seq)
}

func (e *Engine) spillLocked(seq int64) {
	s := &e.spill
	switch {
	case s.on:
		s.from = min(s.from, seq)
	case s.closed:
		return // stopped: the next Start reads them
	default:
		s.on, s.from = true, seq
		s.active.Store(true)
		e.disp.Hold()
	}
	signal(s.kick)
}

// low is the dispatcher's Low: the queue has room for a page.
func (e *Engine) low() {
	if e.spill.active.Load() {
		signal(e.spill.kick)
	}
}

// loader reads the runs left in the store into the queue while it has room
// for them, until the engine stops. It owns one loopWG count.
func (e *Engine) loader() {
	defer e.loopWG.Done()
	s := &e.spill
	for {
		select {
		case <-s.kick:
			for e.loadPage() {
			}
		case <-s.quit:
			s.mu.Lock()
			s.closed = true
			if s.on {
				s.on = false
				s.active.Store(false)
				e.disp.Release()
			}
			s.mu.Unlock()
			return
		}
	}
}

// stopLoader makes the loader return (the engine is stopping).
func (e *Engine) stopLoader() {
	e.spill.once.Do(func() { close(e.spill.quit) })
}

// loadPage reads the next page of runs left in the store into the queue if
// it has room for it; it reports whether to look again at once.
func (e *Engine) loadPage() bool {
	s := &e.spill
	page := e.page()
	s.mu.Lock()
	if !s.on || e.disp.Ready() > e.cfg.MaxQueued-page || !e.isState(stateStarted) {
		s.mu.Unlock()
		return false
	}
	after := s.from - 1
	s.from = math.MaxInt64 // lowered by the runs left in the store during the read
	s.mu.Unlock()
	var runs []store.Pending
	err := e.persist("load pending", func() error {
		var err error
		runs, err = e.store.Pending(e.io, after, page)
		return err
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil { // stopped hard or the store is closed
		s.from = min(s.from, after+1)
		return false
	}
	e.enqueue(pendingItems(runs)...)
	if len(runs) == page {
		s.from = min(s.from, runs[len(runs)-1].Seq+1)
		return true
	}
	if s.from != math.MaxInt64 { // left in the store during the read
		return true
	}
	s.on = false // every run after the cursor that was committed is queued now
	s.active.Store(false)
	e.disp.Release()
	return false
}
