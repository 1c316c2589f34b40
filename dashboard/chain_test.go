package dashboard_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/dashboard"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
)

// widestRead records the most runs one store read returned.
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

// TestRunPageReadsPartOfAWideChain: a run page lists the oldest 200 runs
// of its chain and says how many more there are; it reads those from the
// store, not the whole chain (a fan-out may have any number of runs, each
// with its payload and output).
func TestRunPageReadsPartOfAWideChain(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	st := &widestRead{Store: mem}
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	h, err := dashboard.New(eng, dashboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := mem.Admit(ctx, store.Admission{Event: "wide", Now: now, Runs: []store.NewRun{{ID: "wide-root", Process: "fan"}}}); err != nil {
		t.Fatal(err)
	}
	var as []store.Admission
	for i := range 299 {
		as = append(as, store.Admission{Event: "wide", Now: now, ParentID: "wide-root", CorrelationID: "wide-root", Depth: 1,
			Runs: []store.NewRun{{ID: fmt.Sprintf("wide-%03d", i), Process: "fan"}}})
	}
	if _, err := mem.AdmitBatch(ctx, as); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/runs/wide-250", nil))
	body := w.Body.String()
	if w.Code != 200 {
		t.Fatalf("run page: %d %s", w.Code, body)
	}
	if !strings.Contains(body, "100 more runs in this chain") {
		t.Errorf("the page does not say 100 more runs in the chain")
	}
	if !strings.Contains(body, `"/runs/wide-198"`) || strings.Contains(body, `"/runs/wide-199"`) {
		t.Errorf("the chain list is not the oldest 200 runs (the root and wide-000 to wide-198)")
	}
	if st.max > 201 {
		t.Errorf("one store read returned %d runs, want at most 201", st.max)
	}
}
