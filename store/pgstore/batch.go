package pgstore

import (
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/yella-go/yella/store"
)

// AdmitBatch implements store.Store: one command, so the admissions share
// the batch transaction (the same admission code as Admit, in order;
// committed by the bulk writer from bulkRuns runs on), and
// a failure of any of them, even a store sentinel that alone would only
// refuse its own command, fails the transaction, which is rolled back
// whole.
func (s *Store) AdmitBatch(ctx context.Context, as []store.Admission) ([]store.AdmitResult, error) {
	out := make([]store.AdmitResult, len(as))
	failed := -1      // the admission that failed, read once the command is done
	oneByOne := false // set when a statement of several admissions failed
	runs := 0
	for _, a := range as {
		runs += len(a.Runs)
	}
	locks := s.admissionLocks(as)
	err := s.do(ctx, &cmd{bulk: runs >= bulkRuns, locks: locks, fn: func(w *wtx) error {
		failed = -1
		// The admission locks of every bounded process of the batch, and
		// the locks of its groups, in one order, before any admission takes
		// its own: two batches never wait on each other in opposite orders.
		if len(locks) > 0 {
			if _, err := w.tx.Exec(w.ctx, s.q.lockKeys, locks); err != nil {
				return err
			}
		}
		for i := 0; i < len(as); {
			if j, admit := s.together(as, i); j > i && !oneByOne {
				// Admissions that read nothing before their insert but
				// their parents (the common batch: events without keys,
				// bounds or groups; a fan-out's children), and those
				// that read only their idempotency key (a webhook
				// source's deliveries, each keyed by its delivery id),
				// are inserted by one statement per run of them, in
				// order, where one each cost one to three round trips
				// (1,500 inside the writer's transaction for a batch of
				// 500 keyed events, which every other command of the
				// node waited behind). Should it fail, the command is
				// tried again alone admission by admission, so that the
				// error names the admission that failed (a run id taken,
				// a parent not found).
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
	}})
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

// errParentMissing fails a statement of many admissions one of which
// names a parent that is not found: the command is tried again admission
// by admission, which names it (store.ErrNotFound).
var errParentMissing = errors.New("pgstore: the parent of an admission of the batch is not found")

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
// beyond its idempotency key, its parent's existence and its processes'
// active runs: no group policy.
func simple(a *store.Admission) bool {
	for _, nr := range a.Runs {
		if hasGroup(nr) {
			return false
		}
	}
	return true
}

// plain reports whether a reads nothing before its insert but whether its
// parent exists and the active runs of its bounded processes (simple,
// with no idempotency key): it admits every run it names that its bound
// allows, or fails.
func plain(a *store.Admission) bool { return a.IdempotencyKey == "" && simple(a) }

// keyed reports whether a is simple with an idempotency key, no parent
// and no bound: it admits the runs whose key is new (see admitKeyed).
func keyed(a *store.Admission) bool {
	if a.IdempotencyKey == "" || a.ParentID != "" || !simple(a) {
		return false
	}
	for _, nr := range a.Runs {
		if nr.Limit > 0 {
			return false
		}
	}
	return true
}

// admitPlain admits as, every one plain, in order, with one statement for
// all the runs admitted; out gets their results. What the admissions
// read is read first, in one round trip for all of them: the parents
// they name (a fan-out's children name theirs), each of which must be
// stored or be a run admitted by an earlier admission of as, and the
// active runs of their bounded processes, whose admission locks the
// batch holds (see AdmitBatch), counted once and then as each admission
// adds to them, as they would be counted before each. Without a bound
// the insert goes in that round trip too. Should a parent be missing,
// the error fails the command, which is tried again admission by
// admission (see AdmitBatch) to name the admission whose parent is not
// found.
func (s *Store) admitPlain(w *wtx, as []store.Admission, out []store.AdmitResult) error {
	var parents, bounded []string
	named := map[string]bool{} // the parents in parents
	for i := range as {
		if p := as[i].ParentID; p != "" && !named[p] {
			named[p] = true
			parents = append(parents, p)
		}
		for _, nr := range as[i].Runs {
			if nr.Limit > 0 && !slices.Contains(bounded, nr.Process) {
				bounded = append(bounded, nr.Process)
			}
		}
	}
	stored := make(map[string]bool, len(parents))
	active := make(map[string]int, len(bounded))
	var rows runRows
	seqs := make(map[string]int64)
	b := &pgx.Batch{}
	if len(parents) > 0 {
		b.Queue(s.q.idsExist, parents).Query(func(r pgx.Rows) error {
			defer r.Close()
			for r.Next() {
				var id string
				if err := r.Scan(&id); err != nil {
					return err
				}
				stored[id] = true
			}
			return r.Err()
		})
	}
	if len(bounded) > 0 {
		b.Queue(s.q.activeCounts, bounded).Query(func(r pgx.Rows) error { return readCounts(r, active) })
	} else {
		for i := range as {
			rows.add(&as[i])
		}
		if len(rows.ids) > 0 {
			b.Queue(s.q.insChildren, rows.args()...).Query(func(r pgx.Rows) error { return readSeqs(r, seqs) })
		}
	}
	if b.Len() > 0 {
		if err := w.tx.SendBatch(w.ctx, b).Close(); err != nil {
			return err
		}
	}
	// The admissions in order: each parent found, each run admitted or
	// dropped by its bound.
	var picked [][2]int // the admitted runs: admission, run
	for i := range as {
		a := &as[i]
		if a.ParentID != "" && !stored[a.ParentID] {
			return errParentMissing
		}
		for k := range a.Runs {
			nr := &a.Runs[k]
			if nr.Limit > 0 && active[nr.Process] >= nr.Limit {
				out[i].Dropped = append(out[i].Dropped, *nr)
				continue
			}
			active[nr.Process]++
			stored[nr.ID] = true // a parent of the admissions after it
			picked = append(picked, [2]int{i, k})
			if len(bounded) > 0 {
				rows.addRun(a, nr)
			}
		}
	}
	if len(bounded) > 0 && len(rows.ids) > 0 {
		r, err := w.tx.Query(w.ctx, s.q.insChildren, rows.args()...)
		if err != nil {
			return err
		}
		if err := readSeqs(r, seqs); err != nil {
			return err
		}
	}
	for _, p := range picked {
		a := &as[p[0]]
		nr := &a.Runs[p[1]]
		out[p[0]].Admitted = append(out[p[0]].Admitted, admittedRun(a, nr, seqs[nr.ID]))
		w.moved("", store.StatusIdle)
	}
	return nil
}
