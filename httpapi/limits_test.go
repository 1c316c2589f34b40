package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/store"
)

// hookStore calls a hook before every run listing, so a test can see what
// the store is asked for, or hold a listing.
type hookStore struct {
	store.Store
	mu   sync.Mutex
	hook func(ctx context.Context, f store.RunFilter) error
}

func (s *hookStore) setHook(h func(ctx context.Context, f store.RunFilter) error) {
	s.mu.Lock()
	s.hook = h
	s.mu.Unlock()
}

// Runs implements store.Store.
func (s *hookStore) Runs(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	s.mu.Lock()
	h := s.hook
	s.mu.Unlock()
	if h != nil {
		if err := h(ctx, f); err != nil {
			return nil, err
		}
	}
	return s.Store.Runs(ctx, f)
}

func hooked(t *testing.T, opts httpapi.Options) (*fixture, *hookStore) {
	t.Helper()
	var hs *hookStore
	f := newFixtureWith(t, func(st store.Store) store.Store { hs = &hookStore{Store: st}; return hs }, opts)
	return f, hs
}

// TestFilterValuesDeduplicated: a status given 800 times reaches the store
// once, and a page of 1,000 is read 100 runs at a time, so one request
// never holds more rows than that (besides the response being built).
func TestFilterValuesDeduplicated(t *testing.T) {
	f, hs := hooked(t, httpapi.Options{})
	ctx := context.Background()
	for i := range 150 {
		if _, err := f.eng.Emit(ctx, "order:placed", nil, yella.IdempotencyKey(fmt.Sprint("k", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.eng.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var filters []store.RunFilter
	hs.setHook(func(_ context.Context, rf store.RunFilter) error {
		mu.Lock()
		filters = append(filters, rf)
		mu.Unlock()
		return nil
	})
	q := url.Values{"limit": {"1000"}, "status": {strings.TrimSuffix(strings.Repeat("completed,", 800), ",")}}
	code, body := f.do(t, "GET", "/api/runs?"+q.Encode(), "")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var page httpapi.RunPage
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, r := range page.Runs {
		ids[r.ID] = true
	}
	if len(ids) != len(page.Runs) || len(page.Runs) < 300 || page.Next != "" {
		t.Fatalf("%d runs, %d distinct, next %q", len(page.Runs), len(ids), page.Next)
	}
	if len(filters) < 2 {
		t.Fatalf("the page was read in %d store calls, want several batches", len(filters))
	}
	for _, rf := range filters {
		if len(rf.Statuses) != 1 || rf.Limit > 101 {
			t.Fatalf("the store was asked for %d statuses and %d rows", len(rf.Statuses), rf.Limit)
		}
	}

	// A small page of the same filter: 5 distinct runs and a cursor that
	// continues after them.
	code, body = f.do(t, "GET", "/api/runs?status=completed,completed,completed&limit=5", "")
	page = httpapi.RunPage{}
	if err := json.Unmarshal([]byte(body), &page); err != nil || code != 200 {
		t.Fatal(code, err)
	}
	first := map[string]bool{}
	for _, r := range page.Runs {
		first[r.ID] = true
	}
	if len(first) != 5 || page.Next == "" {
		t.Fatalf("%d distinct of %d runs, next %q", len(first), len(page.Runs), page.Next)
	}
	_, body = f.do(t, "GET", "/api/runs?status=completed&limit=5&cursor="+page.Next, "")
	page = httpapi.RunPage{}
	json.Unmarshal([]byte(body), &page)
	for _, r := range page.Runs {
		if first[r.ID] {
			t.Fatalf("run %s is on both pages", r.ID)
		}
	}
}

// TestParseRunQueryBounds: repeated values count once; too many distinct
// values are refused.
func TestParseRunQueryBounds(t *testing.T) {
	q, err := httpapi.ParseRunQuery(url.Values{"status": {"idle,idle", "idle", " idle ,errored"}})
	if err != nil || len(q.Status) != 2 {
		t.Fatalf("%v %v", q.Status, err)
	}
	var many []string
	for i := range httpapi.MaxFilterValues + 1 {
		many = append(many, fmt.Sprint("s", i))
	}
	if _, err := httpapi.ParseRunQuery(url.Values{"status": {strings.Join(many, ",")}}); err == nil || !strings.Contains(err.Error(), "distinct") {
		t.Fatalf("%d distinct values: %v", len(many), err)
	}
}

// TestReadLimits: page size and response size are bounded, with clear
// errors.
func TestReadLimits(t *testing.T) {
	f := newFixtureWith(t, nil, httpapi.Options{MaxPageSize: 10, MaxResponseBytes: 1500})
	cases := []struct {
		path   string
		status int
		code   string
	}{
		{"/api/runs?limit=11", 400, "INVALID_QUERY"},
		{"/api/runs?limit=1", 200, ""},
		{"/api/runs?limit=10", 422, "RESPONSE_TOO_LARGE"},
		{"/api/runs/" + f.ids["order"], 200, ""},
		{"/api/runs/" + f.ids["order"] + "/chain", 200, ""},
		{"/api/observability?window=1h", 422, "RESPONSE_TOO_LARGE"},
	}
	for _, c := range cases {
		code, body := f.do(t, "GET", c.path, "")
		if code != c.status || (c.code != "" && errCode(t, body) != c.code) {
			t.Errorf("%s: %d %s, want %d %s", c.path, code, body, c.status, c.code)
		}
		if len(body) > 1500+1 {
			t.Errorf("%s: %d bytes, over the limit", c.path, len(body))
		}
	}
}

// TestQueryTimeout: a read's deadline reaches the store, which stops, and
// the client gets 503 TIMEOUT. The store waits for its context, or gives
// up after 10 s, which fails the test: no timing decides a pass.
func TestQueryTimeout(t *testing.T) {
	f, hs := hooked(t, httpapi.Options{QueryTimeout: 20 * time.Millisecond})
	stopped := make(chan error, 1)
	hs.setHook(func(ctx context.Context, _ store.RunFilter) error {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		stopped <- ctx.Err()
		return ctx.Err()
	})
	code, body := f.do(t, "GET", "/api/runs", "")
	if code != 503 || errCode(t, body) != "TIMEOUT" {
		t.Fatalf("%d %s", code, body)
	}
	if err := <-stopped; err != context.DeadlineExceeded {
		t.Fatalf("the store's context ended with %v", err)
	}
}

// TestHeavyReadsBounded: past MaxHeavyReads, a read is refused at once
// with 503 BUSY and Retry-After; light routes still answer.
func TestHeavyReadsBounded(t *testing.T) {
	f, hs := hooked(t, httpapi.Options{MaxHeavyReads: 1})
	entered, release := make(chan struct{}), make(chan struct{})
	hs.setHook(func(ctx context.Context, _ store.RunFilter) error {
		close(entered)
		<-release
		return nil
	})
	done := make(chan int)
	go func() {
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, httptest.NewRequest("GET", "/api/runs", nil))
		done <- w.Code
	}()
	<-entered
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, httptest.NewRequest("GET", "/api/runs/"+f.ids["order"], nil))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || errCode(t, w.Body.String()) != "BUSY" {
		t.Fatalf("second heavy read: %d %q %s", w.Code, w.Header().Get("Retry-After"), w.Body.String())
	}
	if code, body := f.do(t, "GET", "/api/health", ""); code != 200 {
		t.Fatalf("health while busy: %d %s", code, body)
	}
	hs.setHook(nil)
	close(release)
	if code := <-done; code != 200 {
		t.Fatalf("first read: %d", code)
	}
	if code, body := f.do(t, "GET", "/api/runs/"+f.ids["order"], ""); code != 200 {
		t.Fatalf("after: %d %s", code, body)
	}
}
