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
	err := s.runLocked(ctx, s.admissionLocks([]store.Admission{a}), func(w *wtx) error {
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
// exact across nodes. Runs with a group policy are decided next, under
// their groups' locks (see admitGroups); a debounced run whose start
// changed is reported to moved as going from idle to idle: no count
// changes, but the nodes must look at it again.
func (s *Store) admit(ctx context.Context, q pgx.Tx, a *store.Admission, moved func(from, to store.Status)) (store.AdmitResult, error) {
	var res store.AdmitResult
	if keyed(a) { // the key alone decides: insert first, read only if it is not new
		out := []store.AdmitResult{{}}
		err := s.admitKeyed(ctx, q, []store.Admission{*a}, out, moved)
		return out[0], err
	}
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
		holders, pruned, err := s.keyHolders(ctx, q, a, procs)
		if err != nil {
			return res, err
		}
		for k, r := range holders {
			existing[k.process] = r
		}
		for k, r := range pruned {
			kept[k.process] = r
		}
	}
	var grouped []int // the runs of a that a group may stand in for
	for i, nr := range a.Runs {
		_, e := existing[nr.Process]
		_, k := kept[nr.Process]
		if hasGroup(nr) && !e && !k {
			grouped = append(grouped, i)
		}
	}
	var active map[string]int
	var standIn map[int]store.Run
	var err error
	if len(grouped) == 0 { // no group: no group lock, no lookup
		active, err = s.lockBounds(ctx, q, a, existing, kept)
	} else {
		active, standIn, err = s.admitGroups(ctx, q, a, grouped, existing, kept, moved)
	}
	if err != nil {
		return res, err
	}
	var admit []store.NewRun
	for i, nr := range a.Runs {
		if r, ok := existing[nr.Process]; ok {
			res.Existing = append(res.Existing, r)
			continue
		}
		if r, ok := kept[nr.Process]; ok {
			res.Pruned = append(res.Pruned, r)
			continue
		}
		if r, ok := standIn[i]; ok {
			res.Grouped = append(res.Grouped, r)
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

// admitKeyed admits as, every one keyed (simple, with an idempotency
// key), in order, and reports each admitted run to moved; out gets their
// results. One statement inserts the runs whose key is new (insKeyed):
// an admission of a new key, the common case, costs that statement
// alone. For the runs it left out, one more round trip reads who holds
// their keys: a run (Existing: admitted before, by an earlier admission
// of as, or by a concurrent admission that the insert waited for) or a
// pruned run (Pruned).
func (s *Store) admitKeyed(ctx context.Context, q pgx.Tx, as []store.Admission, out []store.AdmitResult,
	moved func(from, to store.Status)) error {
	var rows runRows
	var keys []string
	for i := range as {
		rows.add(&as[i])
		for range as[i].Runs {
			keys = append(keys, as[i].IdempotencyKey)
		}
	}
	seqs := make(map[string]int64, len(keys))
	if len(keys) > 0 {
		r, err := q.Query(ctx, s.q.insKeyed, append(rows.args(), keys)...)
		if err != nil {
			return err
		}
		if err := readSeqs(r, seqs); err != nil {
			return err
		}
	}
	var events, lost, procs []string // the keys of the runs left out
	for i := range as {
		a := &as[i]
		for k := range a.Runs {
			nr := &a.Runs[k]
			seq, ok := seqs[nr.ID]
			if !ok {
				events, lost, procs = append(events, a.Event), append(lost, a.IdempotencyKey), append(procs, nr.Process)
				continue
			}
			out[i].Admitted = append(out[i].Admitted, admittedRun(a, nr, seq))
			moved("", store.StatusIdle)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	holders, pruned, err := s.keysHeld(ctx, q, events, lost, procs)
	if err != nil {
		return err
	}
	for i := range as {
		a := &as[i]
		for k := range a.Runs {
			nr := &a.Runs[k]
			if _, ok := seqs[nr.ID]; ok {
				continue
			}
			kk := idemKey{a.Event, a.IdempotencyKey, nr.Process}
			if r, ok := holders[kk]; ok {
				out[i].Existing = append(out[i].Existing, r)
			} else if r, ok := pruned[kk]; ok {
				out[i].Pruned = append(out[i].Pruned, r)
			} else {
				return errors.New("pgstore: an idempotent admission was left out and no run holds its key")
			}
		}
	}
	return nil
}

// idemKey is an idempotency key as one process holds it.
type idemKey struct{ event, key, process string }

// keyHolders reads, in one round trip, the runs that hold a's idempotency
// key for procs, and the pruned runs that held it.
func (s *Store) keyHolders(ctx context.Context, q pgx.Tx, a *store.Admission, procs []string) (holders, pruned map[idemKey]store.Run, err error) {
	events, keys := make([]string, len(procs)), make([]string, len(procs))
	for i := range procs {
		events[i], keys[i] = a.Event, a.IdempotencyKey
	}
	return s.keysHeld(ctx, q, events, keys, procs)
}

// keysHeld reads, in one round trip, the runs that hold the keys
// (events[i], keys[i], procs[i]), and the pruned runs that held them.
func (s *Store) keysHeld(ctx context.Context, q pgx.Tx, events, keys, procs []string) (holders, pruned map[idemKey]store.Run, err error) {
	holders, pruned = map[idemKey]store.Run{}, map[idemKey]store.Run{}
	b := &pgx.Batch{}
	b.Queue(s.q.selIdemKeys, events, keys, procs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			r, _, err := scanRun(rows)
			if err != nil {
				return err
			}
			holders[idemKey{r.Event, r.IdempotencyKey, r.Process}] = r
		}
		return rows.Err()
	})
	b.Queue(s.q.selKeptKeys, events, keys, procs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			r := store.Run{Status: store.StatusCompleted}
			var created int64
			if err := rows.Scan(&r.Event, &r.IdempotencyKey, &r.Process, &r.ID, &created); err != nil {
				return err
			}
			r.CreatedAt = time.Unix(0, created)
			pruned[idemKey{r.Event, r.IdempotencyKey, r.Process}] = r
		}
		return rows.Err()
	})
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, err
	}
	return holders, pruned, nil
}

// boundedOf returns the processes with a bound that a may admit: those
// not admitted before under its idempotency key.
func boundedOf(a *store.Admission, existing, kept map[string]store.Run) []string {
	var bounded []string
	for _, nr := range a.Runs {
		_, e := existing[nr.Process]
		_, k := kept[nr.Process]
		if nr.Limit > 0 && !e && !k && !slices.Contains(bounded, nr.Process) {
			bounded = append(bounded, nr.Process)
		}
	}
	return bounded
}

// lockBounds takes the admission locks of the processes with a bound that
// a may admit, in lock-key order, and returns their active runs counted
// under the locks.
func (s *Store) lockBounds(ctx context.Context, q pgx.Tx, a *store.Admission, existing, kept map[string]store.Run) (map[string]int, error) {
	active := map[string]int{}
	bounded := boundedOf(a, existing, kept)
	if len(bounded) == 0 {
		return active, nil
	}
	// The locks, then the count: one round trip, the count a statement of
	// its own after the locks, so that its snapshot is taken once they
	// are held.
	b := &pgx.Batch{}
	b.Queue(s.q.lockKeys, s.lockKeys(bounded, "admit"))
	b.Queue(s.q.activeCounts, bounded).Query(func(r pgx.Rows) error { return readCounts(r, active) })
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return active, nil
}

// readCounts reads the (process, count) rows of activeCounts into
// active, and closes them.
func readCounts(rows pgx.Rows, active map[string]int) error {
	defer rows.Close()
	for rows.Next() {
		var p string
		var n int
		if err := rows.Scan(&p, &n); err != nil {
			return err
		}
		active[p] = n
	}
	return rows.Err()
}

// hasGroup reports whether a group may stand in for nr: it has a group
// key and a policy (Singleton or Debounce). A key without one is only
// stored.
func hasGroup(nr store.NewRun) bool {
	return nr.GroupKey != "" && (nr.Group == store.GroupSingleton || nr.Group == store.GroupDebounce)
}

// admissionLocks are the advisory lock keys that the admissions as may
// take (cmd.locks), sorted, once each: the admission lock of each process
// with a bound, and the lock of each group with a policy.
func (s *Store) admissionLocks(as []store.Admission) []int64 {
	var keys []int64
	for i := range as {
		for _, nr := range as[i].Runs {
			if nr.Limit > 0 {
				keys = append(keys, lockID(s.opts.Schema, "admit\x00"+nr.Process))
			}
			if hasGroup(nr) {
				keys = append(keys, s.groupLock(nr.Process, nr.GroupKey))
			}
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// groupLock is the advisory lock key of the group of process p and key k,
// in a key space of its own (the process, flow and signal locks hash other
// prefixes).
func (s *Store) groupLock(p, k string) int64 {
	return lockID(s.opts.Schema, "group\x00"+p+"\x00"+k)
}

// admitGroups decides the runs of a at the indexes grouped (each with a
// group policy) under their groups' locks, and returns the runs that stand
// in for them, by index, and the active runs of the processes with a
// bound that a may admit (as lockBounds does).
//
// Two admissions of one group on any nodes are serialized by the group's
// lock, a transaction-scoped advisory lock, and the lookup is a statement
// that begins once the lock is granted (READ COMMITTED: a new snapshot per
// statement), so it sees the run the group's previous admission
// committed: two Singleton admissions never both admit, and two Debounce
// admissions never both create a never-started run. The group locks and
// the bounded processes' admission locks are taken together, in lock-key
// order, in one statement, sent with the lookups and the bounded counts
// in one round trip. A debounced run is locked as it is found: it is
// either updated before a claim of it, or found started after the claim
// committed, and the run before it taken instead.
func (s *Store) admitGroups(ctx context.Context, q pgx.Tx, a *store.Admission, grouped []int, existing, kept map[string]store.Run,
	moved func(from, to store.Status)) (map[string]int, map[int]store.Run, error) {
	active := map[string]int{}
	standIn := map[int]store.Run{}
	bounded := boundedOf(a, existing, kept)
	keys := make([]int64, 0, len(grouped)+len(bounded))
	for _, i := range grouped {
		keys = append(keys, s.groupLock(a.Runs[i].Process, a.Runs[i].GroupKey))
	}
	for _, p := range bounded {
		keys = append(keys, lockID(s.opts.Schema, "admit\x00"+p))
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	b := &pgx.Batch{}
	b.Queue(s.q.lockKeys, keys)
	if len(bounded) > 0 {
		b.Queue(s.q.activeCounts, bounded).Query(func(rows pgx.Rows) error {
			var p string
			var n int
			_, err := pgx.ForEachRow(rows, []any{&p, &n}, func() error { active[p] = n; return nil })
			return err
		})
	}
	for _, i := range grouped {
		nr := &a.Runs[i]
		found := func(r store.Run, err error) error {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err == nil {
				standIn[i] = r
			}
			return err
		}
		if nr.Group == store.GroupSingleton {
			b.Queue(s.q.groupSingleton, nr.Process, nr.GroupKey).QueryRow(func(row pgx.Row) error {
				r, _, err := scanUpdated(row)
				return found(r, err)
			})
		} else {
			b.Queue(s.q.groupDebounce, nr.Process, nr.GroupKey, blob(a.Payload), blob(a.Context), notBefore(a), a.Now.UnixNano()).
				QueryRow(func(row pgx.Row) error {
					var start bool
					r, _, err := scanUpdated(row, &start)
					if err == nil && start {
						moved(store.StatusIdle, store.StatusIdle)
					}
					return found(r, err)
				})
		}
	}
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, err
	}
	return active, standIn, nil
}

// lockKeys are the advisory lock keys of kind for procs, in the one order
// every transaction takes them in.
func (s *Store) lockKeys(procs []string, kind string) []int64 {
	keys := make([]int64, len(procs))
	for i, p := range procs {
		keys[i] = lockID(s.opts.Schema, kind+"\x00"+p)
	}
	slices.Sort(keys)
	return keys
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
	rateKeys, concKeys, groupKeys := make([]*string, len(admit)), make([]*string, len(admit)), make([]*string, len(admit))
	for i, nr := range admit {
		ids[i], procs[i] = nr.ID, nr.Process
		prios[i], rateKeys[i], concKeys[i] = nullInt(nr.Priority), nullStr(nr.RateKey), nullStr(nr.ConcurrencyKey)
		groupKeys[i] = nullStr(nr.GroupKey)
	}
	var corr *string
	if a.CorrelationID != "" {
		corr = &a.CorrelationID
	}
	rows, err := q.Query(ctx, s.q.insRuns, ids, procs, a.Event, corr, nullStr(a.ParentID), a.Depth,
		blob(a.Payload), blob(a.Context), nullStr(a.IdempotencyKey), a.Now.UnixNano(), prios, rateKeys, concKeys, notBefore(a), groupKeys)
	if err != nil {
		return res, err
	}
	seqs := map[string]int64{}
	if err := readSeqs(rows, seqs); err != nil {
		return res, err
	}
	var lost []string
	for _, nr := range admit {
		seq, ok := seqs[nr.ID]
		if !ok {
			lost = append(lost, nr.Process)
			continue
		}
		moved("", store.StatusIdle)
		res.Admitted = append(res.Admitted, admittedRun(a, &nr, seq))
	}
	if len(lost) > 0 { // admitted meanwhile by another transaction
		holders, _, err := s.keyHolders(ctx, q, a, lost)
		if err != nil {
			return res, err
		}
		for _, p := range lost {
			r, ok := holders[idemKey{a.Event, a.IdempotencyKey, p}]
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

// readSeqs reads the (seq, id) rows of an insert of runs into seqs, by
// id, and closes them.
func readSeqs(rows pgx.Rows, seqs map[string]int64) error {
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var id string
		if err := rows.Scan(&seq, &id); err != nil {
			return err
		}
		seqs[id] = seq
	}
	return rows.Err()
}
