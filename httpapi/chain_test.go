package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/internal/storespy"
	"github.com/yella-go/yella/store"
)

// TestChainReadInPages: a chain may have any number of runs (a fan-out's
// children), so GET /api/runs/{id}/chain lists it as a run listing does:
// oldest first, a page of limit runs (the server's MaxPageSize by
// default) with next for the rest, read 100 runs at a time from the
// store, never the whole chain at once. Named by any run of the
// chain, it lists the same runs; an id that names none is 404.
func TestChainReadInPages(t *testing.T) {
	var wide *storespy.Widest
	f := newFixtureWith(t, func(s store.Store) store.Store { wide = storespy.New(s); return wide },
		httpapi.Options{Version: "test", Keepalive: time.Hour})
	const children = 249
	if err := storespy.FanOut(context.Background(), f.st, "wide-root", "fan", children, nil); err != nil {
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
	for _, via := range []string{"wide-root", "wide-root-0117"} {
		wide.Reset()
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
		if len(ids) != children+1 || ids[0] != "wide-root" || ids[1] != "wide-root-0000" || ids[children] != fmt.Sprintf("wide-root-%04d", children-1) {
			t.Errorf("via %s: %d runs (first %v), want the root then the %d children in order", via, len(ids), ids[:min(len(ids), 3)], children)
		}
		if all := get("/api/runs/" + via + "/chain"); len(all.Runs) != children+1 || all.Next != "" {
			t.Errorf("via %s, no limit: %d runs, next %q; want all %d in one page", via, len(all.Runs), all.Next, children+1)
		}
		if n := wide.Max(); n > 101 { // a batch of 100, and one more to tell whether more follow
			t.Errorf("via %s: one store read returned %d runs, want at most 101", via, n)
		}
	}
	if code, body := f.do(t, "GET", "/api/runs/no-such-run/chain", ""); code != 404 {
		t.Errorf("unknown id: %d %s", code, body)
	}
}
