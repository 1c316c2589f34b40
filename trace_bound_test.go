package yella_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
)

// widestRead records the most runs one store read returned (a listing
// or a chain).
type widestRead struct {
	store.Store
	mu  sync.Mutex
	max int
}

func (w *widestRead) saw(n int) {
	w.mu.Lock()
	w.max = max(w.max, n)
	w.mu.Unlock()
}

func (w *widestRead) Runs(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	rs, err := w.Store.Runs(ctx, f)
	w.saw(len(rs))
	return rs, err
}

func (w *widestRead) Chain(ctx context.Context, corr string) ([]store.Run, error) {
	rs, err := w.Store.Chain(ctx, corr)
	w.saw(len(rs))
	return rs, err
}

// TestTraceOfAWideChainIsBounded: a chain may have any number of runs;
// a trace covers its oldest MaxTraceRuns, counts the rest (More), and
// reads the store 100 runs at a time, never the whole chain. Named by a
// child it traces the same chain; an unknown id is CodeRunNotFound.
func TestTraceOfAWideChainIsBounded(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	st := &widestRead{Store: mem}
	e, err := yella.New(yella.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := mem.Admit(ctx, store.Admission{Event: "wide", Now: now, Runs: []store.NewRun{{ID: "wide-root", Process: "fan"}}}); err != nil {
		t.Fatal(err)
	}
	const children = yella.MaxTraceRuns + 49
	var as []store.Admission
	for i := range children {
		as = append(as, store.Admission{Event: "wide", Now: now, ParentID: "wide-root", CorrelationID: "wide-root", Depth: 1,
			Runs: []store.NewRun{{ID: fmt.Sprintf("wide-%04d", i), Process: "fan"}}})
	}
	if _, err := mem.AdmitBatch(ctx, as); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"wide-root", "wide-0500"} {
		st.max = 0
		tr, err := e.Trace(ctx, id)
		if err != nil {
			t.Fatalf("trace of %s: %v", id, err)
		}
		if len(tr.Spans) != yella.MaxTraceRuns || tr.More != children+1-yella.MaxTraceRuns || tr.CorrelationID != "wide-root" {
			t.Errorf("trace of %s: %d spans, %d more, chain %s; want %d, %d, wide-root", id, len(tr.Spans), tr.More, tr.CorrelationID,
				yella.MaxTraceRuns, children+1-yella.MaxTraceRuns)
		}
		if len(tr.Spans) > 0 && (tr.Spans[0].RunID != "wide-root" || tr.Spans[0].Level != 0 || tr.Spans[1].Level != 1) {
			t.Errorf("trace of %s starts %+v, %+v; want the root, then its children a level down", id, tr.Spans[0], tr.Spans[1])
		}
		if st.max > 100 {
			t.Errorf("trace of %s: one store read returned %d runs, want at most 100", id, st.max)
		}
	}
	if _, err := e.Trace(ctx, "no-such-run"); yella.CodeOf(err) != yella.CodeRunNotFound {
		t.Errorf("trace of an unknown id: %v, want CodeRunNotFound", err)
	}
}
