package pgstore

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yella-go/yella/store"
)

// effStart is an effect to record as started: one row of its batch's
// statement.
type effStart struct {
	runID, key string
	epoch      int64
	now        time.Time
}

// effFinish is an effect's outcome to record: one row of its batch's
// statement.
type effFinish struct {
	runID, key string
	epoch      int64
	status     store.EffectStatus
	output     json.RawMessage
	errMsg     string
	now        time.Time
}

// StartEffect implements store.Store.
func (s *Store) StartEffect(ctx context.Context, runID string, epoch int64, key string, now time.Time) error {
	if !isText(runID) {
		return store.ErrNotFound
	}
	return s.do(ctx, &cmd{effStart: &effStart{runID: runID, key: key, epoch: epoch, now: now}})
}

// FinishEffect implements store.Store.
func (s *Store) FinishEffect(ctx context.Context, runID string, epoch int64, key string, status store.EffectStatus, output json.RawMessage, errMsg string, now time.Time) error {
	if !isText(runID) {
		return store.ErrNotFound
	}
	return s.do(ctx, &cmd{effFin: &effFinish{runID: runID, key: key, epoch: epoch, status: status, output: output, errMsg: pgText(errMsg), now: now}})
}

// QueueFinishEffect implements store.EffectQueue. With one writer (the
// default) the commands of a node are taken in order and a batch commits
// whole, so the write is only queued; with several, a later write could
// commit first on another writer, so it is made as FinishEffect makes it
// before returning.
func (s *Store) QueueFinishEffect(ctx context.Context, runID string, epoch int64, key string, status store.EffectStatus, output json.RawMessage, errMsg string, now time.Time) (wait func() error) {
	c := &cmd{effFin: &effFinish{runID: runID, key: key, epoch: epoch, status: status, output: output, errMsg: pgText(errMsg), now: now}}
	if s.opts.Writers > 1 {
		err := s.do(ctx, c)
		return func() error { return err }
	}
	if err := s.enqueue(ctx, c); err != nil {
		return func() error { return err }
	}
	return func() error {
		<-c.done
		return c.err
	}
}

// queueEffStartMany queues the effect starts of a batch in b, one
// statement for each kind of start: of a key new to a run this store
// holds from its first claim (effStartNew: a plain insert), of another
// key of a run it holds (effStartHeld: by seq), and of the other runs (by
// id); the function returned sets the refusals once b is sent. A start
// whose run is not running at its epoch, or whose effect is already
// completed, is refused (ErrFenced; ErrNotFound for an unknown run).
// Two starts of one effect in a batch fail the statement, and the batch
// is then retried command by command.
func (w *wtx) queueEffStartMany(b *pgx.Batch, cs []*cmd) func() error {
	if len(cs) == 0 {
		return func() error { return nil }
	}
	n := len(cs)
	ids, epochs := make([]string, n), make([]int64, n)
	for i, c := range cs {
		ids[i], epochs[i] = c.effStart.runID, c.effStart.epoch
	}
	held, isHeld := w.s.held.at(ids, epochs)
	const (
		byID = iota
		byHeld
		isNew
	)
	kind := make([]int, n)
	for i, c := range cs {
		switch {
		case !isHeld[i]:
			kind[i] = byID
		case w.s.held.newEffect(c.effStart.runID, c.effStart.epoch, c.effStart.key):
			kind[i] = isNew
		default:
			kind[i] = byHeld
		}
	}
	done := make([]bool, n)
	for _, k := range []int{isNew, byHeld, byID} {
		var idx []int32
		var seqs []int64
		var names, keys []string
		var eps, ats []int64
		for i, c := range cs {
			if kind[i] != k {
				continue
			}
			e := c.effStart
			idx, keys, eps, ats = append(idx, int32(i)), append(keys, e.key), append(eps, e.epoch), append(ats, e.now.UnixNano())
			if k == byID {
				names = append(names, e.runID)
			} else {
				seqs = append(seqs, held[i].seq)
			}
		}
		if len(idx) == 0 {
			continue
		}
		ord := make([]int32, len(idx))
		for k := range ord {
			ord[k] = int32(k)
		}
		sql, runs := w.s.q.effStartMany, any(names)
		switch k {
		case byHeld:
			sql, runs = w.s.q.effStartHeld, seqs
		case isNew:
			sql, runs = w.s.q.effStartNew, seqs
		}
		b.Queue(sql, ord, runs, eps, keys, ats).Query(func(rows pgx.Rows) error {
			return scanDone(rows, done, idx)
		})
	}
	return func() error {
		return w.refuse(cs, done, func(c *cmd) string { return c.effStart.runID }, store.ErrFenced)
	}
}

// outcomes are rows of a statement of a batch's effect outcomes. Those
// whose runs this store holds from their claims (heldRuns) are the rows
// of effFinishHeld, written with the batch's attempt ends of held runs
// when it has some (heldWithEffects: one statement for both), else on
// their own.
type outcomes struct {
	idx   []int32 // each row's command, by its place in the batch's outcomes
	in    []bool  // the batch's outcomes that are rows
	args  []any   // the statement's arguments
	done  []bool  // the batch's outcomes that applied
	taken bool    // queued with the attempt ends
}

// queueEffFinishMany queues the effect outcomes of a batch (cs) in b: those
// of runs this store holds by seq, in one statement with the batch's
// attempt ends if they took them (h) or on their own, and the others by
// id; the function returned sets the refusals once b is sent. An outcome
// applies whatever the run's state is now (the side effect did happen);
// it is refused (ErrFenced) only when the record is no longer the one
// started at its epoch.
func (w *wtx) queueEffFinishMany(b *pgx.Batch, cs []*cmd, h *outcomes) func() error {
	if len(cs) == 0 {
		return func() error { return nil }
	}
	if h != nil && !h.taken {
		b.Queue(w.s.q.effFinishHeld, h.args...).Query(func(rows pgx.Rows) error {
			return scanDone(rows, h.done, h.idx)
		})
	}
	var done []bool
	if h != nil {
		done = h.done
	} else {
		done = make([]bool, len(cs))
	}
	if wide := outcomeRows(cs, done, func(i int) bool { return h == nil || !h.in[i] }, nil); wide != nil {
		b.Queue(w.s.q.effFinishMany, wide.args...).Query(func(rows pgx.Rows) error {
			return scanDone(rows, done, wide.idx)
		})
	}
	return func() error {
		for i, c := range cs {
			if !done[i] {
				c.err = store.ErrFenced
			}
		}
		return nil
	}
}

// heldOutcomesOf returns the outcomes of cs whose runs this store holds
// at their epochs, or nil if none is.
func (w *wtx) heldOutcomesOf(cs []*cmd) *outcomes {
	if len(cs) == 0 {
		return nil
	}
	ids, epochs := make([]string, len(cs)), make([]int64, len(cs))
	for i, c := range cs {
		ids[i], epochs[i] = c.effFin.runID, c.effFin.epoch
	}
	held, isHeld := w.s.held.at(ids, epochs)
	done := make([]bool, len(cs))
	return outcomeRows(cs, done, func(i int) bool { return isHeld[i] }, func(i int) int64 { return held[i].seq })
}

// outcomeRows returns the rows of the outcomes of cs that pick selects,
// naming each run by its seq (seq) or, if seq is nil, by its id; nil if
// none is selected. done is where the statement's results go.
func outcomeRows(cs []*cmd, done []bool, pick func(int) bool, seq func(int) int64) *outcomes {
	var idx []int32
	in := make([]bool, len(cs))
	var seqs []int64
	var names, keys, sts, errs []string
	var eps, ats []int64
	var outs [][]byte
	for i, c := range cs {
		if !pick(i) {
			continue
		}
		e := c.effFin
		in[i] = true
		idx, keys, eps, ats = append(idx, int32(i)), append(keys, e.key), append(eps, e.epoch), append(ats, e.now.UnixNano())
		sts, outs, errs = append(sts, string(e.status)), append(outs, blob(e.output)), append(errs, e.errMsg)
		if seq != nil {
			seqs = append(seqs, seq(i))
		} else {
			names = append(names, e.runID)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	ord := make([]int32, len(idx))
	for k := range ord {
		ord[k] = int32(k)
	}
	runs := any(names)
	if seq != nil {
		runs = seqs
	}
	return &outcomes{idx: idx, in: in, done: done, args: []any{ord, runs, eps, keys, sts, outs, errs, ats}}
}

// scanDone marks done the ordinals rows return: each ordinal's command
// is done[idx[ordinal]], or done[ordinal] when idx is nil (the statement
// had every command of the batch).
func scanDone(rows pgx.Rows, done []bool, idx []int32) error {
	for rows.Next() {
		var i int32
		if err := rows.Scan(&i); err != nil {
			return err
		}
		if idx != nil {
			i = idx[i]
		}
		done[i] = true
	}
	return rows.Err()
}
