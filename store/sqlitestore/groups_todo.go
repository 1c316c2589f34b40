package sqlitestore

import (
	"context"
	"errors"
	"time"
)

// PauseSchedule implements store.Store. TEMPORARY: replaced by the real
// implementation before this branch merges.
func (s *Store) PauseSchedule(ctx context.Context, name string, paused bool, now time.Time) error {
	return errors.New("sqlitestore: schedule pauses not implemented yet")
}

// PausedSchedules implements store.Store. TEMPORARY (see PauseSchedule).
func (s *Store) PausedSchedules(ctx context.Context) (map[string]time.Time, error) {
	return nil, nil
}

// PauseSchedule implements store.Store. TEMPORARY (see Store.PauseSchedule).
func (s *ReadOnlyStore) PauseSchedule(ctx context.Context, name string, paused bool, now time.Time) error {
	return errors.New("sqlitestore: schedule pauses not implemented yet")
}

// PausedSchedules implements store.Store. TEMPORARY (see Store.PauseSchedule).
func (s *ReadOnlyStore) PausedSchedules(ctx context.Context) (map[string]time.Time, error) {
	return nil, nil
}
