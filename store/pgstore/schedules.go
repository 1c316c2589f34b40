package pgstore

import (
	"context"
	"time"
)

// PauseSchedule implements store.Store: a pause inserts the schedule's row
// unless it is there (the first pause's time is kept); a resume deletes it,
// whether it is there or not.
func (s *Store) PauseSchedule(ctx context.Context, name string, paused bool, now time.Time) error {
	return s.run(ctx, func(w *wtx) error {
		var err error
		if paused {
			_, err = w.tx.Exec(w.ctx, s.q.pause, name, now.UnixNano())
		} else {
			_, err = w.tx.Exec(w.ctx, s.q.resume, name)
		}
		return err
	})
}

// PausedSchedules implements store.Store.
func (s *Store) PausedSchedules(ctx context.Context) (map[string]time.Time, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.selPaused)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]time.Time{}
	var name string
	var at int64
	for rows.Next() {
		if err := rows.Scan(&name, &at); err != nil {
			return nil, err
		}
		out[name] = time.Unix(0, at)
	}
	return out, rows.Err()
}
