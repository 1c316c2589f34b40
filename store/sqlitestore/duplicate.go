package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/yella-go/yella/store"
)

// admittedBefore answers a repeated idempotent admission from the read
// pool, without a write transaction: when every process of a was admitted
// before under its key (its run exists, or retention pruned it and kept
// the key), the result is what the writer would decide, and known is true.
// A key is never taken back while its run exists, and a kept key only by
// PruneKeys, so the answer holds at the moment of the read. Otherwise
// known is false and the admission goes to the writer, which decides again
// inside its transaction.
func (s *Store) admittedBefore(ctx context.Context, a *store.Admission) (res store.AdmitResult, known bool, err error) {
	if a.IdempotencyKey == "" || a.ParentID != "" || len(a.Runs) == 0 {
		return res, false, nil
	}
	if err := s.readable(); err != nil {
		return res, false, err
	}
	for _, nr := range a.Runs {
		r, _, err := scanRun(s.st.rselIdem.QueryRowContext(ctx, a.Event, a.IdempotencyKey, nr.Process))
		if err == nil {
			res.Existing = append(res.Existing, r)
			continue
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return store.AdmitResult{}, false, err
		}
		kept := store.Run{Process: nr.Process, Event: a.Event, IdempotencyKey: a.IdempotencyKey, Status: store.StatusCompleted}
		var created int64
		err = s.st.rselKept.QueryRowContext(ctx, a.Event, a.IdempotencyKey, nr.Process).Scan(&kept.ID, &created)
		if errors.Is(err, sql.ErrNoRows) {
			return store.AdmitResult{}, false, nil // a process not admitted yet: the writer decides
		}
		if err != nil {
			return store.AdmitResult{}, false, err
		}
		kept.CreatedAt = time.Unix(0, created)
		res.Pruned = append(res.Pruned, kept)
	}
	return res, true, nil
}
