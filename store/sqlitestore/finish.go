package sqlitestore

import (
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/yella-go/yella/store"
)

// finishCmd is an attempt's end that may share one statement with the
// other attempt ends of its batch (mergeFinishes): guarded by the epoch,
// with no effect record to write and no follow-up run to admit. Such an
// end is most of a busy store's writes; alone in its batch, or when its
// values cannot go through the statement's JSON argument, it runs as any
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

// jsonExact reports that s comes back from the statement's JSON argument
// with the very bytes it has: valid UTF-8 (json.Marshal would replace
// the rest) and no NUL (SQLite's text functions stop at one).
func jsonExact(s string) bool {
	return utf8.ValidString(s) && !strings.Contains(s, "\x00")
}

// finishArg is one attempt end in finishManySQL's JSON argument: setCols's
// values (see setArgs), the output as hex (its exact bytes; null keeps
// NULL apart from an empty value), and the run's id and epoch.
type finishArg struct {
	ID          string  `json:"i"`
	Epoch       int64   `json:"e"`
	Status      string  `json:"s"`
	Error       string  `json:"r"`
	Code        string  `json:"c"`
	OutMode     int     `json:"om"`
	Output      *string `json:"o"`
	ThenMode    int     `json:"tm"`
	Then        string  `json:"t"`
	RetryMode   int     `json:"rm"`
	RetryAt     *int64  `json:"ra"`
	Completed   *int64  `json:"ca"`
	AttemptMode int     `json:"am"`
	Version     string  `json:"v"`
	WaitKey     *string `json:"w"`
}

// finishArgOf is f's row of the merged statement, or false if f must run
// on its own: its rule's outcome falls back or fails (the single update
// reports why), or one of its strings would not survive JSON.
func finishArgOf(f *finishCmd) (finishArg, store.Outcome, bool) {
	u := f.u
	o, fallback, err := f.rule.Outcome(u, 0)
	if err != nil || fallback {
		return finishArg{}, o, false
	}
	o = f.rule.Signal(o, false)
	a := setArgs(f.rule, u, &o, false, false)
	fa := finishArg{ID: u.RunID, Epoch: u.Epoch, Status: a[0].(string), Error: a[1].(string), Code: a[2].(string),
		OutMode: a[3].(int), ThenMode: a[5].(int), RetryMode: a[7].(int), AttemptMode: a[10].(int), Version: a[11].(string)}
	if b, ok := a[4].([]byte); ok {
		h := hex.EncodeToString(b)
		fa.Output = &h
	}
	if t, ok := a[6].(string); ok {
		fa.Then = t
	}
	if r, ok := a[8].(int64); ok {
		fa.RetryAt = &r
	}
	if c, ok := a[9].(int64); ok {
		fa.Completed = &c
	}
	if k, ok := waitKey(u, &o).(string); ok {
		fa.WaitKey = &k
	}
	for _, s := range []string{fa.ID, fa.Status, fa.Error, fa.Code, fa.Then, fa.Version} {
		if !jsonExact(s) {
			return finishArg{}, o, false
		}
	}
	if fa.WaitKey != nil && !jsonExact(*fa.WaitKey) {
		return finishArg{}, o, false
	}
	return fa, o, true
}

// mergeFinishes ends the mergeable attempts among cmds in one statement,
// if there are several, and returns the commands it answered (their
// c.err set; their fn is not to run).
func (w *wtx) mergeFinishes(cmds []*cmd) (map[*cmd]bool, error) {
	var cs []*cmd
	var args []finishArg
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
		fa, o, ok := finishArgOf(c.fin)
		if !ok {
			continue
		}
		ids[fa.ID] = true
		cs, args, outs = append(cs, c), append(args, fa), append(outs, o)
	}
	if len(cs) < 2 {
		return nil, nil
	}
	arg, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	rows, err := w.s.st.finishMany.QueryContext(w.ctx, string(arg))
	if err != nil {
		return nil, err
	}
	type got struct {
		r  store.Run
		tl int
	}
	ended := make(map[string]got, len(cs))
	for rows.Next() {
		r, tl, err := scanUpdated(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		ended[r.ID] = got{r, tl}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
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
