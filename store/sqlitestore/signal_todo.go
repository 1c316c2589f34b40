package sqlitestore

import (
	"context"
	"errors"

	"github.com/yella-go/yella/store"
)

// Signal implements store.Store. TEMPORARY: replaced by the real
// implementation before this branch merges.
func (s *Store) Signal(ctx context.Context, req store.SignalRequest) (store.SignalResult, error) {
	return store.SignalResult{}, errors.New("sqlitestore: signals not implemented yet")
}

// Signal implements store.Store: a read-only store refuses it.
func (s *ReadOnlyStore) Signal(ctx context.Context, req store.SignalRequest) (store.SignalResult, error) {
	return store.SignalResult{}, errors.New("sqlitestore: signals not implemented yet")
}
