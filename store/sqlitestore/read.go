package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/yella-go/yella/store"
)

// Run implements store.Store.
func (s *Store) Run(ctx context.Context, id string) (store.Run, error) {
	if err := s.readable(); err != nil {
		return store.Run{}, err
	}
	r, _, err := scanRun(s.st.selRun.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, store.ErrNotFound
	}
	return r, err
}

// runsByIDChunk is how many ids one statement of RunsByID looks up.
const runsByIDChunk = 500

// RunsByID implements store.Store: one statement per runsByIDChunk ids,
// each run found through the id index.
func (s *Store) RunsByID(ctx context.Context, ids []string) ([]store.Run, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	var out []store.Run
	ids = slices.Compact(slices.Sorted(slices.Values(ids))) // each run once, whichever chunk names it
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), runsByIDChunk)]
		ids = ids[len(chunk):]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := s.rdb.QueryContext(ctx, "SELECT "+runCols+" FROM runs WHERE id IN (?"+strings.Repeat(", ?", len(chunk)-1)+")", args...)
		if err != nil {
			return nil, err
		}
		rs, err := collectRuns(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// CountEnded implements store.Store.
func (s *Store) CountEnded(ctx context.Context, ids []string) (exist, final int, err error) {
	if err := s.readable(); err != nil {
		return 0, 0, err
	}
	ids = slices.Compact(slices.Sorted(slices.Values(ids))) // each run once, whichever chunk names it
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), runsByIDChunk)]
		ids = ids[len(chunk):]
		args := make([]any, 0, len(finalStatuses)+len(chunk)) // in the statement's order
		for _, st := range finalStatuses {
			args = append(args, string(st))
		}
		for _, id := range chunk {
			args = append(args, id)
		}
		var e, f int
		q := "SELECT count(*), coalesce(sum(status IN (?" + strings.Repeat(", ?", len(finalStatuses)-1) + ")), 0) FROM runs WHERE id IN (?" + strings.Repeat(", ?", len(chunk)-1) + ")"
		if err := s.rdb.QueryRowContext(ctx, q, args...).Scan(&e, &f); err != nil {
			return 0, 0, err
		}
		exist, final = exist+e, final+f
	}
	return exist, final, nil
}

// finalStatuses are the statuses that Status.Final reports.
var finalStatuses = slices.DeleteFunc(slices.Clone(store.Statuses), func(st store.Status) bool { return !st.Final() })

// where builds the WHERE clause of a filter, with placeholders only: no
// input is ever spliced into SQL.
func where(f *store.RunFilter, statuses []store.Status) (string, []any) {
	var conds []string
	var args []any
	if f.Process != "" {
		conds, args = append(conds, "process = ?"), append(args, f.Process)
	}
	if f.Event != "" {
		conds, args = append(conds, "event = ?"), append(args, f.Event)
	}
	if len(statuses) > 0 {
		conds = append(conds, "status IN (?"+strings.Repeat(", ?", len(statuses)-1)+")")
		for _, st := range statuses {
			args = append(args, string(st))
		}
		if !slices.Contains(statuses, store.StatusCompleted) {
			conds = append(conds, inFlight) // lets the status index serve it
		}
	}
	if f.RootOnly {
		conds = append(conds, "parent_id IS NULL")
	}
	if f.CorrelationID != "" {
		// A root's correlation id is stored as NULL (see selChain).
		conds, args = append(conds, "(correlation_id = ? OR (id = ? AND correlation_id IS NULL))"), append(args, f.CorrelationID, f.CorrelationID)
	}
	if f.After > 0 {
		if f.Order == store.OldestFirst {
			conds = append(conds, "seq > ?")
		} else {
			conds = append(conds, "seq < ?")
		}
		args = append(args, f.After)
	}
	if len(conds) == 0 {
		return "", args
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// Runs implements store.Store. A filter on several statuses runs one
// indexed query per status, so a page never sorts every matching row, and
// merges them into one page of at most f.Limit runs: once the page is full,
// each further query asks only for runs that would enter it, and a row that
// would not ends that query's reading.
func (s *Store) Runs(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	statuses := store.UniqueStatuses(f.Statuses)
	if f.Limit <= 0 {
		return nil, nil
	}
	if len(statuses) <= 1 {
		return s.runsQuery(ctx, &f, statuses)
	}
	p := newPage(f.Order, f.Limit)
	for _, st := range statuses {
		if err := s.mergeQuery(ctx, &f, st, p); err != nil {
			return nil, err
		}
	}
	return p.runs, nil
}

// mergeQuery reads the runs of one status into p.
func (s *Store) mergeQuery(ctx context.Context, f *store.RunFilter, st store.Status, p *page) error {
	w, args := where(f, []store.Status{st})
	if p.full() {
		if f.Order == store.OldestFirst {
			w += " AND seq < ?"
		} else {
			w += " AND seq > ?"
		}
		args = append(args, p.worst())
	}
	rows, err := s.rdb.QueryContext(ctx, listSQL(f, []store.Status{st}, w), append(args, f.Limit)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		r, _, err := scanRun(rows)
		if err != nil {
			return err
		}
		if !p.offer(r) {
			break // the rest of this status comes later in the order
		}
	}
	return rows.Err()
}

// page keeps the first limit runs, in listing order, of runs offered from
// several streams each in that order. It never holds more than limit runs.
type page struct {
	oldestFirst bool
	runs        []store.Run
}

func newPage(o store.Order, limit int) *page {
	return &page{oldestFirst: o == store.OldestFirst, runs: make([]store.Run, 0, limit)}
}

func (p *page) full() bool { return len(p.runs) == cap(p.runs) }

// worst is the Seq of the last run of a full page.
func (p *page) worst() int64 { return p.runs[len(p.runs)-1].Seq }

// before reports whether seq a comes before seq b in the listing.
func (p *page) before(a, b int64) bool {
	if p.oldestFirst {
		return a < b
	}
	return a > b
}

// offer adds r if it belongs to the page, dropping the run it pushes out;
// false means it does not belong, and neither does anything after it in
// its stream.
func (p *page) offer(r store.Run) bool {
	if p.full() && !p.before(r.Seq, p.worst()) {
		return false
	}
	i := sort.Search(len(p.runs), func(i int) bool { return p.before(r.Seq, p.runs[i].Seq) })
	if !p.full() {
		p.runs = append(p.runs, store.Run{})
	}
	copy(p.runs[i+1:], p.runs[i:len(p.runs)-1])
	p.runs[i] = r
	return true
}

// listSQL is a listing's query: its WHERE clause w (from where), its index,
// its order, and the limit as the last argument.
func listSQL(f *store.RunFilter, statuses []store.Status, w string) string {
	return "SELECT " + runCols + " FROM runs" + indexFor(f, statuses) + w + orderBy(f) + " LIMIT ?"
}

// indexFor picks the index of a listing, so the plan does not depend on
// statistics: a status other than completed is rare, and otherwise the
// table is read in seq order, the listing's own, where recent runs are
// mostly completed; a process or event filter is tested on the rows read
// (no index on either: an admission would write it for listings alone).
func indexFor(f *store.RunFilter, statuses []store.Status) string {
	switch {
	case f.CorrelationID != "":
		return ""
	case len(statuses) == 1 && statuses[0] != store.StatusCompleted:
		return " INDEXED BY runs_status"
	case f.Process != "" || f.Event != "":
		return " NOT INDEXED"
	}
	return ""
}

func (s *Store) runsQuery(ctx context.Context, f *store.RunFilter, statuses []store.Status) ([]store.Run, error) {
	w, args := where(f, statuses)
	rows, err := s.rdb.QueryContext(ctx, listSQL(f, statuses, w), append(args, f.Limit)...)
	if err != nil {
		return nil, err
	}
	return collectRuns(rows)
}

func orderBy(f *store.RunFilter) string {
	if f.Order == store.OldestFirst {
		return " ORDER BY seq"
	}
	return " ORDER BY seq DESC"
}

func collectRuns(rows *sql.Rows) ([]store.Run, error) {
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

// CountRuns implements store.Store.
func (s *Store) CountRuns(ctx context.Context, f store.RunFilter) (int64, error) {
	if err := s.readable(); err != nil {
		return 0, err
	}
	f.After = 0
	w, args := where(&f, store.UniqueStatuses(f.Statuses))
	var n int64
	err := s.rdb.QueryRowContext(ctx, "SELECT count(*) FROM runs"+w, args...).Scan(&n)
	return n, err
}

// Chain implements store.Store.
func (s *Store) Chain(ctx context.Context, correlationID string) ([]store.Run, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	rows, err := s.st.selChain.QueryContext(ctx, correlationID)
	if err != nil {
		return nil, err
	}
	return collectRuns(rows)
}

func (s *Store) seqOf(ctx context.Context, runID string) (int64, error) {
	var seq int64
	err := s.rdb.QueryRowContext(ctx, "SELECT seq FROM runs WHERE id = ?", runID).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, store.ErrNotFound
	}
	return seq, err
}

// Timeline implements store.Store. Two entries are implicit (see the
// timeline table): admission, and the running entry of the attempt in
// progress.
func (s *Store) Timeline(ctx context.Context, runID string) ([]store.TimelineEntry, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	var seq, created int64
	var started, completed sql.NullInt64
	var status, errMsg, code string
	var attempts, tl int
	err := s.st.selRunTL.QueryRowContext(ctx, runID).Scan(&seq, &status, &attempts, &created, &started, &completed, &errMsg, &code, &tl)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	rows, err := s.st.selTimeline.QueryContext(ctx, seq)
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
	// The implicit entries (see implicitEnd): the running entry of the
	// attempt in progress, and both entries of a first attempt that
	// completed the run.
	switch st := store.Status(status); {
	case st == store.StatusRunning && started.Valid:
		out = append(out, store.TimelineEntry{N: tl + 1, At: time.Unix(0, started.Int64), Status: store.StatusRunning, Attempt: attempts, Note: "claimed"})
	case st == store.StatusCompleted && tl == 3 && len(out) == 1 && started.Valid && completed.Valid:
		out = append(out,
			store.TimelineEntry{N: 2, At: time.Unix(0, started.Int64), Status: store.StatusRunning, Attempt: attempts, Note: "claimed"},
			store.TimelineEntry{N: 3, At: time.Unix(0, completed.Int64), Status: store.StatusCompleted, Attempt: attempts, Error: errMsg, Code: code, Note: implicitNote})
	}
	return out, nil
}

// Effects implements store.Store.
func (s *Store) Effects(ctx context.Context, runID string) ([]store.Effect, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	seq, err := s.seqOf(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rows, err := s.st.selEffects.QueryContext(ctx, seq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Effect
	for rows.Next() {
		e := store.Effect{RunID: runID}
		var st string
		var started int64
		var completed sql.NullInt64
		if err := rows.Scan(&e.Key, &st, &e.Epoch, (*[]byte)(&e.Output), &e.Error, &started, &completed); err != nil {
			return nil, err
		}
		e.Status, e.StartedAt, e.CompletedAt = store.EffectStatus(st), time.Unix(0, started), fromNull(completed)
		out = append(out, e)
	}
	return out, rows.Err()
}

// Pending implements store.Store.
func (s *Store) Pending(ctx context.Context, after int64, limit int) ([]store.Pending, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	rows, err := s.st.selPending.QueryContext(ctx, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]store.Pending, 0, min(limit, 4096))
	// Each row is scanned in place, into variables declared once: a
	// variable scanned into escapes, so one declared per row would cost an
	// allocation per row each.
	var retry sql.NullInt64
	var created int64
	var rateKey, concKey sql.NullString
	for rows.Next() {
		out = append(out, store.Pending{})
		p := &out[len(out)-1]
		if err := rows.Scan(&p.ID, &p.Seq, &p.Process, &p.CorrelationID, &retry, &created, &p.Priority, &rateKey, &concKey, &p.Waiting); err != nil {
			return nil, err
		}
		p.RetryAt, p.CreatedAt = fromNull(retry), time.Unix(0, created)
		p.RateKey, p.ConcurrencyKey = rateKey.String, concKey.String
	}
	return out, rows.Err()
}

// RateStates implements store.Store.
func (s *Store) RateStates(ctx context.Context, now time.Time) (map[string]time.Time, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	rows, err := s.st.selRates.QueryContext(ctx, now.UnixNano())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var k string
		var tat int64
		if err := rows.Scan(&k, &tat); err != nil {
			return nil, err
		}
		out[k] = time.Unix(0, tat)
	}
	return out, rows.Err()
}

// Counts implements store.Store. The writer keeps them in memory, so this
// costs no query.
func (s *Store) Counts(ctx context.Context) (map[store.Status]int64, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[store.Status]int64, len(store.Statuses))
	for _, st := range store.Statuses {
		out[st] = s.counts[st]
	}
	return out, nil
}

// Abandoned implements store.Store: running runs whose lease expired, or
// whose owner was not seen by this process, which holds the database's
// exclusive lock, so that owner is dead.
func (s *Store) Abandoned(ctx context.Context, self string, now time.Time, limit int) ([]store.Run, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	rows, err := s.st.selRunning.QueryContext(ctx)
	if err != nil {
		return nil, err
	}
	running, err := collectRuns(rows)
	if err != nil {
		return nil, err
	}
	var out []store.Run
	for _, r := range running {
		if len(out) == limit {
			break
		}
		if !r.LeaseExpires.After(now) || (r.LeaseOwner != self && !s.ownerAlive(r.LeaseOwner)) {
			out = append(out, r)
		}
	}
	return out, nil
}

// Rollups implements store.Store.
func (s *Store) Rollups(ctx context.Context, from, to time.Time) ([]store.Rollup, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, "SELECT bucket, process, counts, hists FROM rollups WHERE bucket >= ? AND bucket < ? ORDER BY bucket, process, id",
		from.UnixNano(), to.UnixNano())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Rollup
	for rows.Next() {
		var bucket int64
		var process string
		var counts, hists []byte
		if err := rows.Scan(&bucket, &process, &counts, &hists); err != nil {
			return nil, err
		}
		r := store.Rollup{Bucket: time.Unix(0, bucket), Process: process, Counts: map[string]int64{}, Hists: map[string][][]byte{}}
		if err := json.Unmarshal(counts, &r.Counts); err != nil {
			return nil, err
		}
		if len(hists) > 0 {
			if err := json.Unmarshal(hists, &r.Hists); err != nil {
				return nil, err
			}
		}
		if n := len(out); n > 0 && out[n-1].Bucket.Equal(r.Bucket) && out[n-1].Process == process {
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
	rows, err := s.rdb.QueryContext(ctx, `SELECT id, at, kind, process, run_id, effect_key, context, message FROM errors
		WHERE at >= ? AND at <= ? ORDER BY at DESC, id DESC LIMIT ?`, from.UnixNano(), to.UnixNano(), limit)
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
