package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/yella-go/yella/store"
)

// Admit implements store.Store.
func (s *Store) Admit(ctx context.Context, a store.Admission) (store.AdmitResult, error) {
	// The read is a shortcut only: when it fails (a read connection that
	// cannot open the database, say), the writer decides, and answers with
	// its own error if it has one.
	if res, known, err := s.admittedBefore(ctx, &a); err == nil && known {
		return res, nil
	}
	var res store.AdmitResult
	err := s.do(ctx, func(w *wtx) error {
		var err error
		res, err = w.admit(&a)
		return err
	})
	return res, err
}

// admitPlan is what an admission will do, decided before anything is
// written so that a refusal writes nothing.
type admitPlan struct {
	res     store.AdmitResult
	admit   []store.NewRun
	grouped []groupedRun
}

// groupedRun is the run of a group that stands in for one of an
// admission's runs (see store.GroupPolicy).
type groupedRun struct {
	run      store.Run // as found, without its payload and context (only its Seq when debounced)
	planned  int       // ≥ 0: the run is admit[planned] of the same admission, not written yet
	debounce bool      // the run takes the admission's data and start time
}

func (w *wtx) planAdmit(a *store.Admission) (admitPlan, error) {
	var p admitPlan
	if a.ParentID != "" || a.IdempotencyKey != "" {
		// Its reads see the runs the batch's earlier admissions admitted.
		if err := w.flushRuns(); err != nil {
			return p, err
		}
	}
	if a.ParentID != "" {
		var seq int64
		if err := w.s.st.seqOf.QueryRowContext(w.ctx, a.ParentID).Scan(&seq); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return p, store.ErrNotFound
			}
			return p, err
		}
	}
	planned := map[string]int{}
	for _, nr := range a.Runs {
		if a.IdempotencyKey != "" {
			r, _, err := scanRun(w.s.st.selIdem.QueryRowContext(w.ctx, a.Event, a.IdempotencyKey, nr.Process))
			if err == nil {
				p.res.Existing = append(p.res.Existing, r)
				continue
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return p, err
			}
			kept := store.Run{Process: nr.Process, Event: a.Event, IdempotencyKey: a.IdempotencyKey, Status: store.StatusCompleted}
			var created int64
			err = w.s.st.selKept.QueryRowContext(w.ctx, a.Event, a.IdempotencyKey, nr.Process).Scan(&kept.ID, &created)
			if err == nil {
				kept.CreatedAt = time.Unix(0, created)
				p.res.Pruned = append(p.res.Pruned, kept)
				continue
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return p, err
			}
		}
		// Only a grouped admission pays for the lookup.
		if nr.GroupKey != "" && nr.Group != store.GroupNone {
			if err := w.flushRuns(); err != nil {
				return p, err
			}
			g, found, err := w.groupRun(&nr, p.admit)
			if err != nil {
				return p, err
			}
			if found {
				p.grouped = append(p.grouped, g)
				continue
			}
		}
		if nr.Limit > 0 {
			n, err := w.active(nr.Process)
			if err != nil {
				return p, err
			}
			if n+planned[nr.Process] >= nr.Limit {
				p.res.Dropped = append(p.res.Dropped, nr)
				continue
			}
		}
		planned[nr.Process]++
		p.admit = append(p.admit, nr)
	}
	return p, nil
}

// groupRun finds the run that stands in for nr under its group policy:
// the latest admitted run of its process and group key that is idle,
// running or waiting (GroupSingleton), or idle and never started
// (GroupDebounce). A run planned earlier in the same admission (in
// planned, not written yet) is the latest of all; any run written earlier
// in this transaction, by another admission of the batch, is seen by the
// query, since the writer's reads see its own uncommitted writes.
func (w *wtx) groupRun(nr *store.NewRun, planned []store.NewRun) (groupedRun, bool, error) {
	g := groupedRun{planned: -1, debounce: nr.Group == store.GroupDebounce}
	if nr.Group != store.GroupSingleton && nr.Group != store.GroupDebounce {
		return g, false, nil // no policy this store knows: the key is only stored
	}
	for i := len(planned) - 1; i >= 0; i-- {
		// A planned run is idle and never started: it stands in under
		// either policy.
		if planned[i].Process == nr.Process && planned[i].GroupKey == nr.GroupKey {
			g.planned = i
			return g, true, nil
		}
	}
	var err error
	if g.debounce { // writeAdmit's update returns the run
		err = w.s.st.selDebounce.QueryRowContext(w.ctx, nr.Process, nr.GroupKey).Scan(&g.run.Seq)
	} else {
		g.run, _, err = scanRun(w.s.st.selSingleton.QueryRowContext(w.ctx, nr.Process, nr.GroupKey))
	}
	if errors.Is(err, sql.ErrNoRows) {
		return g, false, nil
	}
	return g, err == nil, err
}

// notBeforeOf is a delayed admission's retry time as a read would return
// it (nanoseconds, no monotonic reading); zero stays zero.
func notBeforeOf(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.Unix(0, t.UnixNano())
}

func (w *wtx) writeAdmit(a *store.Admission, p *admitPlan) error {
	var notBefore time.Time
	if a.NotBefore.After(a.Now) {
		notBefore = a.NotBefore
	}
	first := len(p.res.Admitted) // the index of admit[0] in p.res.Admitted
	for _, nr := range p.admit {
		corr := a.CorrelationID
		if corr == "" {
			corr = nr.ID
		}
		stored := any(corr)
		if corr == nr.ID {
			stored = nil // a root: its correlation id is its own id
		}
		w.seq++ // the writer is the only one to create runs: no RETURNING needed
		seq := w.seq
		// The row is taken from the batch's buffer as it is appended (one
		// that grows the buffer leaves the rows before it where they
		// were), which the writer clears once the batch is over.
		b := &w.s.bufs
		at := len(b.runVals)
		b.runVals = append(b.runVals, seq, nr.ID, nr.Process, a.Event, stored, nullStr(a.ParentID), a.Depth,
			blob(a.Payload), blob(a.Context), nullStr(a.IdempotencyKey), a.Now.UnixNano(),
			nr.Priority, nullStr(nr.RateKey), nullStr(nr.ConcurrencyKey), ns(notBefore), nullStr(nr.GroupKey))
		row := b.runVals[at:len(b.runVals):len(b.runVals)]
		if w.deferring && len(p.grouped) == 0 { // a debounce below updates a run by its seq
			w.runs, w.runsOf = append(w.runs, row), append(w.runsOf, w.admitting)
		} else if err := w.flushRuns(); err != nil {
			return err
		} else if _, err := w.exec(w.s.st.insRun, row...); err != nil {
			return err
		}
		w.moved(nr.Process, "", store.StatusIdle)
		p.res.Admitted = append(p.res.Admitted, store.Run{
			ID: nr.ID, Seq: seq, Process: nr.Process, Event: a.Event, CorrelationID: corr, ParentID: a.ParentID,
			Depth: a.Depth, Status: store.StatusIdle, Payload: a.Payload, Context: a.Context,
			IdempotencyKey: a.IdempotencyKey, CreatedAt: time.Unix(0, a.Now.UnixNano()),
			Priority: nr.Priority, RateKey: nr.RateKey, ConcurrencyKey: nr.ConcurrencyKey, RetryAt: notBeforeOf(notBefore),
			GroupKey: nr.GroupKey,
		})
		w.s.keepFresh(&p.res.Admitted[len(p.res.Admitted)-1])
	}
	for _, g := range p.grouped {
		r := g.run
		if g.planned >= 0 {
			r = p.res.Admitted[first+g.planned]
			r.Payload, r.Context = nil, nil
		}
		if g.debounce {
			var tl int
			var err error
			r, tl, err = scanRun(w.s.st.debounce.QueryRowContext(w.ctx, blob(a.Payload), blob(a.Context), ns(notBefore), r.Seq))
			if err != nil { // found idle and never started in this transaction: no row is an error
				return err
			}
			if err := w.timeline(&r, store.StatusIdle, r.Attempts, tl, a.Now, "", "", "debounced"); err != nil {
				return err
			}
		}
		p.res.Grouped = append(p.res.Grouped, r)
	}
	return nil
}

func (w *wtx) admit(a *store.Admission) (store.AdmitResult, error) {
	p, err := w.planAdmit(a)
	if err != nil {
		return store.AdmitResult{}, err
	}
	if err := w.writeAdmit(a, &p); err != nil {
		return store.AdmitResult{}, err
	}
	return p.res, nil
}

// Claim implements store.Store.
func (s *Store) Claim(ctx context.Context, req store.ClaimRequest) ([]store.Run, error) {
	s.mu.Lock()
	s.live[req.Owner] = true
	s.mu.Unlock()
	c := &claimCmd{req: req}
	if err := s.submit(ctx, &cmd{fn: c.each, claim: c, done: make(chan struct{})}); err != nil {
		return nil, err
	}
	out := c.out
	for _, i := range c.large {
		// Committed before this read, and only this claim's attempt may
		// change the context from now on, so the read is consistent.
		if err := s.st.selData.QueryRowContext(ctx, out[i].Seq).Scan((*[]byte)(&out[i].Payload), (*[]byte)(&out[i].Context)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// claimCmd is a claim queued for the writer. The claims of one batch are
// made by one statement when there are several (claimMerged); each may
// also run alone (each), when it is the batch's only claim or the batch is
// retried command by command.
type claimCmd struct {
	req   store.ClaimRequest
	out   []store.Run
	large []int // indexes of out whose data is read from the read pool
}

// mergeable reports that the claim may share a statement: it records no
// rate state (a claim with one stores the key's new state with its run).
func (c *claimCmd) mergeable() bool { return len(c.req.RateTATs) == 0 }

// each claims the request's runs one statement each.
func (c *claimCmd) each(w *wtx) error {
	w.s.claiming = true
	c.out, c.large = c.out[:0], c.large[:0]
	req := &c.req
	for i, id := range req.IDs {
		var tat any
		if i < len(req.RateTATs) {
			tat = ns(req.RateTATs[i])
		}
		if f := w.s.freshOf(id, freshSeq(req, i)); f != nil {
			fs := &w.s.bufs.fresh
			err := fs.scan(w.s.st.claimFresh.QueryRowContext(w.ctx, req.Owner, req.LeaseUntil.UnixNano(), req.Now.UnixNano(), tat, f.seq))
			if err == nil {
				w.addKept(c, f, id, fs.payload, fs.context, fs.large)
				fs.payload, fs.context = nil, nil
				continue
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			// Changed since its admission, or not claimable: as any other.
		}
		// The running timeline entry stays implicit until the attempt ends.
		cs := &w.s.bufs.claim
		from, err := cs.scan(w.s.st.claim.QueryRowContext(w.ctx, req.Owner, req.LeaseUntil.UnixNano(), req.Now.UnixNano(), tat, id, req.Now.UnixNano()),
			req.Owner, req.Now, req.LeaseUntil)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return err
		}
		w.moved(cs.r.Process, from, store.StatusRunning)
		w.s.remember(&cs.r, cs.tl, req.Now)
		c.add(cs.r, cs.large)
	}
	return nil
}

// addKept gives c the kept run f, id, which its claim took (claimFreshSQL)
// with payload and context (nil and large when left for the read pool).
func (w *wtx) addKept(c *claimCmd, f *freshRun, id string, payload, context []byte, large bool) {
	r := w.s.claimedFresh(f, id, c.req.Owner, c.req.Now, c.req.LeaseUntil, payload, context)
	w.moved(r.Process, store.StatusIdle, store.StatusRunning)
	w.s.remember(&r, 1, c.req.Now)
	c.add(r, large)
}

func (c *claimCmd) add(r store.Run, big bool) {
	if big {
		c.large = append(c.large, len(c.out))
	}
	c.out = append(c.out, r)
}

// claimMerged makes the claims cs, all mergeable, in one statement: each
// run with its own request's owner, times and conditions (claimManyHead).
// The claims of one batch were made concurrently, so making them together
// before the batch's other commands is one of the orders they could have
// come in. A run asked for twice goes to the first asker.
func (w *wtx) claimMerged(cs []*claimCmd) error {
	b := &w.s.bufs
	if b.claimed == nil {
		b.claimed = map[string]int{}
	}
	defer b.clearClaims()
	w.s.claiming = true
	// b.claimed holds each run asked for, by id, from its first asker: an
	// index into b.gots once the statement that returns runs has returned
	// it, claimNone until then, or for a run the writer keeps as admitted
	// (Store.fresh) freshFirst minus its index into b.cands. The kept runs
	// are claimed first, by a statement that returns only their data; those
	// it does not claim are then asked for with the others.
	const claimNone, freshFirst = -1, -2
	for _, c := range cs {
		c.out, c.large = c.out[:0], c.large[:0]
		for i, id := range c.req.IDs {
			if _, dup := b.claimed[id]; dup {
				continue
			}
			if f := w.s.freshOf(id, freshSeq(&c.req, i)); f != nil {
				b.claimed[id] = freshFirst - len(b.cands)
				b.cands = append(b.cands, freshCand{f: f, c: c, id: id})
				b.keptVals = append(b.keptVals, f.seq, c.req.Owner, c.req.Now.UnixNano(), c.req.LeaseUntil.UnixNano())
				continue
			}
			b.claimed[id] = claimNone
			b.vals = append(b.vals, id, c.req.Owner, c.req.Now.UnixNano(), c.req.LeaseUntil.UnixNano())
		}
	}
	const cols = 4 // claimFreshMany's and claimMany's
	if len(b.cands) > 0 {
		if b.candOf == nil {
			b.candOf = map[int64]int{}
		}
		for k := range b.cands {
			b.candOf[b.cands[k].f.seq] = k
		}
		for i := 0; i < len(b.keptVals); i += cols {
			b.rows = append(b.rows, b.keptVals[i:i+cols])
		}
		_, err := w.queryMany(claimFreshMany, b.rows, func(rs scanner) error {
			if err := b.fresh.scan(rs); err != nil {
				return err
			}
			k, ok := b.candOf[b.fresh.seq]
			if !ok {
				return fmt.Errorf("sqlitestore: a claim returned run seq %d, which it did not ask for", b.fresh.seq)
			}
			cd := &b.cands[k]
			cd.ok, cd.payload, cd.context, cd.large = true, b.fresh.payload, b.fresh.context, b.fresh.large
			return nil
		})
		if err != nil {
			return err
		}
		clear(b.rows)
		b.rows = b.rows[:0]
		for k := range b.cands {
			if cd := &b.cands[k]; !cd.ok {
				b.claimed[cd.id] = claimNone
				b.vals = append(b.vals, cd.id, cd.c.req.Owner, cd.c.req.Now.UnixNano(), cd.c.req.LeaseUntil.UnixNano())
			}
		}
	}
	for i := 0; i < len(b.vals); i += cols {
		b.rows = append(b.rows, b.vals[i:i+cols])
	}
	_, err := w.queryMany(claimMany, b.rows, func(rs scanner) error {
		from, err := b.claim.scan(rs, "", time.Time{}, time.Time{})
		if err != nil {
			return err
		}
		b.gots = append(b.gots, gotRun{r: b.claim.r, big: b.claim.large, tl: b.claim.tl})
		w.moved(b.claim.r.Process, from, store.StatusRunning)
		b.claimed[b.claim.r.ID] = len(b.gots) - 1
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range cs {
		for _, id := range c.req.IDs {
			j, ok := b.claimed[id]
			if !ok || j == claimNone {
				continue
			}
			delete(b.claimed, id)
			if j <= freshFirst {
				cd := &b.cands[freshFirst-j]
				w.addKept(c, cd.f, id, cd.payload, cd.context, cd.large)
				continue
			}
			g := &b.gots[j]
			g.r.LeaseOwner, g.r.LeaseExpires, g.r.StartedAt = c.req.Owner, c.req.LeaseUntil, c.req.Now
			w.s.remember(&g.r, g.tl, c.req.Now)
			c.add(g.r, g.big)
		}
	}
	return nil
}

// gotRun is a run a merged statement returned: whether its data was too
// large to return (a claim), and its timeline entry count.
type gotRun struct {
	r   store.Run
	big bool
	tl  int
}

// writerBufs are buffers of the writer's merged statements, reused batch
// to batch: a busy writer would otherwise allocate them for every batch.
// Each is cleared after use, so that none keeps a run's data alive.
type writerBufs struct {
	claim    claimScan
	fresh    freshScan
	cands    []freshCand    // the batch's claims of runs kept as admitted
	candOf   map[int64]int  // index into cands by seq
	vals     []any          // the bound values, rows after rows
	keptVals []any          // the claims' rows of kept runs (claimFreshMany)
	finVals  []any          // the attempt ends' rows (finishRow)
	runVals  []any          // the batch's admitted runs' rows (writeAdmit): cleared by clearRuns
	rows     [][]any        // each row's values in vals
	gots     []gotRun       // the runs returned
	claimed  map[string]int // index into gots by run id
	held     []heldRun      // the attempt ends' runs as their claims left them
	// ends are mergeFinishes's lists: its attempt ends, their rows and
	// outcomes, and the rows of each statement.
	ends struct {
		cs                        []*cmd
		rows                      [][]any
		outs                      []store.Outcome
		known, completes, unknown [][]any
	}
	answered map[*cmd]bool // the attempt ends mergeFinishes answered
}

// freshCand is a claim of a run the writer keeps as admitted: the run,
// its first asker, its id, and, once claimed (ok), the data the claim
// returned.
type freshCand struct {
	f                *freshRun
	c                *claimCmd
	id               string
	ok, large        bool
	payload, context []byte
}

// heldRun is an ended run as its claim left it, if the writer holds it
// (Store.claimed).
type heldRun struct {
	k  claimedRun
	ok bool
}

// runValsMax bounds the admitted runs' buffer kept from batch to batch:
// a larger one (a batch admission of many thousands) is let go.
const runValsMax = 64 << 10

// clearRuns forgets the batch's admitted runs' rows.
func (b *writerBufs) clearRuns() {
	if cap(b.runVals) > runValsMax {
		b.runVals = nil
		return
	}
	clear(b.runVals)
	b.runVals = b.runVals[:0]
}

func (b *writerBufs) clearClaims() {
	clear(b.vals)
	clear(b.keptVals)
	clear(b.finVals)
	clear(b.rows)
	clear(b.gots)
	b.vals, b.keptVals, b.finVals, b.rows, b.gots = b.vals[:0], b.keptVals[:0], b.finVals[:0], b.rows[:0], b.gots[:0]
	b.claim.r = store.Run{}
	b.fresh.payload, b.fresh.context = nil, nil
	clear(b.cands)
	b.cands = b.cands[:0]
	clear(b.candOf)
	clear(b.claimed)
	clear(b.held)
	e := &b.ends
	clear(e.cs)
	clear(e.rows)
	clear(e.outs)
	clear(e.known)
	clear(e.completes)
	clear(e.unknown)
	e.cs, e.rows, e.outs = e.cs[:0], e.rows[:0], e.outs[:0]
	e.known, e.completes, e.unknown = e.known[:0], e.completes[:0], e.unknown[:0]
}

// timeline appends the entry of a transition that moved a run from one
// status, as entry n (the run's new entry count). If the transition ended an
// attempt, the attempt's implicit running entry is written with it, with
// the attempt's number ran (r.Attempts, unless the transition refunded
// the attempt).
func (w *wtx) timeline(r *store.Run, from store.Status, ran, n int, at time.Time, errMsg, code, note string) error {
	var err error
	if from == store.StatusRunning {
		_, err = w.exec(w.s.st.insTL2, r.Seq, n, r.StartedAt.UnixNano(), ran, at.UnixNano(), string(r.Status), errMsg, code, note, r.Attempts)
	} else {
		_, err = w.exec(w.s.st.insTL, r.Seq, n, at.UnixNano(), string(r.Status), r.Attempts, errMsg, code, note)
	}
	return err
}

// Update implements store.Store.
func (s *Store) Update(ctx context.Context, u store.Update) (store.UpdateResult, error) {
	// One allocation holds the command, the update and its answer: the
	// update made on its own (fn) and one ended with the batch's other
	// attempt ends (mergeFinishes) both answer in uc.fin.res.
	uc := updateCmds.Get().(*updateCmd)
	uc.u = u
	uc.fn = func(w *wtx) error {
		var err error
		uc.fin.res, err = w.update(&uc.u)
		return err
	}
	if uc.fin.set(&uc.u) {
		uc.cmd.fin = &uc.fin
	}
	uc.done = make(chan struct{})
	err := s.submit(ctx, &uc.cmd)
	res := uc.fin.res
	select {
	case <-uc.done: // answered: the writer is done with it
		*uc = updateCmd{}
		updateCmds.Put(uc)
	default: // never queued
	}
	return res, err
}

// updateCmds are Update's commands, reused once answered: a command holds
// an update and its answer (about a kilobyte), and an engine makes one for
// every attempt's end.
var updateCmds = sync.Pool{New: func() any { return new(updateCmd) }}

// updateCmd is an Update's command.
type updateCmd struct {
	cmd
	fin finishCmd
	u   store.Update
}

// update applies one transition as the transition table says (see
// store.Rule). An attempt's end, the hot path, is one UPDATE guarded by the
// epoch in its WHERE clause, with no read; other actions read the run first
// to check their precondition. Either way the SET list writes what the
// rule's field writes say, and RETURNING gives the whole run back. A wait
// for a signal first looks for a kept signal for its key: it is consumed
// (deleted) only once the UPDATE has applied, so a refused wait writes
// nothing.
func (w *wtx) update(u *store.Update) (store.UpdateResult, error) {
	var res store.UpdateResult
	held, isHeld := w.s.claimed[u.RunID]
	delete(w.s.claimed, u.RunID) // whatever it does, the run's claim is over or not this one
	rule, err := u.Rule()
	if err != nil {
		return res, w.notFoundOr(u.RunID, err)
	}
	fast := rule.Guard == store.GuardEpoch
	from := store.StatusRunning
	var seq int64
	if !fast {
		cur, _, err := scanRun(w.s.st.selRunW.QueryRowContext(w.ctx, u.RunID))
		if errors.Is(err, sql.ErrNoRows) {
			return res, store.ErrNotFound
		}
		if err != nil {
			return res, err
		}
		var f store.Facts
		if rule.Guard == store.GuardReclaim {
			f.OwnerGone = !w.s.ownerAlive(cur.LeaseOwner)
		}
		if err := rule.Check(&cur, u, f); err != nil {
			return res, err
		}
		from, seq = cur.Status, cur.Seq
	}
	var plan admitPlan
	if u.Children != nil {
		if plan, err = w.planAdmit(u.Children); err != nil {
			return res, err
		}
	}
	o, fallback, err := rule.Outcome(u, len(plan.admit))
	if err != nil {
		if fast { // the epoch guard comes first (store.Rule.Check)
			return res, w.guardOr(u, rule, err)
		}
		return res, err
	}
	var sig keptSignal
	if rule.Effects == store.EffectsWait && u.Wait.Signal != "" {
		if sig, err = w.keptSignal(u.Wait.Signal, u.Now); err != nil {
			return res, err
		}
	}
	signalled := sig.seq != 0 && rule.Signalled != ""
	o = rule.Signal(o, signalled)
	args := setArgs(rule, u, &o, fallback, signalled)
	var r store.Run
	var tl int
	switch {
	case fast && isHeld && held.epoch == u.Epoch: // the run is held from its claim
		var res sql.Result
		var n int64
		if res, err = w.exec(w.s.st.finishHeld, append(args, held.seq, u.Epoch, waitKey(u, &o))...); err == nil {
			n, err = res.RowsAffected()
		}
		switch {
		case err == nil && n == 0:
			err = sql.ErrNoRows
		case err == nil:
			r, tl = endedRun(held, u.RunID, append(append([]any{u.RunID, u.Epoch}, args...), waitKey(u, &o)))
		}
	case fast:
		r, tl, err = scanUpdated(w.s.st.finish.QueryRowContext(w.ctx, append(args, u.RunID, u.Epoch, waitKey(u, &o))...))
	default:
		r, tl, err = scanUpdated(w.s.st.update.QueryRowContext(w.ctx, append(args, seq, nil, waitKey(u, &o))...))
	}
	if errors.Is(err, sql.ErrNoRows) { // the epoch no longer owns the run
		return res, w.notFoundOr(u.RunID, store.ErrFenced)
	}
	if err != nil {
		return res, err
	}
	w.moved(r.Process, from, r.Status)
	if signalled {
		if _, err := w.exec(w.s.st.delSignal, sig.seq); err != nil {
			return res, err
		}
	}
	if u.Children != nil {
		if err := w.writeAdmit(u.Children, &plan); err != nil {
			return res, err
		}
		res.Children = plan.res
	}
	if err := w.writeEffects(rule.Effects, &r, u, &sig, signalled); err != nil {
		return res, err
	}
	ran := r.Attempts
	if rule.RefundAttempt { // a running run has made at least one attempt
		ran++
	}
	if !implicitEnd(&r, from, tl, u.Now, o.Note) {
		if err := w.timeline(&r, from, ran, tl, u.Now, o.Error, o.ErrorCode, o.Note); err != nil {
			return res, err
		}
	}
	res.Run = r
	return res, nil
}

// implicitEnd reports that an attempt's end writes no timeline row: the
// first attempt of a run (its entries 2 and 3, tl after the end; entry 1,
// the admission, is implicit too) ended the run completed, with the
// complete rule's own note, at the run's completed_at. Completed is final,
// so such a run never gets another entry, and Timeline reads both from
// the run's row (started_at, completed_at): most runs then have no
// timeline row at all.
func implicitEnd(r *store.Run, from store.Status, tl int, at time.Time, note string) bool {
	return from == store.StatusRunning && tl == 3 && r.Status == store.StatusCompleted && note == implicitNote &&
		r.CompletedAt.Equal(at) && !r.StartedAt.IsZero()
}

// implicitNote is the note of an implicit completion entry: the complete
// rule's own.
const implicitNote = "completed"

// keptSignal is a signal kept for a later wait (the signals table).
type keptSignal struct {
	seq     int64 // 0: none
	payload json.RawMessage
}

// keptSignal returns the oldest signal kept for key that is still kept at
// now, or none (seq 0). It does not consume it.
func (w *wtx) keptSignal(key string, now time.Time) (keptSignal, error) {
	var sig keptSignal
	err := w.s.st.selSignal.QueryRowContext(w.ctx, key, now.UnixNano()).Scan(&sig.seq, (*[]byte)(&sig.payload))
	if errors.Is(err, sql.ErrNoRows) {
		return keptSignal{}, nil
	}
	return sig, err
}

// waitKey is the wait_key an update leaves (setCols's ?15): the signal its
// wait waits for when the run is left waiting, else NULL.
func waitKey(u *store.Update, o *store.Outcome) any {
	if o.To != store.StatusWaiting || u.Wait == nil {
		return nil
	}
	return nullStr(u.Wait.Signal)
}

// Modes of setCols's attempt count (?11).
const (
	attemptsKept   = 0
	attemptsReset  = 1
	attemptsRefund = 2
)

// attemptsMode is setCols's attempt-count mode for rule.
func attemptsMode(rule *store.Rule) int {
	switch {
	case rule.ResetAttempts: // a refund after a reset leaves 0 too
		return attemptsReset
	case rule.RefundAttempt:
		return attemptsRefund
	}
	return attemptsKept
}

// setArgs are the arguments ?1 to ?12 of setCols for an update following
// rule with outcome o (the rule's fallback if fallback is set, its
// signalled outcome if signalled is): the rule's field writes, as modes
// and values.
func setArgs(rule *store.Rule, u *store.Update, o *store.Outcome, fallback, signalled bool) []any {
	return appendSetArgs(make([]any, 0, 15), rule, u, o, fallback, signalled)
}

// appendSetArgs appends setArgs's values to dst.
func appendSetArgs(dst []any, rule *store.Rule, u *store.Update, o *store.Outcome, fallback, signalled bool) []any {
	outW, thenW, retryW := rule.Output, rule.Then, rule.RetryAt
	if fallback { // the primary outcome's output is not recorded
		outW, thenW = store.Keep, store.Keep
	}
	if signalled { // the wait is over before it began: no deadline
		retryW = store.Clear
	}
	outMode, out := mode(outW, blob(u.Output), nil)
	thenMode, then := mode(thenW, u.Then, "")
	retryMode, retryAt := mode(retryW, ns(u.RetryAt), nil)
	completed := ns(u.Now)
	if !o.To.Final() {
		completed = nil
	}
	return append(dst, string(o.To), o.Error, o.ErrorCode, outMode, out, thenMode, then, retryMode, retryAt,
		completed, attemptsMode(rule), u.Version)
}

// mode turns a field write into setCols's mode (0 keep, 1 set) and value:
// the update's value v for Set, zero for Clear.
func mode(w store.Write, v, zero any) (int, any) {
	switch w {
	case store.Set:
		return 1, v
	case store.Clear:
		return 1, zero
	}
	return 0, zero
}

// writeEffects changes the run's effect records as its transition says: a
// wait that consumed the kept signal sig (signalled) is recorded as
// completed with its payload, any other wait as waiting.
func (w *wtx) writeEffects(ew store.EffectWrite, r *store.Run, u *store.Update, sig *keptSignal, signalled bool) error {
	var err error
	switch ew {
	case store.EffectsClearStarted:
		_, err = w.exec(w.s.st.effClear, r.Seq)
	case store.EffectsComplete:
		d := u.CompleteEffect
		_, err = w.exec(w.s.st.effDone, r.Seq, d.Key, r.Epoch, blob(d.Output), u.Now.UnixNano(), u.Now.UnixNano())
	case store.EffectsWait:
		if signalled {
			_, err = w.exec(w.s.st.effDone, r.Seq, u.Wait.Key, r.Epoch, blob(sig.payload), u.Now.UnixNano(), u.Now.UnixNano())
		} else {
			_, err = w.exec(w.s.st.effWait, r.Seq, u.Wait.Key, r.Epoch, u.Now.UnixNano())
		}
	}
	return err
}

// guardOr returns the error of the rule's guard for the run, or err if it
// passes: the refusal of an update whose guard the fast path left to the
// UPDATE's WHERE clause.
func (w *wtx) guardOr(u *store.Update, rule *store.Rule, err error) error {
	cur, _, rerr := scanRun(w.s.st.selRunW.QueryRowContext(w.ctx, u.RunID))
	if errors.Is(rerr, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	if rerr != nil {
		return rerr
	}
	if gerr := rule.Check(&cur, u, store.Facts{}); gerr != nil {
		return gerr
	}
	return err
}

// notFoundOr returns ErrNotFound for an unknown run, else err.
func (w *wtx) notFoundOr(runID string, err error) error {
	var seq int64
	if e := w.s.st.seqOf.QueryRowContext(w.ctx, runID).Scan(&seq); errors.Is(e, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

// ownerAlive reports whether a lease owner may still be alive: one seen in
// this process, or any owner when the store could not take its exclusive
// lock (then only lease expiry proves death).
func (s *Store) ownerAlive(owner string) bool {
	if !s.exclusive {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[owner]
}

// SetContext implements store.Store.
func (s *Store) SetContext(ctx context.Context, runID string, epoch int64, c json.RawMessage) error {
	return s.do(ctx, func(w *wtx) error {
		res, err := w.exec(w.s.st.setCtx, blob(c), runID, epoch)
		if err != nil {
			return err
		}
		return w.fencedOr404(res, runID)
	})
}

// HoldRate implements store.Store.
func (s *Store) HoldRate(ctx context.Context, runID string, epoch int64, tat time.Time) error {
	return s.do(ctx, func(w *wtx) error {
		res, err := w.exec(w.s.st.holdRate, tat.UnixNano(), runID, epoch)
		if err != nil {
			return err
		}
		return w.fencedOr404(res, runID)
	})
}

// fencedOr404 turns "no row changed" into ErrNotFound or ErrFenced.
func (w *wtx) fencedOr404(res sql.Result, runID string) error {
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return err
	}
	var seq int64
	if err := w.s.st.seqOf.QueryRowContext(w.ctx, runID).Scan(&seq); errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return store.ErrFenced
}

// Heartbeat implements store.Store.
func (s *Store) Heartbeat(ctx context.Context, owner string, now, until time.Time) ([]store.Lease, error) {
	s.mu.Lock()
	s.live[owner] = true
	s.mu.Unlock()
	var out []store.Lease
	err := s.do(ctx, func(w *wtx) error {
		out = out[:0]
		rows, err := w.s.st.heartbeat.QueryContext(w.ctx, until.UnixNano(), owner)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var l store.Lease
			if err := rows.Scan(&l.RunID, &l.Epoch); err != nil {
				return err
			}
			out = append(out, l)
		}
		return rows.Err()
	})
	return out, err
}

// StartEffect implements store.Store.
func (s *Store) StartEffect(ctx context.Context, runID string, epoch int64, key string, now time.Time) error {
	return s.do(ctx, func(w *wtx) error {
		res, err := w.exec(w.s.st.effStart, key, now.UnixNano(), runID, epoch)
		if err != nil {
			return err
		}
		return w.fencedOr404(res, runID)
	})
}

// FinishEffect implements store.Store.
func (s *Store) FinishEffect(ctx context.Context, runID string, epoch int64, key string, status store.EffectStatus, output json.RawMessage, errMsg string, now time.Time) error {
	return s.QueueFinishEffect(ctx, runID, epoch, key, status, output, errMsg, now)()
}

// QueueFinishEffect implements store.EffectQueue: the write is a command
// of the writer's queue, which it takes in order (enqueue).
func (s *Store) QueueFinishEffect(ctx context.Context, runID string, epoch int64, key string, status store.EffectStatus, output json.RawMessage, errMsg string, now time.Time) (wait func() error) {
	c := &cmd{fn: func(w *wtx) error {
		res, err := w.exec(w.s.st.effFinish, string(status), blob(output), errMsg, now.UnixNano(), runID, key, epoch)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				err = store.ErrFenced
			}
			return err
		}
		return nil
	}, done: make(chan struct{})}
	if err := s.enqueue(ctx, c); err != nil {
		return func() error { return err }
	}
	return func() error {
		<-c.done
		return c.err
	}
}

// Signal implements store.Store: one write transaction finds the run
// waiting for the key, admitted first (runs_wait_key), and wakes it, or
// keeps the signal. The writer runs one command at a time, so a signal and
// a wait for its key are never decided at once: the wait finds the kept
// signal, or the signal finds the waiting run.
func (s *Store) Signal(ctx context.Context, req store.SignalRequest) (store.SignalResult, error) {
	var res store.SignalResult
	err := s.do(ctx, func(w *wtx) error {
		var err error
		res, err = w.signal(&req)
		return err
	})
	return res, err
}

func (w *wtx) signal(req *store.SignalRequest) (store.SignalResult, error) {
	var seq int64
	if req.RunID != "" {
		cur, _, err := scanRun(w.s.st.selRunW.QueryRowContext(w.ctx, req.RunID))
		if errors.Is(err, sql.ErrNoRows) {
			return store.SignalResult{}, store.ErrNotFound
		}
		if err != nil {
			return store.SignalResult{}, err
		}
		if cur.Status != store.StatusWaiting || cur.WaitKey != req.Key || req.Key == "" {
			return store.SignalResult{}, &store.StatusError{RunID: cur.ID, Status: cur.Status}
		}
		seq = cur.Seq
	} else if req.Key != "" {
		err := w.s.st.selWaiter.QueryRowContext(w.ctx, req.Key).Scan(&seq)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return store.SignalResult{}, err
		}
	}
	if seq == 0 { // no run waits: kept, or dropped
		if !req.KeepUntil.After(req.Now) {
			return store.SignalResult{}, nil
		}
		if _, err := w.exec(w.s.st.keepSignal, req.Key, blob(req.Payload), req.KeepUntil.UnixNano()); err != nil {
			return store.SignalResult{}, err
		}
		return store.SignalResult{Kept: true}, nil
	}
	r, tl, err := scanUpdated(w.s.st.wake.QueryRowContext(w.ctx, seq))
	if err != nil { // found waiting in this transaction: no row is an error
		return store.SignalResult{}, err
	}
	w.moved(r.Process, store.StatusWaiting, r.Status)
	if _, err := w.exec(w.s.st.effSignal, blob(req.Payload), req.Now.UnixNano(), r.Seq); err != nil {
		return store.SignalResult{}, err
	}
	if err := w.timeline(&r, store.StatusWaiting, r.Attempts, tl, req.Now, "", "", "signalled"); err != nil {
		return store.SignalResult{}, err
	}
	return store.SignalResult{Woken: &r}, nil
}

// AddRollups implements store.Store.
func (s *Store) AddRollups(ctx context.Context, rs []store.Rollup) error {
	return s.do(ctx, func(w *wtx) error {
		for _, r := range rs {
			counts, err := json.Marshal(r.Counts)
			if err != nil {
				return err
			}
			var hists []byte
			if len(r.Hists) > 0 {
				if hists, err = json.Marshal(r.Hists); err != nil {
					return err
				}
			}
			if _, err := w.exec(w.s.st.insRollup, r.Bucket.UnixNano(), r.Process, counts, hists); err != nil {
				return err
			}
		}
		return nil
	})
}

// AddErrors implements store.Store.
func (s *Store) AddErrors(ctx context.Context, es []store.ErrorRecord) error {
	return s.do(ctx, func(w *wtx) error {
		for _, e := range es {
			if _, err := w.exec(w.s.st.insError, e.At.UnixNano(), e.Kind, e.Process, e.RunID, e.EffectKey, e.Context, e.Message); err != nil {
				return err
			}
		}
		return nil
	})
}

// pruneSQL reads runs in seq order after ?2, at most ?3 of them, each with
// whether it was admitted at or after the cut ?1 (then it cannot have
// completed before it: the pass is over) and whether it is to be pruned
// (completed before the cut, holding no later rate state, with no child
// left; the child lookup is made for those runs only).
const pruneSQL = `SELECT seq, process, created_at >= ?1,
	CASE WHEN status = 'completed' AND completed_at < ?1 AND (rate_tat IS NULL OR rate_tat < ?1)
		THEN NOT EXISTS (SELECT 1 FROM runs c WHERE c.parent_id = r.id) ELSE 0 END
	FROM runs r WHERE seq > ?2 ORDER BY seq LIMIT ?3`

// Prune implements store.Store. One call is one transaction of at most
// p.Limit runs, and of at most 10×p.Limit rollups, error records and kept
// signals each, so retention never holds the writer for long; the next
// call deletes what is left. Completed runs have no index of their own:
// the runs are read in seq order, a window per call (store.PruneWindow).
func (s *Store) Prune(ctx context.Context, p store.PruneRequest) (int, error) {
	var n int
	err := s.do(ctx, func(w *wtx) error {
		n = 0
		if !p.CompletedBefore.IsZero() && p.Limit > 0 {
			pw := store.NewPruneWindow(w.s.pruneFrom, p.Limit)
			rows, err := w.s.conn.QueryContext(w.ctx, pruneSQL, p.CompletedBefore.UnixNano(), w.s.pruneFrom, pw.Rows())
			if err != nil {
				return err
			}
			type victim struct {
				seq     int64
				process string
			}
			var vs []victim
			for rows.Next() {
				var v victim
				var young, prune bool
				if err := rows.Scan(&v.seq, &v.process, &young, &prune); err != nil {
					rows.Close()
					return err
				}
				take, more := pw.Add(v.seq, young, prune)
				if take {
					vs = append(vs, v)
				}
				if !more {
					break
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			w.s.pruneFrom = pw.Next()
			for _, v := range vs {
				// The run's idempotency key outlives it (PruneKeys).
				for _, q := range []string{`INSERT OR REPLACE INTO pruned_keys (event, key, process, run_id, created_at)
						SELECT event, idem_key, process, id, created_at FROM runs WHERE seq = ? AND idem_key IS NOT NULL`,
					"DELETE FROM timeline WHERE run_seq = ?", "DELETE FROM effects WHERE run_seq = ?", "DELETE FROM runs WHERE seq = ?"} {
					if _, err := w.s.conn.ExecContext(w.ctx, q, v.seq); err != nil {
						return err
					}
				}
				w.moved(v.process, store.StatusCompleted, "")
				n++
			}
		}
		if !p.ObservabilityBefore.IsZero() {
			cut := p.ObservabilityBefore.UnixNano()
			if _, err := w.s.conn.ExecContext(w.ctx, `DELETE FROM rollups WHERE id IN (SELECT id FROM rollups WHERE bucket < ? LIMIT ?)`, cut, 10*p.Limit); err != nil {
				return err
			}
			if _, err := w.s.conn.ExecContext(w.ctx, `DELETE FROM errors WHERE id IN (SELECT id FROM errors WHERE at < ? LIMIT ?)`, cut, 10*p.Limit); err != nil {
				return err
			}
		}
		if !p.SignalsBefore.IsZero() {
			if _, err := w.s.conn.ExecContext(w.ctx, `DELETE FROM signals WHERE seq IN
				(SELECT seq FROM signals WHERE keep_until < ? LIMIT ?)`, p.SignalsBefore.UnixNano(), 10*p.Limit); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// PruneKeys implements store.Store: one transaction of at most limit keys.
func (s *Store) PruneKeys(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.do(ctx, func(w *wtx) error {
		res, err := w.s.conn.ExecContext(w.ctx, `DELETE FROM pruned_keys WHERE (event, key, process) IN
			(SELECT event, key, process FROM pruned_keys WHERE created_at < ? ORDER BY created_at LIMIT ?)`, before.UnixNano(), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
