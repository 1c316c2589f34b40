package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/yella-go/yella/store"
)

// finish is the end of one attempt with no follow-up: the hot path,
// written with every other attempt end of its batch in one statement.
type finish struct {
	u    store.Update // a copy in the command: the caller's stays on its stack
	rule *store.Rule
	o    store.Outcome
	res  store.UpdateResult
}

// finishCmd is an attempt end's command with its finish, allocated
// together.
type finishCmd struct {
	c cmd
	f finish
}

// finishes recycles attempt ends' commands: at about 1 KB each (the
// update, its outcome, and its result with the run as stored), one per
// run ended was a sixth of the bytes a no-op run allocated. Update takes
// one back only once its batch answered (do waits for that even when its
// caller's context ends), after which the writer holds no reference to it.
var finishes = sync.Pool{New: func() any { return new(finishCmd) }}

// Update implements store.Store: the transition table's rule for the
// update's action (store.Rule), in SQL. The end of an attempt that writes
// no effect record, without a follow-up (or with one admitted whatever
// the database holds), is one statement for the whole batch, guarded by
// the epoch in its WHERE clause, with no read. Every other update (a
// wait among them) locks and reads the run first (SELECT … FOR UPDATE),
// checks the rule's precondition, admits its follow-up runs and writes
// the run, its effects and its timeline in the same transaction.
func (s *Store) Update(ctx context.Context, u store.Update) (store.UpdateResult, error) {
	defer s.held.forget(u.RunID) // whatever the update did, the claim's record is spent
	if !isText(u.RunID) {
		return store.UpdateResult{}, store.ErrNotFound
	}
	u.Error, u.ErrorCode, u.Note = pgText(u.Error), pgText(u.ErrorCode), pgText(u.Note)
	rule, err := u.Rule()
	if err != nil {
		return store.UpdateResult{}, s.notFoundOr(ctx, u.RunID, err)
	}
	if rule.Guard == store.GuardEpoch && rule.Effects == store.EffectsKept && plainChildren(u.Children) &&
		(len(u.From) == 0 || slices.Contains(u.From, store.StatusRunning)) {
		admitted := 0
		if u.Children != nil {
			admitted = len(u.Children.Runs)
		}
		o, _, _ := rule.Outcome(&u, admitted) // every follow-up is admitted: never refused
		fc := finishes.Get().(*finishCmd)
		fc.f.u, fc.f.rule, fc.f.o = u, rule, o
		fc.c.fin = &fc.f
		err := s.do(ctx, &fc.c)
		res := fc.f.res
		*fc = finishCmd{} // drops the update's and the result's references
		finishes.Put(fc)
		return res, err
	}
	return s.updateLocked(ctx, u, rule)
}

// updateLocked is an Update that reads its run first (see Update).
func (s *Store) updateLocked(ctx context.Context, u store.Update, rule *store.Rule) (store.UpdateResult, error) {
	var res store.UpdateResult
	var locks []int64
	if u.Children != nil {
		locks = s.admissionLocks([]store.Admission{*u.Children})
	}
	if rule.Effects == store.EffectsWait && u.Wait.Signal != "" {
		locks = append(locks, s.signalLock(u.Wait.Signal))
	}
	err := s.runLocked(ctx, locks, func(w *wtx) error {
		var err error
		res, err = w.update(&u, rule)
		return err
	})
	return res, err
}

// plainChildren reports whether an update's follow-up runs (if any) are
// all admitted whatever the database holds (store.Admission.Unconditional).
// Such an update ends its attempt in its batch's statements, its
// follow-ups inserted by one statement for the batch.
func plainChildren(a *store.Admission) bool {
	return a == nil || a.Unconditional()
}

// notFoundOr returns ErrNotFound for an unknown run, else err.
func (s *Store) notFoundOr(ctx context.Context, runID string, err error) error {
	var ok bool
	if e := s.pool.QueryRow(ctx, s.q.parentExists, runID).Scan(&ok); e == nil && !ok {
		return store.ErrNotFound
	}
	return err
}

// update applies one transition of a locked run.
//
// A wait for a signal takes its key's signal lock (see Signal) before it
// locks the run, as Signal does, and takes the oldest signal kept for the
// key, if any, once its checks have passed: the run is then idle at once
// and its wait's record completed with the signal's payload.
func (w *wtx) update(u *store.Update, rule *store.Rule) (store.UpdateResult, error) {
	var res store.UpdateResult
	var gone bool
	waitSignal := rule.Effects == store.EffectsWait && u.Wait.Signal != ""
	if waitSignal {
		if err := w.lockSignal(u.Wait.Signal); err != nil {
			return res, err
		}
	}
	cur, _, err := scanRun(w.tx.QueryRow(w.ctx, w.s.q.selForUpdate, u.RunID, w.s.opts.NodeTimeout.Seconds()), &gone)
	if errors.Is(err, pgx.ErrNoRows) {
		return res, store.ErrNotFound
	}
	if err != nil {
		return res, err
	}
	if err := rule.Check(&cur, u, store.Facts{OwnerGone: gone}); err != nil {
		return res, err
	}
	if u.Children != nil {
		// Admitting writes nothing unless it admits a run, and then the
		// update applies: its checks are passed.
		if res.Children, err = w.s.admit(w.ctx, w.tx, u.Children, w.moved); err != nil {
			return store.UpdateResult{}, err
		}
	}
	o, fallback, err := rule.Outcome(u, len(res.Children.Admitted))
	if err != nil {
		return store.UpdateResult{}, err
	}
	// Nothing refuses the update from here on: a kept signal is taken
	// only now.
	var signal *keptSignal
	if waitSignal {
		if signal, err = w.takeSignal(u.Wait.Signal, u.Now); err != nil {
			return store.UpdateResult{}, err
		}
		o = rule.Signal(o, signal != nil)
	}
	set := setArgs(rule, u, &o, fallback, signal != nil)
	r, tl, err := scanUpdated(w.tx.QueryRow(w.ctx, w.s.q.update, set.args(cur.Seq)...))
	if err != nil {
		return store.UpdateResult{}, err
	}
	w.moved(cur.Status, r.Status)
	if cur.Status == store.StatusRunning {
		w.freedKey(&r)
	}
	if err := w.writeEffects(rule.Effects, &r, u, signal); err != nil {
		return store.UpdateResult{}, err
	}
	if cur.Status == store.StatusRunning {
		_, err = w.tx.Exec(w.ctx, w.s.q.insTL2, r.Seq, tl, r.StartedAt.UnixNano(), cur.Attempts, u.Now.UnixNano(), string(r.Status), o.Error, o.ErrorCode, o.Note,
			r.Attempts)
	} else {
		_, err = w.tx.Exec(w.ctx, w.s.q.insTL, r.Seq, tl, u.Now.UnixNano(), string(r.Status), r.Attempts, o.Error, o.ErrorCode, o.Note)
	}
	if err != nil {
		return store.UpdateResult{}, err
	}
	res.Run = r
	return res, nil
}

// sets are the field writes of an update: its new status, error and
// code, and per field the rule may keep, whether it is written and its
// value; then the completion time (nil: none), the attempts' reset or
// refund, the handler version ("": kept) and the wait key.
type sets struct {
	status, err, code string
	outSet            bool
	out               []byte
	thenSet           bool
	then              string
	retrySet          bool
	retry, completed  *int64
	reset             bool
	version           string
	refund            int
	waitKey           *string
}

// args are the arguments of the update statement (q.update) of the run
// seq.
func (v *sets) args(seq int64) []any {
	return []any{v.status, v.err, v.code, v.outSet, v.out, v.thenSet, v.then, v.retrySet, v.retry, v.completed, v.reset, v.version,
		v.refund, v.waitKey, seq}
}

// setArgs are the field writes of an update following rule with outcome
// o (the rule's fallback if fallback is set; the signalled outcome of a
// wait that took a kept signal if signalled).
func setArgs(rule *store.Rule, u *store.Update, o *store.Outcome, fallback, signalled bool) sets {
	outW, thenW := rule.Output, rule.Then
	if fallback { // the primary outcome's output is not recorded
		outW, thenW = store.Keep, store.Keep
	}
	var out []byte
	var then string
	var retry *int64
	if outW == store.Set {
		out = blob(u.Output)
	}
	if thenW == store.Set {
		then = u.Then
	}
	if rule.RetryAt == store.Set && !signalled {
		retry = ns(u.RetryAt)
	}
	completed := ns(u.Now)
	if !o.To.Final() {
		completed = nil
	}
	refund := 0
	if rule.RefundAttempt {
		refund = 1
	}
	var waitKey *string
	if o.To == store.StatusWaiting && u.Wait != nil {
		waitKey = nullStr(u.Wait.Signal)
	}
	return sets{status: string(o.To), err: o.Error, code: o.ErrorCode, outSet: outW != store.Keep, out: out, thenSet: thenW != store.Keep,
		then: then, retrySet: rule.RetryAt != store.Keep || signalled, retry: retry, completed: completed, reset: rule.ResetAttempts,
		version: u.Version, refund: refund, waitKey: waitKey}
}

// writeEffects changes the run's effect records as its transition says:
// a wait's record is completed with signal's payload when the wait took
// a kept signal (signal not nil), else recorded as waiting.
func (w *wtx) writeEffects(ew store.EffectWrite, r *store.Run, u *store.Update, signal *keptSignal) error {
	var err error
	switch ew {
	case store.EffectsClearStarted:
		_, err = w.tx.Exec(w.ctx, w.s.q.effClear, r.Seq)
	case store.EffectsComplete:
		d := u.CompleteEffect
		_, err = w.tx.Exec(w.ctx, w.s.q.effDone, r.Seq, d.Key, r.Epoch, blob(d.Output), u.Now.UnixNano())
	case store.EffectsWait:
		if signal != nil {
			_, err = w.tx.Exec(w.ctx, w.s.q.effDone, r.Seq, u.Wait.Key, r.Epoch, signal.payload, u.Now.UnixNano())
		} else {
			_, err = w.tx.Exec(w.ctx, w.s.q.effWait, r.Seq, u.Wait.Key, r.Epoch, u.Now.UnixNano())
		}
	}
	return err
}

// queueFinishMany queues the end of the attempts of cs in b: one
// statement for those whose runs this store holds from their claims
// (heldEnds: found by seq, returning only what the claims did not) and
// one for the others (finishMany); the function returned reads their
// results once b is sent, and gathers the follow-up runs of the ends
// that applied for the transaction to insert (followUps). An attempt
// whose run is no longer running at its epoch is refused: ErrFenced, or
// ErrNotFound for an unknown run.
func (w *wtx) queueFinishMany(b *pgx.Batch, cs []*cmd, eff *outcomes) func() error {
	if len(cs) == 0 {
		return func() error { return nil }
	}
	n := len(cs)
	ids, epochs := make([]string, n), make([]int64, n)
	for i, c := range cs {
		ids[i], epochs[i] = c.fin.u.RunID, c.fin.u.Epoch
	}
	held, isHeld := w.s.held.at(ids, epochs)
	args := make([]sets, n)
	var wide, fromClaim []int
	for i, c := range cs {
		f := c.fin
		args[i] = setArgs(f.rule, &f.u, &f.o, false, false)
		if isHeld[i] {
			fromClaim = append(fromClaim, i)
		} else {
			wide = append(wide, i)
		}
	}
	done := make([]bool, n)
	applied := func(i int, r store.Run) {
		cs[i].fin.res.Run = r
		done[i] = true
		w.moved(store.StatusRunning, r.Status)
		w.freedKey(&r)
	}
	if len(wide) > 0 {
		w.answerCounts = true // counted by applied
		b.Queue(w.s.q.finishMany, finishArgs(cs, wide, args, func(i int) string { return ids[i] })...).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var k int32
				r, _, err := scanUpdated(rows, &k)
				if err != nil {
					return err
				}
				applied(wide[k], r)
			}
			return rows.Err()
		})
	}
	if len(fromClaim) > 0 {
		// The completion form when every end is a plain completion, as
		// most batches' are; else the general one.
		forms, fargs := &w.s.q.completeHeld, []any(nil)
		if slices.ContainsFunc(fromClaim, func(i int) bool { return !plainCompletion(cs[i].fin, &args[i]) }) {
			forms, fargs = &w.s.q.finishHeld, finishArgs(cs, fromClaim, args, func(i int) int64 { return held[i].seq })
		} else {
			fargs = completeArgs(cs, fromClaim, args, held)
		}
		form := 0
		if eff != nil {
			form, fargs, eff.taken = form|heldWithEffects, append(fargs, eff.args...), true
		}
		// The ends' follow-up runs are inserted by their statement.
		follow := w.followUps(cs, fromClaim, done, true)
		if follow != nil {
			form, fargs = form|heldWithFollowUps, append(fargs, follow.args...)
			w.follow = append(w.follow, follow)
		}
		fargs = append(fargs, w.shard)
		// The statement counts what it changes (countsItem). Whether the
		// nodes are woken is decided before its answer, which may come
		// after the commit (tryBatch): when an end may make its run
		// claimable again or free a concurrency key, or a follow-up run
		// is admitted idle. An end found fenced costs a needless
		// wake-up, no more.
		for _, i := range fromClaim {
			w.ready = w.ready || args[i].status == string(store.StatusIdle) || held[i].concKey != ""
		}
		if follow != nil && len(follow.started) < follow.runs {
			w.ready = true
		}
		b.Queue(forms[form], fargs...).Query(func(rows pgx.Rows) error {
			dest := make([]any, 6, 7)
			var k int32
			var e heldEnd
			var seq int64
			dest[0], dest[1], dest[2], dest[3], dest[4], dest[5] = &k, &e.then, &e.idem, &e.version, &e.groupKey, &e.waitKey
			if follow != nil {
				dest = append(dest, &seq)
			}
			for rows.Next() {
				e = heldEnd{}
				if err := rows.Scan(dest...); err != nil {
					return err
				}
				switch {
				case k == heldFollowUpRow: // a follow-up run (its id read as then)
					follow.seqs[e.then] = seq
					continue
				case k < 0: // an effect outcome (heldWithEffects)
					eff.done[eff.idx[-1-k]] = true
					continue
				}
				i := fromClaim[k]
				cs[i].fin.res.Run, done[i] = endedRun(&held[i], ids[i], &e, &args[i]), true
				w.held++
			}
			return rows.Err()
		})
	}
	return func() error {
		if f := w.followUps(cs, wide, done, false); f != nil {
			w.follow = append(w.follow, f)
		}
		return w.refuse(cs, done, func(c *cmd) string { return c.fin.u.RunID }, store.ErrFenced)
	}
}

// plainCompletion reports an attempt end that the completion form of the
// ends of held runs (completeHeld) writes as the general form would: it
// completes its run as the complete rule does, with the rule's note, at
// the end's time.
func plainCompletion(f *finish, a *sets) bool {
	return a.status == string(store.StatusCompleted) && f.o.Note == implicitNote && a.err == "" && a.code == "" &&
		a.outSet && a.thenSet && a.retrySet && a.retry == nil && a.completed != nil && *a.completed == f.u.Now.UnixNano()
}

// completeArgs are the arguments of the completion form of the ends of
// held runs (completeRows) for the ends of cs at idx, as finishArgs.
func completeArgs(cs []*cmd, idx []int, args []sets, held []heldRun) []any {
	n := len(idx)
	ord := make([]int32, n)
	seqs, epochs, ats := make([]int64, n), make([]int64, n), make([]int64, n)
	outs := make([][]byte, n)
	thens, vers := make([]string, n), make([]string, n)
	for k, i := range idx {
		a := &args[i]
		ord[k], seqs[k], epochs[k], ats[k] = int32(k), held[i].seq, cs[i].fin.u.Epoch, *a.completed
		outs[k], thens[k], vers[k] = a.out, a.then, a.version
	}
	return []any{ord, seqs, epochs, outs, thens, ats, vers}
}

// finishArgs are the arguments of an attempt-end statement for the ends
// of cs at idx (args: their setArgs), each row's ord its place in idx and
// its run as run gives it (an id or a seq).
func finishArgs[T int64 | string](cs []*cmd, idx []int, args []sets, run func(int) T) []any {
	n := len(idx)
	ord := make([]int32, n)
	runs := make([]T, n)
	sts, errs, codes, thens, vers, notes := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	epochs, ats := make([]int64, n), make([]int64, n)
	outSet, thenSet, retrySet := make([]bool, n), make([]bool, n), make([]bool, n)
	outs := make([][]byte, n)
	retries, completed := make([]*int64, n), make([]*int64, n)
	for k, i := range idx {
		f, a := cs[i].fin, &args[i]
		ord[k], runs[k], epochs[k] = int32(k), run(i), f.u.Epoch
		sts[k], errs[k], codes[k] = a.status, a.err, a.code
		outSet[k], outs[k], thenSet[k], thens[k] = a.outSet, a.out, a.thenSet, a.then
		retrySet[k], retries[k], completed[k], vers[k] = a.retrySet, a.retry, a.completed, a.version
		ats[k], notes[k] = f.u.Now.UnixNano(), f.o.Note
	}
	return []any{ord, runs, epochs, sts, errs, codes, outSet, outs, thenSet, thens, retrySet, retries, completed, vers, ats, notes}
}

// followUps are the follow-up runs of some of a batch's attempt ends
// (idx, in cs), admitted in the batch's transaction: they exist if and
// only if their parents' ends commit. Those of ends of held runs are
// inserted by the ends' own statement (heldFollowUps); the others by a
// statement of their own (insChildren, queue) once the ends are known.
type followUps struct {
	cs      []*cmd
	idx     []int
	done    []bool
	args    []any
	seqs    map[string]int64
	runs    int             // how many
	sent    bool            // inserted by the ends' statement
	started map[string]bool // the runs the ends' statement admitted running (starts)
}

// followUps returns the follow-up runs of the attempt ends cs[i], i in
// idx; nil when there are none. For the ends' own statement (inEnds) it
// takes every end's, each row led by its end's place in idx (the ends
// that apply are not known yet: the statement inserts only theirs);
// else only those of the ends that applied (done), counted as new idle
// runs.
func (w *wtx) followUps(cs []*cmd, idx []int, done []bool, inEnds bool) *followUps {
	var ends []int32
	var rows runRows
	for k, i := range idx {
		a := cs[i].fin.u.Children
		if a == nil || (!inEnds && !done[i]) {
			continue
		}
		rows.add(a)
		for range a.Runs {
			ends = append(ends, int32(k))
			if !inEnds {
				w.moved("", store.StatusIdle)
			}
		}
	}
	if len(rows.ids) == 0 {
		return nil
	}
	f := &followUps{cs: cs, idx: idx, done: done, runs: len(rows.ids), seqs: make(map[string]int64, len(rows.ids)), sent: inEnds, args: rows.args()}
	if inEnds {
		nodes, leases := w.starts(cs, idx, f)
		f.args = append(append([]any{ends}, f.args...), nodes, leases)
	}
	return f
}

// starts are the claims of the follow-up runs of the ends cs[i], i in
// idx, that their admissions start (store.Admission.Start), as the ends'
// statement takes them: each row's lease owner's number and lease expiry,
// NULL for a run admitted idle. A run starts only if nothing at admission
// holds it back (no bound, flow key, group key or delay) and its owner
// has a number this store knows (it does when the owner claimed the
// ending run here). f records the runs started.
func (w *wtx) starts(cs []*cmd, idx []int, f *followUps) ([]*int32, []*int64) {
	var nodes []*int32
	var leases []*int64
	for _, i := range idx {
		a := cs[i].fin.u.Children
		if a == nil {
			continue
		}
		var node *int32
		if a.Start != nil && notBefore(a) == nil {
			if n, ok := w.s.knownOwnerNum(a.Start.Owner); ok {
				node = &n
			}
		}
		for k := range a.Runs {
			nr := &a.Runs[k]
			if node == nil || !nr.Start || nr.Limit > 0 || nr.RateKey != "" || nr.ConcurrencyKey != "" || nr.GroupKey != "" {
				nodes, leases = append(nodes, nil), append(leases, nil)
				continue
			}
			if f.started == nil {
				f.started = map[string]bool{}
			}
			f.started[nr.ID] = true
			nodes, leases = append(nodes, node), append(leases, ns(a.Start.LeaseUntil))
		}
	}
	return nodes, leases
}

// runRows are the columns of runs to insert without a lookup (insChildren:
// no idempotency key, no bound, no group policy), a row per run, the runs
// of each admission added in order.
type runRows struct {
	ids, procs, events            []string
	corrs, parents                []*string
	depths                        []int32
	payloads, contexts            [][]byte
	created                       []int64
	prios                         []*int32
	rateKeys, concKeys, groupKeys []*string
	retryAts                      []*int64
}

// add adds the rows of a's runs.
func (r *runRows) add(a *store.Admission) {
	for k := range a.Runs {
		r.addRun(a, &a.Runs[k])
	}
}

// addRun adds the row of nr, a run of a.
func (r *runRows) addRun(a *store.Admission, nr *store.NewRun) {
	var corr *string
	if a.CorrelationID != "" {
		corr = &a.CorrelationID
	}
	r.ids, r.procs, r.events, r.parents = append(r.ids, nr.ID), append(r.procs, nr.Process), append(r.events, a.Event), append(r.parents, nullStr(a.ParentID))
	r.corrs, r.depths = append(r.corrs, corr), append(r.depths, int32(a.Depth))
	r.payloads, r.contexts, r.created = append(r.payloads, blob(a.Payload)), append(r.contexts, blob(a.Context)), append(r.created, a.Now.UnixNano())
	r.prios, r.rateKeys, r.concKeys = append(r.prios, nullInt(nr.Priority)), append(r.rateKeys, nullStr(nr.RateKey)), append(r.concKeys, nullStr(nr.ConcurrencyKey))
	r.retryAts, r.groupKeys = append(r.retryAts, notBefore(a)), append(r.groupKeys, nullStr(nr.GroupKey))
}

// args are insChildren's arguments for the rows.
func (r *runRows) args() []any {
	return []any{r.ids, r.procs, r.events, r.corrs, r.parents, r.depths, r.payloads, r.contexts, r.created, r.prios, r.rateKeys, r.concKeys,
		r.retryAts, r.groupKeys}
}

// admittedRun is the run that admission a made of nr, stored at seq.
func admittedRun(a *store.Admission, nr *store.NewRun, seq int64) store.Run {
	corr := a.CorrelationID
	if corr == "" {
		corr = nr.ID
	}
	return store.Run{
		ID: nr.ID, Seq: seq, Process: nr.Process, Event: a.Event, CorrelationID: corr, ParentID: a.ParentID,
		Depth: a.Depth, Status: store.StatusIdle, Payload: a.Payload, Context: a.Context,
		IdempotencyKey: a.IdempotencyKey, CreatedAt: time.Unix(0, a.Now.UnixNano()),
		Priority: nr.Priority, RateKey: nr.RateKey, ConcurrencyKey: nr.ConcurrencyKey, RetryAt: fromNS(notBefore(a)),
		GroupKey: nr.GroupKey,
	}
}

// queue queues their insertion in b, which reads back their seqs,
// unless the ends' statement inserted them.
func (f *followUps) queue(b *pgx.Batch, sql string) {
	if f.sent {
		return
	}
	b.Queue(sql, f.args...).Query(func(rows pgx.Rows) error { return readSeqs(rows, f.seqs) })
}

// admitted answers each parent's end with its follow-up runs, once the
// transaction committed. Each has its seq: the statement inserts every
// row or fails, and the transaction with it. The runs admitted running
// are as their claim left them (scanClaimed), and h remembers them.
func (f *followUps) admitted(h *heldRuns) {
	var started []store.Run
	for _, i := range f.idx {
		c := f.cs[i]
		a := c.fin.u.Children
		if !f.done[i] || a == nil {
			continue
		}
		c.fin.res.Children.Admitted = c.fin.res.Children.Admitted[:0]
		for k := range a.Runs {
			r := admittedRun(a, &a.Runs[k], f.seqs[a.Runs[k].ID])
			if f.started[r.ID] {
				r.Status, r.Epoch, r.Attempts, r.StartedAt = store.StatusRunning, 1, 1, r.CreatedAt
				r.LeaseOwner, r.LeaseExpires = a.Start.Owner, time.Unix(0, a.Start.LeaseUntil.UnixNano())
				started = append(started, r)
			}
			c.fin.res.Children.Admitted = append(c.fin.res.Children.Admitted, r)
		}
	}
	h.remember(started)
}

// refuse sets the error of every command not done: ErrNotFound when its
// run does not exist, else fenced.
func (w *wtx) refuse(cs []*cmd, done []bool, runOf func(*cmd) string, fenced error) error {
	var missing []string
	for i, c := range cs {
		if !done[i] {
			missing = append(missing, runOf(c))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	exist := map[string]bool{}
	rows, err := w.tx.Query(w.ctx, w.s.q.idsExist, missing)
	if err == nil {
		for rows.Next() {
			var id string
			if err = rows.Scan(&id); err != nil {
				break
			}
			exist[id] = true
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil && !w.committed {
		return err
	}
	for i, c := range cs {
		if done[i] {
			continue
		}
		// A read that failed after the batch committed cannot fail the
		// batch: the commands refused are then told fenced, the answer
		// for a run that exists, as it does unless it was never admitted.
		c.err = fenced
		if err == nil && !exist[runOf(c)] {
			c.err = store.ErrNotFound
		}
	}
	return nil
}

// Claim implements store.Store. The named runs that wait past their
// deadline are made idle first (promoteIDs), in the same round trip, and
// claimed with the idle ones. The store remembers the runs it claimed
// (heldRuns) for their ends.
func (s *Store) Claim(ctx context.Context, req store.ClaimRequest) ([]store.Run, error) {
	runs, err := s.claim(ctx, req)
	if err == nil {
		s.held.remember(runs)
	}
	return runs, err
}

func (s *Store) claim(ctx context.Context, req store.ClaimRequest) ([]store.Run, error) {
	node, err := s.ownerNum(ctx, req.Owner)
	if err != nil {
		return nil, err
	}
	var out []store.Run
	err = s.run(ctx, func(w *wtx) error {
		out = out[:0]
		tats := make([]*int64, len(req.IDs))
		for i := range tats {
			if i < len(req.RateTATs) {
				tats[i] = ns(req.RateTATs[i])
			}
		}
		byOrd := map[int64]store.Run{}
		b := &pgx.Batch{}
		b.Queue(s.q.promoteIDs, req.IDs, req.Now.UnixNano()).Exec(func(tag pgconn.CommandTag) error {
			w.promoted(tag.RowsAffected())
			return nil
		})
		b.Queue(s.q.claimIDs, node, req.LeaseUntil.UnixNano(), req.Now.UnixNano(), req.IDs, tats).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var r store.Run
				ord, err := scanClaimed(rows, req.Owner, req.Now, req.LeaseUntil, &r)
				if err != nil {
					return err
				}
				byOrd[ord] = r
				w.moved(store.StatusIdle, store.StatusRunning)
			}
			return rows.Err()
		})
		if err := w.tx.SendBatch(w.ctx, b).Close(); err != nil {
			return err
		}
		for i := range req.IDs {
			if r, ok := byOrd[int64(i+1)]; ok {
				out = append(out, r)
			}
		}
		return nil
	})
	return out, err
}

// SetContext implements store.Store.
func (s *Store) SetContext(ctx context.Context, runID string, epoch int64, c json.RawMessage) error {
	if !isText(runID) {
		return store.ErrNotFound
	}
	return s.attemptWrite(ctx, runID, s.q.setCtx, blob(c), runID, epoch)
}

// HoldRate implements store.Store.
func (s *Store) HoldRate(ctx context.Context, runID string, epoch int64, tat time.Time) error {
	if !isText(runID) {
		return store.ErrNotFound
	}
	return s.attemptWrite(ctx, runID, s.q.holdRate, tat.UnixNano(), runID, epoch)
}

// attemptWrite runs a write guarded by a running attempt's epoch; when it
// changes no row the run is unknown (ErrNotFound) or no longer held by
// that attempt (ErrFenced).
func (s *Store) attemptWrite(ctx context.Context, runID, sql string, args ...any) error {
	return s.run(ctx, func(w *wtx) error {
		tag, err := w.tx.Exec(w.ctx, sql, args...)
		if err != nil || tag.RowsAffected() > 0 {
			return err
		}
		var ok bool
		if err := w.tx.QueryRow(w.ctx, s.q.parentExists, runID).Scan(&ok); err != nil {
			return err
		}
		if !ok {
			return store.ErrNotFound
		}
		return store.ErrFenced
	})
}

// Heartbeat implements store.Store.
func (s *Store) Heartbeat(ctx context.Context, owner string, now, until time.Time) ([]store.Lease, error) {
	var out []store.Lease
	err := s.run(ctx, func(w *wtx) error {
		out = out[:0]
		rows, err := w.tx.Query(w.ctx, s.q.heartbeat, until.UnixNano(), owner)
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
