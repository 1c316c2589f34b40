package prommetrics_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/prommetrics"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
)

// sharedStore is a memory store that says it is shared, with a fixed list
// of nodes.
type sharedStore struct {
	*memstore.Store
	nodes []store.Node
}

func (s *sharedStore) Join(context.Context, string) (func(context.Context) error, error) {
	return func(context.Context) error { return nil }, nil
}

func (s *sharedStore) ClaimNext(context.Context, store.ClaimNextRequest) (store.ClaimNextResult, error) {
	return store.ClaimNextResult{}, errors.New("not claimed in this test")
}

func (s *sharedStore) Watch(func(store.Change)) func() { return func() {} }

func (s *sharedStore) Nodes(_ context.Context, limit int) ([]store.Node, error) {
	return s.nodes[:min(limit, len(s.nodes))], nil
}

func scrapeText(t *testing.T, st store.Store) string {
	t.Helper()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	x := prommetrics.New(eng, prommetrics.Options{})
	defer x.Close()
	srv := httptest.NewServer(x.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// TestNodeMetrics: on a shared store the scrape counts the live and gone
// nodes and the runs each holds; a single-node store has neither series.
func TestNodeMetrics(t *testing.T) {
	text := scrapeText(t, &sharedStore{Store: memstore.New(), nodes: []store.Node{
		{Owner: "a", Running: 3}, {Owner: "b"}, {Owner: "c", Gone: true, Running: 1},
	}})
	for _, want := range []string{
		`yella_nodes{state="live"} 2`,
		`yella_nodes{state="gone"} 1`,
		`yella_node_running_runs{node="a"} 3`,
		`yella_node_running_runs{node="b"} 0`,
		`yella_node_running_runs{node="c"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("missing %s", want)
		}
	}
	if text := scrapeText(t, memstore.New()); strings.Contains(text, "yella_nodes") || strings.Contains(text, "yella_node_running_runs") {
		t.Errorf("a single-node store reports nodes")
	}
}
