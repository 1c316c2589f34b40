package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yella-go/yella/store"
)

// Run implements store.Store.
func (s *Store) Run(ctx context.Context, id string) (store.Run, error) {
	if err := s.readable(); err != nil {
		return store.Run{}, err
	}
	if !isText(id) {
		return store.Run{}, store.ErrNotFound
	}
	r, _, err := scanRun(s.pool.QueryRow(ctx, s.q.selRun, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, store.ErrNotFound
	}
	return r, err
}

// RunsByID implements store.Store: one statement, the runs found by
// their seqs in run_ids.
func (s *Store) RunsByID(ctx context.Context, ids []string) ([]store.Run, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return !isText(id) })
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.q.selRunsByID, ids)
	if err != nil {
		return nil, err
	}
	return collectRuns(rows)
}

// CountEnded implements store.Store.
func (s *Store) CountEnded(ctx context.Context, ids []string) (exist, final int, err error) {
	if err := s.readable(); err != nil {
		return 0, 0, err
	}
	ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return !isText(id) })
	if len(ids) == 0 {
		return 0, 0, nil
	}
	err = s.pool.QueryRow(ctx, s.q.countEnded, ids, finalStatuses).Scan(&exist, &final)
	return exist, final, err
}

// finalStatuses are the statuses that Status.Final reports.
var finalStatuses = func() []string {
	var out []string
	for _, st := range store.Statuses {
		if st.Final() {
			out = append(out, string(st))
		}
	}
	return out
}()

// where builds the WHERE clause of a filter, with placeholders only: no
// input is ever spliced into SQL.
func where(schema string, f *store.RunFilter, statuses []store.Status) (string, []any) {
	var conds []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.Process != "" {
		conds = append(conds, "process = "+arg(f.Process))
	}
	if f.Event != "" {
		conds = append(conds, "event = "+arg(f.Event))
	}
	if len(statuses) > 0 {
		ss := make([]string, len(statuses))
		for i, st := range statuses {
			ss[i] = string(st)
		}
		conds = append(conds, "status = ANY("+arg(ss)+")")
	}
	if f.RootOnly {
		conds = append(conds, "parent_id IS NULL")
	}
	if f.CorrelationID != "" {
		// A root's correlation id is stored as NULL (see chainSeqs).
		p := arg(f.CorrelationID)
		conds = append(conds, "seq IN ("+chainSeqs(schema+".", p)+")")
	}
	if f.After > 0 {
		op := " < "
		if f.Order == store.OldestFirst {
			op = " > "
		}
		conds = append(conds, "seq"+op+arg(f.After))
	}
	if len(conds) == 0 {
		return "", args
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// Runs implements store.Store.
func (s *Store) Runs(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	if f.Limit <= 0 || !textFilter(f) {
		return nil, nil
	}
	w, args := where(s.q.schema, &f, store.UniqueStatuses(f.Statuses))
	order := " ORDER BY seq DESC"
	if f.Order == store.OldestFirst {
		order = " ORDER BY seq"
	}
	args = append(args, f.Limit)
	rows, err := s.pool.Query(ctx, "SELECT "+s.q.runCols+" FROM "+s.q.schema+".runs"+w+order+" LIMIT $"+strconv.Itoa(len(args)), args...)
	if err != nil {
		return nil, err
	}
	return collectRuns(rows)
}

func collectRuns(rows pgx.Rows) ([]store.Run, error) {
	defer rows.Close()
	var out []store.Run
	for rows.Next() {
		r, _, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// textFilter reports whether f's strings are text (isText): one that is
// not matches no run.
func textFilter(f store.RunFilter) bool {
	return isText(f.Process) && isText(f.Event) && isText(f.CorrelationID)
}

// CountRuns implements store.Store.
func (s *Store) CountRuns(ctx context.Context, f store.RunFilter) (int64, error) {
	if err := s.readable(); err != nil {
		return 0, err
	}
	if !textFilter(f) {
		return 0, nil
	}
	f.After = 0
	w, args := where(s.q.schema, &f, store.UniqueStatuses(f.Statuses))
	var n int64
	err := s.pool.QueryRow(ctx, "SELECT count(*) FROM "+s.q.schema+".runs"+w, args...).Scan(&n)
	return n, err
}

// Chain implements store.Store.
func (s *Store) Chain(ctx context.Context, correlationID string) ([]store.Run, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	if !isText(correlationID) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.q.selChain, correlationID)
	if err != nil {
		return nil, err
	}
	return collectRuns(rows)
}

// Timeline implements store.Store. Some entries are implicit (see the
// timeline table): admission; the running entry of the attempt in
// progress; and both entries of a first attempt that completed the run
// (a completed run whose tl says three entries and that has no row), with
// the run's completion time, error fields and the completion's note.
func (s *Store) Timeline(ctx context.Context, runID string) ([]store.TimelineEntry, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	var seq, created int64
	var started, completed *int64
	var status, errMsg, code string
	var attempts, tl int
	if !isText(runID) {
		return nil, store.ErrNotFound
	}
	err := s.pool.QueryRow(ctx, s.q.selRunTL, runID).Scan(&seq, &status, &attempts, &created, &started, &completed, &errMsg, &code, &tl)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.selTimeline, seq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []store.TimelineEntry{{N: 1, At: time.Unix(0, created), Status: store.StatusIdle, Note: "admitted"}}
	for rows.Next() {
		var e store.TimelineEntry
		var at int64
		var st string
		if err := rows.Scan(&e.N, &at, &st, &e.Attempt, &e.Error, &e.Code, &e.Note); err != nil {
			return nil, err
		}
		e.At, e.Status = time.Unix(0, at), store.Status(st)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	switch st := store.Status(status); {
	case st == store.StatusRunning && started != nil:
		out = append(out, store.TimelineEntry{N: tl + 1, At: time.Unix(0, *started), Status: store.StatusRunning, Attempt: attempts, Note: "claimed"})
	case st == store.StatusCompleted && tl == 3 && len(out) == 1 && started != nil && completed != nil:
		out = append(out,
			store.TimelineEntry{N: 2, At: time.Unix(0, *started), Status: store.StatusRunning, Attempt: attempts, Note: "claimed"},
			store.TimelineEntry{N: 3, At: time.Unix(0, *completed), Status: store.StatusCompleted, Attempt: attempts, Error: errMsg, Code: code, Note: implicitNote})
	}
	return out, nil
}

// Effects implements store.Store.
func (s *Store) Effects(ctx context.Context, runID string) ([]store.Effect, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	if !isText(runID) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.q.selEffects, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Effect
	for rows.Next() {
		e := store.Effect{RunID: runID}
		var st string
		var started int64
		var completed *int64
		if err := rows.Scan(&e.Key, &st, &e.Epoch, (*[]byte)(&e.Output), &e.Error, &started, &completed); err != nil {
			return nil, err
		}
		e.Status, e.StartedAt, e.CompletedAt = store.EffectStatus(st), time.Unix(0, started), fromNS(completed)
		out = append(out, e)
	}
	return out, rows.Err()
}

// Pending implements store.Store.
func (s *Store) Pending(ctx context.Context, after int64, limit int) ([]store.Pending, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.selPending, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]store.Pending, 0, min(limit, 4096))
	for rows.Next() {
		var p store.Pending
		var retry *int64
		var created int64
		if err := rows.Scan(&p.ID, &p.Seq, &p.Process, &p.CorrelationID, &retry, &created, &p.Priority, &p.RateKey, &p.ConcurrencyKey, &p.Waiting); err != nil {
			return nil, err
		}
		p.RetryAt, p.CreatedAt = fromNS(retry), time.Unix(0, created)
		out = append(out, p)
	}
	return out, rows.Err()
}

// Counts implements store.Store: the sum of the writers' shards of
// deltas, so reading them scans no run.
func (s *Store) Counts(ctx context.Context) (map[store.Status]int64, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	out := make(map[store.Status]int64, len(store.Statuses))
	for _, st := range store.Statuses {
		out[st] = 0
	}
	rows, err := s.pool.Query(ctx, s.q.selCounts)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[store.Status(st)] = n
	}
	return out, rows.Err()
}

// Abandoned implements store.Store: running runs held by a node whose
// heartbeat is older than Options.NodeTimeout on the database's clock,
// whatever their leases say, and running runs whose lease expired at now
// that self holds or that no node holds. A lease a live node holds is not
// judged on the caller's clock: its node's heartbeat vouches for it.
func (s *Store) Abandoned(ctx context.Context, self string, now time.Time, limit int) ([]store.Run, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.selAbandoned, self, now.UnixNano(), limit, s.opts.NodeTimeout.Seconds())
	if err != nil {
		return nil, err
	}
	return collectRuns(rows)
}

// Rollups implements store.Store.
func (s *Store) Rollups(ctx context.Context, from, to time.Time) ([]store.Rollup, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.selRollups, from.UnixNano(), to.UnixNano())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Rollup
	for rows.Next() {
		r, err := scanRollup(rows)
		if err != nil {
			return nil, err
		}
		if n := len(out); n > 0 && out[n-1].Bucket.Equal(r.Bucket) && out[n-1].Process == r.Process {
			last := &out[n-1]
			for k, v := range r.Counts {
				last.Counts[k] += v
			}
			for k, v := range r.Hists {
				last.Hists[k] = append(last.Hists[k], v...)
			}
			continue
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Errors implements store.Store.
func (s *Store) Errors(ctx context.Context, from, to time.Time, limit int) ([]store.ErrorRecord, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.selErrors, from.UnixNano(), to.UnixNano(), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.ErrorRecord
	for rows.Next() {
		var e store.ErrorRecord
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.Kind, &e.Process, &e.RunID, &e.EffectKey, &e.Context, &e.Message); err != nil {
			return nil, err
		}
		e.At = time.Unix(0, at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// AddRollups implements store.Store.
func (s *Store) AddRollups(ctx context.Context, rs []store.Rollup) error {
	if len(rs) == 0 {
		return s.readable()
	}
	cols, err := rollupColumns(rs)
	if err != nil {
		return err
	}
	return s.run(ctx, func(w *wtx) error {
		_, err := w.tx.Exec(w.ctx, s.q.insRollup, cols...)
		return err
	})
}

// rollupColumns encodes rollups as the insert's arrays: buckets,
// processes, counts and histograms.
func rollupColumns(rs []store.Rollup) ([]any, error) {
	buckets, procs := make([]int64, len(rs)), make([]string, len(rs))
	counts, hists := make([][]byte, len(rs)), make([][]byte, len(rs))
	for i, r := range rs {
		c, err := json.Marshal(r.Counts)
		if err != nil {
			return nil, err
		}
		buckets[i], procs[i], counts[i] = r.Bucket.UnixNano(), r.Process, c
		if len(r.Hists) > 0 {
			if hists[i], err = json.Marshal(r.Hists); err != nil {
				return nil, err
			}
		}
	}
	return []any{buckets, procs, counts, hists}, nil
}

// scanRollup reads one stored rollup row: bucket, process, counts,
// histograms.
func scanRollup(row pgx.Row) (store.Rollup, error) {
	var bucket int64
	var process string
	var counts, hists []byte
	if err := row.Scan(&bucket, &process, &counts, &hists); err != nil {
		return store.Rollup{}, err
	}
	r := store.Rollup{Bucket: time.Unix(0, bucket), Process: process, Counts: map[string]int64{}, Hists: map[string][][]byte{}}
	if err := json.Unmarshal(counts, &r.Counts); err != nil {
		return r, err
	}
	if len(hists) > 0 {
		if err := json.Unmarshal(hists, &r.Hists); err != nil {
			return r, err
		}
	}
	return r, nil
}

// CompactRollups merges, in one transaction, the rows of up to limit
// (process, bucket) groups before before: nodes each add a row per bucket,
// and a compacted bucket costs one row and one index entry (see
// store.RollupCompactor).
func (s *Store) CompactRollups(ctx context.Context, before time.Time, limit int, merge func([]store.Rollup) (store.Rollup, error)) (int, error) {
	var groups int
	err := s.run(ctx, func(w *wtx) error {
		groups = 0
		rows, err := w.tx.Query(w.ctx, s.q.compactRollups, before.UnixNano(), limit)
		if err != nil {
			return err
		}
		type group struct {
			bucket  int64
			process string
		}
		taken := map[group][]store.Rollup{}
		var order []group
		for rows.Next() {
			r, err := scanRollup(rows)
			if err != nil {
				rows.Close()
				return err
			}
			g := group{r.Bucket.UnixNano(), r.Process}
			if taken[g] == nil {
				order = append(order, g)
			}
			taken[g] = append(taken[g], r)
		}
		if rows.Close(); rows.Err() != nil {
			return rows.Err()
		}
		merged := make([]store.Rollup, 0, len(order))
		for _, g := range order {
			m, err := merge(taken[g])
			if err != nil {
				return err
			}
			merged = append(merged, m)
		}
		if len(merged) == 0 {
			return nil
		}
		cols, err := rollupColumns(merged)
		if err != nil {
			return err
		}
		if _, err := w.tx.Exec(w.ctx, s.q.insRollup, cols...); err != nil {
			return err
		}
		groups = len(merged)
		return nil
	})
	return groups, err
}

// AddErrors implements store.Store.
func (s *Store) AddErrors(ctx context.Context, es []store.ErrorRecord) error {
	if len(es) == 0 {
		return s.readable()
	}
	n := len(es)
	ats := make([]int64, n)
	kinds, procs, runs, keys, ctxs, msgs := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, e := range es {
		ats[i], kinds[i], procs[i], runs[i], keys[i], ctxs[i], msgs[i] = e.At.UnixNano(), e.Kind, e.Process, e.RunID, e.EffectKey, pgText(e.Context), pgText(e.Message)
	}
	return s.run(ctx, func(w *wtx) error {
		_, err := w.tx.Exec(w.ctx, s.q.insError, ats, kinds, procs, runs, keys, ctxs, msgs)
		return err
	})
}

// Prune implements store.Store. One call is one transaction of at most
// p.Limit runs (and ten times as many expired kept signals, rollups and
// error records), so retention never holds a writer for long.
func (s *Store) Prune(ctx context.Context, p store.PruneRequest) (int, error) {
	var n int
	err := s.run(ctx, func(w *wtx) error {
		n = 0
		if !p.CompletedBefore.IsZero() && p.Limit > 0 {
			victims, err := s.pruneWindow(w, p.CompletedBefore.UnixNano(), p.Limit)
			if err != nil {
				return err
			}
			if len(victims) > 0 {
				tag, err := w.tx.Exec(w.ctx, s.q.prune, p.CompletedBefore.UnixNano(), victims)
				if err != nil {
					return err
				}
				n = int(tag.RowsAffected())
				w.counts[store.StatusCompleted] -= int64(n)
			}
		}
		if !p.SignalsBefore.IsZero() {
			if _, err := w.tx.Exec(w.ctx, s.q.pruneSignals, p.SignalsBefore.UnixNano(), 10*p.Limit); err != nil {
				return err
			}
		}
		if !p.ObservabilityBefore.IsZero() {
			cut := p.ObservabilityBefore.UnixNano()
			if _, err := w.tx.Exec(w.ctx, s.q.pruneRollups, cut, 10*p.Limit); err != nil {
				return err
			}
			if _, err := w.tx.Exec(w.ctx, s.q.pruneErrors, cut, 10*p.Limit); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// pruneWindow reads retention's next window (store.PruneWindow) from
// where this node's last call stopped, and returns the seqs of at most
// limit runs to prune. Each node keeps its own place; two nodes that pick
// the same run skip each other's locks (prune).
func (s *Store) pruneWindow(w *wtx, cut int64, limit int) ([]int64, error) {
	from := s.pruneFrom.Load()
	pw := store.NewPruneWindow(from, limit)
	rows, err := w.tx.Query(w.ctx, s.q.pruneScan, cut, from, pw.Rows())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var victims []int64
	for rows.Next() {
		var seq int64
		var young, prune bool
		if err := rows.Scan(&seq, &young, &prune); err != nil {
			return nil, err
		}
		take, more := pw.Add(seq, young, prune)
		if take {
			victims = append(victims, seq)
		}
		if !more {
			break
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	s.pruneFrom.Store(pw.Next())
	return victims, nil
}

// PruneKeys implements store.Store: one transaction of at most limit keys.
func (s *Store) PruneKeys(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.run(ctx, func(w *wtx) error {
		tag, err := w.tx.Exec(w.ctx, s.q.pruneKeys, before.UnixNano(), limit)
		n = tag.RowsAffected()
		return err
	})
	return int(n), err
}

// RateStates implements store.Store: per rate key, the largest
// theoretical arrival time its runs' claims kept (rate_tat) that is after
// now (runs_rate_tat holds only runs claimed under a rate key).
func (s *Store) RateStates(ctx context.Context, now time.Time) (map[string]time.Time, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.selRates, now.UnixNano())
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	var k string
	var tat int64
	_, err = pgx.ForEachRow(rows, []any{&k, &tat}, func() error { out[k] = time.Unix(0, tat); return nil })
	return out, err
}
