package sqlitestore

import (
	"context"
	"errors"

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
		for i := range as {
			res, err := w.admit(&as[i])
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
// unwrapping to it, so that the writer sees an error that fails the
// transaction rather than a per-command sentinel.
type batchAbort struct{ err error }

func (b batchAbort) Error() string { return b.err.Error() }
