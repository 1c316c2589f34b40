package pgstore

import (
	"context"
	"errors"
	"time"
)

// PauseSchedule implements store.Store. TEMPORARY: replaced by the real
// implementation before this branch merges.
func (s *Store) PauseSchedule(ctx context.Context, name string, paused bool, now time.Time) error {
	return errors.New("pgstore: schedule pauses not implemented yet")
}

// PausedSchedules implements store.Store. TEMPORARY (see PauseSchedule).
func (s *Store) PausedSchedules(ctx context.Context) (map[string]time.Time, error) {
	return nil, nil
}
