package pgstore

import (
	"context"
	"errors"
	"slices"

	"github.com/yella-go/yella/store"
)

// AdmitBatch implements store.Store: one command, so the admissions share
// the batch transaction (the same admission code as Admit, in order), and
// a failure of any of them, even a store sentinel that alone would only
// refuse its own command, fails the transaction, which is rolled back
// whole.
func (s *Store) AdmitBatch(ctx context.Context, as []store.Admission) ([]store.AdmitResult, error) {
	out := make([]store.AdmitResult, len(as))
	failed := -1 // the admission that failed, read once the command is done
	err := s.run(ctx, func(w *wtx) error {
		failed = -1
		// The admission locks of every bounded process of the batch, and
		// the locks of its groups, in one order, before any admission takes
		// its own: two batches never wait on each other in opposite orders.
		var bounded []string
		var groups []int64
		for _, a := range as {
			for _, nr := range a.Runs {
				if nr.Limit > 0 && !slices.Contains(bounded, nr.Process) {
					bounded = append(bounded, nr.Process)
				}
				if hasGroup(nr) {
					groups = append(groups, s.groupLock(nr.Process, nr.GroupKey))
				}
			}
		}
		if len(groups) > 0 { // with the admission locks, in one order
			for _, p := range bounded {
				groups = append(groups, lockID(s.opts.Schema, "admit\x00"+p))
			}
			slices.Sort(groups)
			if _, err := w.tx.Exec(w.ctx, s.q.lockKeys, slices.Compact(groups)); err != nil {
				return err
			}
		} else if len(bounded) > 0 {
			if err := s.lockProcesses(w.ctx, w.tx, bounded, "admit"); err != nil {
				return err
			}
		}
		for i := range as {
			res, err := s.admit(w.ctx, w.tx, &as[i], w.moved)
			if err != nil {
				failed = i
				if isSentinel(err) {
					return batchAbort{err} // fails the transaction, not only this command
				}
				return err
			}
			out[i] = res
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
// unwrapping to it, so that the writer fails the transaction.
type batchAbort struct{ err error }

func (b batchAbort) Error() string { return b.err.Error() }
