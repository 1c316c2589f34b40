package pgstore

import (
	"context"
	"errors"
	"time"
)

// RateStates implements store.Store. Flow control is not yet stored by
// this store.
func (s *Store) RateStates(ctx context.Context, now time.Time) (map[string]time.Time, error) {
	return nil, errors.New("pgstore: rate limits are not supported yet")
}
