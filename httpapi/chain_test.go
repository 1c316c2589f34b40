package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/store"
)

// widestRead records the most runs one store read returned: a listing
// or a chain.
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

// TestChainReadInPages: a chain may have any number of runs (a fan-out's
// children), so GET /api/runs/{id}/chain lists it as a run listing does:
// oldest first, a page of limit runs (the server's MaxPageSize by
// default) with next for the rest, read 100 runs at a time from the
// store, never the whole chain at once. Named by any run of the
// chain, it lists the same runs; an id that names none is 404.
func TestChainReadInPages(t *testing.T) {
	var wide *widestRead
	f := newFixtureWith(t, func(s store.Store) store.Store { wide = &widestRead{Store: s}; return wide },
		httpapi.Options{Version: "test", Keepalive: time.Hour})
	ctx := context.Background()
	now := time.Now()
	const children = 249
	root := store.Admission{Event: "wide", Now: now, Runs: []store.NewRun{{ID: "wide-root", Process: "fan"}}}
	if _, err := f.st.Admit(ctx, root); err != nil {
		t.Fatal(err)
	}
	var as []store.Admission
	for i := range children {
		as = append(as, store.Admission{Event: "wide", Now: now, ParentID: "wide-root", CorrelationID: "wide-root", Depth: 1,
			Runs: []store.NewRun{{ID: fmt.Sprintf("wide-%03d", i), Process: "fan"}}})
	}
	if _, err := f.st.AdmitBatch(ctx, as); err != nil {
		t.Fatal(err)
	}
	type page struct {
		Runs []struct{ ID, CorrelationID string } `json:"runs"`
		Next string                               `json:"next"`
	}
	get := func(path string) page {
		t.Helper()
		code, body := f.do(t, "GET", path, "")
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		var p page
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, via := range []string{"wide-root", "wide-117"} {
		wide.max = 0
		var ids []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 3 {
				t.Fatalf("via %s: more than 3 pages of 100", via)
			}
			p := get("/api/runs/" + via + "/chain?limit=100" + cursor)
			for _, r := range p.Runs {
				if r.CorrelationID != "wide-root" {
					t.Errorf("via %s: run %s of chain %s listed", via, r.ID, r.CorrelationID)
				}
				ids = append(ids, r.ID)
			}
			if p.Next == "" {
				break
			}
			cursor = "&cursor=" + url.QueryEscape(p.Next)
		}
		if len(ids) != children+1 || ids[0] != "wide-root" || ids[1] != "wide-000" || ids[children] != fmt.Sprintf("wide-%03d", children-1) {
			t.Errorf("via %s: %d runs (first %v), want the root then the %d children in order", via, len(ids), ids[:min(len(ids), 3)], children)
		}
		if all := get("/api/runs/" + via + "/chain"); len(all.Runs) != children+1 || all.Next != "" {
			t.Errorf("via %s, no limit: %d runs, next %q; want all %d in one page", via, len(all.Runs), all.Next, children+1)
		}
		if wide.max > 101 { // a batch of 100, and one more to tell whether more follow
			t.Errorf("via %s: one store read returned %d runs, want at most 101", via, wide.max)
		}
	}
	if code, body := f.do(t, "GET", "/api/runs/no-such-run/chain", ""); code != 404 {
		t.Errorf("unknown id: %d %s", code, body)
	}
}
