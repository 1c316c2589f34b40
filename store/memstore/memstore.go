// Package memstore is an in-memory store.Store for tests, examples and
// short-lived scripts. Nothing survives the process. It keeps the same
// contract as the durable stores (checked by store/storetest), including
// detached copies: records handed out never share memory with the store.
package memstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/yella-go/yella/store"
)

// Store is an in-memory store.Store. The zero value is not usable; call New.
type Store struct {
	mu       sync.Mutex
	closed   bool
	seq      int64
	runs     map[string]*store.Run
	order    []*store.Run // by Seq; pruned runs are removed lazily
	pruned   int          // entries of order that are pruned
	children map[string][]string
	corr     map[string][]string
	idem     map[string]string // event\x00key\x00process → run id
	// kept holds the keys of pruned runs (a stub of each run) until
	// PruneKeys; keptOrder lists them in the order they were kept.
	kept      map[string]store.Run
	keptOrder []string
	running   map[string]*store.Run
	active    map[string]int // process → idle+running runs
	counts    map[store.Status]int64
	timeline  map[string][]store.TimelineEntry
	effects   map[string]map[string]*store.Effect
	rollups   map[rollupKey]*store.Rollup
	rates     map[string]time.Time    // rate key → latest theoretical arrival time claimed
	signals   map[string][]keptSignal // signal key → kept signals, oldest first
	paused    map[string]time.Time    // paused schedules
	errors    []store.ErrorRecord
	errSeq    int64
}

// keptSignal is a signal no run waited for, kept for a later wait.
type keptSignal struct {
	payload json.RawMessage
	until   time.Time
}

type rollupKey struct {
	bucket  int64
	process string
}

var _ store.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{
		runs:     map[string]*store.Run{},
		children: map[string][]string{},
		corr:     map[string][]string{},
		idem:     map[string]string{},
		kept:     map[string]store.Run{},
		running:  map[string]*store.Run{},
		active:   map[string]int{},
		counts:   map[store.Status]int64{},
		timeline: map[string][]store.TimelineEntry{},
		effects:  map[string]map[string]*store.Effect{},
		rollups:  map[rollupKey]*store.Rollup{},
		rates:    map[string]time.Time{},
		signals:  map[string][]keptSignal{},
		paused:   map[string]time.Time{},
	}
}

func cloneRaw(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

func cloneRun(r *store.Run) store.Run {
	c := *r
	c.Payload = cloneRaw(r.Payload)
	c.Context = cloneRaw(r.Context)
	c.Output = cloneRaw(r.Output)
	return c
}

func idemKey(event, key, process string) string {
	return event + "\x00" + key + "\x00" + process
}

func (s *Store) lock() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	return nil
}

// setStatus moves r to status to and keeps the derived indexes in step.
func (s *Store) setStatus(r *store.Run, to store.Status) {
	from := r.Status
	if from != "" {
		s.counts[from]--
		if from.Active() {
			s.active[r.Process]--
		}
		if from == store.StatusRunning {
			delete(s.running, r.ID)
		}
	}
	r.Status = to
	s.counts[to]++
	if to.Active() {
		s.active[r.Process]++
	}
	if to == store.StatusRunning {
		s.running[r.ID] = r
	}
}

func (s *Store) appendTimeline(r *store.Run, at time.Time, errMsg, code, note string) {
	tl := s.timeline[r.ID]
	s.timeline[r.ID] = append(tl, store.TimelineEntry{
		N: len(tl) + 1, At: at, Status: r.Status, Attempt: r.Attempts,
		Error: errMsg, Code: code, Note: note,
	})
}

// Admit implements store.Store.
func (s *Store) Admit(ctx context.Context, a store.Admission) (store.AdmitResult, error) {
	if err := s.lock(); err != nil {
		return store.AdmitResult{}, err
	}
	defer s.mu.Unlock()
	return s.admit(a)
}

func (s *Store) admit(a store.Admission) (store.AdmitResult, error) {
	var res store.AdmitResult
	if a.ParentID != "" {
		if _, ok := s.runs[a.ParentID]; !ok {
			return res, store.ErrNotFound
		}
	}
	// A run id is unique, as the durable stores' schemas enforce: an
	// admission reusing one fails before changing anything (and so does the
	// update that carries it).
	for _, nr := range a.Runs {
		if _, dup := s.runs[nr.ID]; dup {
			return res, fmt.Errorf("memstore: run id %s already exists", nr.ID)
		}
	}
	for _, nr := range a.Runs {
		if a.IdempotencyKey != "" {
			k := idemKey(a.Event, a.IdempotencyKey, nr.Process)
			if id, ok := s.idem[k]; ok {
				if r, ok := s.runs[id]; ok {
					res.Existing = append(res.Existing, cloneRun(r))
					continue
				}
			}
			if r, ok := s.kept[k]; ok {
				res.Pruned = append(res.Pruned, r)
				continue
			}
		}
		if g := s.groupRun(nr); g != nil {
			if nr.Group == store.GroupDebounce {
				g.Payload, g.Context, g.RetryAt = cloneRaw(a.Payload), cloneRaw(a.Context), time.Time{}
				if a.NotBefore.After(a.Now) {
					g.RetryAt = a.NotBefore
				}
				s.appendTimeline(g, a.Now, "", "", "debounced")
			}
			gr := cloneRun(g)
			gr.Payload, gr.Context = nil, nil
			res.Grouped = append(res.Grouped, gr)
			continue
		}
		if nr.Limit > 0 && s.active[nr.Process] >= nr.Limit {
			res.Dropped = append(res.Dropped, nr)
			continue
		}
		s.seq++
		r := &store.Run{
			ID: nr.ID, Seq: s.seq, Process: nr.Process, Event: a.Event,
			CorrelationID: a.CorrelationID, ParentID: a.ParentID, Depth: a.Depth,
			Payload: cloneRaw(a.Payload), Context: cloneRaw(a.Context),
			IdempotencyKey: a.IdempotencyKey, CreatedAt: a.Now,
			Priority: nr.Priority, RateKey: nr.RateKey, ConcurrencyKey: nr.ConcurrencyKey, GroupKey: nr.GroupKey,
		}
		if a.NotBefore.After(a.Now) {
			r.RetryAt = a.NotBefore
		}
		if r.CorrelationID == "" {
			r.CorrelationID = r.ID
		}
		s.runs[r.ID] = r
		s.order = append(s.order, r)
		s.setStatus(r, store.StatusIdle)
		s.appendTimeline(r, a.Now, "", "", "admitted")
		s.corr[r.CorrelationID] = append(s.corr[r.CorrelationID], r.ID)
		if r.ParentID != "" {
			s.children[r.ParentID] = append(s.children[r.ParentID], r.ID)
		}
		if a.IdempotencyKey != "" {
			s.idem[idemKey(a.Event, a.IdempotencyKey, nr.Process)] = r.ID
		}
		res.Admitted = append(res.Admitted, cloneRun(r))
	}
	return res, nil
}

// groupRun is the run of nr's group that stands in for it under its
// policy (the latest admitted), or nil. A memory store scans its runs.
func (s *Store) groupRun(nr store.NewRun) *store.Run {
	if nr.GroupKey == "" || nr.Group == store.GroupNone {
		return nil
	}
	for i := len(s.order) - 1; i >= 0; i-- {
		r := s.order[i]
		if s.runs[r.ID] != r || r.Process != nr.Process || r.GroupKey != nr.GroupKey {
			continue
		}
		switch nr.Group {
		case store.GroupSingleton:
			if r.Status.Active() || r.Status == store.StatusWaiting {
				return r
			}
		case store.GroupDebounce:
			if r.Status == store.StatusIdle && r.Attempts == 0 {
				return r
			}
		}
	}
	return nil
}

// PauseSchedule implements store.Store.
func (s *Store) PauseSchedule(ctx context.Context, name string, paused bool, now time.Time) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.paused[name]; paused && !ok {
		s.paused[name] = now
	} else if !paused {
		delete(s.paused, name)
	}
	return nil
}

// PausedSchedules implements store.Store.
func (s *Store) PausedSchedules(ctx context.Context) (map[string]time.Time, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make(map[string]time.Time, len(s.paused))
	for k, v := range s.paused {
		out[k] = v
	}
	return out, nil
}

func (s *Store) deleteRun(r *store.Run) {
	s.counts[r.Status]--
	if r.Status.Active() {
		s.active[r.Process]--
	}
	delete(s.running, r.ID)
	delete(s.runs, r.ID)
	delete(s.timeline, r.ID)
	delete(s.effects, r.ID)
	delete(s.children, r.ID)
	s.corr[r.CorrelationID] = removeID(s.corr[r.CorrelationID], r.ID)
	if len(s.corr[r.CorrelationID]) == 0 {
		delete(s.corr, r.CorrelationID)
	}
	if r.ParentID != "" {
		s.children[r.ParentID] = removeID(s.children[r.ParentID], r.ID)
		if len(s.children[r.ParentID]) == 0 {
			delete(s.children, r.ParentID)
		}
	}
	if r.IdempotencyKey != "" {
		k := idemKey(r.Event, r.IdempotencyKey, r.Process)
		delete(s.idem, k)
		s.kept[k] = store.Run{ID: r.ID, Process: r.Process, Event: r.Event, IdempotencyKey: r.IdempotencyKey,
			CreatedAt: r.CreatedAt, Status: store.StatusCompleted}
		s.keptOrder = append(s.keptOrder, k)
	}
	s.pruned++
}

func removeID(ids []string, id string) []string {
	for i, v := range ids {
		if v == id {
			return append(ids[:i:i], ids[i+1:]...)
		}
	}
	return ids
}

// Claim implements store.Store.
func (s *Store) Claim(ctx context.Context, req store.ClaimRequest) ([]store.Run, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []store.Run
	for i, id := range req.IDs {
		r, ok := s.runs[id]
		if !ok || !due(r, req.Now) {
			continue
		}
		if i < len(req.RateTATs) && r.RateKey != "" && req.RateTATs[i].After(s.rates[r.RateKey]) {
			s.rates[r.RateKey] = req.RateTATs[i]
		}
		s.setStatus(r, store.StatusRunning)
		r.Epoch++
		r.Attempts++
		r.LeaseOwner = req.Owner
		r.LeaseExpires = req.LeaseUntil
		r.StartedAt = req.Now
		r.RetryAt = time.Time{}
		r.WaitKey = ""
		r.Output = nil
		s.appendTimeline(r, req.Now, "", "", "claimed")
		out = append(out, cloneRun(r))
	}
	return out, nil
}

// due reports whether r is claimable at now: idle and due, or waiting with
// a deadline that has passed.
func due(r *store.Run, now time.Time) bool {
	switch r.Status {
	case store.StatusIdle:
		return !r.RetryAt.After(now)
	case store.StatusWaiting:
		return !r.RetryAt.IsZero() && !r.RetryAt.After(now)
	}
	return false
}

// takeSignal removes and returns the oldest signal kept for key that is
// still kept at now. The caller holds s.mu.
func (s *Store) takeSignal(key string, now time.Time) (json.RawMessage, bool) {
	ks := s.signals[key]
	for len(ks) > 0 && !ks[0].until.After(now) {
		ks = ks[1:]
	}
	if len(ks) == 0 {
		delete(s.signals, key)
		return nil, false
	}
	p := ks[0].payload
	if ks = ks[1:]; len(ks) == 0 {
		delete(s.signals, key)
	} else {
		s.signals[key] = ks
	}
	return p, true
}

// Update implements store.Store: the transition table applied directly
// (Rule.Apply), with the effects, follow-up runs and timeline entry the
// rule writes alongside.
func (s *Store) Update(ctx context.Context, u store.Update) (store.UpdateResult, error) {
	if err := s.lock(); err != nil {
		return store.UpdateResult{}, err
	}
	defer s.mu.Unlock()
	var res store.UpdateResult
	r, ok := s.runs[u.RunID]
	if !ok {
		return res, store.ErrNotFound
	}
	rule, err := u.Rule()
	if err != nil {
		return res, err
	}
	// An in-memory store cannot know whether another owner is gone.
	if err := rule.Check(r, &u, store.Facts{}); err != nil {
		return res, err
	}
	if u.Children != nil {
		// Admitting writes nothing unless it admits a run, and then the
		// update applies: its checks are passed.
		if res.Children, err = s.admit(*u.Children); err != nil {
			return res, err
		}
	}
	f := store.Facts{Admitted: len(res.Children.Admitted)}
	var signal json.RawMessage
	if rule.Effects == store.EffectsWait && u.Wait.Signal != "" {
		// The check passed and a wait has no follow-up: the update applies.
		signal, f.Signalled = s.takeSignal(u.Wait.Signal, u.Now)
	}
	next := *r
	note, err := rule.Apply(&next, &u, f)
	if err != nil {
		return store.UpdateResult{}, err
	}
	status := next.Status
	next.Status, next.Output = r.Status, cloneRaw(next.Output)
	*r = next
	s.setStatus(r, status)
	done := u.CompleteEffect
	if rule.Effects == store.EffectsWait {
		if f.Signalled {
			done = &store.EffectDone{Key: u.Wait.Key, Output: signal}
		} else {
			s.effect(r, u.Wait.Key, u.Now).Status = store.EffectWaiting
		}
	}
	s.writeEffects(r, rule.Effects, done, u.Now)
	s.appendTimeline(r, u.Now, r.Error, r.ErrorCode, note)
	res.Run = *r
	res.Run.Payload, res.Run.Context, res.Run.Output = nil, nil, cloneRaw(r.Output)
	return res, nil
}

// writeEffects changes r's effect records as its transition says: done,
// when set, is recorded as completed.
func (s *Store) writeEffects(r *store.Run, w store.EffectWrite, done *store.EffectDone, now time.Time) {
	if w == store.EffectsClearStarted {
		for k, e := range s.effects[r.ID] {
			if e.Status == store.EffectStarted || e.Status == store.EffectWaiting {
				delete(s.effects[r.ID], k)
			}
		}
	}
	if done != nil {
		e := s.effect(r, done.Key, now)
		e.Status, e.Output, e.Error, e.CompletedAt = store.EffectCompleted, cloneRaw(done.Output), "", now
	}
}

// effect returns r's effect record key, creating it (started at now, at
// r's epoch, with a new wait's fields) if there is none.
func (s *Store) effect(r *store.Run, key string, now time.Time) *store.Effect {
	effs := s.effects[r.ID]
	if effs == nil {
		effs = map[string]*store.Effect{}
		s.effects[r.ID] = effs
	}
	e := effs[key]
	if e == nil {
		e = &store.Effect{RunID: r.ID, Key: key, StartedAt: now, Epoch: r.Epoch}
		effs[key] = e
	}
	return e
}

// Signal implements store.Store. The run it wakes is found by a scan of
// the runs in admission order: a memory store is for tests and examples.
func (s *Store) Signal(ctx context.Context, req store.SignalRequest) (store.SignalResult, error) {
	if err := s.lock(); err != nil {
		return store.SignalResult{}, err
	}
	defer s.mu.Unlock()
	var w *store.Run
	if req.RunID != "" {
		r, ok := s.runs[req.RunID]
		if !ok {
			return store.SignalResult{}, store.ErrNotFound
		}
		if r.Status != store.StatusWaiting || r.WaitKey != req.Key || req.Key == "" {
			return store.SignalResult{}, &store.StatusError{RunID: r.ID, Status: r.Status}
		}
		w = r
	} else if req.Key != "" {
		for _, r := range s.order {
			if s.runs[r.ID] == r && r.Status == store.StatusWaiting && r.WaitKey == req.Key {
				w = r
				break
			}
		}
	}
	if w == nil {
		if !req.KeepUntil.After(req.Now) {
			return store.SignalResult{}, nil
		}
		s.signals[req.Key] = append(s.signals[req.Key], keptSignal{payload: cloneRaw(req.Payload), until: req.KeepUntil})
		return store.SignalResult{Kept: true}, nil
	}
	for _, e := range s.effects[w.ID] {
		if e.Status == store.EffectWaiting {
			e.Status, e.Output, e.Error, e.CompletedAt = store.EffectCompleted, cloneRaw(req.Payload), "", req.Now
		}
	}
	s.setStatus(w, store.StatusIdle)
	w.RetryAt, w.WaitKey = time.Time{}, ""
	s.appendTimeline(w, req.Now, "", "", "signalled")
	woken := cloneRun(w)
	woken.Payload, woken.Context = nil, nil
	return store.SignalResult{Woken: &woken}, nil
}

// SetContext implements store.Store.
func (s *Store) SetContext(ctx context.Context, runID string, epoch int64, c json.RawMessage) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r, err := s.liveRun(runID, epoch)
	if err != nil {
		return err
	}
	r.Context = cloneRaw(c)
	return nil
}

// liveRun is runID's attempt with this epoch, the only one that may write
// to it: ErrNotFound for an unknown run, ErrFenced once the run is no
// longer running under that epoch. The caller holds s.mu.
func (s *Store) liveRun(runID string, epoch int64) (*store.Run, error) {
	r, ok := s.runs[runID]
	if !ok {
		return nil, store.ErrNotFound
	}
	if r.Status != store.StatusRunning || r.Epoch != epoch {
		return nil, store.ErrFenced
	}
	return r, nil
}

// Heartbeat implements store.Store.
func (s *Store) Heartbeat(ctx context.Context, owner string, now, until time.Time) ([]store.Lease, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []store.Lease
	for _, r := range s.running {
		if r.LeaseOwner == owner {
			r.LeaseExpires = until
			out = append(out, store.Lease{RunID: r.ID, Epoch: r.Epoch})
		}
	}
	return out, nil
}

// Abandoned implements store.Store. An in-memory store cannot know whether
// another owner is gone, so only expired leases count.
func (s *Store) Abandoned(ctx context.Context, self string, now time.Time, limit int) ([]store.Run, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []store.Run
	for _, r := range s.running {
		if !r.LeaseExpires.After(now) {
			out = append(out, cloneRun(r))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// StartEffect implements store.Store.
func (s *Store) StartEffect(ctx context.Context, runID string, epoch int64, key string, now time.Time) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, err := s.liveRun(runID, epoch); err != nil {
		return err
	}
	effs := s.effects[runID]
	if effs == nil {
		effs = map[string]*store.Effect{}
		s.effects[runID] = effs
	}
	if e := effs[key]; e != nil && e.Status == store.EffectCompleted {
		return store.ErrFenced
	}
	effs[key] = &store.Effect{RunID: runID, Key: key, Status: store.EffectStarted, Epoch: epoch, StartedAt: now}
	return nil
}

// FinishEffect implements store.Store.
func (s *Store) FinishEffect(ctx context.Context, runID string, epoch int64, key string, status store.EffectStatus, output json.RawMessage, errMsg string, now time.Time) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	e := s.effects[runID][key]
	if e == nil || e.Status != store.EffectStarted || e.Epoch != epoch {
		return store.ErrFenced
	}
	e.Status, e.Output, e.Error, e.CompletedAt = status, cloneRaw(output), errMsg, now
	return nil
}

// Run implements store.Store.
func (s *Store) Run(ctx context.Context, id string) (store.Run, error) {
	if err := s.lock(); err != nil {
		return store.Run{}, err
	}
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok {
		return store.Run{}, store.ErrNotFound
	}
	return cloneRun(r), nil
}

// RunsByID implements store.Store.
func (s *Store) RunsByID(ctx context.Context, ids []string) ([]store.Run, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []store.Run
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if r, ok := s.runs[id]; ok && !seen[id] {
			seen[id] = true
			out = append(out, cloneRun(r))
		}
	}
	return out, nil
}

// CountEnded implements store.Store.
func (s *Store) CountEnded(ctx context.Context, ids []string) (exist, final int, err error) {
	if err := s.lock(); err != nil {
		return 0, 0, err
	}
	defer s.mu.Unlock()
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if r, ok := s.runs[id]; ok && !seen[id] {
			seen[id] = true
			exist++
			if r.Status.Final() {
				final++
			}
		}
	}
	return exist, final, nil
}

func (s *Store) compact() {
	if s.pruned == 0 || s.pruned < len(s.order)/2 {
		return
	}
	live := s.order[:0]
	for _, r := range s.order {
		if s.runs[r.ID] == r {
			live = append(live, r)
		}
	}
	clear(s.order[len(live):])
	s.order = live
	s.pruned = 0
}

func matches(r *store.Run, f *store.RunFilter) bool {
	if f.Process != "" && r.Process != f.Process {
		return false
	}
	if f.Event != "" && r.Event != f.Event {
		return false
	}
	if len(f.Statuses) > 0 && !slices.Contains(f.Statuses, r.Status) {
		return false
	}
	if f.RootOnly && r.ParentID != "" {
		return false
	}
	if f.CorrelationID != "" && r.CorrelationID != f.CorrelationID {
		return false
	}
	return true
}

// Runs implements store.Store.
func (s *Store) Runs(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	s.compact()
	f.Statuses = store.UniqueStatuses(f.Statuses)
	var out []store.Run
	visit := func(r *store.Run) bool {
		if s.runs[r.ID] != r || !matches(r, &f) {
			return true
		}
		out = append(out, cloneRun(r))
		return len(out) < f.Limit
	}
	if f.Order == store.OldestFirst {
		i := sort.Search(len(s.order), func(i int) bool { return s.order[i].Seq > f.After })
		for ; i < len(s.order); i++ {
			if !visit(s.order[i]) {
				break
			}
		}
	} else {
		i := len(s.order) - 1
		if f.After > 0 {
			i = sort.Search(len(s.order), func(i int) bool { return s.order[i].Seq >= f.After }) - 1
		}
		for ; i >= 0; i-- {
			if !visit(s.order[i]) {
				break
			}
		}
	}
	return out, nil
}

// CountRuns implements store.Store.
func (s *Store) CountRuns(ctx context.Context, f store.RunFilter) (int64, error) {
	if err := s.lock(); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	f.Statuses = store.UniqueStatuses(f.Statuses)
	var n int64
	for _, r := range s.runs {
		if matches(r, &f) {
			n++
		}
	}
	return n, nil
}

// Chain implements store.Store.
func (s *Store) Chain(ctx context.Context, correlationID string) ([]store.Run, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	ids := s.corr[correlationID]
	out := make([]store.Run, 0, len(ids))
	for _, id := range ids {
		out = append(out, cloneRun(s.runs[id]))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Depth != out[j].Depth {
			return out[i].Depth < out[j].Depth
		}
		return out[i].Seq < out[j].Seq
	})
	return out, nil
}

// Timeline implements store.Store.
func (s *Store) Timeline(ctx context.Context, runID string) ([]store.TimelineEntry, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if _, ok := s.runs[runID]; !ok {
		return nil, store.ErrNotFound
	}
	return append([]store.TimelineEntry(nil), s.timeline[runID]...), nil
}

// Effects implements store.Store.
func (s *Store) Effects(ctx context.Context, runID string) ([]store.Effect, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []store.Effect
	for _, e := range s.effects[runID] {
		c := *e
		c.Output = cloneRaw(e.Output)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Pending implements store.Store.
func (s *Store) Pending(ctx context.Context, after int64, limit int) ([]store.Pending, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []store.Pending
	i := sort.Search(len(s.order), func(i int) bool { return s.order[i].Seq > after })
	for _, r := range s.order[i:] {
		if len(out) == limit {
			break
		}
		if s.runs[r.ID] == r && (r.Status == store.StatusIdle || r.Status == store.StatusWaiting && !r.RetryAt.IsZero()) {
			out = append(out, store.Pending{ID: r.ID, Seq: r.Seq, Process: r.Process, CorrelationID: r.CorrelationID, RetryAt: r.RetryAt,
				CreatedAt: r.CreatedAt, Priority: r.Priority, RateKey: r.RateKey, ConcurrencyKey: r.ConcurrencyKey,
				Waiting: r.Status == store.StatusWaiting})
		}
	}
	return out, nil
}

// Counts implements store.Store.
func (s *Store) Counts(ctx context.Context) (map[store.Status]int64, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make(map[store.Status]int64, len(store.Statuses))
	for _, st := range store.Statuses {
		out[st] = s.counts[st]
	}
	return out, nil
}

// AddRollups implements store.Store.
func (s *Store) AddRollups(ctx context.Context, rs []store.Rollup) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	for _, r := range rs {
		k := rollupKey{r.Bucket.UnixNano(), r.Process}
		cur := s.rollups[k]
		if cur == nil {
			cur = &store.Rollup{Bucket: r.Bucket, Process: r.Process, Counts: map[string]int64{}, Hists: map[string][][]byte{}}
			s.rollups[k] = cur
		}
		for n, v := range r.Counts {
			cur.Counts[n] += v
		}
		for n, hs := range r.Hists {
			for _, h := range hs {
				cur.Hists[n] = append(cur.Hists[n], bytes.Clone(h))
			}
		}
	}
	return nil
}

// Rollups implements store.Store.
func (s *Store) Rollups(ctx context.Context, from, to time.Time) ([]store.Rollup, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []store.Rollup
	for _, r := range s.rollups {
		if r.Bucket.Before(from) || !r.Bucket.Before(to) {
			continue
		}
		c := store.Rollup{Bucket: r.Bucket, Process: r.Process, Counts: map[string]int64{}, Hists: map[string][][]byte{}}
		for n, v := range r.Counts {
			c.Counts[n] = v
		}
		for n, hs := range r.Hists {
			for _, h := range hs {
				c.Hists[n] = append(c.Hists[n], bytes.Clone(h))
			}
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Bucket.Equal(out[j].Bucket) {
			return out[i].Bucket.Before(out[j].Bucket)
		}
		return out[i].Process < out[j].Process
	})
	return out, nil
}

// AddErrors implements store.Store.
func (s *Store) AddErrors(ctx context.Context, es []store.ErrorRecord) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	for _, e := range es {
		s.errSeq++
		e.ID = s.errSeq
		s.errors = append(s.errors, e)
	}
	return nil
}

// Errors implements store.Store.
func (s *Store) Errors(ctx context.Context, from, to time.Time, limit int) ([]store.ErrorRecord, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []store.ErrorRecord
	for i := len(s.errors) - 1; i >= 0 && len(out) < limit; i-- {
		e := s.errors[i]
		if !e.At.Before(from) && !e.At.After(to) {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.After(out[j].At)
		}
		return out[i].ID > out[j].ID
	})
	return out, nil
}

// HoldRate implements store.Store.
func (s *Store) HoldRate(ctx context.Context, runID string, epoch int64, tat time.Time) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r, err := s.liveRun(runID, epoch)
	if err != nil {
		return err
	}
	if r.RateKey != "" && tat.After(s.rates[r.RateKey]) {
		s.rates[r.RateKey] = tat
	}
	return nil
}

// RateStates implements store.Store.
func (s *Store) RateStates(ctx context.Context, now time.Time) (map[string]time.Time, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := map[string]time.Time{}
	for k, t := range s.rates {
		if t.After(now) {
			out[k] = t
		}
	}
	return out, nil
}

// Prune implements store.Store.
func (s *Store) Prune(ctx context.Context, p store.PruneRequest) (int, error) {
	if err := s.lock(); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	n := 0
	if !p.CompletedBefore.IsZero() {
		for _, r := range s.order {
			if n >= p.Limit {
				break
			}
			if s.runs[r.ID] != r || r.Status != store.StatusCompleted ||
				!r.CompletedAt.Before(p.CompletedBefore) || len(s.children[r.ID]) > 0 {
				continue
			}
			s.deleteRun(r)
			n++
		}
	}
	if !p.CompletedBefore.IsZero() {
		for k, t := range s.rates { // a state in the past limits nothing
			if t.Before(p.CompletedBefore) {
				delete(s.rates, k)
			}
		}
	}
	if !p.SignalsBefore.IsZero() {
		for k, ks := range s.signals {
			kept := ks[:0]
			for _, sg := range ks {
				if !sg.until.Before(p.SignalsBefore) {
					kept = append(kept, sg)
				}
			}
			if len(kept) == 0 {
				delete(s.signals, k)
			} else {
				s.signals[k] = kept
			}
		}
	}
	if !p.ObservabilityBefore.IsZero() {
		for k, r := range s.rollups {
			if r.Bucket.Before(p.ObservabilityBefore) {
				delete(s.rollups, k)
			}
		}
		kept := s.errors[:0]
		for _, e := range s.errors {
			if !e.At.Before(p.ObservabilityBefore) {
				kept = append(kept, e)
			}
		}
		s.errors = kept
	}
	return n, nil
}

// PruneKeys implements store.Store.
func (s *Store) PruneKeys(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := s.lock(); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	n := 0
	kept := s.keptOrder[:0]
	for _, k := range s.keptOrder {
		if n < limit && s.kept[k].CreatedAt.Before(before) {
			delete(s.kept, k)
			n++
			continue
		}
		kept = append(kept, k)
	}
	clear(s.keptOrder[len(kept):])
	s.keptOrder = kept
	return n, nil
}

// Close implements store.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}
