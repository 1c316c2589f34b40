package httpapi_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
)

// sharedStore is a memory store that says it is shared, with a fixed list
// of nodes: enough for an engine that is never started to list them.
type sharedStore struct {
	*memstore.Store
	nodes []store.Node
	err   error
	limit int // the last limit asked for
}

func (s *sharedStore) Join(context.Context, string) (func(context.Context) error, error) {
	return func(context.Context) error { return nil }, nil
}

func (s *sharedStore) ClaimNext(context.Context, store.ClaimNextRequest) (store.ClaimNextResult, error) {
	return store.ClaimNextResult{}, errors.New("not claimed in this test")
}

func (s *sharedStore) Watch(func(store.Change)) func() { return func() {} }

func (s *sharedStore) Nodes(_ context.Context, limit int) ([]store.Node, error) {
	s.limit = limit
	return s.nodes[:min(limit, len(s.nodes))], s.err
}

var nodeT0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// twoNodes is a live node holding runs of two processes and a gone one.
func twoNodes() []store.Node {
	return []store.Node{
		{Owner: "api-engine", JoinedAt: nodeT0, Seen: nodeT0.Add(time.Hour), Age: 300 * time.Millisecond, Running: 3, ByProcess: map[string]int64{"ship": 2, "take-order": 1}},
		{Owner: "node-b", JoinedAt: nodeT0, Seen: nodeT0.Add(59 * time.Minute), Age: 61 * time.Second, Gone: true, Running: 1, ByProcess: map[string]int64{"ship": 1}},
	}
}

// TestNodesRoute: on a shared store GET /api/nodes lists the store's
// nodes, live or gone, the serving engine marked self, with the runs each
// holds; limit is passed down, and a failing store is an error.
func TestNodesRoute(t *testing.T) {
	st := &sharedStore{Store: memstore.New(), nodes: twoNodes()}
	eng, err := yella.New(yella.Config{Store: st, Owner: "api-engine"})
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(eng, httpapi.Options{})
	defer api.Close()
	get := func(path string) (int, string) {
		w := httptest.NewRecorder()
		api.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		return w.Code, w.Body.String()
	}
	code, body := get("/api/nodes")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	golden(t, "nodes", indent(t, body))
	if st.limit != yella.DefaultNodeLimit {
		t.Errorf("default limit passed to the store: %d, want %d", st.limit, yella.DefaultNodeLimit)
	}
	if code, body = get("/api/nodes?limit=1"); code != 200 || strings.Contains(body, "node-b") || st.limit != 1 {
		t.Errorf("limit=1: %d %s (store asked for %d)", code, body, st.limit)
	}
	st.err = errors.New("connection refused")
	if code, body = get("/api/nodes"); code != 503 || errCode(t, body) != "UNAVAILABLE" {
		t.Errorf("a failing store: %d %s, want 503 UNAVAILABLE", code, body)
	}
}
