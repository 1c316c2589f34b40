package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/yella-go/yella/store"
)

const runCols = `seq, id, process, event, coalesce(correlation_id, id), parent_id, depth, status, payload, context, output,
	error, error_code, then_event, idem_key, attempts, epoch, retry_at, lease_owner, lease_expires,
	created_at, started_at, completed_at, version, tl, priority, rate_key, conc_key`

// claimCols are the columns a claim returns: the ones the claim does not
// set itself.
// inlineLimit bounds the payloads and contexts a claim returns from the
// writer; larger ones are read by the claimant from the read pool, so the
// single writer does not copy them.
const inlineLimit = 4096

var claimCols = fmt.Sprintf(`seq, id, process, event, coalesce(correlation_id, id), parent_id, depth,
	CASE WHEN length(payload) > %[1]d THEN NULL ELSE payload END, CASE WHEN length(context) > %[1]d THEN NULL ELSE context END,
	coalesce(length(payload) > %[1]d OR length(context) > %[1]d, 0), attempts, epoch`, inlineLimit)

// updCols are the columns an update returns: all but the payload and
// context, which an update never changes (store.UpdateResult).
const updCols = `seq, id, process, event, coalesce(correlation_id, id), parent_id, depth, status, output,
	error, error_code, then_event, idem_key, attempts, epoch, retry_at, created_at, started_at, completed_at, version, tl,
	priority, rate_key, conc_key`

// setCols is the SET list of every transition, the field writes of its rule
// of the transition table (see setArgs): ?1 status, ?2 error, ?3 code,
// ?4 output mode (0 keep, 1 set to ?5), ?6 then mode (set to ?7), ?8 retry
// mode (set to ?9), ?10 completed_at, ?11 reset attempts, ?12 version
// (kept when empty). Every transition clears the lease. Ending an attempt
// also writes its implicit running entry (see the timeline table), hence
// two timeline entries.
const setCols = `status = ?1, error = ?2, error_code = ?3, lease_owner = NULL, lease_expires = NULL,
	output = CASE ?4 WHEN 1 THEN ?5 ELSE output END,
	then_event = CASE ?6 WHEN 1 THEN ?7 ELSE then_event END,
	retry_at = CASE ?8 WHEN 1 THEN ?9 ELSE retry_at END,
	completed_at = ?10,
	attempts = CASE WHEN ?11 THEN 0 ELSE attempts END,
	version = CASE WHEN ?12 = '' THEN version ELSE ?12 END,
	tl = tl + CASE status WHEN 'running' THEN 2 ELSE 1 END`

type stmts struct {
	// writer
	insRun, insTL, insTL2, selIdem, selKept, seqOf, selRunW, claim, finish, update *sql.Stmt
	setCtx, holdRate, heartbeat, effStart, effFinish, effClear, effDone            *sql.Stmt
	insRollup, insError                                                            *sql.Stmt
	// readers
	selRun, selEffects, selTimeline, selData, selRunTL, selChain, selPending, selRunning, selRates *sql.Stmt
	rselIdem, rselKept                                                                             *sql.Stmt
}

func (s *stmts) all() []*sql.Stmt {
	return []*sql.Stmt{s.insRun, s.insTL, s.insTL2, s.selIdem, s.selKept, s.seqOf, s.selRunW, s.claim, s.finish, s.update,
		s.setCtx, s.holdRate, s.heartbeat, s.effStart, s.effFinish, s.effClear, s.effDone, s.insRollup, s.insError,
		s.selRun, s.selEffects, s.selTimeline, s.selData, s.selRunTL, s.selChain, s.selPending, s.selRunning, s.selRates,
		s.rselIdem, s.rselKept}
}

func (s *Store) prepare(ctx context.Context) error {
	w := func(q string) *sql.Stmt {
		st, err := s.conn.PrepareContext(ctx, q)
		if err != nil {
			panic(prepErr{q, err})
		}
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
			insRun: w(`INSERT INTO runs (seq, id, process, event, correlation_id, parent_id, depth, status, payload, context, idem_key, created_at,
				priority, rate_key, conc_key, retry_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, 'idle', ?, ?, ?, ?, ?, ?, ?, ?)`),
			insTL: w(`INSERT INTO timeline (run_seq, n, at, status, attempt, error, code, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
			insTL2: w(`INSERT INTO timeline (run_seq, n, at, status, attempt, error, code, note)
				VALUES (?1, ?2 - 1, ?3, 'running', ?4, '', '', 'claimed'), (?1, ?2, ?5, ?6, ?4, ?7, ?8, ?9)`),
			selIdem: w(`SELECT ` + runCols + ` FROM runs WHERE event = ? AND idem_key = ? AND process = ?`),
			selKept: w(`SELECT run_id, created_at FROM pruned_keys WHERE event = ? AND key = ? AND process = ?`),
			seqOf:   w(`SELECT seq FROM runs WHERE id = ?`),
			selRunW: w(`SELECT ` + runCols + ` FROM runs WHERE id = ?`),
			claim: w(`UPDATE runs SET status = 'running', epoch = epoch + 1, attempts = attempts + 1, lease_owner = ?, lease_expires = ?,
				started_at = ?, retry_at = NULL, output = NULL, rate_tat = coalesce(?, rate_tat)
				WHERE id = ? AND status = 'idle' AND (retry_at IS NULL OR retry_at <= ?) RETURNING ` + claimCols),
			finish:    w(`UPDATE runs SET ` + setCols + ` WHERE id = ?13 AND status = 'running' AND epoch = ?14 RETURNING ` + updCols),
			update:    w(`UPDATE runs SET ` + setCols + ` WHERE seq = ?13 RETURNING ` + updCols),
			setCtx:    w(`UPDATE runs SET context = ? WHERE id = ? AND status = 'running' AND epoch = ?`),
			holdRate:  w(`UPDATE runs SET rate_tat = max(coalesce(rate_tat, 0), ?1) WHERE id = ?2 AND status = 'running' AND epoch = ?3`),
			heartbeat: w(`UPDATE runs SET lease_expires = ? WHERE status = 'running' AND lease_owner = ? RETURNING id, epoch`),
			effStart: w(`INSERT INTO effects (run_seq, key, status, epoch, output, error, started_at, completed_at)
				SELECT seq, ?, 'started', epoch, NULL, '', ?, NULL FROM runs WHERE id = ? AND status = 'running' AND epoch = ?
				ON CONFLICT (run_seq, key) DO UPDATE SET status = 'started', epoch = excluded.epoch, output = NULL, error = '',
				started_at = excluded.started_at, completed_at = NULL WHERE effects.status != 'completed'`),
			effFinish: w(`UPDATE effects SET status = ?, output = ?, error = ?, completed_at = ?
				WHERE run_seq = (SELECT seq FROM runs WHERE id = ?) AND key = ? AND status = 'started' AND epoch = ?`),
			effClear: w(`DELETE FROM effects WHERE run_seq = ? AND status = 'started'`),
			effDone: w(`INSERT INTO effects (run_seq, key, status, epoch, output, error, started_at, completed_at)
				VALUES (?, ?, 'completed', ?, ?, '', ?, ?)
				ON CONFLICT (run_seq, key) DO UPDATE SET status = 'completed', output = excluded.output, error = '', completed_at = excluded.completed_at`),
			insRollup: w(`INSERT INTO rollups (bucket, process, counts, hists) VALUES (?, ?, ?, ?)`),
			insError:  w(`INSERT INTO errors (at, kind, process, run_id, effect_key, context, message) VALUES (?, ?, ?, ?, ?, ?, ?)`),

			selRun:      r(`SELECT ` + runCols + ` FROM runs WHERE id = ?`),
			selEffects:  r(`SELECT key, status, epoch, output, error, started_at, completed_at FROM effects WHERE run_seq = ? ORDER BY key`),
			selTimeline: r(`SELECT n, at, status, attempt, error, code, note FROM timeline WHERE run_seq = ? ORDER BY n`),
			selData:     r(`SELECT payload, context FROM runs WHERE seq = ?`),
			selRunTL:    r(`SELECT seq, status, attempts, created_at, started_at, tl FROM runs WHERE id = ?`),
			// A root's correlation id is stored as NULL (it is its own id):
			// id = ?1 alone would also match a child named by its own id.
			selChain: r(`SELECT ` + runCols + ` FROM runs WHERE correlation_id = ?1 OR (id = ?1 AND correlation_id IS NULL) ORDER BY depth, seq`),
			selPending: r(`SELECT id, seq, process, coalesce(correlation_id, id), retry_at, created_at, priority, rate_key, conc_key
				FROM runs WHERE status = 'idle' AND seq > ? ORDER BY seq LIMIT ?`),
			selRates:   r(`SELECT rate_key, max(rate_tat) FROM runs WHERE rate_tat > ? GROUP BY rate_key`),
			selRunning: r(`SELECT ` + runCols + ` FROM runs WHERE status = 'running' ORDER BY seq`),
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
	var parent, idem, owner, rateKey, concKey sql.NullString
	var retry, expires, started, completed sql.NullInt64
	var status string
	var created int64
	var tl int
	err := sc.Scan(&r.Seq, &r.ID, &r.Process, &r.Event, &r.CorrelationID, &parent, &r.Depth, &status,
		(*[]byte)(&r.Payload), (*[]byte)(&r.Context), (*[]byte)(&r.Output), &r.Error, &r.ErrorCode, &r.Then, &idem,
		&r.Attempts, &r.Epoch, &retry, &owner, &expires, &created, &started, &completed, &r.Version, &tl,
		&r.Priority, &rateKey, &concKey)
	if err != nil {
		return r, 0, err
	}
	r.Status = store.Status(status)
	r.ParentID, r.IdempotencyKey, r.LeaseOwner = parent.String, idem.String, owner.String
	r.RateKey, r.ConcurrencyKey = rateKey.String, concKey.String
	r.RetryAt, r.LeaseExpires = fromNull(retry), fromNull(expires)
	r.CreatedAt, r.StartedAt, r.CompletedAt = time.Unix(0, created), fromNull(started), fromNull(completed)
	return r, tl, nil
}

// scanClaimed reads one row of claimCols into a run claimed by req; large
// reports that its payload or context was left for the read pool.
func scanClaimed(sc scanner, owner string, now, until time.Time) (r store.Run, large bool, err error) {
	r = store.Run{Status: store.StatusRunning, LeaseOwner: owner, LeaseExpires: until, StartedAt: now}
	var parent sql.NullString
	err = sc.Scan(&r.Seq, &r.ID, &r.Process, &r.Event, &r.CorrelationID, &parent, &r.Depth,
		(*[]byte)(&r.Payload), (*[]byte)(&r.Context), &large, &r.Attempts, &r.Epoch)
	r.ParentID = parent.String
	return r, large, err
}

// scanUpdated reads one row of updCols.
func scanUpdated(sc scanner) (store.Run, int, error) {
	var r store.Run
	var parent, idem, rateKey, concKey sql.NullString
	var retry, started, completed sql.NullInt64
	var status string
	var created int64
	var tl int
	err := sc.Scan(&r.Seq, &r.ID, &r.Process, &r.Event, &r.CorrelationID, &parent, &r.Depth, &status,
		(*[]byte)(&r.Output), &r.Error, &r.ErrorCode, &r.Then, &idem, &r.Attempts, &r.Epoch, &retry,
		&created, &started, &completed, &r.Version, &tl, &r.Priority, &rateKey, &concKey)
	r.Status = store.Status(status)
	r.ParentID, r.IdempotencyKey = parent.String, idem.String
	r.RateKey, r.ConcurrencyKey = rateKey.String, concKey.String
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
