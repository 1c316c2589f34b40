package pgstore

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/yella-go/yella/internal/commithook"
	"github.com/yella-go/yella/store"
)

// cmd is one write. A plain command runs fn inside the batch transaction;
// the attempt ends and effect records (fin, effStart, effFin) are
// collected from every command of the batch into one statement per kind,
// sent with the claims (claim) in one pipeline.
// Its error (a store sentinel such as ErrFenced, which must leave nothing
// written, or an SQL error) is returned to the caller once the batch has
// committed.
type cmd struct {
	fn       func(w *wtx) error
	fin      *finish
	effStart *effStart
	effFin   *effFinish
	claim    *claimCmd
	bulk     bool // committed by the bulk writer (see bulkRuns)
	// locks are the advisory lock keys the command takes whatever it
	// finds (the admission locks of its bounded processes and its
	// groups, the claim locks of its capped processes, a signal's key),
	// taken for the whole batch before its first statement (batchLocks).
	locks []int64
	err   error
	done  chan struct{}
}

// wtx is a writer's view of one batch transaction.
type wtx struct {
	s      *Store
	ctx    context.Context
	tx     *lazyTx
	shard  int32 // the writer's row of the status counts
	counts map[store.Status]int64
	ready  bool // runs became claimable: wake the nodes
	// answerCounts is set when a statement of the batch's first round
	// trip is counted from its answer (w.moved) rather than by itself
	// (countsItem): the counts are then written after its answer.
	answerCounts bool
	// committed is set once the batch committed with its statements
	// (tryBatch): a function that reads after them reads outside the
	// transaction, and a read that fails then must not fail the batch.
	committed bool
	bulk      bool // the bulk writer's batch
	held      int  // attempt ends answered from their claims (Stats.HeldEnds)
	follow    []*followUps
}

// moved records that a run went from one status to another ("" for a new
// or deleted run), for the status counts.
func (w *wtx) moved(from, to store.Status) {
	if from != "" {
		w.counts[from]--
	}
	if to != "" {
		w.counts[to]++
	}
	if to == store.StatusIdle {
		w.ready = true
	}
}

// freedKey records that r, a run with a concurrency key, stopped
// running: a run of its key that another node held back may be claimable
// now, so the nodes are woken as for a new run.
func (w *wtx) freedKey(r *store.Run) {
	if r.ConcurrencyKey != "" && r.Status != store.StatusRunning {
		w.ready = true
	}
}

// do queues a command and waits for its batch to commit. Only the
// queueing respects ctx: once queued, a write completes, so a caller that
// gives up never leaves a committed change it did not hear about.
func (s *Store) do(ctx context.Context, c *cmd) error {
	if err := s.enqueue(ctx, c); err != nil {
		return err
	}
	<-c.done
	return c.err
}

// enqueue queues c (see do) without waiting for its batch.
func (s *Store) enqueue(ctx context.Context, c *cmd) error {
	c.done = make(chan struct{})
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return store.ErrClosed
	}
	ch := s.cmds
	if c.bulk {
		ch = s.bulk
	}
	select {
	case ch <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run queues fn as a plain command.
func (s *Store) run(ctx context.Context, fn func(w *wtx) error) error {
	return s.do(ctx, &cmd{fn: fn})
}

// runLocked queues fn as a plain command that takes the advisory locks
// keys (see cmd.locks).
func (s *Store) runLocked(ctx context.Context, keys []int64, fn func(w *wtx) error) error {
	return s.do(ctx, &cmd{fn: fn, locks: keys})
}

// batchLocks returns the advisory lock keys that the commands of a batch
// of several commands declare, sorted and once each; nil for a batch of
// one command, which takes its own locks in key order.
//
// Each command takes its own locks in key order, but a transaction runs
// several commands one after the other, and two transactions (the
// group-commit writer's and the bulk writer's, or two nodes') whose
// commands take the same locks in different command orders would wait on
// each other: PostgreSQL breaks such a deadlock only after
// deadlock_timeout (a second by default), fails one of the transactions,
// and its commands are tried again one by one. Taken by the batch in one
// statement, in key order, before any other lock of the transaction
// (only a claim's flow locks, which depend on the runs it finds, come
// after them), the locks of every transaction are taken in one order. A
// command takes its locks again as it runs: an advisory lock its session
// holds is granted at once.
func batchLocks(cmds []*cmd) []int64 {
	if len(cmds) < 2 {
		return nil
	}
	var keys []int64
	for _, c := range cmds {
		keys = append(keys, c.locks...)
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// bulkRuns is the size from which an AdmitBatch is committed by the
// store's bulk writer instead of the group-commit writers: a writer of
// its own, on a connection of its own, whose transactions hold only such
// admissions. A large admission is a long statement (about 10 µs of
// server time per run: 5 ms for 500 runs, measured on 2 vCPUs with a
// local server), and in a group-commit writer's transaction every claim,
// attempt end and effect record of the node queued with it would wait
// for it; committed apart, they go on while it runs. One engine process
// fed batches of 500 while it drains them did a few percent more runs/s
// end to end (medians of 6 alternating rounds: no-op +4%, 2-stage chains
// +5%, one effect +1%), and a node's claims and ends no longer stall for
// the length of the largest batch. Smaller admissions keep sharing the
// writers' commits.
const bulkRuns = 64

// writer is one group-commit writer: it takes every command queued on
// cmds (up to MaxBatch), runs them in one transaction, commits once and
// only then answers the callers. shard is its row of the status counts.
func (s *Store) writer(shard int32, cmds chan *cmd) {
	defer s.writers.Done()
	batch := make([]*cmd, 0, s.opts.MaxBatch)
	for c := range cmds {
		batch = append(batch[:0], c)
		for round := 0; round < 2 && len(batch) < s.opts.MaxBatch; round++ {
			if round > 0 {
				runtime.Gosched() // let the goroutines about to write queue their commands
			}
		fill:
			for len(batch) < s.opts.MaxBatch {
				select {
				case c, ok := <-cmds:
					if !ok {
						break fill
					}
					batch = append(batch, c)
				default:
					break fill
				}
			}
		}
		s.runBatch(batch, shard)
	}
}

// runBatch commits a batch. If the transaction fails as a whole (an SQL
// error inside a command, a lost connection, a serialization failure), it
// is rolled back and each command is tried again in a transaction of its
// own, so one bad command cannot fail the others; a command that meets a
// deadlock or a serialization failure alone is tried again a few times.
func (s *Store) runBatch(batch []*cmd, shard int32) {
	err := s.countDeadlock(s.tryBatch(batch, shard))
	if err != nil && len(batch) > 1 {
		for _, c := range batch {
			c.err = s.tryAlone(c, shard)
		}
	} else if err != nil {
		batch[0].err = s.tryAlone(batch[0], shard)
	}
	for _, c := range batch {
		close(c.done)
	}
}

func (s *Store) tryAlone(c *cmd, shard int32) error {
	var err error
	for try := 0; try < 5; try++ {
		if err = s.countDeadlock(s.tryBatch([]*cmd{c}, shard)); err == nil || !retryable(err) {
			break
		}
		time.Sleep(time.Duration(try+1) * 5 * time.Millisecond)
	}
	return err
}

// countDeadlock counts err in Stats.Deadlocks if PostgreSQL broke a
// deadlock by failing the transaction, and returns it.
func (s *Store) countDeadlock(err error) error {
	if sqlState(err) == "40P01" {
		s.statsMu.Lock()
		s.stats.Deadlocks++
		s.statsMu.Unlock()
	}
	return err
}

// retryable reports a failure that the same transaction may not meet again.
func retryable(err error) bool {
	c := sqlState(err)
	return c == "40001" || c == "40P01" // serialization failure, deadlock
}

// sqlState is the SQLSTATE code of the PostgreSQL error err wraps; "" if
// it wraps none.
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// tryBatch runs cmds in one transaction. Store sentinel errors are
// per-command results; any other error fails the transaction.
func (s *Store) tryBatch(cmds []*cmd, shard int32) error {
	start := time.Now()
	ctx := s.bgCtxOrBackground()
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer pc.Release() // a connection left inside a transaction is closed, not reused
	tx := &lazyTx{conn: pc.Conn()}
	committed := false
	defer func() {
		if !committed {
			tx.rollback()
		}
	}()
	w := &wtx{s: s, ctx: ctx, tx: tx, shard: shard, counts: map[store.Status]int64{}, bulk: cmds[0].bulk}
	var fins []*cmd
	var starts []*cmd
	var finishes []*cmd
	var claims []*cmd
	var plain []*cmd
	for _, c := range cmds {
		c.err = nil
		switch {
		case c.fin != nil:
			fins = append(fins, c)
		case c.effStart != nil:
			starts = append(starts, c)
		case c.effFin != nil:
			finishes = append(finishes, c)
		case c.claim != nil:
			claims = append(claims, c)
		default:
			plain = append(plain, c)
		}
	}
	// The attempt ends, effect records and claims (of uncapped processes)
	// of the batch are independent statements: they are sent together (with BEGIN, the batch's first
	// statements), one round trip, and what depends on their results
	// (follow-up runs, refusals) after them. Commands of one batch come
	// from callers none of which waits for another's, so their order in
	// the transaction is free.
	b := &pgx.Batch{}
	if keys := batchLocks(cmds); keys != nil {
		b.Queue(s.q.lockKeys, keys)
	}
	eff := w.heldOutcomesOf(finishes) // written with the held runs' ends, if any
	after := []func() error{w.queueFinishMany(b, fins, eff), w.queueEffStartMany(b, starts), w.queueEffFinishMany(b, finishes, eff)}
	for _, c := range claims {
		after = append(after, w.queueClaimCmd(b, c.claim))
	}
	// When each of these statements counts what it changes (so no
	// follow-up run is left to insert after their answers either) and no
	// plain command comes after them, COMMIT is sent with them: the batch
	// is one round trip. What the functions after them read (whether a
	// claim left runs, whether a refused command's run exists) is then
	// read once the batch committed.
	if b.Len() > 0 && len(plain) == 0 && !w.answerCounts && !commithook.Installed() {
		notified := w.ready && s.notify.queue(b)
		b.Queue("COMMIT")
		tx.withBegin(b)
		if err := sendEnd(ctx, pc.Conn(), b); err != nil {
			return err
		}
		took := time.Since(start) // the reads after the commit are not its time
		committed, w.committed = true, true
		for _, f := range after {
			_ = f() // with w.committed set, it fails no command: the batch committed
		}
		s.batchCommitted(w, len(cmds), took, notified, true)
		return nil
	}
	if b.Len() > 0 {
		if err := w.tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
	}
	for _, f := range after {
		if err := f(); err != nil {
			return err
		}
	}
	// The follow-up runs of the attempt ends of runs this store holds
	// were inserted by the ends' statement; the others' are inserted with
	// COMMIT (one round trip fewer), unless other commands of the batch
	// come after them: those may read the runs and must find them, as the
	// order of the batch's commands says (an admission checks that its
	// parent exists, retention that a run has no children).
	end := &pgx.Batch{}
	fb := end
	if len(plain) > 0 {
		fb = &pgx.Batch{}
	}
	for _, f := range w.follow {
		f.queue(fb, s.q.insChildren)
	}
	if fb != end && fb.Len() > 0 {
		if err := w.tx.SendBatch(ctx, fb).Close(); err != nil {
			return err
		}
	}
	for _, c := range plain {
		if err := c.fn(w); err != nil {
			if isSentinel(err) {
				c.err = err
				continue
			}
			return err
		}
	}
	// The status counts, the wake-up notification and COMMIT are sent
	// together: one round trip.
	w.queueCounts(end, shard)
	notified := w.ready && s.notify.queue(end)
	// Tests may hold or fail the commit here (internal/commithook).
	if err := commithook.BeforeCommit(s.hookName()); err != nil {
		return err
	}
	end.Queue("COMMIT")
	tx.withBegin(end) // a batch that sent no statement yet
	if err := sendEnd(ctx, pc.Conn(), end); err != nil {
		return err
	}
	committed = true
	s.batchCommitted(w, len(cmds), time.Since(start), notified, false)
	return nil
}

// batchCommitted does what follows the commit of a batch of n commands
// (in one round trip: oneTrip), which took took from asking for a
// connection to COMMIT's answer: its follow-up runs are answered, the
// nodes woken, the batch and its time counted.
func (s *Store) batchCommitted(w *wtx, n int, took time.Duration, notified, oneTrip bool) {
	for _, f := range w.follow {
		f.admitted(&s.held)
	}
	if w.ready {
		s.notify.committed(notified)
	}
	s.statsMu.Lock()
	s.stats.Batches++
	s.stats.Commands += int64(n)
	s.stats.CommitNanos += took.Nanoseconds()
	s.stats.HeldEnds += int64(w.held)
	if oneTrip {
		s.stats.OneTrip++
	}
	if w.bulk {
		s.stats.Bulk++
	}
	s.statsMu.Unlock()
}

// hookName names the store for internal/commithook: its schema.
func (s *Store) hookName() string { return "pgstore:" + s.opts.Schema }

// bgCtxOrBackground is the context of the writers' statements: a
// committed batch must not be cut short, so it is never cancelled.
func (s *Store) bgCtxOrBackground() context.Context { return context.Background() }

// sendEnd sends the end of a batch transaction, its last statement
// COMMIT, and reads every result (through its queued function, if any):
// an error, or a COMMIT that the server turned into a rollback, fails
// the batch.
func sendEnd(ctx context.Context, conn *pgx.Conn, b *pgx.Batch) error {
	br := conn.SendBatch(ctx, b)
	for i, q := range b.QueuedQueries {
		if q.Fn != nil {
			if err := q.Fn(br); err != nil {
				br.Close()
				return err
			}
			continue
		}
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return err
		}
		if i == b.Len()-1 && tag.String() != "COMMIT" {
			br.Close()
			return pgx.ErrTxCommitRollback
		}
	}
	return br.Close()
}

// queueCounts queues the addition of the batch's status changes that
// were counted from its statements' answers (moved) to the writer's
// shard, in status order.
func (w *wtx) queueCounts(b *pgx.Batch, shard int32) {
	var sts []string
	var ds []int64
	for st, d := range w.counts {
		if d != 0 {
			sts = append(sts, string(st))
		}
	}
	if len(sts) == 0 {
		return
	}
	slices.Sort(sts)
	for _, st := range sts {
		ds = append(ds, w.counts[store.Status(st)])
	}
	b.Queue(w.s.q.addCounts, shard, sts, ds)
}

func isSentinel(err error) bool {
	var se *store.StatusError
	return errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrNotFound) ||
		errors.Is(err, store.ErrNotAdmitted) || errors.Is(err, store.ErrInvalidUpdate) || errors.As(err, &se)
}
