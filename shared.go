package yella

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/internal/dispatch"
	"github.com/yella-go/yella/store"
)

// An engine on a shared store (store.Shared: several engine processes on
// one database) is a node. Its dispatcher then holds only runs it has
// claimed: it cannot know the runs other nodes admit, retry or reclaim, so
// instead of claiming the runs it indexed itself it asks the store for the
// next ones (ClaimNext), as many as it has free slots and a few more, and
// the store picks them across nodes within the processes' running caps.
//
// The node claims again when it admits or frees something itself, a
// moment (watchCooldown, on the engine's clock) after the store reports
// another node's change (Watch: a burst of notifications costs one claim),
// at the earliest retry time the store reports, and on a poll every
// sharedPoll (±20%), which bounds the latency of a lost notification.
// While the store may hold claimable runs of its processes the node holds
// its dispatcher, so Drain waits for them.

// sharedPoll is how often a node looks for claimable runs without being
// told.
const sharedPoll = time.Second

// watchCooldown is how long a node waits after a reported change before
// it claims.
const watchCooldown = 20 * time.Millisecond

// claimBatch bounds the runs one ClaimNext claims.
const claimBatch = 256

type node struct {
	e  *Engine
	st store.Shared

	leave     func(context.Context) error
	stopWatch func()
	wake      chan struct{} // claim again
	reclaim   chan struct{} // a node is gone: sweep for its runs
	quit      chan struct{}
	done      chan struct{}

	mu        sync.Mutex
	stopped   bool
	gen       uint64                // wake-ups so far
	held      bool                  // a dispatcher hold: claimable runs may be left
	holding   atomic.Bool           // held, for freed (called under the dispatcher's lock)
	claimed   map[string]*store.Run // claimed, not yet begun
	suspects  map[string]int64      // held by this node in the store, unknown to it at the last heartbeat (orphans.go)
	wakeAt    time.Time             // the armed retry-time timer's time
	stopTimer func() bool
	stopPoll  func() bool
	stopSoon  func() bool   // the watch cooldown's timer, while armed
	backoff   time.Duration // after a failed claim
	backlog   bool          // the last claim left claimable runs
	waiters   int           // chain waiters (EmitAndWait)
	changed   chan struct{} // closed at the next change a waiter may care about
}

func newNode(e *Engine, st store.Shared) *node {
	return &node{e: e, st: st, wake: make(chan struct{}, 1), reclaim: make(chan struct{}, 1),
		quit: make(chan struct{}), done: make(chan struct{}), claimed: map[string]*store.Run{}, changed: make(chan struct{})}
}

// join registers the engine as a node (before Start's recovery, so that
// runs left under its owner id by an earlier process are reclaimed).
func (n *node) join(ctx context.Context) error {
	leave, err := n.st.Join(ctx, n.e.owner)
	if err != nil {
		return err
	}
	n.leave = leave
	return nil
}

// start begins claiming: the watch, the poll, a first claim (before
// Start returns, like the first page of idle runs elsewhere) and the
// claim loop.
func (n *node) start() {
	n.stopWatch = n.st.Watch(func(c store.Change) {
		if c&store.ChangeGone != 0 {
			signal(n.reclaim)
		}
		if c&store.ChangeReady != 0 {
			n.pokeSoon()
		}
		n.notifyWaiters()
	})
	n.e.Subscribe(func(Event) { n.notifyWaiters() })
	n.poll()
	n.mu.Lock()
	n.gen++
	n.holdLocked()
	n.mu.Unlock()
	n.claim()
	go n.loop()
}

// stop ends claiming (the engine is stopping) and hands back the runs
// claimed but not begun, leaving them idle for other nodes.
func (n *node) stop() {
	n.mu.Lock()
	n.stopped = true
	if n.stopPoll != nil {
		n.stopPoll()
	}
	if n.stopTimer != nil {
		n.stopTimer()
	}
	if n.stopSoon != nil {
		n.stopSoon()
	}
	n.mu.Unlock()
	if n.stopWatch != nil {
		n.stopWatch()
	}
	close(n.quit)
	<-n.done
	n.mu.Lock()
	var back []store.Run
	for id, r := range n.claimed {
		if n.e.disp.Remove(id) {
			back = append(back, *r)
			delete(n.claimed, id)
		}
	}
	n.mu.Unlock()
	n.handBack(back)
	n.release()
}

// handBack leaves runs claimed here but not begun idle for other nodes.
func (n *node) handBack(runs []store.Run) {
	for i := range runs {
		r := &runs[i]
		u := store.Update{RunID: r.ID, Epoch: r.Epoch, Now: n.e.clock.Now(), Action: store.ActionHandBack, Note: "engine stopped before the attempt began"}
		if _, err := n.e.store.Update(n.e.io, u); err != nil && !errors.Is(err, store.ErrFenced) {
			n.e.internalError("hand back", err)
		}
	}
}

// started hands the dispatcher a run the store admitted already claimed
// by this engine (Engine.startHere), as a claim's run; once the node has
// stopped, the run is handed back as stop hands back the claimed runs
// not begun. It is queued under n.mu, so that stop, which takes the
// claimed runs from the dispatcher under n.mu, finds it there.
func (n *node) started(r *store.Run) {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		n.handBack([]store.Run{*r})
		return
	}
	c := new(store.Run)
	*c = *r
	n.claimed[c.ID] = c
	n.e.disp.Add(itemOf(c))
	n.mu.Unlock()
}

// leaveNow removes the node (the engine has stopped).
func (n *node) leaveNow() {
	if n.leave == nil {
		return
	}
	if err := n.leave(n.e.io); err != nil {
		n.e.log.Warn("leaving the shared store failed; the node will be found gone", "err", err)
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// pokeSoon asks for a claim after the watch cooldown.
func (n *node) pokeSoon() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped || n.stopSoon != nil {
		return
	}
	n.stopSoon = n.e.clock.AfterFunc(watchCooldown, func() {
		n.mu.Lock()
		n.stopSoon = nil
		n.mu.Unlock()
		n.poke()
	})
}

// poke asks for a claim now: the store may hold claimable runs, so the
// dispatcher is held until a claim finds none.
func (n *node) poke() {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return
	}
	n.gen++
	n.holdLocked()
	n.mu.Unlock()
	signal(n.wake)
}

// holdLocked takes the dispatcher hold. Lock order: n.mu, then the
// dispatcher's lock (never the other way: the dispatcher calls freed
// under its lock, and freed takes no lock).
func (n *node) holdLocked() {
	if !n.held {
		n.held = true
		n.holding.Store(true)
		n.e.disp.Hold()
	}
}

func (n *node) releaseLocked() {
	if n.held {
		n.held = false
		n.holding.Store(false)
		n.e.disp.Release()
	}
}

func (n *node) release() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.releaseLocked()
}

// freed is the dispatcher's Freed: claim again if the store may hold more.
func (n *node) freed() {
	if n.holding.Load() {
		signal(n.wake)
	}
}

// enqueue stands for the dispatcher's Add on a shared store: idle runs
// this engine admitted or made idle are claimed through the store like any
// other, at once or at their retry time.
func (n *node) enqueue(items []dispatch.Item) {
	now := n.e.clock.Now()
	soon := false
	for _, it := range items {
		if it.RetryAt.After(now) {
			n.wakeAtTime(it.RetryAt)
		} else {
			soon = true
		}
	}
	if soon {
		n.poke()
	} else if len(items) > 0 { // Drain waits for delayed retries too
		n.mu.Lock()
		if !n.stopped {
			n.holdLocked()
		}
		n.mu.Unlock()
	}
}

// wakeAtTime arms the retry-time timer for t, unless it is armed sooner.
func (n *node) wakeAtTime(t time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped || (n.stopTimer != nil && !n.wakeAt.After(t)) {
		return
	}
	if n.stopTimer != nil {
		n.stopTimer()
	}
	n.wakeAt = t
	n.stopTimer = clock.At(n.e.clock, t, func() {
		n.mu.Lock()
		n.stopTimer = nil
		n.mu.Unlock()
		n.poke()
	})
}

// poll arms the next jittered poll.
func (n *node) poll() {
	d := time.Duration(float64(sharedPoll) * (0.8 + 0.4*rand.Float64()))
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return
	}
	n.stopPoll = n.e.clock.AfterFunc(d, func() {
		signal(n.wake)
		n.poll()
	})
}

func (n *node) loop() {
	defer close(n.done)
	for {
		select {
		case <-n.quit:
			return
		case <-n.reclaim:
			if err := n.e.reclaim(n.e.io, false); err != nil {
				n.e.storeFailed("reclaim", err)
			}
		case <-n.wake:
			n.claim()
		}
	}
}

// claim claims runs while slots are free and the store has them.
func (n *node) claim() {
	for n.e.isState(stateStarted) {
		n.mu.Lock()
		gen := n.gen
		n.mu.Unlock()
		// A quarter more than the free slots, so a freed slot starts its
		// next run without waiting for a claim; while the store has a
		// backlog, claims wait until half of that buffer is used, so each
		// claims several runs.
		buffer := max(n.e.cfg.Concurrency/4, 1)
		room := func() int { return min(n.e.disp.Free()+buffer, claimBatch) }
		limit := room()
		n.mu.Lock()
		backlog := n.backlog
		n.mu.Unlock()
		if limit <= 0 || (backlog && limit < max(buffer/2, 1)) {
			return
		}
		now := n.e.clock.Now()
		caps, flows := n.e.caps()
		// The claim's size is its room when it runs: the slots that free
		// while it waits for the store's writer are filled by it.
		res, err := n.st.ClaimNext(n.e.io, store.ClaimNextRequest{Owner: n.e.owner, Now: now, LeaseUntil: now.Add(n.e.cfg.LeaseTimeout),
			Processes: caps, Flows: flows, Limit: claimBatch, Room: room})
		if err != nil {
			n.e.storeFailed("claim", err)
			n.mu.Lock()
			n.backoff = min(max(2*n.backoff, 100*time.Millisecond), 5*time.Second)
			wait := n.backoff
			n.mu.Unlock()
			n.wakeAtTime(now.Add(wait))
			return
		}
		n.e.storeOK()
		n.mu.Lock()
		n.backoff = 0
		n.backlog = res.More
		items := make([]dispatch.Item, len(res.Runs))
		for i := range res.Runs {
			// One copy per run, which its attempt keeps: a pointer into
			// res.Runs would keep every run of the claim (and its payload)
			// alive as long as the claim's longest attempt.
			r := new(store.Run)
			*r = res.Runs[i]
			n.claimed[r.ID] = r
			items[i] = itemOf(r)
		}
		n.mu.Unlock()
		if len(items) > 0 {
			n.e.disp.Add(items...)
		}
		switch {
		case res.NextAt.IsZero():
		case res.NextAt.After(now) && !res.NextAt.After(n.e.clock.Now()):
			// The clock reached the time while the store answered: claim
			// again now. A timer armed for a time already passed would
			// fire only at a fake clock's next advance.
			n.poke()
		default:
			n.wakeAtTime(res.NextAt)
		}
		n.mu.Lock()
		switch {
		case res.More:
			n.holdLocked()
		case gen == n.gen:
			n.releaseLocked()
		}
		n.mu.Unlock()
		if len(res.Runs) == 0 || len(res.Runs) < res.Limit {
			return
		}
	}
}

// take returns the claimed run of a dispatched item, if it is one.
func (n *node) take(id string) (*store.Run, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r, ok := n.claimed[id]
	delete(n.claimed, id)
	return r, ok
}

// forget drops a claimed run an operator ended before it began.
func (n *node) forget(id string) {
	n.mu.Lock()
	delete(n.claimed, id)
	n.mu.Unlock()
}

// caps maps every registered process to its running cap (0: none).
func (e *Engine) caps() (map[string]int, map[string]store.Flow) {
	e.regMu.RLock()
	defer e.regMu.RUnlock()
	out := make(map[string]int, len(e.procs))
	var flows map[string]store.Flow
	for name, p := range e.procs {
		out[name] = max(p.Concurrency, 0)
		if p.flow != (store.Flow{}) {
			if flows == nil {
				flows = map[string]store.Flow{}
			}
			flows[name] = p.flow
		}
	}
	return out, flows
}

// notifyWaiters wakes the chain waiters, if any.
func (n *node) notifyWaiters() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.waiters == 0 {
		return
	}
	close(n.changed)
	n.changed = make(chan struct{})
}

// waitChain waits until no run of the chain is idle, running or waiting: it
// counts them in the store after each local event or notification, and at
// least every sharedPoll, since its runs may execute on other nodes.
func (n *node) waitChain(ctx context.Context, corr string) error {
	n.mu.Lock()
	n.waiters++
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.waiters--
		n.mu.Unlock()
	}()
	for {
		n.mu.Lock()
		ch := n.changed
		n.mu.Unlock()
		// Counted, not read: this runs after every local event while the
		// chain is active, and a wide chain read whole each time would
		// cost the square of its runs, payloads and outputs included.
		active, err := n.e.store.CountRuns(ctx, store.RunFilter{CorrelationID: corr, Statuses: []store.Status{store.StatusIdle, store.StatusRunning, store.StatusWaiting}})
		if err != nil {
			return err
		}
		if active == 0 {
			return nil
		}
		tick := make(chan struct{})
		stop := n.e.clock.AfterFunc(sharedPoll, func() { close(tick) })
		select {
		case <-ch:
		case <-tick:
		case <-ctx.Done():
			stop()
			return ctx.Err()
		}
		stop()
	}
}

// joinNode joins the shared store as a node (no-op on another store).
func (e *Engine) joinNode(ctx context.Context) error {
	if e.node == nil {
		return nil
	}
	return e.node.join(ctx)
}

// firstPending is the first page of idle runs Start dispatches; on a
// shared store none: the node starts claiming through the store instead.
func (e *Engine) firstPending(ctx context.Context) ([]store.Pending, error) {
	if e.node != nil {
		e.node.start()
		return nil, nil
	}
	return e.store.Pending(ctx, 0, firstPendingPage)
}

// stopNode ends a node's claims (no-op on another store).
func (e *Engine) stopNode() {
	if e.node != nil && e.node.stopWatch != nil {
		e.node.stop()
	}
}

// leaveNode leaves the shared store once stopped, or after a failed
// start (no-op on another store).
func (e *Engine) leaveNode() {
	if e.node != nil {
		e.node.leaveNow()
	}
}

// freed is the dispatcher's Freed.
func (e *Engine) freed() {
	if e.node != nil {
		e.node.freed()
	}
}

// waitShared waits, on a shared store, until the chain corr has no idle
// or running run left (anywhere); elsewhere the dispatcher knows.
func (e *Engine) waitShared(ctx context.Context, corr string) error {
	if e.node == nil {
		return nil
	}
	if err := e.node.waitChain(ctx, corr); err != nil {
		if ctx.Err() != nil {
			return &Error{Code: CodeDrainTimeout, Op: "emit and wait", Msg: "chain " + corr + " still active", Err: ctx.Err()}
		}
		return storeErr("emit and wait", corr, err)
	}
	return nil
}

// EmitTx is Emit inside a database transaction of the caller's, given as
// the admitter its shared store offers for it (pgstore.Store.Tx): the runs
// are admitted if and only if the transaction commits, together with the
// caller's own writes in it, so a business write and the events it causes
// are never apart. Idempotency keys, admission bounds and chain links are
// decided inside the transaction as for Emit.
//
// The engine must be on that shared store. Nothing is announced for the
// runs (no run:admitted, no drop events): the transaction may still roll
// back. Every node hears of them when it commits, and runs them as usual.
// On error the transaction may no longer be usable: roll it back.
func (e *Engine) EmitTx(ctx context.Context, tx store.Admitter, event string, payload any, opts ...EmitOption) (Emission, error) {
	if e.node == nil {
		return Emission{}, &Error{Code: CodeInvalidConfig, Op: "emit tx", Field: "Store",
			Msg: "EmitTx needs an engine on a shared store (store/pgstore) whose transaction admitter is given"}
	}
	if tx == nil {
		return Emission{}, &Error{Code: CodeInvalidConfig, Op: "emit tx", Msg: "no transaction admitter given"}
	}
	em, _, err := e.emit(ctx, tx, event, payload, opts, false)
	return em, err
}
