package dashboard_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/dashboard"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
)

// sharedStore is a memory store that says it is shared, with a fixed list
// of nodes: enough for an engine that is never started to list them.
type sharedStore struct {
	*memstore.Store
	nodes []store.Node
	err   error
}

func (s *sharedStore) Join(context.Context, string) (func(context.Context) error, error) {
	return func(context.Context) error { return nil }, nil
}

func (s *sharedStore) ClaimNext(context.Context, store.ClaimNextRequest) (store.ClaimNextResult, error) {
	return store.ClaimNextResult{}, errors.New("not claimed in this test")
}

func (s *sharedStore) Watch(func(store.Change)) func() { return func() {} }

func (s *sharedStore) Nodes(_ context.Context, limit int) ([]store.Node, error) {
	return s.nodes[:min(limit, len(s.nodes))], s.err
}

// TestNodesPage: on a shared store the nodes page lists each node, live
// or gone, this server's marked, with the runs it holds by process and a
// link to them; a failing store is an error page. On a single-node store
// (the fixture's) it says so.
func TestNodesPage(t *testing.T) {
	t1 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	st := &sharedStore{Store: memstore.New(), nodes: []store.Node{
		{Owner: "web-1", JoinedAt: t1, Seen: t1.Add(time.Hour), Age: 400 * time.Millisecond, Running: 3, ByProcess: map[string]int64{"ship": 2, "take-order": 1}},
		{Owner: "web-2", JoinedAt: t1, Seen: t1.Add(time.Hour), Age: time.Second},
		{Owner: "web-3", JoinedAt: t1, Seen: t1.Add(59 * time.Minute), Age: 61 * time.Second, Gone: true, Running: 1, ByProcess: map[string]int64{"ship": 1}},
	}}
	eng, err := yella.New(yella.Config{Store: st, Owner: "web-1"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := dashboard.NewAt(eng, dashboard.Options{Brand: "Yella"}, func() time.Time { return t1.Add(time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	get := func(target string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
		b, _ := io.ReadAll(w.Result().Body)
		return w.Code, string(b)
	}
	code, body := get("/nodes")
	if code != 200 {
		t.Fatalf("GET /nodes: %d", code)
	}
	golden(t, "nodes.html", normalise(body))
	for _, want := range []string{`2 live, 1 gone`, `<code>web-1</code> <span class="tag">this server</span>`,
		`<a href="/runs?process=ship&amp;status=running">ship</a> 2`, `<span class="badge st-dead-letter">gone</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("nodes page lacks %s", want)
		}
	}
	if code, frag := get("/nodes?fragment=nodes"); code != 200 || !strings.Contains(frag, "web-3") || strings.Contains(frag, "<html") {
		t.Errorf("nodes fragment: %d %s", code, frag)
	}
	st.err = errors.New("connection refused")
	if code, _ := get("/nodes"); code < 500 {
		t.Errorf("nodes page of a failing store: %d, want an error", code)
	}

	f := newFixture(t)
	r := f.get("/nodes")
	if r.Code != 200 {
		t.Fatalf("GET /nodes on a single-node store: %d", r.Code)
	}
	golden(t, "nodes-single.html", normalise(r.Body))
	if !strings.Contains(r.Body, "This database is single-node") {
		t.Errorf("the single-node page does not say so")
	}
}
