package sqlitestore

import (
	"database/sql"
	"slices"

	"github.com/yella-go/yella/store"
)

// finishCmd is an attempt's end that may share one statement with the
// other attempt ends of its batch (mergeFinishes): guarded by the epoch,
// with no effect record to write and no follow-up run to admit. Such an
// end is most of a busy store's writes; alone in its batch, or when its
// rule's outcome needs the single update (finishRow), it runs as any
// other update (cmd.fn).
type finishCmd struct {
	u    *store.Update
	rule *store.Rule
	// res is the update's result when merged: set only by a batch that
	// ended it with others (a batch that fails and is retried command by
	// command clears it first).
	res    store.UpdateResult
	merged bool
}

// mergeableFinish returns the merged form of u, or nil if u must run on
// its own: only an epoch-guarded attempt end that keeps the run's effect
// records, admits nothing and may find the run running qualifies.
func mergeableFinish(u *store.Update) *finishCmd {
	rule, err := u.Rule()
	if err != nil || rule.Guard != store.GuardEpoch || rule.Effects != store.EffectsKept || u.Children != nil ||
		(len(u.From) > 0 && !slices.Contains(u.From, store.StatusRunning)) {
		return nil
	}
	return &finishCmd{u: u, rule: rule}
}

// finishRow is f's row of the merged statement (finishManyHead): the
// run's id and epoch, then setCols's values as the single statement binds
// them (setArgs, waitKey); or false if f must run on its own, because its
// rule's outcome falls back or fails (the single update reports why).
func finishRow(f *finishCmd) ([]any, store.Outcome, bool) {
	u := f.u
	o, fallback, err := f.rule.Outcome(u, 0)
	if err != nil || fallback {
		return nil, o, false
	}
	o = f.rule.Signal(o, false)
	return append(append([]any{u.RunID, u.Epoch}, setArgs(f.rule, u, &o, false, false)...), waitKey(u, &o)), o, true
}

// mergeFinishes ends the mergeable attempts among cmds in one statement
// (manyMax at a time), if there are several, and returns the commands it
// answered (their c.err set; their fn is not to run).
func (w *wtx) mergeFinishes(cmds []*cmd) (map[*cmd]bool, error) {
	var cs []*cmd
	var rows [][]any
	var outs []store.Outcome
	ids := map[string]bool{}
	for _, c := range cmds {
		if c.fin != nil {
			c.fin.res, c.fin.merged = store.UpdateResult{}, false
		}
	}
	for _, c := range cmds {
		if c.fin == nil || ids[c.fin.u.RunID] { // one row per run: UPDATE … FROM takes one match
			continue
		}
		row, o, ok := finishRow(c.fin)
		if !ok {
			continue
		}
		ids[c.fin.u.RunID] = true
		cs, rows, outs = append(cs, c), append(rows, row), append(outs, o)
	}
	if len(cs) < 2 {
		return nil, nil
	}
	type got struct {
		r  store.Run
		tl int
	}
	ended := make(map[string]got, len(cs))
	err := w.queryMany(finishMany, rows, func(rs *sql.Rows) error {
		r, tl, err := scanUpdated(rs)
		if err != nil {
			return err
		}
		ended[r.ID] = got{r, tl}
		return nil
	})
	if err != nil {
		return nil, err
	}
	w.ended = len(cs)
	answered := make(map[*cmd]bool, len(cs))
	for i, c := range cs {
		f := c.fin
		answered[c], f.merged = true, true
		g, ok := ended[f.u.RunID]
		if !ok { // the epoch no longer owns the run
			c.err = w.notFoundOr(f.u.RunID, store.ErrFenced)
			if !isSentinel(c.err) {
				return nil, c.err
			}
			continue
		}
		c.err = nil
		r := g.r
		w.moved(r.Process, store.StatusRunning, r.Status)
		ran := r.Attempts
		if f.rule.RefundAttempt {
			ran++
		}
		if !implicitEnd(&r, store.StatusRunning, g.tl, f.u.Now, outs[i].Note) {
			if err := w.timeline(&r, store.StatusRunning, ran, g.tl, f.u.Now, outs[i].Error, outs[i].ErrorCode, outs[i].Note); err != nil {
				return nil, err
			}
		}
		f.res = store.UpdateResult{Run: r}
	}
	return answered, nil
}
