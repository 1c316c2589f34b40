package pgstore

import (
	"context"
	"encoding/json"
	"time"

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

// effStartMany records the effect starts of a batch in one statement. A
// start whose run is not running at its epoch, or whose effect is already
// completed, is refused (ErrFenced; ErrNotFound for an unknown run).
// Two starts of one effect in a batch fail the statement, and the batch
// is then retried command by command.
func (w *wtx) effStartMany(cs []*cmd) error {
	if len(cs) == 0 {
		return nil
	}
	n := len(cs)
	ord := make([]int32, n)
	ids, keys := make([]string, n), make([]string, n)
	epochs, ats := make([]int64, n), make([]int64, n)
	for i, c := range cs {
		e := c.effStart
		ord[i], ids[i], keys[i], epochs[i], ats[i] = int32(i), e.runID, e.key, e.epoch, e.now.UnixNano()
	}
	rows, err := w.tx.Query(w.ctx, w.s.q.effStartMany, ord, ids, epochs, keys, ats)
	if err != nil {
		return err
	}
	done := make([]bool, n)
	for rows.Next() {
		var i int32
		if err := rows.Scan(&i); err != nil {
			rows.Close()
			return err
		}
		done[i] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	return w.refuse(cs, done, func(c *cmd) string { return c.effStart.runID }, store.ErrFenced)
}

// effFinishMany records the effect outcomes of a batch in one statement.
// An outcome applies whatever the run's state is now (the side effect did
// happen); it is refused (ErrFenced) only when the record is no longer the
// one started at its epoch.
func (w *wtx) effFinishMany(cs []*cmd) error {
	if len(cs) == 0 {
		return nil
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
	rows, err := w.tx.Query(w.ctx, w.s.q.effFinishMany, ord, ids, epochs, keys, sts, outs, errs, ats)
	if err != nil {
		return err
	}
	done := make([]bool, n)
	for rows.Next() {
		var i int32
		if err := rows.Scan(&i); err != nil {
			rows.Close()
			return err
		}
		done[i] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for i, c := range cs {
		if !done[i] {
			c.err = store.ErrFenced
		}
	}
	return nil
}
