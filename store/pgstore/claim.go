package pgstore

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yella-go/yella/store"
)

// ClaimNext implements store.Shared: the due idle runs in rank order,
// claimed with FOR UPDATE SKIP LOCKED so that nodes claiming at once
// never wait on each other's rows. A process with a running cap is
// claimed under its claim lock (a transaction-scoped advisory lock of its
// own), after counting its running runs across every node, so the cap is
// exact: a node claiming the same process waits for the lock and then
// counts the runs this one claimed. A process with flow limits is claimed
// under the locks of its runs' keys in the same way (claimFlows).
// Processes with neither take no lock: their claim is sent in one
// pipeline with the batch's attempt ends (see tryBatch).
//
// Waiting runs whose deadline has passed are claimable too: each claim
// first makes up to its limit of them idle (promoteDue), in its first
// round trip, and then claims them with the idle runs, in rank order;
// those it made idle and did not claim are left idle (More). The same
// statement reads the earliest deadline to come, a NextAt like a delayed
// run's. A wait past its deadline that another transaction holds (one
// claiming it, or ending its wait) is left to that transaction; the
// engine's poll bounds the cost of the rare one left behind by a
// rollback.
//
// The store remembers the runs it claimed (heldRuns) for their ends.
func (s *Store) ClaimNext(ctx context.Context, req store.ClaimNextRequest) (store.ClaimNextResult, error) {
	node, err := s.ownerNum(ctx, req.Owner)
	if err != nil {
		return store.ClaimNextResult{}, err
	}
	res, err := s.claimNext(ctx, req, node)
	if err == nil {
		s.held.remember(res.Runs)
	}
	return res, err
}

// claimNext is ClaimNext for the owner numbered node (ownerNum).
func (s *Store) claimNext(ctx context.Context, req store.ClaimNextRequest, node int32) (store.ClaimNextResult, error) {
	var all, free, capped, flowed []string
	for p, c := range req.Processes {
		all = append(all, p)
		if c > 0 {
			capped = append(capped, p)
		}
		if limited(req.Flows[p]) {
			flowed = append(flowed, p)
		} else if c <= 0 {
			free = append(free, p)
		}
	}
	sort.Strings(capped)
	sort.Strings(flowed)
	if len(all) > 0 && len(capped) == 0 && len(flowed) == 0 && req.Limit > 0 {
		c := &claimCmd{req: req, node: node, all: all}
		err := s.do(ctx, &cmd{claim: c})
		return c.res, err
	}
	var res store.ClaimNextResult
	err := s.runLocked(ctx, s.claimLocks(capped), func(w *wtx) error {
		req.Limit = limitNow(&req)
		res = store.ClaimNextResult{Limit: req.Limit}
		if len(all) == 0 {
			return nil
		}
		claim := func(procs []string, n int) error {
			b := &pgx.Batch{}
			w.queueClaim(b, &req, node, procs, n, &res)
			return w.tx.SendBatch(w.ctx, b).Close()
		}
		var flowNext time.Time
		var waitNext *int64
		if req.Limit > 0 {
			b := &pgx.Batch{}
			w.queuePromote(b, &req, all, &waitNext)
			running := map[string]int{}
			if len(capped) > 0 {
				s.queueLockRunning(b, capped, running)
			}
			if err := w.tx.SendBatch(w.ctx, b).Close(); err != nil {
				return err
			}
			for _, p := range capped {
				room := min(req.Processes[p]-running[p], req.Limit-len(res.Runs))
				if room > 0 && !limited(req.Flows[p]) {
					if err := claim([]string{p}, room); err != nil {
						return err
					}
				}
			}
			if len(flowed) > 0 && req.Limit > len(res.Runs) {
				rooms := make(map[string]int, len(flowed))
				for _, p := range flowed {
					rooms[p] = req.Limit // no cap: the limit bounds it
					if c := req.Processes[p]; c > 0 {
						rooms[p] = max(c-running[p], 0)
					}
				}
				var err error
				if flowNext, err = w.claimFlows(&req, node, flowed, rooms, &res); err != nil {
					return err
				}
			}
		}
		if n := req.Limit - len(res.Runs); len(free) > 0 && n > 0 {
			if err := claim(free, n); err != nil {
				return err
			}
		}
		if err := w.claimed(&req, all, &res, waitNext); err != nil {
			return err
		}
		if !flowNext.IsZero() && len(res.Runs) < req.Limit && (res.NextAt.IsZero() || flowNext.Before(res.NextAt)) {
			res.NextAt = flowNext
		}
		return nil
	})
	return res, err
}

// limitNow is the bound of a claim as it runs: req.Limit, or the
// caller's free slots now (req.Room) when fewer. A claim runs when its
// batch is built, after the transaction before it: its caller's slots
// may have freed meanwhile.
func limitNow(req *store.ClaimNextRequest) int {
	if req.Room == nil {
		return req.Limit
	}
	return max(min(req.Limit, req.Room()), 0)
}

// claimCmd is a claim of uncapped processes only: queued in its batch's
// pipeline.
type claimCmd struct {
	req      store.ClaimNextRequest
	node     int32    // the number of req.Owner (ownerNum)
	all      []string // the processes
	res      store.ClaimNextResult
	waitNext *int64 // the earliest deadline of a wait after req.Now
}

// queueClaimCmd queues c's claim in b; the function returned completes
// its result once b is sent.
func (w *wtx) queueClaimCmd(b *pgx.Batch, c *claimCmd) func() error {
	c.req.Limit = limitNow(&c.req)
	c.res = store.ClaimNextResult{Limit: c.req.Limit}
	c.waitNext = nil
	w.queuePromote(b, &c.req, c.all, &c.waitNext)
	w.queueClaim(b, &c.req, c.node, c.all, c.req.Limit, &c.res)
	return func() error { return w.claimed(&c.req, c.all, &c.res, c.waitNext) }
}

// queuePromote queues in b the promotion of up to req.Limit waiting runs
// of procs whose deadline has passed at req.Now to idle runs due now
// (promoteDue, which counts them), which the claims queued after it see;
// next is set to the earliest deadline after req.Now of the others (nil:
// none). It wakes no node: the claim that made them idle claims them, or
// reports them left (More).
func (w *wtx) queuePromote(b *pgx.Batch, req *store.ClaimNextRequest, procs []string, next **int64) {
	b.Queue(w.s.q.promoteDue, req.Now.UnixNano(), procs, req.Limit, w.shard).QueryRow(func(row pgx.Row) error {
		var n int64
		return row.Scan(&n, next)
	})
}

// promoted counts n waiting runs made idle by a claim of runs by id. It
// wakes no node: the claim that made them idle claims them.
func (w *wtx) promoted(n int64) {
	if n > 0 {
		w.counts[store.StatusWaiting] -= n
		w.counts[store.StatusIdle] += n
	}
}

// claimRoom is how many runs' room a claim's result is given before its
// rows are read (queueClaim).
const claimRoom = 128

// queueClaim queues in b the claim of up to n runs of procs, appended to
// res once b is sent: the plan settings, the claim (claimNext, which
// counts them), the settings back to the session's.
func (w *wtx) queueClaim(b *pgx.Batch, req *store.ClaimNextRequest, node int32, procs []string, n int, res *store.ClaimNextResult) {
	for _, set := range claimPlan {
		b.Queue(set)
	}
	b.Queue(w.s.q.claimNext, node, req.LeaseUntil.UnixNano(), req.Now.UnixNano(), procs, n, w.shard).Query(func(rows pgx.Rows) error {
		// Room for the runs a claim usually returns, so the slice is not
		// copied as it grows; not for n itself, which a large fleet makes
		// far larger than the idle runs there are.
		res.Runs = slices.Grow(res.Runs, min(n, claimRoom))
		for rows.Next() {
			var err error
			if res.Runs, err = appendClaimed(res.Runs, rows, req); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	for _, reset := range claimPlanReset {
		b.Queue(reset)
	}
}

// claimed completes a claim's result: its runs in claim order, and
// whether runs are left (a full claim may leave some: the caller claims
// again) or when the next delayed one, or the next wait's deadline
// (waitNext, as its promotion read it), is due.
func (w *wtx) claimed(req *store.ClaimNextRequest, all []string, res *store.ClaimNextResult, waitNext *int64) error {
	sort.Slice(res.Runs, func(i, j int) bool {
		a, b := &res.Runs[i], &res.Runs[j]
		if ra, rb := store.Rank(a.CreatedAt, a.Priority), store.Rank(b.CreatedAt, b.Priority); ra != rb {
			return ra < rb
		}
		return a.Seq < b.Seq
	})
	if len(res.Runs) == req.Limit {
		res.More = true
		return nil
	}
	var next *int64
	if err := w.tx.QueryRow(w.ctx, w.s.q.claimMore, all, req.Now.UnixNano()).Scan(&res.More, &next); err != nil {
		if !w.committed {
			return err
		}
		// Read after the claim committed: its runs are claimed, and
		// reporting runs left makes the caller claim again, which finds
		// whether there are.
		res.More = true
		return nil
	}
	if next == nil || waitNext != nil && *waitNext < *next {
		next = waitNext
	}
	res.NextAt = fromNS(next)
	return nil
}

// claimPlan are the settings a claim is planned and run under (see
// queries.claimNext), besides its transaction's writerPlan, and
// claimPlanReset what puts them back: RESET returns to the session's
// default, which the store never changes.
var (
	claimPlan      = []string{"SET LOCAL enable_sort = off"}
	claimPlanReset = []string{"RESET enable_sort"}
)

// claimLocks are the claim locks of the capped processes procs, in
// lock-key order (nil for none).
func (s *Store) claimLocks(procs []string) []int64 {
	var keys []int64
	for _, p := range procs {
		keys = append(keys, lockID(s.opts.Schema, "claim\x00"+p))
	}
	slices.Sort(keys)
	return keys
}

// queueLockRunning queues in b the claim locks of the capped processes,
// taken in lock-key order (claimLocks), and the count of their running
// runs under them, into running.
func (s *Store) queueLockRunning(b *pgx.Batch, procs []string, running map[string]int) {
	b.Queue(s.q.lockKeys, s.claimLocks(procs))
	b.Queue(s.q.runningCounts, procs).Query(func(rows pgx.Rows) error {
		var p string
		var n int
		_, err := pgx.ForEachRow(rows, []any{&p, &n}, func() error { running[p] = n; return nil })
		return err
	})
}
