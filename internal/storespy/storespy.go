// Package storespy holds store helpers for tests that bound what one read
// of a wide chain costs: a wrapper that records the most runs one store
// read returned, and a fan-out to read.
package storespy

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/yella-go/yella/store"
)

// Widest is a store.Store that records the most runs one listing (Runs)
// or chain (Chain) read returned, and how many runs its reads by id
// (RunsByID) returned in all.
type Widest struct {
	store.Store
	mu   sync.Mutex
	max  int
	byID int
}

// New wraps s.
func New(s store.Store) *Widest { return &Widest{Store: s} }

// Wrap wraps s as New does and returns the store to hand an engine: one
// that is a store.Shared when s is (an engine on it then runs as a node),
// whose Runs and Chain are the Widest's.
func Wrap(s store.Store) (store.Store, *Widest) {
	w := New(s)
	if sh, ok := s.(store.Shared); ok {
		return &shared{Shared: sh, w: w}, w
	}
	return w, w
}

// shared is a store.Shared whose reads of runs are recorded by w.
type shared struct {
	store.Shared
	w *Widest
}

// Runs implements store.Store, recording the runs it returns.
func (s *shared) Runs(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	return s.w.Runs(ctx, f)
}

// RunsByID implements store.Store, counting the runs it returns.
func (s *shared) RunsByID(ctx context.Context, ids []string) ([]store.Run, error) {
	return s.w.RunsByID(ctx, ids)
}

// Chain implements store.Store, recording the runs it returns.
func (s *shared) Chain(ctx context.Context, corr string) ([]store.Run, error) {
	return s.w.Chain(ctx, corr)
}

// Max returns the most runs one read returned since New or Reset.
func (w *Widest) Max() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.max
}

// ByID returns how many runs the reads by id (RunsByID) returned in all
// since New or Reset.
func (w *Widest) ByID() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byID
}

// Reset forgets the reads so far.
func (w *Widest) Reset() {
	w.mu.Lock()
	w.max, w.byID = 0, 0
	w.mu.Unlock()
}

// RunsByID implements store.Store, counting the runs it returns (ByID).
func (w *Widest) RunsByID(ctx context.Context, ids []string) ([]store.Run, error) {
	rs, err := w.Store.RunsByID(ctx, ids)
	w.mu.Lock()
	w.byID += len(rs)
	w.mu.Unlock()
	return rs, err
}

func (w *Widest) saw(n int) {
	w.mu.Lock()
	w.max = max(w.max, n)
	w.mu.Unlock()
}

// Runs implements store.Store, recording the runs it returns.
func (w *Widest) Runs(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	rs, err := w.Store.Runs(ctx, f)
	w.saw(len(rs))
	return rs, err
}

// Chain implements store.Store, recording the runs it returns.
func (w *Widest) Chain(ctx context.Context, corr string) ([]store.Run, error) {
	rs, err := w.Store.Chain(ctx, corr)
	w.saw(len(rs))
	return rs, err
}

// FanOut admits to st a root run of process proc with id root, then, in
// one batch, n children of it at depth 1 with ids root-0000, root-0001, …
// (in that order), every run of event "wide" with the given payload.
func FanOut(ctx context.Context, st store.Store, root, proc string, n int, payload []byte) error {
	now := time.Now()
	if _, err := st.Admit(ctx, store.Admission{Event: "wide", Payload: payload, Now: now, Runs: []store.NewRun{{ID: root, Process: proc}}}); err != nil {
		return err
	}
	as := make([]store.Admission, n)
	for i := range as {
		as[i] = store.Admission{Event: "wide", Payload: payload, Now: now, ParentID: root, CorrelationID: root, Depth: 1,
			Runs: []store.NewRun{{ID: fmt.Sprintf("%s-%04d", root, i), Process: proc}}}
	}
	_, err := st.AdmitBatch(ctx, as)
	return err
}
