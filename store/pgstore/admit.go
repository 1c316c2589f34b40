package pgstore

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yella-go/yella/store"
)

// Admit implements store.Store.
func (s *Store) Admit(ctx context.Context, a store.Admission) (store.AdmitResult, error) {
	var res store.AdmitResult
	err := s.run(ctx, func(w *wtx) error {
		var err error
		res, err = s.admit(w.ctx, w.tx, &a, w.moved)
		return err
	})
	return res, err
}

// admit admits the runs of a within q's transaction and reports each
// admitted run to moved. Nothing is written unless a run is admitted.
//
// With an idempotency key, the processes admitted before (or pruned) are
// found first; a concurrent admission of the same key by another node
// waits on the unique index and then loses (ON CONFLICT DO NOTHING), so its
// process is returned as existing. Processes with an admission bound are
// decided under their advisory locks (taken in one order), so the bound is
// exact across nodes.
func (s *Store) admit(ctx context.Context, q pgx.Tx, a *store.Admission, moved func(from, to store.Status)) (store.AdmitResult, error) {
	var res store.AdmitResult
	if a.ParentID != "" {
		var ok bool
		if err := q.QueryRow(ctx, s.q.parentExists, a.ParentID).Scan(&ok); err != nil {
			return res, err
		}
		if !ok {
			return res, store.ErrNotFound
		}
	}
	procs := make([]string, len(a.Runs))
	for i, nr := range a.Runs {
		procs[i] = nr.Process
	}
	existing := map[string]store.Run{}
	kept := map[string]store.Run{}
	if a.IdempotencyKey != "" {
		var err error
		if existing, err = s.byKey(ctx, q, a, procs); err != nil {
			return res, err
		}
		rows, err := q.Query(ctx, s.q.selKept, a.Event, a.IdempotencyKey, procs)
		if err != nil {
			return res, err
		}
		for rows.Next() {
			r := store.Run{Event: a.Event, IdempotencyKey: a.IdempotencyKey, Status: store.StatusCompleted}
			var created int64
			if err := rows.Scan(&r.Process, &r.ID, &created); err != nil {
				rows.Close()
				return res, err
			}
			r.CreatedAt = time.Unix(0, created)
			kept[r.Process] = r
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return res, err
		}
	}
	active, err := s.lockBounds(ctx, q, a, existing, kept)
	if err != nil {
		return res, err
	}
	var admit []store.NewRun
	for _, nr := range a.Runs {
		if r, ok := existing[nr.Process]; ok {
			res.Existing = append(res.Existing, r)
			continue
		}
		if r, ok := kept[nr.Process]; ok {
			res.Pruned = append(res.Pruned, r)
			continue
		}
		if nr.Limit > 0 && active[nr.Process] >= nr.Limit {
			res.Dropped = append(res.Dropped, nr)
			continue
		}
		active[nr.Process]++
		admit = append(admit, nr)
	}
	if len(admit) == 0 {
		return res, nil
	}
	return s.insertRuns(ctx, q, a, admit, res, moved)
}

// byKey returns the runs admitted under a's idempotency key, by process.
func (s *Store) byKey(ctx context.Context, q pgx.Tx, a *store.Admission, procs []string) (map[string]store.Run, error) {
	out := map[string]store.Run{}
	rows, err := q.Query(ctx, s.q.selIdem, a.Event, a.IdempotencyKey, procs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		r, _, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out[r.Process] = r
	}
	return out, rows.Err()
}

// lockBounds takes the admission locks of the processes with a bound that
// a may admit, in lock-key order, and returns their active runs counted
// under the locks.
func (s *Store) lockBounds(ctx context.Context, q pgx.Tx, a *store.Admission, existing, kept map[string]store.Run) (map[string]int, error) {
	active := map[string]int{}
	var bounded []string
	for _, nr := range a.Runs {
		_, e := existing[nr.Process]
		_, k := kept[nr.Process]
		if nr.Limit > 0 && !e && !k && !slices.Contains(bounded, nr.Process) {
			bounded = append(bounded, nr.Process)
		}
	}
	if len(bounded) == 0 {
		return active, nil
	}
	if err := s.lockProcesses(ctx, q, bounded, "admit"); err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, s.q.activeCounts, bounded)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var p string
		var n int
		if err := rows.Scan(&p, &n); err != nil {
			return nil, err
		}
		active[p] = n
	}
	return active, rows.Err()
}

// lockProcesses takes the transaction's advisory locks of kind for each
// process, in key order, so two transactions never wait on each other in
// opposite orders.
func (s *Store) lockProcesses(ctx context.Context, q pgx.Tx, procs []string, kind string) error {
	keys := make([]int64, len(procs))
	for i, p := range procs {
		keys[i] = lockID(s.opts.Schema, kind+"\x00"+p)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if _, err := q.Exec(ctx, s.q.lockKey, k); err != nil {
			return err
		}
	}
	return nil
}

// insertRuns inserts the admitted runs in one statement. A run whose key a
// concurrent admission took meanwhile is returned as existing.
//
// A delayed admission (Admission.NotBefore) stores its time as the runs'
// retry_at: they are due then, like a retry.
func (s *Store) insertRuns(ctx context.Context, q pgx.Tx, a *store.Admission, admit []store.NewRun, res store.AdmitResult,
	moved func(from, to store.Status)) (store.AdmitResult, error) {
	ids := make([]string, len(admit))
	procs := make([]string, len(admit))
	prios := make([]*int32, len(admit))
	rateKeys, concKeys := make([]*string, len(admit)), make([]*string, len(admit))
	for i, nr := range admit {
		ids[i], procs[i] = nr.ID, nr.Process
		prios[i], rateKeys[i], concKeys[i] = nullInt(nr.Priority), nullStr(nr.RateKey), nullStr(nr.ConcurrencyKey)
	}
	var corr *string
	if a.CorrelationID != "" {
		corr = &a.CorrelationID
	}
	rows, err := q.Query(ctx, s.q.insRuns, ids, procs, a.Event, corr, nullStr(a.ParentID), a.Depth,
		blob(a.Payload), blob(a.Context), nullStr(a.IdempotencyKey), a.Now.UnixNano(), prios, rateKeys, concKeys, notBefore(a))
	if err != nil {
		return res, err
	}
	seqs := map[string]int64{}
	for rows.Next() {
		var seq int64
		var id string
		if err := rows.Scan(&seq, &id); err != nil {
			rows.Close()
			return res, err
		}
		seqs[id] = seq
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return res, err
	}
	var lost []string
	for _, nr := range admit {
		seq, ok := seqs[nr.ID]
		if !ok {
			lost = append(lost, nr.Process)
			continue
		}
		c := a.CorrelationID
		if c == "" {
			c = nr.ID
		}
		moved("", store.StatusIdle)
		res.Admitted = append(res.Admitted, store.Run{
			ID: nr.ID, Seq: seq, Process: nr.Process, Event: a.Event, CorrelationID: c, ParentID: a.ParentID,
			Depth: a.Depth, Status: store.StatusIdle, Payload: a.Payload, Context: a.Context,
			IdempotencyKey: a.IdempotencyKey, CreatedAt: time.Unix(0, a.Now.UnixNano()),
			Priority: nr.Priority, RateKey: nr.RateKey, ConcurrencyKey: nr.ConcurrencyKey, RetryAt: fromNS(notBefore(a)),
		})
	}
	if len(lost) > 0 { // admitted meanwhile by another transaction
		existing, err := s.byKey(ctx, q, a, lost)
		if err != nil {
			return res, err
		}
		for _, p := range lost {
			r, ok := existing[p]
			if !ok {
				return res, errors.New("pgstore: an idempotent admission conflicted and its run is not found")
			}
			res.Existing = append(res.Existing, r)
		}
	}
	return res, nil
}

// notBefore is a delayed admission's start time in Unix nanoseconds, nil
// when its runs are due at once.
func notBefore(a *store.Admission) *int64 {
	if !a.NotBefore.After(a.Now) {
		return nil
	}
	ns := a.NotBefore.UnixNano()
	return &ns
}
