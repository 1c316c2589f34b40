package pgstore

import (
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yella-go/yella/store"
)

// Flow control on a shared store. A key's state lives in the runs: the
// running runs of a concurrency key (runs_conc), and the largest rate_tat
// of a rate key's runs (runs_rate_tat), which each claim of a rate-limited
// run moves forward. Claims of the same key are serialized across nodes by
// a transaction-scoped advisory lock per key: a claim reads the key's
// state once it holds the lock, and READ COMMITTED lets that read see the
// claims of whichever transaction held the lock before. So the limits are
// exact across nodes, and runs without keys never take a lock.

// limited reports whether f limits anything.
func limited(f store.Flow) bool { return !f.Rate.Zero() || f.KeyConcurrency > 0 }

// flowSlack is how many more candidates than it has room for a round of
// claimFlows reads, so that runs held back by their keys are passed over
// without another round.
const flowSlack = 8

// maxFlowRounds bounds the rounds of one claimFlows: each reads the runs
// behind those the previous rounds held back, with the keys they found
// full excluded.
const maxFlowRounds = 4

// candidate is an idle run claimFlows looks at, locked (FOR UPDATE).
type candidate struct {
	seq              int64
	proc             string
	rank             int64
	rateKey, concKey string
}

// flowKeys are the keys' states as one claimFlows knows them, and which
// of the keys it holds the locks of: a locked key's state is exact (read
// under the lock, then moved by the runs this claim picks); the others'
// are as last committed, and only decide which runs to leave out.
type flowKeys struct {
	conc   map[string]int       // running runs per concurrency key
	tat    map[string]time.Time // theoretical arrival time per rate key (after now)
	locked map[string]bool      // "c" or "r", then the key
	failed map[string]bool      // keys another node holds (rounds after the first only try)
}

// claimFlows claims, in rank order, up to rooms[p] due idle runs of each
// process p of procs (processes with flow limits), and no more than the
// request's limit left after res's runs, and adds them to res. A run is
// passed over, and the runs behind it are claimed, when its concurrency
// key already has the process's KeyConcurrency running runs (on any node)
// or its rate key does not allow a start at req.Now; each run claimed
// under a rate key keeps the key's new theoretical arrival time. It
// returns the earliest time after req.Now at which a rate key that holds
// back an idle run of procs allows a start (zero: none).
//
// Each round reads the keys' states without locks, selects candidates
// (FOR UPDATE SKIP LOCKED) leaving out the runs of the keys found full,
// takes the locks of the candidates' keys in key order (rounds after the
// first only try them: a lock taken out of order could deadlock with
// another node's claim, and a key another node holds is passed over), reads
// those keys' states under the locks and decides each candidate in Go
// with the same rules as a single-process engine (store.Rate.Allow).
func (w *wtx) claimFlows(req *store.ClaimNextRequest, node int32, procs []string, rooms map[string]int, res *store.ClaimNextResult) (time.Time, error) {
	q := &w.s.q
	now := req.Now.UnixNano()
	limit := req.Limit - len(res.Runs)
	keys := flowKeys{conc: map[string]int{}, tat: map[string]time.Time{}, locked: map[string]bool{}, failed: map[string]bool{}}
	b := &pgx.Batch{}
	var k string
	var n int64
	b.Queue(q.flowConcAll).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&k, &n}, func() error { keys.conc[k] = int(n); return nil })
		return err
	})
	b.Queue(q.flowRatesAll, now).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&k, &n}, func() error { keys.tat[k] = time.Unix(0, n); return nil })
		return err
	})
	if err := w.tx.SendBatch(w.ctx, b).Close(); err != nil {
		return time.Time{}, err
	}
	waiting := map[string]time.Time{} // rate keys holding back a start → when they allow one
	wait := func(key string, at time.Time) {
		if t, ok := waiting[key]; !ok || at.Before(t) {
			waiting[key] = at
		}
	}
	var picked, tats []*int64
	seen := []int64{}
	for round := 0; round < maxFlowRounds && limit > 0; round++ {
		var cands []candidate
		want, got := map[string]int{}, map[string]int{}
		b := &pgx.Batch{}
		for _, set := range claimPlan {
			b.Queue(set)
		}
		for _, p := range procs {
			room := min(rooms[p], limit)
			if room <= 0 {
				continue
			}
			f := req.Flows[p]
			fullConc, fullRate := []string{}, []string{}
			if f.KeyConcurrency > 0 {
				for key, c := range keys.conc {
					if c >= f.KeyConcurrency {
						fullConc = append(fullConc, key)
					}
				}
			}
			if !f.Rate.Zero() {
				for key, t := range keys.tat {
					if ok, _, at := f.Rate.Allow(t, req.Now); !ok {
						fullRate = append(fullRate, key)
						wait(key, at)
					}
				}
			}
			want[p] = room + flowSlack
			b.Queue(q.flowCands, now, p, fullConc, fullRate, seen, want[p]).Query(func(rows pgx.Rows) error {
				c := candidate{proc: p}
				var created int64
				var prio int
				_, err := pgx.ForEachRow(rows, []any{&c.seq, &created, &prio, &c.rateKey, &c.concKey}, func() error {
					c.rank = store.Rank(time.Unix(0, created), prio)
					cands = append(cands, c)
					got[p]++
					return nil
				})
				return err
			})
		}
		if len(want) == 0 {
			break
		}
		for _, reset := range claimPlanReset {
			b.Queue(reset)
		}
		if err := w.tx.SendBatch(w.ctx, b).Close(); err != nil {
			return time.Time{}, err
		}
		sort.Slice(cands, func(i, j int) bool {
			if cands[i].rank != cands[j].rank {
				return cands[i].rank < cands[j].rank
			}
			return cands[i].seq < cands[j].seq
		})
		if err := w.lockKeys(req, cands, &keys, round == 0); err != nil {
			return time.Time{}, err
		}
		for _, c := range cands {
			// Every candidate is looked at once: the next rounds leave
			// out the runs this one picks as well as those it passes
			// over (this transaction's own row locks do not skip them).
			seen = append(seen, c.seq)
			f := req.Flows[c.proc]
			limitsConc := f.KeyConcurrency > 0 && c.concKey != ""
			limitsRate := !f.Rate.Zero() && c.rateKey != ""
			switch {
			case limit == 0 || rooms[c.proc] == 0,
				limitsConc && keys.failed["c"+c.concKey], limitsRate && keys.failed["r"+c.rateKey],
				limitsConc && keys.conc[c.concKey] >= f.KeyConcurrency:
				continue
			}
			var tat *int64
			if limitsRate {
				ok, next, at := f.Rate.Allow(keys.tat[c.rateKey], req.Now)
				if !ok {
					wait(c.rateKey, at)
					continue
				}
				keys.tat[c.rateKey] = next
				tat = ns(next)
			}
			if c.concKey != "" {
				keys.conc[c.concKey]++
			}
			seq := c.seq
			picked, tats = append(picked, &seq), append(tats, tat)
			rooms[c.proc]--
			limit--
		}
		more := false // a process may have candidates beyond those read
		for p, n := range want {
			more = more || (got[p] == n && rooms[p] > 0)
		}
		if !more {
			break
		}
	}
	if len(picked) > 0 {
		rows, err := w.tx.Query(w.ctx, q.flowClaim, node, req.LeaseUntil.UnixNano(), now, picked, tats)
		if err != nil {
			return time.Time{}, err
		}
		res.Runs = slices.Grow(res.Runs, len(picked))
		for rows.Next() {
			if res.Runs, err = appendClaimed(res.Runs, rows, req); err != nil {
				rows.Close()
				return time.Time{}, err
			}
			w.moved(store.StatusIdle, store.StatusRunning)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return time.Time{}, err
		}
	}
	if len(waiting) == 0 || len(res.Runs) >= req.Limit {
		return time.Time{}, nil
	}
	names, ats := make([]string, 0, len(waiting)), make([]int64, 0, len(waiting))
	for key, at := range waiting {
		names, ats = append(names, key), append(ats, at.UnixNano())
	}
	var next *int64
	if err := w.tx.QueryRow(w.ctx, q.flowWaiting, names, ats, procs).Scan(&next); err != nil {
		return time.Time{}, err
	}
	return fromNS(next), nil
}

// lockKeys takes the locks of the limiting keys of cands that keys does
// not hold yet, then reads their states under the locks. With wait, it
// waits for each lock, in lock-key order; otherwise it only tries them,
// and marks the keys it could not lock as failed.
func (w *wtx) lockKeys(req *store.ClaimNextRequest, cands []candidate, keys *flowKeys, wait bool) error {
	names := map[int64][]string{} // lock id → "c" or "r", then the key
	var ids []int64
	concKeys, rateKeys := []string{}, []string{}
	need := func(kind, key string) {
		name := kind + key
		if keys.locked[name] || keys.failed[name] {
			return
		}
		id := w.s.flowLockID(kind, key)
		if slices.Contains(names[id], name) {
			return
		}
		if len(names[id]) == 0 {
			ids = append(ids, id)
		}
		names[id] = append(names[id], name)
		if kind == "c" {
			concKeys = append(concKeys, key)
		} else {
			rateKeys = append(rateKeys, key)
		}
	}
	for _, c := range cands {
		f := req.Flows[c.proc]
		if f.KeyConcurrency > 0 && c.concKey != "" {
			need("c", c.concKey)
		}
		if !f.Rate.Zero() && c.rateKey != "" {
			need("r", c.rateKey)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	q := &w.s.q
	b := &pgx.Batch{}
	if wait {
		b.Queue(q.lockKeys, ids)
	} else {
		b.Queue(q.tryLockKeys, ids).Query(func(rows pgx.Rows) error {
			var id int64
			_, err := pgx.ForEachRow(rows, []any{&id}, func() error {
				for _, name := range names[id] {
					keys.failed[name] = true
				}
				return nil
			})
			return err
		})
	}
	conc, tat := map[string]int{}, map[string]time.Time{}
	var k string
	var n int64
	b.Queue(q.flowConc, concKeys).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&k, &n}, func() error { conc[k] = int(n); return nil })
		return err
	})
	b.Queue(q.flowRates, req.Now.UnixNano(), rateKeys).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&k, &n}, func() error { tat[k] = time.Unix(0, n); return nil })
		return err
	})
	if err := w.tx.SendBatch(w.ctx, b).Close(); err != nil {
		return err
	}
	for _, key := range concKeys {
		if !keys.failed["c"+key] {
			keys.locked["c"+key], keys.conc[key] = true, conc[key]
		}
	}
	for _, key := range rateKeys {
		if !keys.failed["r"+key] {
			keys.locked["r"+key] = true
			if t, ok := tat[key]; ok {
				keys.tat[key] = t
			} else {
				delete(keys.tat, key)
			}
		}
	}
	return nil
}

// flowLockID is the advisory lock of a flow key: kind "c" for a
// concurrency key, "r" for a rate key.
func (s *Store) flowLockID(kind, key string) int64 {
	return lockID(s.opts.Schema, "flow\x00"+kind+"\x00"+key)
}
