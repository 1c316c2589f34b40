package sqlitestore

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/yella-go/yella/store"
)

// finishCmd is an attempt's end that may share one statement with the
// other attempt ends of its batch (mergeFinishes): guarded by the epoch,
// with no effect record to write and no follow-up admission that needs a
// read (plainChildren). Such an end is most of a busy store's writes;
// alone in its batch, or when its rule's outcome needs the single update
// (finishRow), it runs as any other update (cmd.fn).
type finishCmd struct {
	u    *store.Update
	rule *store.Rule
	// res is the update's result: set by a batch that ended it with others
	// (a batch that fails and is retried command by command clears it
	// first), and by Store.Update's own command when it runs alone.
	res store.UpdateResult
}

// set makes f the merged form of u and reports whether u qualifies, or
// must run on its own: only an epoch-guarded attempt end that keeps the
// run's effect records, admits nothing or plain children (plainChildren)
// and may find the run running qualifies.
func (f *finishCmd) set(u *store.Update) bool {
	rule, err := u.Rule()
	if err != nil || rule.Guard != store.GuardEpoch || rule.Effects != store.EffectsKept || !plainChildren(u) ||
		(len(u.From) > 0 && !slices.Contains(u.From, store.StatusRunning)) {
		return false
	}
	f.u, f.rule = u, rule
	return true
}

// plainChildren reports that u admits no follow-up, or one whose plan
// needs no read: its parent is the run u ends (which the end's own guarded
// UPDATE finds, or the end is refused and admits nothing), and all its
// runs are admitted whatever the store holds (Admission.Unconditional).
// So its outcome is known before anything is written, and its runs are
// written after the merged UPDATE, for the ends it applied. That is a
// chain's hot path: each stage's completion admits the next.
func plainChildren(u *store.Update) bool {
	a := u.Children
	return a == nil || (a.ParentID == u.RunID && a.Unconditional())
}

// finishRow appends f's row of the merged statement (finishManyHead) to
// dst: the run's id and epoch, then setCols's values as the single
// statement binds them (setArgs, waitKey); or reports false, dst as it
// was, if f must run on its own, because its rule's outcome falls back or
// fails (the single update reports why).
func finishRow(dst []any, f *finishCmd) ([]any, store.Outcome, bool) {
	u := f.u
	var admitted int
	if u.Children != nil {
		admitted = len(u.Children.Runs) // all of them (plainChildren)
	}
	o, fallback, err := f.rule.Outcome(u, admitted)
	if err != nil || fallback {
		return dst, o, false
	}
	o = f.rule.Signal(o, false)
	return append(appendSetArgs(append(dst, u.RunID, u.Epoch), f.rule, u, &o, false, false), waitKey(u, &o)), o, true
}

// claimedMax bounds Store.claimed. A run leaves it when an attempt's end
// or any other update names it; one that never does (its engine stopped)
// stays until the map is full, and is then forgotten with the others.
const claimedMax = 1 << 16

// remember keeps run r as a claim at now left its row (Store.claimed),
// with the fields of updCols the claim returns (claimCols): all but those
// an attempt's end writes, and tl, its timeline entries. While the run is
// running at the claim's epoch no statement changes them: a context, a
// rate state or a lease is all that changes then, and every transition out
// of running is an attempt's end or an operator's action (Store.update),
// after which only a new claim, which raises the epoch, makes it running
// again. So an attempt end that finds its run running at that epoch need
// not read the run back (endedRun).
func (s *Store) remember(r *store.Run, tl int, now time.Time) {
	if s.claimed == nil || len(s.claimed) >= claimedMax {
		s.claimed = make(map[string]claimedRun)
	}
	s.claimed[r.ID] = claimedRun{seq: r.Seq, process: r.Process, event: r.Event, correlation: r.CorrelationID, parent: r.ParentID,
		depth: r.Depth, attempts: r.Attempts, epoch: r.Epoch, started: now.UnixNano(), created: r.CreatedAt.UnixNano(),
		idem: r.IdempotencyKey, then: r.Then, version: r.Version, rateKey: r.RateKey, concKey: r.ConcurrencyKey, groupKey: r.GroupKey,
		priority: r.Priority, tl: tl}
}

// claimedRun is a run as remember keeps it: under half of a
// store.Run's size, since a busy engine has one for each run in flight.
type claimedRun struct {
	seq                                             int64
	process, event, correlation, parent             string
	idem, then, version, rateKey, concKey, groupKey string
	depth, attempts, priority, tl                   int
	epoch, started, created                         int64
}

// endedRun is the run an end left, as updCols would return it: what its
// claim left (c) with the end's writes (row: its values as finishManyHead's
// row takes them, the id, the epoch, setArgs and the wait key) applied as
// SQLite applies them, and the run's timeline entries after the end, which
// adds the attempt's two.
func endedRun(c claimedRun, id string, row []any) (store.Run, int) {
	r := store.Run{ID: id, Seq: c.seq, Process: c.process, Event: c.event, CorrelationID: c.correlation, ParentID: c.parent,
		Depth: c.depth, Attempts: c.attempts, Epoch: c.epoch, StartedAt: time.Unix(0, c.started)}
	r.CreatedAt, r.IdempotencyKey, r.Then, r.Version = time.Unix(0, c.created), c.idem, c.then, c.version
	r.Priority, r.RateKey, r.ConcurrencyKey, r.GroupKey = c.priority, c.rateKey, c.concKey, c.groupKey
	if row[7].(int) == 1 {
		r.Then = row[8].(string)
	}
	if v := row[13].(string); v != "" {
		r.Version = v
	}
	r.Status = store.Status(row[2].(string))
	r.Error, r.ErrorCode = row[3].(string), row[4].(string)
	if row[5].(int) == 1 {
		r.Output = nil
		if b, ok := row[6].([]byte); ok { // an empty output reads back empty, not as NULL
			r.Output = bytes.Clone(b)
		}
	}
	if row[9].(int) == 1 {
		r.RetryAt = timeOf(row[10])
	}
	r.CompletedAt = timeOf(row[11])
	switch row[12].(int) {
	case attemptsReset:
		r.Attempts = 0
	case attemptsRefund:
		r.Attempts = max(r.Attempts-1, 0)
	}
	r.WaitKey, _ = row[14].(string)
	return r, c.tl + 2
}

// completeRow reports whether finishRow's row holds the values that
// completeManyHead writes as constants: a completion that clears the
// error and the retry time, sets the output and the follow-up event,
// keeps the attempt count and leaves no wait key. That statement takes
// the row's values at completeCols.
func completeRow(row []any) bool {
	return row[2] == string(store.StatusCompleted) && row[3] == "" && row[4] == "" && row[5] == 1 && row[7] == 1 &&
		row[9] == 1 && row[10] == nil && row[12] == attemptsKept && row[14] == nil
}

// completeCols are the indexes of finishRow's values that completeRow's
// statement takes, in its order.
var completeCols = [...]int{0, 1, 6, 8, 11, 13}

// timeOf reads back a time bound as ns binds it.
func timeOf(v any) time.Time {
	if n, ok := v.(int64); ok {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// mergeFinishes ends the mergeable attempts among cmds in one statement
// (manyMax at a time), if there are several, and returns the commands it
// answered (their c.err set; their fn is not to run). The ends whose runs
// the writer holds from their claims (Store.claimed) are made by a
// statement that returns nothing (the completions among them by one of
// their own, completeManyHead), their runs being what the claims left with
// the ends' writes; the others' statement returns their runs. The held
// ends must change a row each: one that did not find its run as its claim
// left it fails the batch, which is then retried command by command, where
// the end reads its run back.
func (w *wtx) mergeFinishes(cmds []*cmd) (map[*cmd]bool, error) {
	b := &w.s.bufs
	if b.claimed == nil {
		b.claimed = map[string]int{}
	}
	defer b.clearClaims()
	cs, rows, outs := b.ends.cs, b.ends.rows, b.ends.outs
	// The lists are kept for the next batch (clearClaims empties them).
	defer func() { b.ends.cs, b.ends.rows, b.ends.outs = cs, rows, outs }()
	ids := b.claimed // the runs with a row so far (cleared below)
	for _, c := range cmds {
		if c.fin != nil {
			c.fin.res = store.UpdateResult{}
		}
	}
	for _, c := range cmds {
		if c.fin == nil {
			continue
		}
		if _, dup := ids[c.fin.u.RunID]; dup { // one row per run: UPDATE … FROM takes one match
			continue
		}
		// Each row is taken from b.finVals as it is appended: one that
		// grows the buffer leaves the rows before it where they were.
		at := len(b.finVals)
		var o store.Outcome
		var ok bool
		if b.finVals, o, ok = finishRow(b.finVals, c.fin); !ok {
			continue
		}
		row := b.finVals[at:len(b.finVals):len(b.finVals)]
		ids[c.fin.u.RunID] = 0
		cs, rows, outs = append(cs, c), append(rows, row), append(outs, o)
	}
	if len(cs) < 2 {
		return nil, nil
	}
	clear(ids)
	// The runs the statements return, by id: an index into b.gots, whose
	// runs are too large to be a map's values (each would be allocated on
	// its own). A run is returned at most once.
	ended := b.claimed
	known, completes, unknown := b.ends.known, b.ends.completes, b.ends.unknown
	defer func() { b.ends.known, b.ends.completes, b.ends.unknown = known, completes, unknown }()
	if cap(b.held) < len(cs) {
		b.held = make([]heldRun, len(cs))
	}
	held := b.held[:len(cs)]
	clear(held)
	// The held ends' rows are copies in b.vals, named by seq: endedRun
	// reads the row as the end wrote it. b.vals is grown first, so that
	// the rows taken from it stay where they are.
	b.vals = slices.Grow(b.vals[:0], len(cs)*manyParts[finishMany].cols)
	for i, c := range cs {
		u := c.fin.u
		if k, ok := w.s.claimed[u.RunID]; ok && k.epoch == u.Epoch {
			held[i].k, held[i].ok = k, true
			at := len(b.vals)
			if completeRow(rows[i]) {
				for _, j := range completeCols {
					b.vals = append(b.vals, rows[i][j])
				}
				b.vals[at] = k.seq
				completes = append(completes, b.vals[at:len(b.vals):len(b.vals)])
			} else {
				b.vals = append(b.vals, rows[i]...)
				b.vals[at] = k.seq
				known = append(known, b.vals[at:len(b.vals):len(b.vals)])
			}
		} else {
			unknown = append(unknown, rows[i])
		}
		delete(w.s.claimed, u.RunID) // ended now, or not by this claim
	}
	_, err := w.queryMany(finishMany, unknown, func(rs scanner) error {
		b.gots = append(b.gots, gotRun{})
		g := &b.gots[len(b.gots)-1]
		var err error
		if g.r, g.tl, err = scanUpdated(rs); err != nil {
			return err
		}
		ended[g.r.ID] = len(b.gots) - 1
		return nil
	})
	if err != nil {
		return nil, err
	}
	n, err := w.queryMany(finishManyHeld, known, nil)
	if err != nil {
		return nil, err
	}
	m, err := w.queryMany(completeMany, completes, nil)
	if err != nil {
		return nil, err
	}
	if want := len(known) + len(completes); n+m != int64(want) {
		return nil, fmt.Errorf("sqlitestore: %d of %d attempt ends held from their claims found their runs as the claims left them", n+m, want)
	}
	w.ended = len(cs)
	if b.answered == nil {
		b.answered = map[*cmd]bool{}
	}
	answered := b.answered // cleared by the writer once the batch is over
	clear(answered)
	for i, c := range cs {
		f := c.fin
		answered[c] = true
		var r store.Run
		var tl int
		if held[i].ok { // ended: every held end changed its row (above)
			r, tl = endedRun(held[i].k, f.u.RunID, rows[i])
		} else if j, ok := ended[f.u.RunID]; ok {
			r, tl = b.gots[j].r, b.gots[j].tl
		} else { // the epoch no longer owns the run
			c.err = w.notFoundOr(f.u.RunID, store.ErrFenced)
			if !isSentinel(c.err) {
				return nil, c.err
			}
			continue
		}
		c.err = nil
		w.moved(r.Process, store.StatusRunning, r.Status)
		ran := r.Attempts
		if f.rule.RefundAttempt {
			ran++
		}
		if !implicitEnd(&r, store.StatusRunning, tl, f.u.Now, outs[i].Note) {
			if err := w.timeline(&r, store.StatusRunning, ran, tl, f.u.Now, outs[i].Error, outs[i].ErrorCode, outs[i].Note); err != nil {
				return nil, err
			}
		}
		f.res = store.UpdateResult{Run: r}
		if a := f.u.Children; a != nil {
			// Inserted many per statement below, before any other command
			// of the batch runs.
			p := admitPlan{admit: a.Runs}
			w.deferring = true
			err := w.writeAdmit(a, &p)
			w.deferring = false
			if err != nil {
				return nil, err
			}
			f.res.Children = p.res
		}
	}
	if err := w.flushRuns(); err != nil {
		var rf runFailed
		if errors.As(err, &rf) {
			err = rf.err // the batch is retried command by command, which names the end
		}
		return nil, err
	}
	return answered, nil
}
