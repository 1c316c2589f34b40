package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// ownerNums are the numbers of the owners this store claimed for: a
// running run's row names its lease owner by number (the owners table),
// 4 bytes where the owner's id takes 30-40, in the row version and the
// runs_inflight entry every claim writes. An owner's number never
// changes and is never given to another owner, so it is kept for the
// store's life.
type ownerNums struct {
	mu sync.Mutex
	n  map[string]int32
}

// ownerNum returns owner's number, adding the owner to the owners table
// (committed at once, outside any batch) the first time any store claims
// for it.
func (s *Store) ownerNum(ctx context.Context, owner string) (int32, error) {
	s.owners.mu.Lock()
	n, ok := s.owners.n[owner]
	s.owners.mu.Unlock()
	if ok {
		return n, nil
	}
	for try := 0; ; try++ {
		err := s.pool.QueryRow(ctx, s.q.ownerNum, owner).Scan(&n)
		if err == nil {
			break
		}
		// No row: another store added the owner concurrently, after
		// this statement's snapshot; the next statement sees it.
		if !errors.Is(err, pgx.ErrNoRows) || try == 2 {
			return 0, fmt.Errorf("pgstore: number of lease owner %q: %w", owner, err)
		}
	}
	s.owners.mu.Lock()
	if s.owners.n == nil {
		s.owners.n = map[string]int32{}
	}
	s.owners.n[owner] = n
	s.owners.mu.Unlock()
	return n, nil
}

// knownOwnerNum returns owner's number if this store has it already
// (ownerNum), without a round trip.
func (s *Store) knownOwnerNum(owner string) (int32, bool) {
	s.owners.mu.Lock()
	defer s.owners.mu.Unlock()
	n, ok := s.owners.n[owner]
	return n, ok
}
