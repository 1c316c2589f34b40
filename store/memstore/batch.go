package memstore

import (
	"context"
	"fmt"

	"github.com/yella-go/yella/store"
)

// AdmitBatch implements store.Store. Every admission is checked before
// any is applied (its parent exists, its run ids are new, in the store and
// in the batch), so the admissions that follow cannot fail half way.
func (s *Store) AdmitBatch(ctx context.Context, as []store.Admission) ([]store.AdmitResult, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	ids := map[string]bool{}
	for i, a := range as {
		if a.ParentID != "" {
			if _, ok := s.runs[a.ParentID]; !ok {
				return nil, &store.BatchError{Index: i, Err: store.ErrNotFound}
			}
		}
		for _, nr := range a.Runs {
			if _, dup := s.runs[nr.ID]; dup || ids[nr.ID] {
				return nil, &store.BatchError{Index: i, Err: fmt.Errorf("memstore: run id %s already exists", nr.ID)}
			}
			ids[nr.ID] = true
		}
	}
	out := make([]store.AdmitResult, len(as))
	for i, a := range as {
		res, err := s.admit(a)
		if err != nil { // checked above: cannot happen
			return nil, &store.BatchError{Index: i, Err: err}
		}
		out[i] = res
	}
	return out, nil
}
