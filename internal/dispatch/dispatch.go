// Package dispatch decides which idle run starts next. It is the engine's
// in-memory queue of the store's idle runs: fed by admissions, retries and
// repairs, and by the engine's loader with the runs of a backlog too large
// to hold (Config.Low tells it when the queue runs low), so nothing polls
// the database.
//
// A Dispatcher owns the fleet's execution slots, each process's running
// cap and its flow limits (see flow.go). Runs become eligible in rank
// order (store.Rank: admission time moved earlier by priority), then
// creation order (Seq); a run whose process is at its cap, whose
// concurrency key is at its limit or whose rate key allows no start yet
// waits aside without blocking other runs; a run with a future RetryAt
// waits on one clock timer for the earliest of them.
// There is no dispatcher goroutine: work is started from whichever goroutine
// adds an item or finishes one, under the Dispatcher's lock.
package dispatch

import (
	"container/heap"
	"sync"
	"time"

	"github.com/yella-go/yella/internal/clock"
)

// Item is one idle run known to the dispatcher.
type Item struct {
	ID          string
	Seq         int64
	Rank        int64 // start order (store.Rank); ties by Seq
	Process     string
	Correlation string
	RetryAt     time.Time
	// Flow holds the run's flow keys; nil for a run without any, as most
	// are: a queued run costs its item, and a backlog is many items.
	Flow *Flow
	// Waiting marks a waiting run's deadline (RetryAt): until it is due,
	// Idle does not wait for it (the run waits for a signal or a time, not
	// for a slot).
	Waiting bool
	// vacated: the item's slot was released by Vacate; Done releases the
	// rest.
	vacated bool
}

// Flow is what flow control knows of an item's run.
type Flow struct {
	// RateKey and ConcKey are the run's flow keys ("" for none); they
	// apply when its process has a flow (SetFlow).
	RateKey string
	ConcKey string
	// TAT is set when the item starts with a rate key: the key's new state
	// (store.Rate.Allow), for the claim to store; Granted is the time the
	// key granted the start, the time the claim records as its start, so
	// the stored starts obey the limit exactly.
	TAT     time.Time
	Granted time.Time
}

// FlowOf returns the flow of a run with keys rate and conc, nil for none.
func FlowOf(rate, conc string) *Flow {
	if rate == "" && conc == "" {
		return nil
	}
	return &Flow{RateKey: rate, ConcKey: conc}
}

// RateKey is the item's rate key, "" for none.
func (it *Item) RateKey() string {
	if it.Flow == nil {
		return ""
	}
	return it.Flow.RateKey
}

// ConcKey is the item's concurrency key, "" for none.
func (it *Item) ConcKey() string {
	if it.Flow == nil {
		return ""
	}
	return it.Flow.ConcKey
}

// Config configures a Dispatcher.
type Config struct {
	// Slots is the number of items that may be started and not yet Done
	// or Vacated.
	Slots int
	Clock clock.Clock
	// Start is called, under the dispatcher's lock, for each item that takes
	// a slot. It must not block or call back into the Dispatcher; it
	// typically starts a goroutine.
	Start func(Item)
	// Freed, if set, is called under the dispatcher's lock each time a
	// started item is Done or Vacated (a slot may be free). The same rules
	// as Start.
	Freed func()
	// Low, if set, is called under the dispatcher's lock after items were
	// started or Done while fewer than LowWater items are ready (Ready):
	// the engine may have more in the store. The same rules as Start.
	Low      func()
	LowWater int
}

// Stats is a snapshot of the dispatcher's queues.
type Stats struct {
	Ready     int            // eligible or waiting for a process slot or a flow limit
	Delayed   int            // waiting for their RetryAt
	RateWait  int            // waiting for their rate key to allow a start
	KeyWait   int            // waiting for their concurrency key to have room
	Running   int            // started and not yet Done
	ByProcess map[string]int // started and not yet Done, per process
}

type entry struct {
	Item
	index   int // position in its current heap
	where   place
	removed bool
}

// place is where a waiting entry is.
type place uint8

const (
	inReady place = iota
	inDelayed
	inProcess // parked: its process is at its cap
	inKey     // parked: its concurrency key is at its limit
	inRate    // parked: its rate key allows no start yet
)

// Dispatcher schedules items onto slots. It is safe for concurrent use.
type Dispatcher struct {
	mu       sync.Mutex
	cfg      Config
	paused   bool
	ready    seqHeap
	delayed  timeHeap
	parked   map[string]*seqHeap // per process, waiting for a process slot
	flow     flowState
	byID     map[string]*entry // ready, parked or delayed
	limits   map[string]int
	running  int
	vacated  int // items started, Vacated and not Done
	byProc   map[string]int
	corr     map[string]int  // active items per correlation
	idleW    []chan struct{} // closed when nothing waits or runs
	runW     []chan struct{} // closed when nothing runs
	nDelayed int
	nKey     int // entries parked inKey
	nProc    int // entries parked inProcess
	nRate    int // entries parked inRate
	corrW    map[string][]chan struct{}
	stopTmr  func() bool
	tmrAt    time.Time
	inactive int // ready+parked+delayed items, and holds
	nHeld    int // holds (Hold, and Replace's while it swaps)
	nWaiting int // delayed items that are waiting runs' deadlines (Item.Waiting)
}

// New returns a paused dispatcher; call Resume to start work.
func New(cfg Config) *Dispatcher {
	return &Dispatcher{
		cfg:    cfg,
		paused: true,
		parked: map[string]*seqHeap{},
		byID:   map[string]*entry{},
		limits: map[string]int{},
		byProc: map[string]int{},
		corr:   map[string]int{},
		corrW:  map[string][]chan struct{}{},
		flow:   newFlowState(),
	}
}

// SetLimit caps how many items of process may run at once; 0 removes the cap.
func (d *Dispatcher) SetLimit(process string, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n <= 0 {
		delete(d.limits, process)
	} else {
		d.limits[process] = n
	}
	d.unparkLocked(process)
	d.fillLocked()
}

// Add makes items known. Items already known (by ID) are ignored.
func (d *Dispatcher) Add(items ...Item) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.cfg.Clock.Now()
	for _, it := range items {
		if _, ok := d.byID[it.ID]; ok {
			continue
		}
		e := &entry{Item: it}
		d.byID[it.ID] = e
		d.inactive++
		d.corr[it.Correlation]++
		if it.RetryAt.After(now) {
			e.where = inDelayed
			d.nDelayed++
			if it.Waiting {
				d.nWaiting++
			}
			heap.Push(&d.delayed, e)
		} else {
			e.Waiting = false
			heap.Push(&d.ready, e)
		}
	}
	d.armLocked(now)
	d.fillLocked()
}

// Replace queues it in place of the item of the same run that has not
// started, if any, at once: the run's chain is never seen idle in between
// (Add keeps an item already queued instead).
func (d *Dispatcher) Replace(it Item) {
	d.mu.Lock()
	d.corr[it.Correlation]++ // the chain and the dispatcher held across the swap
	d.inactive++
	d.nHeld++
	d.mu.Unlock()
	d.Remove(it.ID)
	d.Add(it)
	d.mu.Lock()
	d.inactive--
	d.nHeld--
	d.releaseCorrLocked(it.Correlation)
	d.notifyIdleLocked()
	d.mu.Unlock()
}

// Remove forgets an item that has not started (a cancelled run). It reports
// whether the item was waiting.
func (d *Dispatcher) Remove(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.byID[id]
	if !ok {
		return false
	}
	e.removed = true
	switch e.where {
	case inDelayed:
		d.nDelayed--
		if e.Waiting {
			d.nWaiting--
		}
	case inProcess:
		d.nProc--
	case inKey:
		d.nKey--
	case inRate:
		d.nRate--
	}
	delete(d.byID, id)
	d.inactive--
	d.releaseCorrLocked(e.Correlation)
	d.notifyIdleLocked()
	return true
}

// Done releases the slot of a started item. Add follow-up items (children,
// the retry of the same run) before calling Done, so waiters never see the
// chain idle in between.
func (d *Dispatcher) Done(it Item) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if it.vacated {
		d.vacated--
	} else {
		d.running--
	}
	d.byProc[it.Process]--
	if d.byProc[it.Process] <= 0 {
		delete(d.byProc, it.Process)
	}
	d.releaseCorrLocked(it.Correlation)
	d.unparkLocked(it.Process)
	d.keyDoneLocked(it)
	d.notifyIdleLocked()
	d.fillLocked()
	if d.cfg.Freed != nil {
		d.cfg.Freed()
	}
}

// Vacate releases the fleet slot of a started item whose handler has
// returned while its end is still being written, so that the next item
// starts at once: its claim can then share the end's write. Everything
// else the item holds (its process's and its concurrency key's places, its
// correlation) stays held, and it counts as running for Idle, Quiet and
// Running, until Done(*it).
func (d *Dispatcher) Vacate(it *Item) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if it.vacated {
		return
	}
	it.vacated = true
	d.running--
	d.vacated++
	d.fillLocked()
	if d.cfg.Freed != nil {
		d.cfg.Freed()
	}
}

// Hold counts as one waiting item until Release: it keeps Idle from firing
// while the engine is still loading items from the store.
func (d *Dispatcher) Hold() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inactive++
	d.nHeld++
}

// Release ends a Hold.
func (d *Dispatcher) Release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inactive--
	d.nHeld--
	d.notifyIdleLocked()
}

// Pause stops starting items; running ones continue.
func (d *Dispatcher) Pause() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.paused = true
}

// Resume starts items again.
func (d *Dispatcher) Resume() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.paused = false
	d.armLocked(d.cfg.Clock.Now())
	d.fillLocked()
}

// Close stops the retry timer. The dispatcher stays paused.
func (d *Dispatcher) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.paused = true
	if d.stopTmr != nil {
		d.stopTmr()
		d.stopTmr = nil
	}
}

// startedLocked is how many items are started and not Done: running,
// and vacated (their slot released, their outcome still being written).
func (d *Dispatcher) startedLocked() int { return d.running + d.vacated }

// Active reports how many items are waiting or running (holds are not
// items).
func (d *Dispatcher) Active() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inactive - d.nHeld + d.startedLocked()
}

// Free reports how many slots no item holds or waits for: the slots less
// the items started and not Done or Vacated and the items waiting (holds
// do not count). It is negative when more items wait than slots are free.
func (d *Dispatcher) Free() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg.Slots - d.running - len(d.byID)
}

// Running reports how many items are started and not Done.
func (d *Dispatcher) Running() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.startedLocked()
}

// Stats returns a snapshot of the queues.
func (d *Dispatcher) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := Stats{Delayed: d.nDelayed, RateWait: d.nRate, KeyWait: d.nKey, Running: d.startedLocked(), ByProcess: make(map[string]int, len(d.byProc))}
	s.Ready = d.inactive - d.nHeld - s.Delayed - s.RateWait - s.KeyWait
	for p, n := range d.byProc {
		s.ByProcess[p] = n
	}
	return s
}

// Idle returns a channel closed once no item is waiting or running, but
// for waiting runs' deadlines that are not due (Item.Waiting).
func (d *Dispatcher) Idle() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch := make(chan struct{})
	if d.startedLocked() == 0 && d.inactive == d.nWaiting {
		close(ch)
		return ch
	}
	d.idleW = append(d.idleW, ch)
	return ch
}

// Quiet returns a channel closed once no item is running (waiting items do
// not count): what a stopping engine waits for.
func (d *Dispatcher) Quiet() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch := make(chan struct{})
	if d.startedLocked() == 0 {
		close(ch)
		return ch
	}
	d.runW = append(d.runW, ch)
	return ch
}

// CorrelationDone returns a channel closed once no item of the correlation
// is waiting or running.
func (d *Dispatcher) CorrelationDone(corr string) <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch := make(chan struct{})
	if d.corr[corr] == 0 {
		close(ch)
		return ch
	}
	d.corrW[corr] = append(d.corrW[corr], ch)
	return ch
}

// ForgetWaiter drops a waiter channel returned by CorrelationDone whose
// caller gave up, so abandoned waits do not accumulate.
func (d *Dispatcher) ForgetWaiter(corr string, ch <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ws := d.corrW[corr]
	for i, w := range ws {
		if w == ch {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(d.corrW, corr)
	} else {
		d.corrW[corr] = ws
	}
}

func (d *Dispatcher) releaseCorrLocked(corr string) {
	d.corr[corr]--
	if d.corr[corr] > 0 {
		return
	}
	delete(d.corr, corr)
	for _, w := range d.corrW[corr] {
		close(w)
	}
	delete(d.corrW, corr)
}

func (d *Dispatcher) notifyIdleLocked() {
	if d.startedLocked() != 0 {
		return
	}
	for _, w := range d.runW {
		close(w)
	}
	d.runW = nil
	if d.inactive != d.nWaiting {
		return
	}
	for _, w := range d.idleW {
		close(w)
	}
	d.idleW = nil
}

func (d *Dispatcher) atLimit(process string) bool {
	lim, ok := d.limits[process]
	return ok && d.byProc[process] >= lim
}

// unparkLocked moves the next parked item of process back to the ready heap
// if the process has a free slot.
func (d *Dispatcher) unparkLocked(process string) {
	ph := d.parked[process]
	for ph != nil && ph.Len() > 0 && !d.atLimit(process) {
		e := heap.Pop(ph).(*entry)
		if e.removed {
			continue
		}
		e.where = inReady
		d.nProc--
		heap.Push(&d.ready, e)
		break
	}
	if ph != nil && ph.Len() == 0 {
		delete(d.parked, process)
	}
}

func (d *Dispatcher) fillLocked() {
	var now time.Time // read once, when a rate limit needs it
	for !d.paused && d.running < d.cfg.Slots && d.ready.Len() > 0 {
		e := heap.Pop(&d.ready).(*entry)
		if e.removed {
			continue
		}
		if d.atLimit(e.Process) {
			ph := d.parked[e.Process]
			if ph == nil {
				ph = &seqHeap{}
				d.parked[e.Process] = ph
			}
			e.where = inProcess
			d.nProc++
			heap.Push(ph, e)
			continue
		}
		if d.keyFullLocked(e) {
			continue
		}
		if e.RateKey() != "" && d.flow.rated(e.Process) {
			if now.IsZero() {
				now = d.cfg.Clock.Now()
			}
			if !d.rateAllowLocked(e, now) {
				continue
			}
		}
		delete(d.byID, e.ID)
		d.inactive--
		d.running++
		d.byProc[e.Process]++
		d.keyStartLocked(e)
		d.cfg.Start(e.Item)
	}
	if d.flow.rearm {
		d.flow.rearm = false
		d.timerLocked()
	}
	if d.cfg.Low != nil && d.readyLocked() < d.cfg.LowWater {
		d.cfg.Low()
	}
}

// Ready reports how many items could start but for a free slot: known,
// not started, due, and not parked at a cap or flow limit.
func (d *Dispatcher) Ready() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.readyLocked()
}

func (d *Dispatcher) readyLocked() int {
	return d.inactive - d.nHeld - d.nDelayed - d.nProc - d.nKey - d.nRate
}

// armLocked moves due delayed items to ready and arms the timer for the
// earliest remaining one.
func (d *Dispatcher) armLocked(now time.Time) {
	for d.delayed.Len() > 0 {
		e := d.delayed[0]
		if e.removed {
			heap.Pop(&d.delayed)
			continue
		}
		if e.RetryAt.After(now) {
			break
		}
		heap.Pop(&d.delayed)
		e.where = inReady
		d.nDelayed--
		if e.Waiting { // due: a run to start like any other
			e.Waiting = false
			d.nWaiting--
		}
		heap.Push(&d.ready, e)
	}
	d.rateWakeLocked(now)
	d.timerLocked()
}

// timerLocked arms the timer for the earliest delayed item or rate key
// wake-up, at its time (clock.At): a delay from a time read before would
// fire late under a fake clock advanced meanwhile.
func (d *Dispatcher) timerLocked() {
	if d.paused {
		return
	}
	var at time.Time
	if d.delayed.Len() > 0 {
		at = d.delayed[0].RetryAt
	}
	if w, ok := d.flow.nextWake(); ok && (at.IsZero() || w.Before(at)) {
		at = w
	}
	if at.IsZero() {
		return
	}
	if d.stopTmr != nil {
		if at.Equal(d.tmrAt) {
			return
		}
		d.stopTmr()
	}
	d.tmrAt = at
	d.stopTmr = clock.At(d.cfg.Clock, at, d.fire)
}

func (d *Dispatcher) fire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopTmr = nil
	if d.paused {
		return
	}
	d.armLocked(d.cfg.Clock.Now())
	d.fillLocked()
}

type seqHeap []*entry

func (h seqHeap) Len() int { return len(h) }
func (h seqHeap) Less(i, j int) bool {
	if h[i].Rank != h[j].Rank {
		return h[i].Rank < h[j].Rank
	}
	return h[i].Seq < h[j].Seq
}
func (h seqHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *seqHeap) Push(x any)   { e := x.(*entry); e.index = len(*h); *h = append(*h, e) }
func (h *seqHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

type timeHeap []*entry

func (h timeHeap) Len() int { return len(h) }
func (h timeHeap) Less(i, j int) bool {
	if !h[i].RetryAt.Equal(h[j].RetryAt) {
		return h[i].RetryAt.Before(h[j].RetryAt)
	}
	return h[i].Seq < h[j].Seq
}
func (h timeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *timeHeap) Push(x any)   { e := x.(*entry); e.index = len(*h); *h = append(*h, e) }
func (h *timeHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
