package sqlitestore

import (
	"context"
	"errors"
	"math/bits"

	"github.com/yella-go/yella/store"
)

// AdmitBatch implements store.Store: one command, so the admissions share
// the batch transaction, and a failure of any of them (even a store
// sentinel, which alone would only refuse its own command) fails the
// transaction, which is rolled back whole.
func (s *Store) AdmitBatch(ctx context.Context, as []store.Admission) ([]store.AdmitResult, error) {
	out := make([]store.AdmitResult, len(as))
	failed := -1 // the admission that failed, read once the command is done
	err := s.do(ctx, func(w *wtx) error {
		failed = -1
		w.deferring = true // the runs are inserted many per statement (flushRuns)
		defer func() { w.deferring = false }()
		for i := range as {
			w.admitting = i
			res, err := w.admit(&as[i])
			if err != nil {
				failed = i
				var rf runFailed
				if errors.As(err, &rf) { // an earlier admission's run, inserted late
					failed, err = rf.at, rf.err
				}
				if isSentinel(err) {
					return batchAbort{err} // fails the transaction, not only this command
				}
				return err
			}
			out[i] = res
		}
		if err := w.flushRuns(); err != nil {
			var rf runFailed
			errors.As(err, &rf)
			failed = rf.at
			return rf.err
		}
		return nil
	})
	if err == nil {
		return out, nil
	}
	var ab batchAbort
	if errors.As(err, &ab) {
		err = ab.err
	}
	if failed >= 0 {
		err = &store.BatchError{Index: failed, Err: err}
	}
	return nil, err
}

// batchAbort carries a batch admission's error through the writer without
// unwrapping to it, so that the writer sees an error that fails the
// transaction rather than a per-command sentinel.
type batchAbort struct{ err error }

func (b batchAbort) Error() string { return b.err.Error() }

// runFailed is the error of a run that flushRuns inserted after its
// admission was decided: at is the index of that admission in its batch.
type runFailed struct {
	at  int
	err error
}

func (r runFailed) Error() string { return r.err.Error() }

// flushRuns inserts the runs that a batch's admissions deferred (wtx.runs)
// in order, as many per statement as insertMany's sizes allow. A
// statement that fails changes nothing (SQLite undoes a failed statement
// and keeps its transaction), so its runs are then inserted one at a
// time: a run that fails alone fails as it would have at its admission,
// and names that admission (runFailed).
func (w *wtx) flushRuns() error {
	for len(w.runs) > 0 {
		n := 1 << (bits.Len(uint(min(len(w.runs), manyMax))) - 1) // a power of two: no padding rows to insert
		chunk, of := w.runs[:n], w.runsOf[:n]
		if _, err := w.runMany(insertMany, n, chunk, nil); err != nil {
			for i, r := range chunk {
				if _, err := w.exec(w.s.st.insRun, r...); err != nil {
					return runFailed{of[i], err}
				}
			}
		}
		w.runs, w.runsOf = w.runs[n:], w.runsOf[n:]
	}
	w.runs, w.runsOf = nil, nil
	return nil
}
