package yella_test

import (
	"context"
	"testing"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/storespy"
	"github.com/yella-go/yella/store/memstore"
)

// TestTraceOfAWideChainIsBounded: a chain may have any number of runs;
// a trace covers its oldest MaxTraceRuns, counts the rest (More), and
// reads the store 100 runs at a time, never the whole chain. Named by a
// child it traces the same chain; an unknown id is CodeRunNotFound.
func TestTraceOfAWideChainIsBounded(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	st := storespy.New(mem)
	e, err := yella.New(yella.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	const children = yella.MaxTraceRuns + 49
	if err := storespy.FanOut(ctx, mem, "wide-root", "fan", children, nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"wide-root", "wide-root-0500"} {
		st.Reset()
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
		if n := st.Max(); n > 100 {
			t.Errorf("trace of %s: one store read returned %d runs, want at most 100", id, n)
		}
	}
	if _, err := e.Trace(ctx, "no-such-run"); yella.CodeOf(err) != yella.CodeRunNotFound {
		t.Errorf("trace of an unknown id: %v, want CodeRunNotFound", err)
	}
}
