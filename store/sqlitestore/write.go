package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/yella-go/yella/store"
)

// Admit implements store.Store.
func (s *Store) Admit(ctx context.Context, a store.Admission) (store.AdmitResult, error) {
	var res store.AdmitResult
	err := s.do(ctx, func(w *wtx) error {
		var err error
		res, err = w.admit(&a)
		return err
	})
	return res, err
}

// admitPlan is what an admission will do, decided before anything is
// written so that a refusal writes nothing.
type admitPlan struct {
	res   store.AdmitResult
	admit []store.NewRun
}

func (w *wtx) planAdmit(a *store.Admission) (admitPlan, error) {
	var p admitPlan
	if a.ParentID != "" {
		var seq int64
		if err := w.s.st.seqOf.QueryRowContext(w.ctx, a.ParentID).Scan(&seq); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return p, store.ErrNotFound
			}
			return p, err
		}
	}
	planned := map[string]int{}
	for _, nr := range a.Runs {
		if a.IdempotencyKey != "" {
			r, _, err := scanRun(w.s.st.selIdem.QueryRowContext(w.ctx, a.Event, a.IdempotencyKey, nr.Process))
			if err == nil {
				p.res.Existing = append(p.res.Existing, r)
				continue
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return p, err
			}
			kept := store.Run{Process: nr.Process, Event: a.Event, IdempotencyKey: a.IdempotencyKey, Status: store.StatusCompleted}
			var created int64
			err = w.s.st.selKept.QueryRowContext(w.ctx, a.Event, a.IdempotencyKey, nr.Process).Scan(&kept.ID, &created)
			if err == nil {
				kept.CreatedAt = time.Unix(0, created)
				p.res.Pruned = append(p.res.Pruned, kept)
				continue
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return p, err
			}
		}
		if nr.Limit > 0 {
			n, err := w.active(nr.Process)
			if err != nil {
				return p, err
			}
			if n+planned[nr.Process] >= nr.Limit {
				p.res.Dropped = append(p.res.Dropped, nr)
				continue
			}
		}
		planned[nr.Process]++
		p.admit = append(p.admit, nr)
	}
	return p, nil
}

func (w *wtx) writeAdmit(a *store.Admission, p *admitPlan) error {
	for _, nr := range p.admit {
		corr := a.CorrelationID
		if corr == "" {
			corr = nr.ID
		}
		stored := any(corr)
		if corr == nr.ID {
			stored = nil // a root: its correlation id is its own id
		}
		w.seq++ // the writer is the only one to create runs: no RETURNING needed
		seq := w.seq
		if _, err := w.exec(w.s.st.insRun, seq, nr.ID, nr.Process, a.Event, stored, nullStr(a.ParentID), a.Depth,
			blob(a.Payload), blob(a.Context), nullStr(a.IdempotencyKey), a.Now.UnixNano()); err != nil {
			return err
		}
		w.moved(nr.Process, "", store.StatusIdle)
		p.res.Admitted = append(p.res.Admitted, store.Run{
			ID: nr.ID, Seq: seq, Process: nr.Process, Event: a.Event, CorrelationID: corr, ParentID: a.ParentID,
			Depth: a.Depth, Status: store.StatusIdle, Payload: a.Payload, Context: a.Context,
			IdempotencyKey: a.IdempotencyKey, CreatedAt: time.Unix(0, a.Now.UnixNano()),
		})
	}
	return nil
}

func (w *wtx) admit(a *store.Admission) (store.AdmitResult, error) {
	p, err := w.planAdmit(a)
	if err != nil {
		return store.AdmitResult{}, err
	}
	if err := w.writeAdmit(a, &p); err != nil {
		return store.AdmitResult{}, err
	}
	return p.res, nil
}

// Claim implements store.Store.
func (s *Store) Claim(ctx context.Context, req store.ClaimRequest) ([]store.Run, error) {
	s.mu.Lock()
	s.live[req.Owner] = true
	s.mu.Unlock()
	var out []store.Run
	var large []int // indexes of out whose data is read from the read pool
	err := s.do(ctx, func(w *wtx) error {
		out, large = out[:0], large[:0]
		for _, id := range req.IDs {
			// The running timeline entry stays implicit until the attempt ends.
			r, big, err := scanClaimed(w.s.st.claim.QueryRowContext(w.ctx, req.Owner, req.LeaseUntil.UnixNano(), req.Now.UnixNano(), id, req.Now.UnixNano()),
				req.Owner, req.Now, req.LeaseUntil)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			w.moved(r.Process, store.StatusIdle, store.StatusRunning)
			if big {
				large = append(large, len(out))
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, i := range large {
		// Committed before this read, and only this claim's attempt may
		// change the context from now on, so the read is consistent.
		if err := s.st.selData.QueryRowContext(ctx, out[i].Seq).Scan((*[]byte)(&out[i].Payload), (*[]byte)(&out[i].Context)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// timeline appends the entry of a transition that moved a run from one
// status, as entry n (the run's new entry count). If the transition ended an
// attempt, the attempt's implicit running entry is written with it.
func (w *wtx) timeline(r *store.Run, from store.Status, n int, at time.Time, errMsg, code, note string) error {
	var err error
	if from == store.StatusRunning {
		_, err = w.exec(w.s.st.insTL2, r.Seq, n, r.StartedAt.UnixNano(), r.Attempts, at.UnixNano(), string(r.Status), errMsg, code, note)
	} else {
		_, err = w.exec(w.s.st.insTL, r.Seq, n, at.UnixNano(), string(r.Status), r.Attempts, errMsg, code, note)
	}
	return err
}

// Update implements store.Store.
func (s *Store) Update(ctx context.Context, u store.Update) (store.UpdateResult, error) {
	var res store.UpdateResult
	err := s.do(ctx, func(w *wtx) error {
		var err error
		res, err = w.update(&u)
		return err
	})
	return res, err
}

func (w *wtx) update(u *store.Update) (store.UpdateResult, error) {
	var res store.UpdateResult
	// Read the run when a precondition needs more than the UPDATE's WHERE.
	var cur store.Run
	needRead := len(u.From) > 0 || u.Reclaim || u.Epoch == 0
	if needRead {
		var err error
		cur, _, err = scanRun(w.s.st.selRunW.QueryRowContext(w.ctx, u.RunID))
		if errors.Is(err, sql.ErrNoRows) {
			return res, store.ErrNotFound
		}
		if err != nil {
			return res, err
		}
		if u.Epoch != 0 && (cur.Status != store.StatusRunning || cur.Epoch != u.Epoch) {
			return res, store.ErrFenced
		}
		if u.Reclaim && cur.LeaseExpires.After(u.Now) && w.s.ownerAlive(cur.LeaseOwner) {
			return res, store.ErrFenced
		}
		if len(u.From) > 0 && !statusIn(cur.Status, u.From) {
			return res, &store.StatusError{RunID: cur.ID, Status: cur.Status}
		}
	}
	to, errMsg, code, note := u.To, u.Error, u.ErrorCode, u.Note
	var plan admitPlan
	if u.Children != nil {
		var err error
		if plan, err = w.planAdmit(u.Children); err != nil {
			return res, err
		}
		if len(plan.admit) == 0 {
			if u.RequireChildren || u.NoChildren == nil {
				return res, store.ErrNotAdmitted
			}
			to, errMsg, code, note = u.NoChildren.To, u.NoChildren.Error, u.NoChildren.ErrorCode, u.NoChildren.Note
		}
	}
	// retry_at is set for an idle run and cleared otherwise: a run
	// cancelled while waiting for a retry has no next attempt.
	outMode, thenMode, retryAt := 0, 0, any(nil)
	switch to {
	case store.StatusCompleted, store.StatusDeferred:
		outMode, thenMode = 1, 1
	case store.StatusIdle:
		outMode, retryAt = 2, ns(u.RetryAt)
	}
	args := []any{string(to), errMsg, code, outMode, blob(u.Output), thenMode, u.Then, 1, retryAt,
		u.Now.UnixNano(), u.ResetAttempts, u.Version}
	var row *sql.Row
	if needRead {
		row = w.s.st.update.QueryRowContext(w.ctx, append(args, cur.Seq)...)
	} else {
		row = w.s.st.finish.QueryRowContext(w.ctx, append(args, u.RunID, u.Epoch)...)
	}
	var r store.Run
	var tl int
	var err error
	if needRead {
		r, tl, err = scanUpdated(row)
	} else {
		// The attempt knows the run; return what the update decided
		// (store.UpdateResult) without reading the rest back.
		var started int64
		err = row.Scan(&r.Seq, &r.Process, &r.Attempts, &started, &tl)
		r.ID, r.Epoch, r.StartedAt, r.Status, r.Error, r.ErrorCode = u.RunID, u.Epoch, time.Unix(0, started), to, errMsg, code
		switch to {
		case store.StatusCompleted, store.StatusDeferred:
			r.Output, r.Then, r.CompletedAt = u.Output, u.Then, u.Now
		case store.StatusIdle:
			r.RetryAt = u.RetryAt
		default:
			r.CompletedAt = u.Now
		}
	}
	if errors.Is(err, sql.ErrNoRows) { // the epoch no longer owns the run
		var seq int64
		if err := w.s.st.seqOf.QueryRowContext(w.ctx, u.RunID).Scan(&seq); errors.Is(err, sql.ErrNoRows) {
			return res, store.ErrNotFound
		}
		return res, store.ErrFenced
	}
	if err != nil {
		return res, err
	}
	from := store.StatusRunning
	if needRead {
		from = cur.Status
	}
	w.moved(r.Process, from, to)
	if u.Children != nil {
		if err := w.writeAdmit(u.Children, &plan); err != nil {
			return res, err
		}
		res.Children = plan.res
	}
	if u.ClearStartedEffects {
		if _, err := w.exec(w.s.st.effClear, r.Seq); err != nil {
			return res, err
		}
	}
	if d := u.CompleteEffect; d != nil {
		if _, err := w.exec(w.s.st.effDone, r.Seq, d.Key, r.Epoch, blob(d.Output), u.Now.UnixNano(), u.Now.UnixNano()); err != nil {
			return res, err
		}
	}
	if err := w.timeline(&r, from, tl, u.Now, errMsg, code, note); err != nil {
		return res, err
	}
	res.Run = r
	return res, nil
}

func statusIn(st store.Status, set []store.Status) bool {
	for _, v := range set {
		if v == st {
			return true
		}
	}
	return false
}

// ownerAlive reports whether a lease owner may still be alive: one seen in
// this process, or any owner when the store could not take its exclusive
// lock (then only lease expiry proves death).
func (s *Store) ownerAlive(owner string) bool {
	if !s.exclusive {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[owner]
}

// SetContext implements store.Store.
func (s *Store) SetContext(ctx context.Context, runID string, epoch int64, c json.RawMessage) error {
	return s.do(ctx, func(w *wtx) error {
		res, err := w.exec(w.s.st.setCtx, blob(c), runID, epoch)
		if err != nil {
			return err
		}
		return w.fencedOr404(res, runID)
	})
}

// fencedOr404 turns "no row changed" into ErrNotFound or ErrFenced.
func (w *wtx) fencedOr404(res sql.Result, runID string) error {
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return err
	}
	var seq int64
	if err := w.s.st.seqOf.QueryRowContext(w.ctx, runID).Scan(&seq); errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return store.ErrFenced
}

// Heartbeat implements store.Store.
func (s *Store) Heartbeat(ctx context.Context, owner string, now, until time.Time) ([]store.Lease, error) {
	s.mu.Lock()
	s.live[owner] = true
	s.mu.Unlock()
	var out []store.Lease
	err := s.do(ctx, func(w *wtx) error {
		out = out[:0]
		rows, err := w.s.st.heartbeat.QueryContext(w.ctx, until.UnixNano(), owner)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var l store.Lease
			if err := rows.Scan(&l.RunID, &l.Epoch); err != nil {
				return err
			}
			out = append(out, l)
		}
		return rows.Err()
	})
	return out, err
}

// StartEffect implements store.Store.
func (s *Store) StartEffect(ctx context.Context, runID string, epoch int64, key string, now time.Time) error {
	return s.do(ctx, func(w *wtx) error {
		res, err := w.exec(w.s.st.effStart, key, now.UnixNano(), runID, epoch)
		if err != nil {
			return err
		}
		return w.fencedOr404(res, runID)
	})
}

// FinishEffect implements store.Store.
func (s *Store) FinishEffect(ctx context.Context, runID string, epoch int64, key string, status store.EffectStatus, output json.RawMessage, errMsg string, now time.Time) error {
	return s.do(ctx, func(w *wtx) error {
		res, err := w.exec(w.s.st.effFinish, string(status), blob(output), errMsg, now.UnixNano(), runID, key, epoch)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				err = store.ErrFenced
			}
			return err
		}
		return nil
	})
}

// AddRollups implements store.Store.
func (s *Store) AddRollups(ctx context.Context, rs []store.Rollup) error {
	return s.do(ctx, func(w *wtx) error {
		for _, r := range rs {
			counts, err := json.Marshal(r.Counts)
			if err != nil {
				return err
			}
			var hists []byte
			if len(r.Hists) > 0 {
				if hists, err = json.Marshal(r.Hists); err != nil {
					return err
				}
			}
			if _, err := w.exec(w.s.st.insRollup, r.Bucket.UnixNano(), r.Process, counts, hists); err != nil {
				return err
			}
		}
		return nil
	})
}

// AddErrors implements store.Store.
func (s *Store) AddErrors(ctx context.Context, es []store.ErrorRecord) error {
	return s.do(ctx, func(w *wtx) error {
		for _, e := range es {
			if _, err := w.exec(w.s.st.insError, e.At.UnixNano(), e.Kind, e.Process, e.RunID, e.EffectKey, e.Context, e.Message); err != nil {
				return err
			}
		}
		return nil
	})
}

// Prune implements store.Store. One call is one transaction of at most
// p.Limit runs, so retention never holds the writer for long.
func (s *Store) Prune(ctx context.Context, p store.PruneRequest) (int, error) {
	var n int
	err := s.do(ctx, func(w *wtx) error {
		n = 0
		if !p.CompletedBefore.IsZero() {
			rows, err := w.s.conn.QueryContext(w.ctx, `SELECT seq, process FROM runs r
				WHERE status = 'completed' AND completed_at < ?
				AND NOT EXISTS (SELECT 1 FROM runs c WHERE c.parent_id = r.id)
				ORDER BY completed_at LIMIT ?`, p.CompletedBefore.UnixNano(), p.Limit)
			if err != nil {
				return err
			}
			type victim struct {
				seq     int64
				process string
			}
			var vs []victim
			for rows.Next() {
				var v victim
				if err := rows.Scan(&v.seq, &v.process); err != nil {
					rows.Close()
					return err
				}
				vs = append(vs, v)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			for _, v := range vs {
				// The run's idempotency key outlives it (PruneKeys).
				for _, q := range []string{`INSERT OR REPLACE INTO pruned_keys (event, key, process, run_id, created_at)
						SELECT event, idem_key, process, id, created_at FROM runs WHERE seq = ? AND idem_key IS NOT NULL`,
					"DELETE FROM timeline WHERE run_seq = ?", "DELETE FROM effects WHERE run_seq = ?", "DELETE FROM runs WHERE seq = ?"} {
					if _, err := w.s.conn.ExecContext(w.ctx, q, v.seq); err != nil {
						return err
					}
				}
				w.moved(v.process, store.StatusCompleted, "")
				n++
			}
		}
		if !p.ObservabilityBefore.IsZero() {
			cut := p.ObservabilityBefore.UnixNano()
			if _, err := w.s.conn.ExecContext(w.ctx, `DELETE FROM rollups WHERE id IN (SELECT id FROM rollups WHERE bucket < ? LIMIT ?)`, cut, 10*p.Limit); err != nil {
				return err
			}
			if _, err := w.s.conn.ExecContext(w.ctx, `DELETE FROM errors WHERE id IN (SELECT id FROM errors WHERE at < ? LIMIT ?)`, cut, 10*p.Limit); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// PruneKeys implements store.Store: one transaction of at most limit keys.
func (s *Store) PruneKeys(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.do(ctx, func(w *wtx) error {
		res, err := w.s.conn.ExecContext(w.ctx, `DELETE FROM pruned_keys WHERE (event, key, process) IN
			(SELECT event, key, process FROM pruned_keys WHERE created_at < ? ORDER BY created_at LIMIT ?)`, before.UnixNano(), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
