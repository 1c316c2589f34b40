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
	return s.do(ctx, &cmd{effStart: &effStart{runID: runID, key: key, epoch: epoch, now: now}})
}

// FinishEffect implements store.Store.
func (s *Store) FinishEffect(ctx context.Context, runID string, epoch int64, key string, status store.EffectStatus, output json.RawMessage, errMsg string, now time.Time) error {
	return s.do(ctx, &cmd{effFin: &effFinish{runID: runID, key: key, epoch: epoch, status: status, output: output, errMsg: errMsg, now: now}})
}

// QueueFinishEffect implements store.EffectQueue. With one writer (the
// default) the commands of a node are taken in order and a batch commits
// whole, so the write is only queued; with several, a later write could
// commit first on another writer, so it is made as FinishEffect makes it
// before returning.
func (s *Store) QueueFinishEffect(ctx context.Context, runID string, epoch int64, key string, status store.EffectStatus, output json.RawMessage, errMsg string, now time.Time) (wait func() error) {
	c := &cmd{effFin: &effFinish{runID: runID, key: key, epoch: epoch, status: status, output: output, errMsg: errMsg, now: now}}
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
// statement for the runs this store holds from their claims (by seq) and
// one for the others (by id); the function returned sets the refusals
// once b is sent. A start
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
	done := make([]bool, n)
	// Two statements: one for the runs this store holds from their claims
	// (effStartHeld: named by seq), one for the others (by id).
	for _, byHeld := range []bool{true, false} {
		var idx []int32
		var seqs []int64
		var names, keys []string
		var eps, ats []int64
		for i, c := range cs {
			if isHeld[i] != byHeld {
				continue
			}
			e := c.effStart
			idx, keys, eps, ats = append(idx, int32(i)), append(keys, e.key), append(eps, e.epoch), append(ats, e.now.UnixNano())
			if byHeld {
				seqs = append(seqs, held[i].seq)
			} else {
				names = append(names, e.runID)
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
		if byHeld {
			sql, runs = w.s.q.effStartHeld, seqs
		}
		b.Queue(sql, ord, runs, eps, keys, ats).Query(func(rows pgx.Rows) error {
			return scanDone(rows, done, idx)
		})
	}
	return func() error {
		return w.refuse(cs, done, func(c *cmd) string { return c.effStart.runID }, store.ErrFenced)
	}
}

// queueEffFinishMany queues the effect outcomes of a batch, one
// statement, in b; the function returned sets the refusals once b is
// sent. An outcome applies whatever the run's state is now (the side
// effect did happen); it is refused (ErrFenced) only when the record is
// no longer the one started at its epoch.
func (w *wtx) queueEffFinishMany(b *pgx.Batch, cs []*cmd) func() error {
	if len(cs) == 0 {
		return func() error { return nil }
	}
	n := len(cs)
	ord := make([]int32, n)
	ids, keys, sts, errs := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	epochs, ats := make([]int64, n), make([]int64, n)
	outs := make([][]byte, n)
	for i, c := range cs {
		e := c.effFin
		ord[i], ids[i], keys[i], epochs[i], ats[i] = int32(i), e.runID, e.key, e.epoch, e.now.UnixNano()
		sts[i], outs[i], errs[i] = string(e.status), blob(e.output), e.errMsg
	}
	done := make([]bool, n)
	b.Queue(w.s.q.effFinishMany, ord, ids, epochs, keys, sts, outs, errs, ats).Query(func(rows pgx.Rows) error {
		return scanDone(rows, done, nil)
	})
	return func() error {
		for i, c := range cs {
			if !done[i] {
				c.err = store.ErrFenced
			}
		}
		return nil
	}
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
