package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"time"

	"github.com/yella-go/yella/store"
)

// runHead and runTail are the columns of a whole run (runCols) around
// its payload and context.
const (
	runHead = `seq, id, process, event, coalesce(correlation_id, id), parent_id, depth, status`
	runTail = `output, error, error_code, then_event, idem_key, attempts, epoch, retry_at, lease_owner, lease_expires,
	created_at, started_at, completed_at, version, tl, priority, rate_key, conc_key, wait_key, group_key`
)

// runCols are the columns of a whole run, as scanRun reads them.
const runCols = runHead + `, payload, context, ` + runTail

// groupCols are runCols with NULL for the payload and the context: a
// group's run as an admission that it stands in for returns it
// (AdmitResult.Grouped), read without copying its data in the writer.
const groupCols = runHead + `, NULL, NULL, ` + runTail

// inlineLimit bounds the payloads and contexts a claim returns from the
// writer; larger ones are read by the claimant from the read pool, so the
// single writer does not copy them.
const inlineLimit = 4096

// claimCols are the columns a claim returns: the ones the claim does not
// set itself, and whether the run was waiting (see the claim statement).
// They are every column of updCols but those an attempt's end writes, so
// that an end of a run the writer holds from its claim (Store.claimed)
// returns nothing: SQLite runs a statement with RETURNING by writing its
// rows to a table of its own and reading them back. A root run's
// correlation id is NULL, read as the run's own id (claimScan): a copy of
// the id would cost the writer a string a run.
var claimCols = fmt.Sprintf(`seq, id, process, event, correlation_id, parent_id, depth,
	CASE WHEN length(payload) > %[1]d THEN NULL ELSE payload END, CASE WHEN length(context) > %[1]d THEN NULL ELSE context END,
	coalesce(length(payload) > %[1]d OR length(context) > %[1]d, 0), attempts, epoch, wait_key IS NOT NULL,
	created_at, idem_key, then_event, version, tl, priority, rate_key, conc_key, group_key`, inlineLimit)

// freshCols are the columns the claim of a run kept as admitted returns
// (claimFreshSQL): its seq, its payload and context unless too large
// (claimCols), and whether they were.
var freshCols = fmt.Sprintf(`seq, CASE WHEN length(payload) > %[1]d THEN NULL ELSE payload END,
	CASE WHEN length(context) > %[1]d THEN NULL ELSE context END, coalesce(length(payload) > %[1]d OR length(context) > %[1]d, 0)`, inlineLimit)

// updCols are the columns an update returns: all but the payload and
// context, which an update never changes (store.UpdateResult).
const updCols = `seq, id, process, event, coalesce(correlation_id, id), parent_id, depth, status, output,
	error, error_code, then_event, idem_key, attempts, epoch, retry_at, created_at, started_at, completed_at, version, tl,
	priority, rate_key, conc_key, wait_key, group_key`

// setCols is the SET list of every transition, the field writes of its rule
// of the transition table (see setArgs): ?1 status, ?2 error, ?3 code,
// ?4 output mode (0 keep, 1 set to ?5), ?6 then mode (set to ?7), ?8 retry
// mode (set to ?9), ?10 completed_at, ?11 attempts mode (see
// attemptsMode: 0 keep, 1 reset, 2 refund one), ?12 version (kept when
// empty), ?15 wait_key (NULL unless the run is left waiting); ?13 and ?14
// belong to the WHERE clause. Every transition clears the lease. Ending an
// attempt also writes its implicit running entry (see the timeline table),
// hence two timeline entries.
const setCols = `status = ?1, error = ?2, error_code = ?3, lease_owner = NULL, lease_expires = NULL,
	output = CASE ?4 WHEN 1 THEN ?5 ELSE output END,
	then_event = CASE ?6 WHEN 1 THEN ?7 ELSE then_event END,
	retry_at = CASE ?8 WHEN 1 THEN ?9 ELSE retry_at END,
	completed_at = ?10,
	attempts = CASE ?11 WHEN 1 THEN 0 WHEN 2 THEN max(attempts - 1, 0) ELSE attempts END,
	version = CASE WHEN ?12 = '' THEN version ELSE ?12 END,
	wait_key = ?15,
	tl = tl + CASE status WHEN 'running' THEN 2 ELSE 1 END`

// inFlight is runs_status's condition: the index holds the runs that are
// not completed (see migration 7), and SQLite reads a partial index only
// for a query that states its condition.
const inFlight = "status <> 'completed'"

// The statements whose plans matter most (TestPlans checks them): the hot
// path's claim and attempt end, the dispatcher's index, signal delivery and
// the lookups of grouped admissions.
var (
	// claimSQL takes an idle run that is due, or a waiting run whose
	// deadline has passed (one without a deadline is never due), by its id.
	// It leaves wait_key '' (not NULL) on a run that was waiting, so that
	// RETURNING, which sees only the new row, tells the two apart for the
	// status counts; '' reads as no wait key, and the attempt's end clears
	// it with every other transition (setCols).
	claimSQL = `UPDATE runs SET status = 'running', epoch = epoch + 1, attempts = attempts + 1, lease_owner = ?1, lease_expires = ?2,
		started_at = ?3, retry_at = NULL, output = NULL, rate_tat = coalesce(?4, rate_tat),
		wait_key = CASE status WHEN 'waiting' THEN '' END
		WHERE id = ?5 AND (status = 'idle' OR status = 'waiting' AND retry_at IS NOT NULL) AND (retry_at IS NULL OR retry_at <= ?6)
		RETURNING ` + claimCols
	// claimManyHead and claimManyTail make claimSQL for many runs at once
	// (manySQL), around rows of values (id, owner, now, lease until), one
	// per run (Store.claimMerged). The status terms are kept off
	// runs_status (+status): through it SQLite would scan every idle run
	// for the ids; it finds each by its id instead.
	claimManyHead = `UPDATE runs SET status = 'running', epoch = epoch + 1, attempts = attempts + 1, lease_owner = c.column2,
		lease_expires = c.column4, started_at = c.column3, retry_at = NULL, output = NULL,
		wait_key = CASE status WHEN 'waiting' THEN '' END
		FROM (VALUES `
	claimManyTail = `) AS c
		WHERE runs.id = c.column1 AND (+status = 'idle' OR +status = 'waiting' AND retry_at IS NOT NULL) AND (retry_at IS NULL OR retry_at <= c.column3)
		RETURNING ` + claimCols
	// claimFreshSQL is claimSQL for a run the writer keeps as admitted
	// (Store.fresh), named by its seq (?5): it claims the run only while
	// the run is as its admission left it, idle with its one timeline
	// entry (every other change of a run adds one; a kept run was due at
	// once, and its retry time changes only with a change that adds an
	// entry), and returns only what the writer does not keep (freshCols).
	// A run it does not claim is then asked for by claimSQL in the same
	// transaction.
	claimFreshSQL = `UPDATE runs SET status = 'running', epoch = epoch + 1, attempts = attempts + 1, lease_owner = ?1, lease_expires = ?2,
		started_at = ?3, retry_at = NULL, output = NULL, rate_tat = coalesce(?4, rate_tat), wait_key = NULL
		WHERE seq = ?5 AND +status = 'idle' AND tl = 1
		RETURNING ` + freshCols
	// claimFreshManyHead and claimFreshManyTail make claimFreshSQL for
	// many runs at once (manySQL), around rows of values (seq, owner, now,
	// lease until), one per run.
	claimFreshManyHead = `UPDATE runs SET status = 'running', epoch = epoch + 1, attempts = attempts + 1, lease_owner = c.column2,
		lease_expires = c.column4, started_at = c.column3, retry_at = NULL, output = NULL, wait_key = NULL
		FROM (VALUES `
	claimFreshManyTail = `) AS c
		WHERE runs.seq = c.column1 AND +status = 'idle' AND tl = 1
		RETURNING ` + freshCols
	// finishSQL ends an attempt: guarded by the epoch, with no read first.
	finishSQL = `UPDATE runs SET ` + setCols + ` WHERE id = ?13 AND status = 'running' AND epoch = ?14 RETURNING ` + updCols
	// finishHeldSQL is finishSQL for an end whose run the writer holds from
	// its claim (Store.claimed), named by its seq (?13): it returns
	// nothing, the run being its claim's (endedRun), and ends it only if
	// it is running at the claim's epoch, as finishSQL does.
	finishHeldSQL = `UPDATE runs SET ` + setCols + ` WHERE seq = ?13 AND status = 'running' AND epoch = ?14`
	// finishManyHead and finishManyTail make finishSQL for many attempt
	// ends at once (manySQL), around rows of values, one per end
	// (finishRow): the run's id and epoch, then setCols's ?1 to ?12 and
	// ?15 (see setArgs) as columns 3 to 15. Every run it updates is
	// running, so tl grows by the attempt's two entries. The status term
	// is kept off runs_status (+status), as in claimManyHead.
	finishManyHead = `UPDATE runs SET status = c.column3, error = c.column4, error_code = c.column5, lease_owner = NULL, lease_expires = NULL,
		output = CASE c.column6 WHEN 1 THEN c.column7 ELSE output END,
		then_event = CASE c.column8 WHEN 1 THEN c.column9 ELSE then_event END,
		retry_at = CASE c.column10 WHEN 1 THEN c.column11 ELSE retry_at END,
		completed_at = c.column12,
		attempts = CASE c.column13 WHEN 1 THEN 0 WHEN 2 THEN max(attempts - 1, 0) ELSE attempts END,
		version = CASE WHEN c.column14 = '' THEN version ELSE c.column14 END,
		wait_key = c.column15,
		tl = tl + 2
		FROM (VALUES `
	// finishManyWhere ends the rows and guards each end by its epoch.
	finishManyWhere = `) AS c
		WHERE runs.id = c.column1 AND +status = 'running' AND epoch = c.column2`
	finishManyTail = finishManyWhere + `
		RETURNING ` + updCols
	// finishManyHeldTail is finishManyTail for the ends whose runs the
	// writer holds from their claims (Store.claimed): each row names its
	// run by seq, which the claim returned, so the run is found by its
	// rowid rather than through the id index, and nothing comes back (see
	// finishHeldSQL); the count of the rows it changed tells whether every
	// end found its run as the claim left it (mergeFinishes).
	finishManyHeldTail = `) AS c
		WHERE runs.seq = c.column1 AND +status = 'running' AND epoch = c.column2`
	// completeManyHead is finishManyHead with finishManyHeldTail for the
	// commonest end, a completion whose run the writer holds from its
	// claim, with the values every completion's row has (completeRow)
	// written as constants: it binds 6 values a run instead of 15 and
	// evaluates no mode. Its rows are (id, epoch, output, then, completed
	// at, version).
	completeManyHead = `UPDATE runs SET status = 'completed', error = '', error_code = '', lease_owner = NULL, lease_expires = NULL,
		output = c.column3, then_event = c.column4, retry_at = NULL, completed_at = c.column5,
		version = CASE WHEN c.column6 = '' THEN version ELSE c.column6 END,
		wait_key = NULL,
		tl = tl + 2
		FROM (VALUES `
	// insertRunsHead and insertRunsRow insert an admitted run (insRun), or
	// many (insertMany) with the row repeated.
	insertRunsHead = `INSERT INTO runs (seq, id, process, event, correlation_id, parent_id, depth, status, payload, context, idem_key, created_at,
		priority, rate_key, conc_key, retry_at, group_key) VALUES `
	insertRunsRow = `(?, ?, ?, ?, ?, ?, ?, 'idle', ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// pendingSQL lists idle runs and waiting runs with a deadline, each
	// read in seq order from its own index and merged (a MERGE of the
	// UNION ALL): no sort, and no read of the runs that wait without a
	// deadline.
	pendingSQL = `SELECT id, seq, process, coalesce(correlation_id, id), retry_at, created_at, priority, rate_key, conc_key, 0
		FROM runs INDEXED BY runs_status WHERE status = 'idle' AND ` + inFlight + ` AND seq > ?1
		UNION ALL
		SELECT id, seq, process, coalesce(correlation_id, id), retry_at, created_at, priority, rate_key, conc_key, 1
		FROM runs INDEXED BY runs_wait_due WHERE status = 'waiting' AND retry_at IS NOT NULL AND seq > ?1
		ORDER BY seq LIMIT ?2`
	// heartbeatSQL extends the leases of an owner's running runs.
	heartbeatSQL = `UPDATE runs SET lease_expires = ? WHERE status = 'running' AND ` + inFlight + ` AND lease_owner = ? RETURNING id, epoch`
	// runningSQL lists the running runs, in seq order.
	runningSQL = `SELECT ` + runCols + ` FROM runs WHERE status = 'running' AND ` + inFlight + ` ORDER BY seq`
	// waiterSQL finds the run a signal wakes: the first admitted of those
	// waiting for its key.
	waiterSQL = `SELECT seq FROM runs WHERE status = 'waiting' AND wait_key = ? ORDER BY seq LIMIT 1`
	// keptSignalSQL finds the signal a wait consumes: the oldest kept for
	// its key and not expired.
	keptSignalSQL = `SELECT seq, payload FROM signals WHERE key = ? AND keep_until > ? ORDER BY seq LIMIT 1`
	// singletonSQL finds the run that stands in for a singleton admission:
	// the latest admitted of its process and group key that is idle,
	// running or waiting (the very runs of runs_group).
	singletonSQL = `SELECT ` + groupCols + ` FROM runs INDEXED BY runs_group
		WHERE process = ?1 AND group_key = ?2 AND status IN ('idle', 'running', 'waiting')
		ORDER BY seq DESC LIMIT 1`
	// debounceSQL finds the run a debounced admission updates: the latest
	// admitted of its process and group key that is idle and never
	// started, by its seq (the update that follows returns the run). The
	// status IN term repeats runs_group's condition, which SQLite needs to
	// see in the query to use the partial index.
	debounceSQL = `SELECT seq FROM runs INDEXED BY runs_group
		WHERE process = ?1 AND group_key = ?2 AND status IN ('idle', 'running', 'waiting') AND status = 'idle' AND attempts = 0
		ORDER BY seq DESC LIMIT 1`
)

type stmts struct {
	// writer
	insRun, insTL, insTL2, selIdem, selKept, seqOf, selRunW, claim, claimFresh, finish, finishHeld, update *sql.Stmt
	setCtx, holdRate, heartbeat, effStart, effFinish, effClear, effDone, effWait                           *sql.Stmt
	selWaiter, wake, effSignal, keepSignal, selSignal, delSignal                                           *sql.Stmt
	insRollup, insError, selSingleton, selDebounce, debounce                                               *sql.Stmt
	// readers
	selRun, selEffects, selTimeline, selData, selRunTL, selChain, selPending, selRunning, selRates *sql.Stmt
	rselIdem, rselKept                                                                             *sql.Stmt
}

func (s *stmts) all() []*sql.Stmt {
	return []*sql.Stmt{s.insRun, s.insTL, s.insTL2, s.selIdem, s.selKept, s.seqOf, s.selRunW, s.claim, s.claimFresh, s.finish, s.finishHeld, s.update,
		s.setCtx, s.holdRate, s.heartbeat, s.effStart, s.effFinish, s.effClear, s.effDone, s.effWait,
		s.selWaiter, s.wake, s.effSignal, s.keepSignal, s.selSignal, s.delSignal, s.insRollup, s.insError,
		s.selSingleton, s.selDebounce, s.debounce,
		s.selRun, s.selEffects, s.selTimeline, s.selData, s.selRunTL, s.selChain, s.selPending, s.selRunning, s.selRates,
		s.rselIdem, s.rselKept}
}

func (s *Store) prepare(ctx context.Context) error {
	s.sqlOf, s.raw = map[*sql.Stmt]string{}, map[*sql.Stmt]driver.Stmt{}
	w := func(q string) *sql.Stmt {
		st, err := s.conn.PrepareContext(ctx, q)
		if err != nil {
			panic(prepErr{q, err})
		}
		s.sqlOf[st] = q
		return st
	}
	r := func(q string) *sql.Stmt {
		st, err := s.rdb.PrepareContext(ctx, q)
		if err != nil {
			panic(prepErr{q, err})
		}
		return st
	}
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				pe, ok := p.(prepErr)
				if !ok {
					panic(p)
				}
				err = pe
			}
		}()
		s.begin, s.commit, s.rollback = w("BEGIN IMMEDIATE"), w("COMMIT"), w("ROLLBACK")
		s.st = stmts{
			insRun: w(insertRunsHead + insertRunsRow),
			insTL:  w(`INSERT INTO timeline (run_seq, n, at, status, attempt, error, code, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
			insTL2: w(`INSERT INTO timeline (run_seq, n, at, status, attempt, error, code, note)
				VALUES (?1, ?2 - 1, ?3, 'running', ?4, '', '', 'claimed'), (?1, ?2, ?5, ?6, ?10, ?7, ?8, ?9)`),
			selIdem:    w(`SELECT ` + runCols + ` FROM runs WHERE event = ? AND idem_key = ? AND process = ?`),
			selKept:    w(`SELECT run_id, created_at FROM pruned_keys WHERE event = ? AND key = ? AND process = ?`),
			seqOf:      w(`SELECT seq FROM runs WHERE id = ?`),
			selRunW:    w(`SELECT ` + runCols + ` FROM runs WHERE id = ?`),
			claim:      w(claimSQL),
			claimFresh: w(claimFreshSQL),
			finish:     w(finishSQL),
			finishHeld: w(finishHeldSQL),
			update:     w(`UPDATE runs SET ` + setCols + ` WHERE seq = ?13 RETURNING ` + updCols),
			setCtx:     w(`UPDATE runs SET context = ? WHERE id = ? AND status = 'running' AND epoch = ?`),
			holdRate:   w(`UPDATE runs SET rate_tat = max(coalesce(rate_tat, 0), ?1) WHERE id = ?2 AND status = 'running' AND epoch = ?3`),
			heartbeat:  w(heartbeatSQL),
			effStart: w(`INSERT INTO effects (run_seq, key, status, epoch, output, error, started_at, completed_at)
				SELECT seq, ?, 'started', epoch, NULL, '', ?, NULL FROM runs WHERE id = ? AND status = 'running' AND epoch = ?
				ON CONFLICT (run_seq, key) DO UPDATE SET status = 'started', epoch = excluded.epoch, output = NULL, error = '',
				started_at = excluded.started_at, completed_at = NULL WHERE effects.status != 'completed'`),
			effFinish: w(`UPDATE effects SET status = ?, output = ?, error = ?, completed_at = ?
				WHERE run_seq = (SELECT seq FROM runs WHERE id = ?) AND key = ? AND status = 'started' AND epoch = ?`),
			effClear: w(`DELETE FROM effects WHERE run_seq = ? AND status IN ('started', 'waiting')`),
			effDone: w(`INSERT INTO effects (run_seq, key, status, epoch, output, error, started_at, completed_at)
				VALUES (?, ?, 'completed', ?, ?, '', ?, ?)
				ON CONFLICT (run_seq, key) DO UPDATE SET status = 'completed', output = excluded.output, error = '', completed_at = excluded.completed_at`),
			// A wait's record, begun afresh at the run's epoch whatever the key
			// held before.
			effWait: w(`INSERT INTO effects (run_seq, key, status, epoch, output, error, started_at, completed_at)
				VALUES (?1, ?2, 'waiting', ?3, NULL, '', ?4, NULL)
				ON CONFLICT (run_seq, key) DO UPDATE SET status = 'waiting', epoch = excluded.epoch, output = NULL, error = '',
				started_at = excluded.started_at, completed_at = NULL`),
			selWaiter: w(waiterSQL),
			wake: w(`UPDATE runs SET status = 'idle', retry_at = NULL, wait_key = NULL, completed_at = NULL, tl = tl + 1
				WHERE seq = ? AND status = 'waiting' RETURNING ` + updCols),
			effSignal:  w(`UPDATE effects SET status = 'completed', output = ?, error = '', completed_at = ? WHERE run_seq = ? AND status = 'waiting'`),
			keepSignal: w(`INSERT INTO signals (key, payload, keep_until) VALUES (?, ?, ?)`),
			selSignal:  w(keptSignalSQL),
			delSignal:  w(`DELETE FROM signals WHERE seq = ?`),
			insRollup:  w(`INSERT INTO rollups (bucket, process, counts, hists) VALUES (?, ?, ?, ?)`),
			insError:   w(`INSERT INTO errors (at, kind, process, run_id, effect_key, context, message) VALUES (?, ?, ?, ?, ?, ?, ?)`),

			// A grouped admission's lookups.
			selSingleton: w(singletonSQL),
			selDebounce:  w(debounceSQL),
			// A debounced admission's data and start time, on the run found
			// by debounceSQL in the same transaction, with its timeline entry
			// counted.
			debounce: w(`UPDATE runs SET payload = ?1, context = ?2, retry_at = ?3, tl = tl + 1
				WHERE seq = ?4 AND status = 'idle' AND attempts = 0 RETURNING ` + groupCols),

			selRun:      r(`SELECT ` + runCols + ` FROM runs WHERE id = ?`),
			selEffects:  r(`SELECT key, status, epoch, output, error, started_at, completed_at FROM effects WHERE run_seq = ? ORDER BY key`),
			selTimeline: r(`SELECT n, at, status, attempt, error, code, note FROM timeline WHERE run_seq = ? ORDER BY n`),
			selData:     r(`SELECT payload, context FROM runs WHERE seq = ?`),
			selRunTL:    r(`SELECT seq, status, attempts, created_at, started_at, completed_at, error, error_code, tl FROM runs WHERE id = ?`),
			// A root's correlation id is stored as NULL (it is its own id):
			// id = ?1 alone would also match a child named by its own id.
			selChain:   r(`SELECT ` + runCols + ` FROM runs WHERE correlation_id = ?1 OR (id = ?1 AND correlation_id IS NULL) ORDER BY depth, seq`),
			selPending: r(pendingSQL),
			selRates:   r(`SELECT rate_key, max(rate_tat) FROM runs WHERE rate_tat > ? GROUP BY rate_key`),
			selRunning: r(runningSQL),
			rselIdem:   r(`SELECT ` + runCols + ` FROM runs WHERE event = ? AND idem_key = ? AND process = ?`),
			rselKept:   r(`SELECT run_id, created_at FROM pruned_keys WHERE event = ? AND key = ? AND process = ?`),
		}
	}()
	return err
}

type prepErr struct {
	q   string
	err error
}

func (e prepErr) Error() string { return "prepare " + e.q + ": " + e.err.Error() }

type scanner interface{ Scan(...any) error }

// scanRun reads one row of runCols.
func scanRun(sc scanner) (store.Run, int, error) {
	var r store.Run
	var parent, idem, owner, rateKey, concKey, waitKey, groupKey sql.NullString
	var retry, expires, started, completed sql.NullInt64
	var status string
	var created int64
	var tl int
	err := sc.Scan(&r.Seq, &r.ID, &r.Process, &r.Event, &r.CorrelationID, &parent, &r.Depth, &status,
		(*[]byte)(&r.Payload), (*[]byte)(&r.Context), (*[]byte)(&r.Output), &r.Error, &r.ErrorCode, &r.Then, &idem,
		&r.Attempts, &r.Epoch, &retry, &owner, &expires, &created, &started, &completed, &r.Version, &tl,
		&r.Priority, &rateKey, &concKey, &waitKey, &groupKey)
	if err != nil {
		return r, 0, err
	}
	r.Status = store.Status(status)
	r.ParentID, r.IdempotencyKey, r.LeaseOwner = parent.String, idem.String, owner.String
	r.RateKey, r.ConcurrencyKey, r.WaitKey, r.GroupKey = rateKey.String, concKey.String, waitKey.String, groupKey.String
	r.RetryAt, r.LeaseExpires = fromNull(retry), fromNull(expires)
	r.CreatedAt, r.StartedAt, r.CompletedAt = time.Unix(0, created), fromNull(started), fromNull(completed)
	return r, tl, nil
}

// claimScan is where the writer reads a claimed run (claimCols): the run,
// the other variables, and the destinations pointing at them, kept for
// every row. Variables scanned through an interface escape, so scanning
// into locals would cost an allocation for each of them in every row.
type claimScan struct {
	r                                store.Run
	correlation, parent              sql.NullString
	idem, rateKey, concKey, groupKey sql.NullString
	created                          int64
	tl                               int // the run's timeline entries (its claim adds none)
	large, waited                    bool
	dest                             []any
}

// scan reads one row of claimCols into c.r, a run claimed by owner at now
// until until; c.large reports that its payload or context was left for
// the read pool, from the status the run was claimed from (idle or
// waiting).
func (c *claimScan) scan(sc scanner, owner string, now, until time.Time) (from store.Status, err error) {
	if c.dest == nil {
		c.dest = []any{&c.r.Seq, &c.r.ID, &c.r.Process, &c.r.Event, &c.correlation, &c.parent, &c.r.Depth,
			(*[]byte)(&c.r.Payload), (*[]byte)(&c.r.Context), &c.large, &c.r.Attempts, &c.r.Epoch, &c.waited,
			&c.created, &c.idem, &c.r.Then, &c.r.Version, &c.tl, &c.r.Priority, &c.rateKey, &c.concKey, &c.groupKey}
	}
	c.r = store.Run{Status: store.StatusRunning, LeaseOwner: owner, LeaseExpires: until, StartedAt: now}
	err = sc.Scan(c.dest...)
	c.r.ParentID, c.r.CorrelationID = c.parent.String, c.correlation.String
	c.r.CreatedAt, c.r.IdempotencyKey = time.Unix(0, c.created), c.idem.String
	c.r.RateKey, c.r.ConcurrencyKey, c.r.GroupKey = c.rateKey.String, c.concKey.String, c.groupKey.String
	if !c.correlation.Valid {
		c.r.CorrelationID = c.r.ID
	}
	from = store.StatusIdle
	if c.waited {
		from = store.StatusWaiting
	}
	return from, err
}

// scanUpdated reads one row of updCols.
func scanUpdated(sc scanner) (store.Run, int, error) {
	var r store.Run
	var parent, idem, rateKey, concKey, waitKey, groupKey sql.NullString
	var retry, started, completed sql.NullInt64
	var status string
	var created int64
	var tl int
	err := sc.Scan(&r.Seq, &r.ID, &r.Process, &r.Event, &r.CorrelationID, &parent, &r.Depth, &status,
		(*[]byte)(&r.Output), &r.Error, &r.ErrorCode, &r.Then, &idem, &r.Attempts, &r.Epoch, &retry,
		&created, &started, &completed, &r.Version, &tl, &r.Priority, &rateKey, &concKey, &waitKey, &groupKey)
	r.Status = store.Status(status)
	r.ParentID, r.IdempotencyKey = parent.String, idem.String
	r.RateKey, r.ConcurrencyKey, r.WaitKey, r.GroupKey = rateKey.String, concKey.String, waitKey.String, groupKey.String
	r.RetryAt, r.CreatedAt, r.StartedAt, r.CompletedAt = fromNull(retry), time.Unix(0, created), fromNull(started), fromNull(completed)
	return r, tl, err
}

func fromNull(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64)
}

// ns stores a time as Unix nanoseconds, the zero time as NULL.
func ns(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// blob stores a JSON value, nil as NULL.
func blob(b json.RawMessage) any {
	if b == nil {
		return nil
	}
	return []byte(b)
}

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}
