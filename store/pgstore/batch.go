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
	failed := -1      // the admission that failed, read once the command is done
	oneByOne := false // set when a statement of several admissions failed
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
		for i := 0; i < len(as); {
			if j, admit := s.together(as, i); j > i && !oneByOne {
				// Admissions that read nothing before their insert (the
				// common batch: events without keys, bounds or groups),
				// and those that read only their idempotency key (a
				// webhook source's deliveries, each keyed by its
				// delivery id), are inserted by one statement per run of
				// them, in order, where one each cost a round trip or
				// three (1,500 round trips inside the writer's
				// transaction for a batch of 500 keyed events, which
				// every other command of the node waited behind). Should
				// it fail, the command is tried again alone admission by
				// admission, so that the error names the admission that
				// failed (a run id taken).
				if err := admit(w, as[i:j], out[i:j]); err != nil {
					failed, oneByOne = i, true
					return err
				}
				i = j
				continue
			}
			res, err := s.admit(w.ctx, w.tx, &as[i], w.moved)
			if err != nil {
				failed = i
				if isSentinel(err) {
					return batchAbort{err} // fails the transaction, not only this command
				}
				return err
			}
			out[i] = res
			i++
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

// together returns the end of the run of admissions of as from i that
// one statement inserts (plain ones, or keyed ones), and the function
// that admits them; i itself when as[i] is neither.
func (s *Store) together(as []store.Admission, i int) (int, func(w *wtx, as []store.Admission, out []store.AdmitResult) error) {
	if j := runOf(as, i, plain); j > i {
		return j, s.admitPlain
	}
	return runOf(as, i, keyed), func(w *wtx, as []store.Admission, out []store.AdmitResult) error {
		return s.admitKeyed(w.ctx, w.tx, as, out, w.moved)
	}
}

// runOf returns the end of the run of admissions of as from i that are
// of a kind (plain or keyed; i itself when as[i] is not).
func runOf(as []store.Admission, i int, kind func(*store.Admission) bool) int {
	j := i
	for j < len(as) && kind(&as[j]) {
		j++
	}
	return j
}

// simple reports whether a admits its runs without a read of its own
// beyond its idempotency key: no parent to check, no bound, no group
// policy.
func simple(a *store.Admission) bool {
	if a.ParentID != "" {
		return false
	}
	for _, nr := range a.Runs {
		if nr.Limit > 0 || hasGroup(nr) {
			return false
		}
	}
	return true
}

// plain reports whether a reads nothing before its insert (simple, with
// no idempotency key): it admits every run it names.
func plain(a *store.Admission) bool { return a.IdempotencyKey == "" && simple(a) }

// keyed reports whether a is simple with an idempotency key: it admits
// the runs whose key is new (see admitKeyed).
func keyed(a *store.Admission) bool { return a.IdempotencyKey != "" && simple(a) }

// admitPlain admits as, every one plain, with one statement
// for all their runs, numbered in order; out gets their results.
func (s *Store) admitPlain(w *wtx, as []store.Admission, out []store.AdmitResult) error {
	var rows runRows
	for i := range as {
		rows.add(&as[i])
	}
	seqs := make(map[string]int64, len(rows.ids))
	if len(rows.ids) > 0 {
		r, err := w.tx.Query(w.ctx, s.q.insChildren, rows.args()...)
		if err != nil {
			return err
		}
		if err := readSeqs(r, seqs); err != nil {
			return err
		}
	}
	for i := range as {
		a := &as[i]
		var res store.AdmitResult
		if len(a.Runs) > 0 {
			res.Admitted = make([]store.Run, 0, len(a.Runs))
		}
		for k := range a.Runs {
			res.Admitted = append(res.Admitted, admittedRun(a, &a.Runs[k], seqs[a.Runs[k].ID]))
			w.moved("", store.StatusIdle)
		}
		out[i] = res
	}
	return nil
}
