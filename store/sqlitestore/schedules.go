package sqlitestore

import (
	"context"
	"time"
)

// PauseSchedule implements store.Store: one row of paused_schedules per
// paused schedule. A second pause leaves the row, and so the time of the
// first pause; a resume deletes it, and resuming a schedule that is not
// paused changes nothing.
func (s *Store) PauseSchedule(ctx context.Context, name string, paused bool, now time.Time) error {
	return s.do(ctx, func(w *wtx) error {
		var err error
		if paused {
			_, err = w.s.conn.ExecContext(w.ctx, `INSERT INTO paused_schedules (name, paused_at) VALUES (?, ?)
				ON CONFLICT (name) DO NOTHING`, name, now.UnixNano())
		} else {
			_, err = w.s.conn.ExecContext(w.ctx, `DELETE FROM paused_schedules WHERE name = ?`, name)
		}
		return err
	})
}

// PausedSchedules implements store.Store, from the read pool: a pause or
// resume is committed before PauseSchedule returns, so a later read sees
// it.
func (s *Store) PausedSchedules(ctx context.Context) (map[string]time.Time, error) {
	if err := s.readable(); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT name, paused_at FROM paused_schedules`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var name string
		var at int64
		if err := rows.Scan(&name, &at); err != nil {
			return nil, err
		}
		out[name] = time.Unix(0, at)
	}
	return out, rows.Err()
}
