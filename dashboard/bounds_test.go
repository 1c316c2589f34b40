package dashboard

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
)

// slowStore blocks every run listing until its context ends or release is
// closed, reporting how the context ended.
type slowStore struct {
	*memstore.Store
	entered chan struct{}
	release chan struct{}
	ended   chan error
}

func (s *slowStore) Runs(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	select {
	case <-ctx.Done():
		s.ended <- ctx.Err()
		return nil, ctx.Err()
	case <-s.release:
		return s.Store.Runs(ctx, f)
	case <-time.After(5 * time.Second): // a bound for a broken test, not a timing
		return s.Store.Runs(ctx, f)
	}
}

func slowDashboard(t *testing.T, opts Options) (http.Handler, *slowStore) {
	t.Helper()
	st := &slowStore{Store: memstore.New(), entered: make(chan struct{}, 1), release: make(chan struct{}), ended: make(chan error, 4)}
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(eng, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h, st
}

// TestPageReadTimeout: a page whose reads outlast ReadTimeout answers 503,
// and the store's query is stopped by its context (not left running).
func TestPageReadTimeout(t *testing.T) {
	h, st := slowDashboard(t, Options{ReadTimeout: 20 * time.Millisecond})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/runs", nil))
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "took too long") {
		t.Fatalf("%d %s", w.Code, w.Body.String())
	}
	select {
	case err := <-st.ended:
		if err != context.DeadlineExceeded {
			t.Fatalf("the store's context ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the store's query was not stopped")
	}
}

// TestPagesBounded: past MaxConcurrentPages a page is refused at once with
// 503 and Retry-After; assets are not counted.
func TestPagesBounded(t *testing.T) {
	h, st := slowDashboard(t, Options{MaxConcurrentPages: 1})
	done := make(chan int)
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/runs", nil))
		done <- w.Code
	}()
	<-st.entered
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/dead", nil))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("second page: %d %q", w.Code, w.Header().Get("Retry-After"))
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/static/app.js", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("an asset while a page renders: %d", w.Code)
	}
	close(st.release)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("first page: %d", code)
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/dead", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("a page after the first finished: %d", w.Code)
	}
}
