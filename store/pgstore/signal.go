package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yella-go/yella/store"
)

// Signals and waits. A signal that finds no run waiting for its key is
// kept (the signals table) for the next wait for the key; a wait for a
// key takes a kept signal if there is one. A signal and a wait on the
// same key that commit concurrently, on any nodes, must not both miss
// each other: the signal kept while the run is left waiting. So both
// take the key's signal lock, a transaction-scoped advisory lock (see
// lockSignal), before they read anything of the key, and hold it until
// they commit. Whichever takes it second waits for the first to commit,
// and then reads, in a statement that began after the lock was granted
// (READ COMMITTED: a new snapshot per statement), what the first
// committed: the signal finds the run waiting, or the wait finds the
// signal kept. Signals of one key are serialized by the same lock, so
// two of them never wake the same run, and a waiting run's lock is only
// held, besides, by a transaction that is taking it out of its wait (a
// claim past its deadline, an operator's cancel or end of the wait).

// keptSignal is a kept signal a wait took.
type keptSignal struct {
	payload []byte
}

// lockSignal takes the signal lock of key in w's transaction: an advisory
// lock keyed by a hash of the schema and key, of a key space of its own
// (the flow and process locks hash other prefixes).
func (w *wtx) lockSignal(key string) error {
	_, err := w.tx.Exec(w.ctx, w.s.q.lockKey, w.s.signalLock(key))
	return err
}

// signalLock is the advisory lock key of the signals of key.
func (s *Store) signalLock(key string) int64 {
	return lockID(s.opts.Schema, "signal\x00"+key)
}

// takeSignal takes (deletes) the oldest signal kept for key that is
// still kept at now, under the key's signal lock; nil if there is none.
func (w *wtx) takeSignal(key string, now time.Time) (*keptSignal, error) {
	var p []byte
	err := w.tx.QueryRow(w.ctx, w.s.q.sigTake, key, now.UnixNano()).Scan(&p)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &keptSignal{payload: p}, nil
}

// Signal implements store.Store, in one transaction under the key's
// signal lock. The run woken is the one waiting for the key that was
// admitted first (runs_wait_key), found with FOR UPDATE SKIP LOCKED so
// that it does not wait behind a run another transaction holds; if every
// waiting run is held (by a transaction taking it out of its wait), it
// waits for them rather than keep the signal beside a run that may go on
// waiting. Waking the run wakes the nodes, as an admission does.
func (s *Store) Signal(ctx context.Context, req store.SignalRequest) (store.SignalResult, error) {
	var res store.SignalResult
	err := s.runLocked(ctx, []int64{s.signalLock(req.Key)}, func(w *wtx) error {
		res = store.SignalResult{}
		return w.signal(&req, &res)
	})
	return res, err
}

func (w *wtx) signal(req *store.SignalRequest, res *store.SignalResult) error {
	q := &w.s.q
	if err := w.lockSignal(req.Key); err != nil {
		return err
	}
	var seq int64
	if req.RunID != "" {
		var status, key string
		err := w.tx.QueryRow(w.ctx, q.sigRun, req.RunID).Scan(&seq, &status, &key)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if store.Status(status) != store.StatusWaiting || key != req.Key || req.Key == "" {
			return &store.StatusError{RunID: req.RunID, Status: store.Status(status)}
		}
	} else {
		err := w.tx.QueryRow(w.ctx, q.sigFirst, req.Key).Scan(&seq)
		if errors.Is(err, pgx.ErrNoRows) {
			err = w.tx.QueryRow(w.ctx, q.sigFirstWait, req.Key).Scan(&seq)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			if !req.KeepUntil.After(req.Now) {
				return nil
			}
			if _, err := w.tx.Exec(w.ctx, q.sigKeep, req.Key, blob(req.Payload), req.KeepUntil.UnixNano()); err != nil {
				return err
			}
			res.Kept = true
			return nil
		}
		if err != nil {
			return err
		}
	}
	r, _, err := scanUpdated(w.tx.QueryRow(w.ctx, q.sigWake, seq, req.Now.UnixNano(), blob(req.Payload)))
	if err != nil {
		return err
	}
	w.moved(store.StatusWaiting, store.StatusIdle)
	res.Woken = &r
	return nil
}
