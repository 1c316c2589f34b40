package yella

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/internal/dispatch"
	"github.com/yella-go/yella/internal/obs"
	"github.com/yella-go/yella/store"
)

// Engine runs registered processes durably on a store. Create it with New,
// register processes, call Start, emit events; Stop it before closing the
// store. All methods are safe for concurrent use.
type Engine struct {
	cfg   Config
	store store.Store
	clock clock.Clock
	log   *slog.Logger
	owner string

	regMu   sync.RWMutex
	procs   map[string]*registered
	byEvent map[string][]*registered

	schedMu   sync.Mutex
	schedules map[string]*schedule // by name (schedule.go)

	wokeMu sync.Mutex
	woke   chan struct{} // closed when a waiting run is queued again (wait.go)
	joins  joins         // runs waiting in Join (children.go)

	disp    *dispatch.Dispatcher
	spill   spill // runs left in the store beyond MaxQueued (queue.go)
	node    *node // on a shared store (shared.go), else nil
	rec     *obs.Recorder
	metrics counters
	// storeHealth tracks whether store calls succeed (storehealth.go).
	storeHealth storeHealth
	subs        subscribers
	drops       dropLog

	// io is the context of store calls: never cancelled, so that a hard stop
	// can still record what it abandons.
	io context.Context
	// runCtx ends at a hard stop (cause errStopped): the engine's loops
	// watch it. Handlers' contexts are not its children: a hard stop
	// cancels each attempt (stopAttempts).
	runCtx  context.Context
	stopRun context.CancelCauseFunc

	mu       sync.Mutex
	state    engineState
	stopped  chan struct{} // closed when Stop has finished
	running  map[string]*attempt
	trackSeq uint64
	// attemptsStopped: a hard stop ended every attempt; one tracked
	// later ends at once.
	attemptsStopped bool
	timers          map[int]func() bool
	timerSeq        int
	loopWG          sync.WaitGroup
	loopsOff        bool
	backoff         time.Duration  // claim-failure backoff (nextBackoff)
	backoffSince    time.Time      // when backoff was last doubled
	writing         map[string]int // runs whose outcome is being recorded (retried while the store fails) or settled
	// superseded: runs changed again while an attempt's outcome on them
	// was being written or settled, with that attempt's epoch (supersede).
	superseded map[string]int64
}

type engineState int

const (
	stateNew engineState = iota
	stateStarted
	stateStopping
	stateStopped
)

// Abort causes of an attempt's context.
var (
	errAttemptDone = errors.New("attempt finished")
	errCancelled   = errors.New("run cancelled")
	errTimeout     = errors.New("handler timed out")
	errStopped     = errors.New("engine stopped")
	errLeaseLost   = errors.New("run lease lost")
)

// New validates cfg and returns an engine. It does not touch the store
// until Start (or the first Emit).
func New(cfg Config) (*Engine, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	owner := cfg.Owner
	if owner == "" {
		owner = uuid.NewString()
	}
	e := &Engine{
		cfg: cfg, store: cfg.Store, clock: cfg.Clock, log: cfg.Logger, owner: owner,
		procs: map[string]*registered{}, byEvent: map[string][]*registered{}, schedules: map[string]*schedule{},
		rec: obs.NewRecorder(cfg.ObservabilityBucket), io: context.Background(),
		stopped: make(chan struct{}), running: map[string]*attempt{}, timers: map[int]func() bool{}, writing: map[string]int{}, superseded: map[string]int64{},
	}
	e.runCtx, e.stopRun = context.WithCancelCause(context.Background())
	if sh, ok := cfg.Store.(store.Shared); ok {
		e.node = newNode(e, sh)
	}
	e.spill.init()
	e.disp = dispatch.New(dispatch.Config{Slots: cfg.Concurrency, Clock: cfg.Clock, Start: func(it dispatch.Item) { go e.execute(&it) }, Freed: e.freed,
		Low: e.low, LowWater: cfg.MaxQueued - e.page() + 1})
	return e, nil
}

// Owner returns the id this engine uses in leases.
func (e *Engine) Owner() string { return e.owner }

// Register adds a process. Processes may be registered before or after
// Start. An engine only executes runs of processes registered with it:
// runs of any other process stay in the store exactly as they are, so an
// engine pointed at a database shared with other programs never touches
// their work. Registering after Start loads the process's waiting runs.
func (e *Engine) Register(p Process) error {
	if err := validateProcess(p); err != nil {
		return err
	}
	if err := e.register(p); err != nil {
		return err
	}
	if e.isState(stateStarted) { // after regMu: the loader queues under its own lock, then regMu
		if e.node != nil {
			e.node.poke() // the store may hold claimable runs of it
		} else {
			e.spillFrom(0) // its idle runs are in the store: the loader reads them
		}
	}
	return nil
}

func (e *Engine) register(p Process) error {
	e.regMu.Lock()
	defer e.regMu.Unlock()
	if _, dup := e.procs[p.Name]; dup {
		return &Error{Code: CodeProcessAlreadyRegistered, Op: "register", Msg: "process already registered: " + p.Name}
	}
	r := &registered{Process: p}
	r.Emits = append([]string(nil), p.Emits...)
	r.deriveFlow()
	if err := e.checkSharedLimits(r); err != nil {
		return err
	}
	e.procs[p.Name] = r
	e.byEvent[p.On] = append(e.byEvent[p.On], r)
	if p.Concurrency > 0 {
		e.disp.SetLimit(p.Name, p.Concurrency)
	}
	if e.node == nil { // a shared store applies flow limits when it claims
		e.disp.SetFlow(p.Name, r.flow)
	}
	return nil
}

// Unregister removes a process; unknown names are ignored. Its runs stay in
// the store as they are: waiting ones are no longer started, and an attempt
// already running finishes normally.
func (e *Engine) Unregister(name string) {
	e.regMu.Lock()
	defer e.regMu.Unlock()
	p, ok := e.procs[name]
	if !ok {
		return
	}
	delete(e.procs, name)
	ls := e.byEvent[p.On]
	for i, l := range ls {
		if l == p {
			ls = append(ls[:i:i], ls[i+1:]...)
			break
		}
	}
	if len(ls) == 0 {
		delete(e.byEvent, p.On)
	} else {
		e.byEvent[p.On] = ls
	}
	e.disp.SetLimit(name, 0)
	e.disp.SetFlow(name, store.Flow{})
}

// Processes returns the registered processes in registration order per
// event, events sorted.
func (e *Engine) Processes() []Process {
	e.regMu.RLock()
	defer e.regMu.RUnlock()
	var out []Process
	for _, ev := range sortedKeys(e.byEvent) {
		for _, r := range e.byEvent[ev] {
			out = append(out, r.Process)
		}
	}
	return out
}

func (e *Engine) lookup(name string) *registered {
	e.regMu.RLock()
	defer e.regMu.RUnlock()
	return e.procs[name]
}

func (e *Engine) listeners(event string) []*registered {
	e.regMu.RLock()
	defer e.regMu.RUnlock()
	return e.byEvent[event]
}

// Start recovers and begins dispatching: runs whose owner the store knows
// to be dead (on SQLite, whoever held the file before this process) are
// reclaimed at once, idle runs are loaded, and background work
// (heartbeats, lease sweeps, rollups, retention) starts. It is idempotent.
// Register processes first: recovered runs are executed as soon as Start
// returns.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	switch e.state {
	case stateStarted:
		e.mu.Unlock()
		return nil
	case stateStopping, stateStopped:
		e.mu.Unlock()
		return &Error{Code: CodeStopped, Op: "start", Msg: "engine was stopped"}
	}
	e.state = stateStarted
	e.mu.Unlock()
	fail := func(err error) error {
		e.leaveNode()
		e.mu.Lock()
		e.state = stateNew
		e.mu.Unlock()
		return storeErr("start", "", err)
	}
	if err := e.joinNode(ctx); err != nil {
		return fail(err)
	}
	if err := e.reclaimKeyed(ctx); err != nil {
		return fail(err)
	}
	if e.node == nil {
		// Rate limits resume from the state stored with the last claims, so
		// a restart grants no new burst.
		tats, err := e.store.RateStates(ctx, e.clock.Now())
		if err != nil {
			return fail(err)
		}
		e.disp.LoadRates(tats)
	}
	// The first page of idle runs is dispatched at once; the rest is loaded
	// in the background, so a large backlog does not delay recovery. Drain
	// waits for the loading (a dispatcher hold).
	first, err := e.firstPending(ctx)
	if err != nil {
		return fail(err)
	}
	if len(first) == firstPendingPage { // the loader reads the rest (queue.go)
		e.spillFrom(first[len(first)-1].Seq + 1)
	}
	e.enqueue(pendingItems(first)...)
	e.disp.Resume()
	// The runs a crashed predecessor left running are reclaimed once
	// dispatch has begun (but those with a concurrency key, reclaimed
	// above): the first idle runs start meanwhile instead of waiting for
	// every reclaim's commit, and each reclaimed run, idle again, is queued
	// by its admission time ahead of the later runs. Start still returns
	// only once they are all reclaimed (or the store failed: the engine
	// runs by then, and the periodic reclaim tries again). The first page
	// was read before any of them was made idle, so none is queued twice
	// from it; the runs this engine claims meanwhile hold live leases of
	// its own and are not taken for abandoned.
	if err := e.reclaim(ctx, true); err != nil {
		e.storeFailed("reclaim", err)
	}
	if e.node == nil {
		e.loopWG.Add(1)
		go e.loader()
	}
	e.every(e.cfg.HeartbeatInterval, e.heartbeat)
	e.every(e.cfg.ReclaimInterval, func() {
		if err := e.reclaim(e.io, false); err != nil {
			e.storeFailed("reclaim", err)
		}
	})
	e.every(e.cfg.FlushInterval, func() { e.flush(e.clock.Now()) })
	if e.cfg.Retention > 0 || e.cfg.ObservabilityRetention > 0 || e.cfg.KeyRetention > 0 {
		e.every(e.cfg.RetentionInterval, e.prune)
	}
	e.startSchedules()
	e.log.Info("engine started", "owner", e.owner)
	return nil
}

// pendingPage is how many idle runs the loader reads at a time, and
// firstPendingPage how many Start reads before dispatch begins: few, so
// that the first runs after a restart start within milliseconds however
// large the backlog (the loader reads the rest meanwhile).
const (
	pendingPage      = 2048
	firstPendingPage = 256
)

func pendingItems(ps []store.Pending) []dispatch.Item {
	items := make([]dispatch.Item, len(ps))
	for i, p := range ps {
		items[i] = dispatch.Item{ID: p.ID, Seq: p.Seq, Rank: store.Rank(p.CreatedAt, p.Priority), Process: p.Process,
			Correlation: p.CorrelationID, RetryAt: p.RetryAt, Flow: dispatch.FlowOf(p.RateKey, p.ConcurrencyKey), Waiting: p.Waiting}
	}
	return items
}

func (e *Engine) isState(s engineState) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state == s
}

// Drain waits until this engine has no idle or running run left (delayed
// retries included; deferred runs count as done; waiting runs are not
// waited for: they hold nothing and may wait for days), or ctx ends, which gives
// an error with CodeDrainTimeout. Runs owned by other engine instances are
// not waited for.
func (e *Engine) Drain(ctx context.Context) error {
	e.mu.Lock()
	st := e.state
	e.mu.Unlock()
	if st == stateNew {
		return &Error{Code: CodeNotStarted, Op: "drain", Msg: "call Start first"}
	}
	select {
	case <-e.disp.Idle():
		return nil
	case <-ctx.Done():
		return &Error{Code: CodeDrainTimeout, Op: "drain", Msg: fmt.Sprintf("%d runs still active", e.disp.Active()), Err: ctx.Err()}
	}
}

// Stop stops the engine. It stops admitting and claiming at once, then
// waits for the attempts in flight to finish while heartbeats keep their
// leases. If ctx ends first, it stops hard: handlers' contexts are
// cancelled and their runs are recorded as abandoned (an attempt counted,
// requeued within the retry budget), and Stop returns an error with
// CodeGracefulStopTimeout. Either way background work stops and rollups are
// flushed. The store stays open; close it after Stop. Stop is idempotent.
func (e *Engine) Stop(ctx context.Context) error {
	e.mu.Lock()
	switch e.state {
	case stateNew:
		e.state = stateStopped
		close(e.stopped)
		e.mu.Unlock()
		e.drops.flush(e, true) // emits before Start may have dropped events
		return nil
	case stateStopping, stateStopped:
		e.mu.Unlock()
		<-e.stopped
		return nil
	}
	e.state = stateStopping
	e.mu.Unlock()

	e.disp.Pause()
	e.stopNode()
	var stopErr error
	select {
	case <-e.disp.Quiet():
	case <-ctx.Done():
		e.stopAttempts()
		<-e.disp.Quiet()
		stopErr = &Error{Code: CodeGracefulStopTimeout, Op: "stop", Msg: "in-flight runs were abandoned", Err: ctx.Err()}
	}
	e.stopLoops()
	e.flush(time.Time{})
	e.disp.Close()
	e.stopAttempts()
	e.leaveNode()
	e.mu.Lock()
	e.state = stateStopped
	close(e.stopped)
	e.mu.Unlock()
	e.log.Info("engine stopped", "graceful", stopErr == nil)
	return stopErr
}

// every runs fn every d (engine clock) until Stop; runs never overlap.
func (e *Engine) every(d time.Duration, fn func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.timerSeq++
	id := e.timerSeq
	var tick func()
	tick = func() {
		e.mu.Lock()
		if e.loopsOff {
			e.mu.Unlock()
			return
		}
		e.loopWG.Add(1)
		e.mu.Unlock()
		fn()
		e.mu.Lock()
		if !e.loopsOff {
			e.timers[id] = e.clock.AfterFunc(d, tick)
		}
		e.mu.Unlock()
		e.loopWG.Done()
	}
	e.timers[id] = e.clock.AfterFunc(d, tick)
}

func (e *Engine) stopLoops() {
	e.mu.Lock()
	e.loopsOff = true
	for _, stop := range e.timers {
		stop()
	}
	e.mu.Unlock()
	e.stopLoader()
	e.loopWG.Wait()
}

// sleep waits d on the engine clock; it returns false if the engine was
// stopped hard meanwhile.
func (e *Engine) sleep(d time.Duration) bool {
	ch := make(chan struct{})
	stop := e.clock.AfterFunc(d, func() { close(ch) })
	select {
	case <-ch:
		return true
	case <-e.runCtx.Done():
		stop()
		return false
	}
}

func (e *Engine) heartbeat() {
	e.mu.Lock()
	seq := e.trackSeq
	e.mu.Unlock()
	now := e.clock.Now()
	leases, err := e.store.Heartbeat(e.io, e.owner, now, now.Add(e.cfg.LeaseTimeout))
	if err != nil {
		e.storeFailed("heartbeat", err)
		return
	}
	e.storeOK()
	held := make(map[string]int64, len(leases))
	for _, l := range leases {
		held[l.RunID] = l.Epoch
	}
	var lost []*attempt
	e.mu.Lock()
	for id, a := range e.running {
		if a.trackSeq > seq {
			continue // claimed after the heartbeat began
		}
		if ep, ok := held[id]; !ok || ep != a.run.Epoch {
			lost = append(lost, a)
		}
	}
	e.mu.Unlock()
	for _, a := range lost {
		a.cancel(errLeaseLost)
	}
	e.handBackOrphans(held)
}

// reclaim finds runs whose owner is gone and requeues (or dead-letters) them.
// At start it reclaims everything the store reports; later sweeps skip the
// runs this engine is executing, whose leases its own heartbeat renews.
func (e *Engine) reclaim(ctx context.Context, atStart bool) error {
	const batch = 1024
	seen := map[string]bool{}
	for {
		now := e.clock.Now()
		runs, err := e.store.Abandoned(ctx, e.owner, now, batch)
		if err != nil {
			return err
		}
		n := len(runs)
		todo := runs[:0]
		for _, r := range runs {
			if seen[r.ID] || (!atStart && e.tracked(r.ID)) {
				continue
			}
			seen[r.ID] = true
			todo = append(todo, r)
		}
		e.abandonAll(todo, now)
		if n < batch || len(todo) == 0 {
			return nil
		}
	}
}

// abandonAll abandons the runs as reclaimed. They are abandoned
// concurrently, so that the store's writer commits them together (a few
// transactions per page), not one commit each: recovery after a crash with
// many runs in flight waits for a handful of commits.
func (e *Engine) abandonAll(runs []store.Run, now time.Time) {
	var wg sync.WaitGroup
	for i := range runs {
		r := &runs[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.abandon(r, now, "lease expired", CodeLeaseExpired, true, nil)
		}()
	}
	wg.Wait()
}

// reclaimKeyed reclaims, before Start dispatches anything, the runs a dead
// process held that have a concurrency key: the dispatcher counts a key's
// running runs among those it started, and would otherwise start new runs
// of the key while the store still holds the dead ones running, above the
// key's bound (on a shared store a claim counts them in the store). The
// other abandoned runs are reclaimed once dispatch has begun.
func (e *Engine) reclaimKeyed(ctx context.Context) error {
	if e.node != nil || !e.keyBounded() {
		return nil
	}
	now := e.clock.Now()
	runs, err := e.store.Abandoned(ctx, e.owner, now, math.MaxInt32)
	if err != nil {
		return err
	}
	e.abandonAll(slices.DeleteFunc(runs, func(r store.Run) bool { return r.ConcurrencyKey == "" }), now)
	return nil
}

// keyBounded reports whether a registered process bounds its runs per
// concurrency key.
func (e *Engine) keyBounded() bool {
	e.regMu.RLock()
	defer e.regMu.RUnlock()
	for _, p := range e.procs {
		if p.flow.KeyConcurrency > 0 {
			return true
		}
	}
	return false
}

// abandon records that the attempt holding r is gone (see abandonment).
func (e *Engine) abandon(r *store.Run, now time.Time, why string, code Code, reclaim bool, slot *dispatch.Item) {
	c := &change{u: e.abandonment(r, now, why, code, reclaim), run: r, slot: slot}
	if reclaim {
		c.event = LeaseReclaimed
	}
	if _, err := e.commit(e.io, c); err != nil && !errors.Is(err, store.ErrFenced) {
		e.internalError("abandon", err)
	}
}

// flush writes the rollups of buckets closed by before (all if zero), and
// the drop log lines owed (all of them if before is zero: the final flush).
func (e *Engine) flush(before time.Time) {
	if err := e.rec.Flush(e.io, e.store, before); err != nil {
		if !e.storeHealth.down.Load() { // else the outage is logged already
			e.log.Warn("observability flush failed; kept for the next one", "err", err)
		}
	}
	e.drops.flush(e, before.IsZero())
}

func (e *Engine) prune() {
	now := e.clock.Now()
	req := store.PruneRequest{Limit: e.cfg.RetentionBatch, SignalsBefore: now}
	if e.cfg.Retention > 0 {
		req.CompletedBefore = now.Add(-e.cfg.Retention)
	}
	if e.cfg.ObservabilityRetention > 0 {
		req.ObservabilityBefore = now.Add(-e.cfg.ObservabilityRetention)
	}
	for range 100 { // bounded per sweep; the next sweep continues
		n, err := e.store.Prune(e.io, req)
		if err != nil {
			e.storeFailed("retention", err)
			return
		}
		e.metrics.pruned.Add(int64(n))
		if n < req.Limit {
			break
		}
		req.ObservabilityBefore = time.Time{}
	}
	if c, ok := e.store.(store.RollupCompactor); ok {
		e.compactRollups(c, now)
	}
	if e.cfg.KeyRetention <= 0 {
		return
	}
	for range 100 {
		n, err := e.store.PruneKeys(e.io, now.Add(-e.cfg.KeyRetention), e.cfg.RetentionBatch)
		if err != nil {
			e.storeFailed("key retention", err)
			return
		}
		if n < e.cfg.RetentionBatch {
			return
		}
	}
}

// compactRollups merges the rollup rows that the nodes of a shared store
// each wrote for one process and bucket, in buckets every live node has
// flushed (closed for two flush intervals), a bounded number per sweep.
func (e *Engine) compactRollups(c store.RollupCompactor, now time.Time) {
	before := now.Add(-e.cfg.ObservabilityBucket - 2*e.cfg.FlushInterval).Truncate(e.cfg.ObservabilityBucket)
	for range 10 {
		n, err := c.CompactRollups(e.io, before, e.cfg.RetentionBatch, obs.MergeRollups)
		if err != nil {
			e.storeFailed("rollup compaction", err) // an outage, reported once as the others
			return
		}
		if n < e.cfg.RetentionBatch {
			return
		}
	}
}

// enqueue hands idle runs to the dispatcher, keeping only those of
// processes registered with this engine: runs of other processes stay in
// the store untouched (Register loads them if their process arrives).
// items is copied only if some are left out; neither the dispatcher nor a
// node keeps the slice.
func (e *Engine) enqueue(items ...dispatch.Item) {
	e.regMu.RLock()
	keep := items
	for i, it := range items {
		if _, ok := e.procs[it.Process]; !ok {
			keep = append(make([]dispatch.Item, 0, len(items)-1), items[:i]...)
			for _, it := range items[i+1:] {
				if _, ok := e.procs[it.Process]; ok {
					keep = append(keep, it)
				}
			}
			break
		}
	}
	e.regMu.RUnlock()
	if e.node != nil {
		e.node.enqueue(keep)
		return
	}
	if len(keep) > 0 {
		e.disp.Add(keep...)
	}
}

func itemOf(r *store.Run) dispatch.Item {
	return dispatch.Item{ID: r.ID, Seq: r.Seq, Rank: store.Rank(r.CreatedAt, r.Priority), Process: r.Process,
		Correlation: r.CorrelationID, RetryAt: r.RetryAt, Flow: dispatch.FlowOf(r.RateKey, r.ConcurrencyKey),
		Waiting: r.Status == store.StatusWaiting}
}

func runEvent(r *store.Run) Event {
	return Event{RunID: r.ID, CorrelationID: r.CorrelationID, ParentID: r.ParentID, Process: r.Process,
		EventName: r.Event, Status: Status(r.Status), Attempt: r.Attempts}
}

func with(ev Event, t EventType) Event {
	ev.Type = t
	return ev
}

func (e *Engine) tracked(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.running[id]
	return ok
}
