package dispatch

import (
	"container/heap"
	"slices"
	"strings"
	"time"

	"github.com/yella-go/yella/store"
)

// Flow limits in memory: the dispatcher of a single-process engine is the
// only one to start runs, so it decides them exactly, with the rules of
// store.Flow. A concurrency key counts the items started and not Done; a
// rate key's state is its theoretical arrival time (store.Rate.Allow),
// seeded from the store at start (LoadRates) and handed to each claim
// (Flow.TAT) so the store keeps it.
//
// Runs held back by a key wait aside, per key, in start order: one busy
// key never blocks the others. A key at its concurrency limit gets its
// next run back when one of its runs is Done; a rate key gets a wake-up at
// the time it next allows a start, which hands back as many runs as it
// then allows.

type flowState struct {
	flows    map[string]store.Flow // per process
	tats     map[string]time.Time  // rate key → theoretical arrival time
	sweepAt  int                   // len(tats) that triggers a sweep of past states
	keyRun   map[string]int        // concurrency key → items started, not Done
	keyCap   map[string]int        // concurrency key → its limit, as last seen
	keyPark  map[string]*seqHeap   // concurrency key → items waiting for room
	ratePark map[string]*seqHeap   // rate key → items waiting for a start
	rateOf   map[string]store.Rate // rate key → its rate, as last seen
	wakes    wakeHeap              // rate keys with waiting items, by wake time
	wakeAt   map[string]time.Time  // rate key → its scheduled wake-up
	rearm    bool                  // a wake-up was added: re-arm the timer
}

func newFlowState() flowState {
	return flowState{flows: map[string]store.Flow{}, tats: map[string]time.Time{}, sweepAt: 1024,
		keyRun: map[string]int{}, keyCap: map[string]int{}, keyPark: map[string]*seqHeap{},
		ratePark: map[string]*seqHeap{}, rateOf: map[string]store.Rate{}, wakeAt: map[string]time.Time{}}
}

func (f *flowState) rated(process string) bool { return !f.flows[process].Rate.Zero() }

// nextWake is the earliest scheduled rate key wake-up.
func (f *flowState) nextWake() (time.Time, bool) {
	for f.wakes.Len() > 0 {
		w := f.wakes[0]
		if at, ok := f.wakeAt[w.key]; ok && at.Equal(w.at) {
			return w.at, true
		}
		heap.Pop(&f.wakes) // superseded
	}
	return time.Time{}, false
}

// SetFlow sets the flow limits of process's runs; the zero Flow removes
// them. Items already waiting on a key keep waiting until their key lets
// them go.
func (d *Dispatcher) SetFlow(process string, f store.Flow) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f == (store.Flow{}) {
		delete(d.flow.flows, process)
	} else {
		d.flow.flows[process] = f
	}
	d.fillLocked()
}

// LoadRates seeds the state of rate keys (store.Store.RateStates), keeping
// the later of a loaded and a known state.
func (d *Dispatcher) LoadRates(tats map[string]time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, t := range tats {
		if t.After(d.flow.tats[k]) {
			d.flow.tats[k] = t
		}
	}
}

// HoldRate raises a rate key's state to at least tat: the key starts
// nothing before tat less its burst tolerance (store.Rate.Allow).
func (d *Dispatcher) HoldRate(key string, tat time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if tat.After(d.flow.tats[key]) {
		d.flow.tats[key] = tat
	}
}

// RateState returns the state of a rate key (zero: it allows a burst).
func (d *Dispatcher) RateState(key string) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.flow.tats[key]
}

// Waiting says why a known item has not started: "ready" (waiting for a
// slot), "delayed" (until its RetryAt), "process" (its process is at its
// cap), "key" (its concurrency key is at its bound) or "rate" (its rate
// key allows no start before at). ok is false for an item the dispatcher
// does not hold waiting.
func (d *Dispatcher) Waiting(id string) (why string, at time.Time, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, found := d.byID[id]
	if !found {
		return "", time.Time{}, false
	}
	switch e.where {
	case inDelayed:
		return "delayed", e.RetryAt, true
	case inProcess:
		return "process", time.Time{}, true
	case inKey:
		return "key", time.Time{}, true
	case inRate:
		return "rate", d.flow.wakeAt[e.RateKey()], true
	}
	return "ready", time.Time{}, true
}

// KeyStats counts, per flow key, the items waiting on it, and for
// concurrency keys the items running under it.
type KeyStats struct {
	Key     string
	Waiting int
	Running int       // concurrency keys
	Next    time.Time // rate keys: the scheduled wake-up
}

// WaitingKeys lists the rate and concurrency keys that hold items back,
// at most limit of each, busiest first.
func (d *Dispatcher) WaitingKeys(limit int) (rate, conc []KeyStats) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, h := range d.flow.ratePark {
		rate = append(rate, KeyStats{Key: k, Waiting: live(h), Next: d.flow.wakeAt[k]})
	}
	for k, h := range d.flow.keyPark {
		conc = append(conc, KeyStats{Key: k, Waiting: live(h), Running: d.flow.keyRun[k]})
	}
	return busiest(rate, limit), busiest(conc, limit)
}

func live(h *seqHeap) int {
	n := 0
	for _, e := range *h {
		if !e.removed {
			n++
		}
	}
	return n
}

// keyFullLocked parks e if its concurrency key is at its limit.
func (d *Dispatcher) keyFullLocked(e *entry) bool {
	k := e.ConcKey()
	if k == "" {
		return false
	}
	lim := d.flow.flows[e.Process].KeyConcurrency
	if lim <= 0 {
		return false
	}
	d.flow.keyCap[k] = lim
	if d.flow.keyRun[k] < lim {
		return false
	}
	push(d.flow.keyPark, k, e, inKey)
	d.nKey++
	return true
}

// keyStartLocked counts a started item against its concurrency key.
func (d *Dispatcher) keyStartLocked(e *entry) {
	if e.ConcKey() != "" && d.flow.flows[e.Process].KeyConcurrency > 0 {
		d.flow.keyRun[e.ConcKey()]++
	}
}

// keyDoneLocked releases a Done item's concurrency key and hands its next
// waiting item back.
func (d *Dispatcher) keyDoneLocked(it Item) {
	k := it.ConcKey()
	n, ok := d.flow.keyRun[k]
	if !ok {
		return
	}
	if n <= 1 {
		delete(d.flow.keyRun, k)
	} else {
		d.flow.keyRun[k] = n - 1
	}
	if h := d.flow.keyPark[k]; h != nil && d.flow.keyRun[k] < d.flow.keyCap[k] {
		if e := pop(d.flow.keyPark, k); e != nil {
			d.nKey--
			e.where = inReady
			heap.Push(&d.ready, e)
		}
	}
	if d.flow.keyRun[k] == 0 && d.flow.keyPark[k] == nil {
		delete(d.flow.keyCap, k)
	}
}

// rateAllowLocked takes a start from e's rate key, or parks e until the key
// allows one. Items of a key start in order: e waits behind the key's
// waiting items that come before it.
func (d *Dispatcher) rateAllowLocked(e *entry, now time.Time) bool {
	f := &d.flow
	k := e.RateKey()
	r := f.flows[e.Process].Rate
	f.rateOf[k] = r
	if h := f.ratePark[k]; h != nil {
		if head := (*h)[0]; head.Rank < e.Rank || (head.Rank == e.Rank && head.Seq < e.Seq) {
			d.parkRateLocked(e, now, r)
			return false
		}
	}
	ok, next, _ := r.Allow(f.tats[k], now)
	if !ok {
		d.parkRateLocked(e, now, r)
		return false
	}
	e.Flow.TAT, e.Flow.Granted = next, now
	f.tats[k] = next
	if len(f.tats) >= f.sweepAt {
		for key, t := range f.tats {
			if !t.After(now) {
				delete(f.tats, key) // a past state allows what no state allows
			}
		}
		f.sweepAt = max(1024, 2*len(f.tats))
	}
	return true
}

// parkRateLocked parks e on its rate key and schedules the key's wake-up
// if none is.
func (d *Dispatcher) parkRateLocked(e *entry, now time.Time, r store.Rate) {
	k := e.RateKey()
	push(d.flow.ratePark, k, e, inRate)
	d.nRate++
	if _, ok := d.flow.wakeAt[k]; !ok {
		_, _, at := r.Allow(d.flow.tats[k], now)
		if at.IsZero() {
			at = now
		}
		d.scheduleWake(k, at)
	}
}

func (d *Dispatcher) scheduleWake(key string, at time.Time) {
	d.flow.wakeAt[key] = at
	heap.Push(&d.flow.wakes, wake{at: at, key: key})
	d.flow.rearm = true
}

// rateWakeLocked hands back, for each rate key whose wake-up is due, as
// many waiting items as the key allows starts now (they take their start
// when they are dispatched), and schedules the key's next wake-up if items
// are left.
func (d *Dispatcher) rateWakeLocked(now time.Time) {
	f := &d.flow
	for {
		at, ok := f.nextWake()
		if !ok || at.After(now) {
			return
		}
		w := heap.Pop(&f.wakes).(wake)
		delete(f.wakeAt, w.key)
		r := f.rateOf[w.key]
		tat := f.tats[w.key]
		for {
			ok, next, at := r.Allow(tat, now)
			if !ok {
				if f.ratePark[w.key] != nil {
					d.scheduleWake(w.key, at)
				}
				break
			}
			e := pop(f.ratePark, w.key)
			if e == nil {
				break
			}
			d.nRate--
			e.where = inReady
			heap.Push(&d.ready, e)
			tat = next
		}
	}
}

// push parks e on key's heap in m.
func push(m map[string]*seqHeap, key string, e *entry, where place) {
	h := m[key]
	if h == nil {
		h = &seqHeap{}
		m[key] = h
	}
	e.where = where
	heap.Push(h, e)
}

// pop takes the first live entry of key's heap in m, dropping the heap
// once empty; nil when none is left.
func pop(m map[string]*seqHeap, key string) *entry {
	h := m[key]
	if h == nil {
		return nil
	}
	var out *entry
	for h.Len() > 0 {
		e := heap.Pop(h).(*entry)
		if !e.removed {
			out = e
			break
		}
	}
	if h.Len() == 0 {
		delete(m, key)
	}
	return out
}

func busiest(ks []KeyStats, limit int) []KeyStats {
	slices.SortFunc(ks, func(a, b KeyStats) int {
		if a.Waiting != b.Waiting {
			return b.Waiting - a.Waiting
		}
		return strings.Compare(a.Key, b.Key)
	})
	if len(ks) > limit {
		ks = ks[:limit]
	}
	return ks
}

type wake struct {
	at  time.Time
	key string
}

type wakeHeap []wake

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h wakeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *wakeHeap) Push(x any)        { *h = append(*h, x.(wake)) }
func (h *wakeHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	return w
}
