package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/yella-go/yella/internal/commithook"
	"github.com/yella-go/yella/store"
)

// cmd is one write: fn runs inside the batch transaction; its error (a
// store sentinel such as ErrFenced, which must leave nothing written, or an
// SQL error) is returned to the caller once the batch has committed.
type cmd struct {
	fn   func(w *wtx) error
	err  error
	done chan struct{}
	// claim is set for a claim, which tryBatch may make together with the
	// batch's other claims (claimMerged) instead of running fn.
	claim *claimCmd
	// fin is set for an attempt end that tryBatch may make together with
	// the batch's other attempt ends (mergeFinishes) instead of running fn.
	fin *finishCmd
}

// wtx is the writer's view of one batch transaction: the connection's
// prepared statements and the in-memory bookkeeping the batch changes,
// applied to the store only if the batch commits.
type wtx struct {
	s       *Store
	ctx     context.Context
	dCounts map[store.Status]int64
	dActive map[string]int
	seq     int64 // the last run seq, including this batch's admissions
	merged  int   // claims made together (Stats.MergedClaims)
	ended   int   // attempt ends made together (Stats.MergedEnds)

	// While a batch admission (AdmitBatch) runs, deferring is set and the
	// runs its admissions admit wait in runs (insRun's values; runsOf
	// holds the index of each one's admission, admitting the current one)
	// for flushRuns, which inserts many per statement.
	deferring bool
	admitting int
	runs      [][]any
	runsOf    []int
}

// exec runs one of the writer's statements in the batch (Store.exec).
func (w *wtx) exec(st *sql.Stmt, args ...any) (sql.Result, error) {
	return w.s.exec(w.ctx, st, args...)
}

// activeSQL counts the idle and running runs of a process, read from the
// status index (there is no index on process: see migration 6).
const activeSQL = `SELECT count(*) FROM runs INDEXED BY runs_status WHERE status IN ('idle', 'running') AND ` + inFlight + ` AND process = ?`

// active is the number of idle or running runs of process, including this
// batch's changes. A process's count is read from the database the first
// time a capped admission needs it, then kept up to date in memory, so
// opening a large database costs no per-process scan.
func (w *wtx) active(process string) (int, error) {
	w.s.mu.Lock()
	n, known := w.s.active[process]
	w.s.mu.Unlock()
	if !known {
		// The query sees this batch's uncommitted changes, which dActive
		// holds too: subtract them to get the committed count.
		if err := w.flushRuns(); err != nil {
			return 0, err
		}
		var q int
		err := w.s.conn.QueryRowContext(w.ctx, activeSQL, process).Scan(&q)
		if err != nil {
			return 0, err
		}
		n = q - w.dActive[process]
		w.s.mu.Lock()
		w.s.active[process] = n
		w.s.mu.Unlock()
	}
	return n + w.dActive[process], nil
}

// moved records that a run of process went from one status to another
// ("" for a new or deleted run).
func (w *wtx) moved(process string, from, to store.Status) {
	if from != "" {
		w.dCounts[from]--
		if from.Active() {
			w.dActive[process]--
		}
	}
	if to != "" {
		w.dCounts[to]++
		if to.Active() {
			w.dActive[process]++
		}
	}
}

// do queues fn and waits for its batch to commit. Only the queueing
// respects ctx: once queued, a write completes, so that a caller that gives
// up never leaves a committed change it did not hear about.
func (s *Store) do(ctx context.Context, fn func(w *wtx) error) error {
	return s.submit(ctx, &cmd{fn: fn, done: make(chan struct{})})
}

// submit queues c and waits for its batch to commit (see do).
func (s *Store) submit(ctx context.Context, c *cmd) error {
	if err := s.enqueue(ctx, c); err != nil {
		return err
	}
	<-c.done
	return c.err
}

// enqueue queues c behind every command queued before it: the writer
// takes commands in order, and a batch commits whole, so c commits in the
// transaction of every command queued after it or in an earlier one.
func (s *Store) enqueue(ctx context.Context, c *cmd) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return store.ErrClosed
	}
	select {
	case s.cmds <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lingerRounds is how many rounds the writer takes queued commands before
// it commits a batch; it yields between rounds. With more than one P the
// callers queue their commands while the writer works, so it commits as
// soon as it has taken what is queued: a yield there only delays the
// batch (measured 4–6% less time a run without it on 2 cores). With one P
// the callers run only when the writer yields: without the yield every
// command committed alone, 3.5 times slower.
func lingerRounds() int {
	if runtime.GOMAXPROCS(0) == 1 {
		return 2
	}
	return 1
}

// writer owns the write connection. It takes every queued command (up to
// MaxBatch), runs them in one BEGIN IMMEDIATE transaction, commits once and
// only then answers the callers: group commit.
func (s *Store) writer() {
	defer close(s.writerDone)
	batch := make([]*cmd, 0, s.opts.MaxBatch)
	shrunk := time.Now()
	wal := walBound{limit: s.opts.WALLimit}
	rounds := lingerRounds()
	for c := range s.cmds {
		batch = append(batch[:0], c)
		for round := 0; round < rounds && len(batch) < s.opts.MaxBatch; round++ {
			if round > 0 {
				// Let the goroutines that are about to write queue their
				// commands: a bigger batch costs far less than another
				// transaction (each commit writes every dirty page).
				runtime.Gosched()
			}
		fill:
			for len(batch) < s.opts.MaxBatch {
				select {
				case c, ok := <-s.cmds:
					if !ok {
						break fill
					}
					batch = append(batch, c)
				default:
					break fill
				}
			}
		}
		s.runBatch(batch)
		// The slice is reused: without this, its slots would keep answered
		// commands, and what their closures hold (an admission's events,
		// a claim's runs), alive until overwritten.
		clear(batch)
		wal.check(s)
		if time.Since(shrunk) >= shrinkEvery {
			s.shrink()
			shrunk = time.Now()
		}
	}
}

// shrinkEvery is how often the writer hands its page cache's excess back.
var shrinkEvery = time.Minute

// shrink returns the writer connection's unused page-cache memory. Under
// the engine's write pattern the writer's cache grows past cache_size and
// keeps the extra pages (the exact trigger inside SQLite's pager is not
// pinned down): in a soak at 600 runs/s it went from 2.1 MB to 3.6 MB in
// 8 minutes and was still growing (sqlite3_db_status CACHE_USED), and the
// process's RSS with it. With a shrink every minute it stayed at 2.1–2.3
// MB. shrink_memory frees the clean pages; the cache refills from the OS
// page cache in about a millisecond. A failure is harmless (the memory
// stays where it was) and would show on the next real statement, so it is
// ignored here.
func (s *Store) shrink() {
	s.conn.ExecContext(context.Background(), "PRAGMA shrink_memory")
}

// walCheckEvery is how often the writer looks at the WAL file's size.
var walCheckEvery = 250 * time.Millisecond

// walTruncateWait is how long a TRUNCATE checkpoint waits for readers.
const walTruncateWait = time.Second

// walBound keeps the WAL file under Options.WALLimit (see there). It is
// the writer goroutine's own state.
type walBound struct {
	limit   int64 // 0: off
	checked time.Time
	next    time.Time     // no try before this, after a try readers blocked
	backoff time.Duration // the wait after the next blocked try
}

// check truncates the WAL when it has grown past the limit. A stat of the
// WAL file is harmless to SQLite's locks (it opens nothing).
func (b *walBound) check(s *Store) {
	now := time.Now()
	if b.limit == 0 || now.Sub(b.checked) < walCheckEvery || now.Before(b.next) {
		return
	}
	b.checked = now
	fi, err := os.Stat(s.path + "-wal")
	if err != nil || fi.Size() < b.limit {
		return
	}
	ctx := context.Background()
	var busy, frames, copied int
	_, err = s.conn.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.FormatInt(walTruncateWait.Milliseconds(), 10))
	if err == nil {
		err = s.conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &copied)
		s.conn.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.FormatInt(s.opts.BusyTimeout.Milliseconds(), 10))
	}
	if err == nil && busy == 0 {
		b.backoff = 0
		s.log.Debug("WAL truncated", "size", fi.Size(), "limit", b.limit, "took", time.Since(now))
		return
	}
	b.backoff = min(max(2*b.backoff, time.Second), 30*time.Second)
	b.next = time.Now().Add(b.backoff)
	s.log.Warn("the WAL is past its limit and readers keep using it; trying again later",
		"size", fi.Size(), "limit", b.limit, "retry_in", b.backoff, "err", err)
}

// runBatch commits a batch. If the transaction fails as a whole (an SQL
// error inside a command, or the commit itself, e.g. a full disk), it is
// rolled back and each command is retried in a transaction of its own, so
// one bad command cannot fail the others.
func (s *Store) runBatch(batch []*cmd) {
	if err := s.tryBatch(batch); err != nil {
		if len(batch) == 1 {
			batch[0].err = err
		} else {
			for _, c := range batch {
				if err := s.tryBatch([]*cmd{c}); err != nil {
					c.err = err
				}
			}
		}
	}
	for _, c := range batch {
		close(c.done)
	}
}

// tryBatch runs cmds in one transaction. Store sentinel errors are
// per-command results; any other error fails the transaction.
func (s *Store) tryBatch(cmds []*cmd) error {
	ctx := context.Background()
	s.mu.Lock()
	w := &wtx{s: s, ctx: ctx, dCounts: map[store.Status]int64{}, dActive: map[string]int{}, seq: s.seq}
	s.mu.Unlock()
	defer s.bufs.clearRuns()
	start := time.Now()
	if _, err := s.exec(ctx, s.begin); err != nil {
		return s.classify(err)
	}
	merged, err := w.mergeClaims(cmds)
	if err != nil {
		s.abort(ctx)
		return s.classify(err)
	}
	ended, err := w.mergeFinishes(cmds)
	if err != nil {
		s.abort(ctx)
		return s.classify(err)
	}
	for _, c := range cmds {
		if ended[c] { // answered, c.err set
			continue
		}
		c.err = nil
		if merged && c.claim != nil && c.claim.mergeable() {
			continue
		}
		if err := c.fn(w); err != nil {
			if isSentinel(err) {
				c.err = err
				continue
			}
			s.abort(ctx)
			return s.classify(err)
		}
	}
	clear(ended) // the writer's map (mergeFinishes): no command kept past its batch
	// Tests may hold or fail the commit here (internal/commithook).
	if err := commithook.BeforeCommit(s.path); err != nil {
		s.abort(ctx)
		return err
	}
	if _, err := s.exec(ctx, s.commit); err != nil {
		s.abort(ctx)
		return s.classify(err)
	}
	s.mu.Lock()
	s.seq = w.seq
	for st, d := range w.dCounts {
		s.counts[st] += d
	}
	for p, d := range w.dActive {
		if _, known := s.active[p]; known {
			s.active[p] += d
		}
	}
	s.stats.Batches++
	s.stats.Commands += int64(len(cmds))
	s.stats.MergedClaims += int64(w.merged)
	s.stats.MergedEnds += int64(w.ended)
	s.stats.CommitNanos += time.Since(start).Nanoseconds()
	s.mu.Unlock()
	return nil
}

// abort rolls the writer's transaction back. The claims remembered in it
// (Store.claimed) may be undone with it, so all are forgotten: an attempt
// end without one reads its run back. So are the admitted runs kept
// (Store.fresh): the seqs of the runs it admitted are given again.
func (s *Store) abort(ctx context.Context) {
	s.exec(ctx, s.rollback)
	s.claimed = nil
	clear(s.fresh)
}

// mergeClaims makes the mergeable claims among cmds in one statement, if
// there are several; merged reports that it did.
func (w *wtx) mergeClaims(cmds []*cmd) (merged bool, err error) {
	var cs []*claimCmd
	for _, c := range cmds {
		if c.claim != nil && c.claim.mergeable() {
			cs = append(cs, c.claim)
		}
	}
	if len(cs) < 2 {
		return false, nil
	}
	w.merged = len(cs)
	return true, w.claimMerged(cs)
}

func isSentinel(err error) bool {
	var se *store.StatusError
	return errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrNotFound) ||
		errors.Is(err, store.ErrNotAdmitted) || errors.Is(err, store.ErrInvalidUpdate) || errors.As(err, &se)
}
