package dashboard_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/dashboard"
	"github.com/yella-go/yella/internal/storespy"
	"github.com/yella-go/yella/store/memstore"
)

// TestRunPageReadsPartOfAWideChain: a run page lists the oldest 200 runs
// of its chain and says how many more there are; it reads those from the
// store, not the whole chain (a fan-out may have any number of runs, each
// with its payload and output).
func TestRunPageReadsPartOfAWideChain(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	st := storespy.New(mem)
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	h, err := dashboard.New(eng, dashboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := storespy.FanOut(ctx, mem, "wide-root", "fan", 299, nil); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/runs/wide-root-0250", nil))
	body := w.Body.String()
	if w.Code != 200 {
		t.Fatalf("run page: %d %s", w.Code, body)
	}
	if !strings.Contains(body, "100 more runs in this chain") {
		t.Errorf("the page does not say 100 more runs in the chain")
	}
	if !strings.Contains(body, `"/runs/wide-root-0198"`) || strings.Contains(body, `"/runs/wide-root-0199"`) {
		t.Errorf("the chain list is not the oldest 200 runs (the root and its children 0000 to 0198)")
	}
	if n := st.Max(); n > 201 {
		t.Errorf("one store read returned %d runs, want at most 201", n)
	}
}
