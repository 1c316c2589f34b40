package yella_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/pgstore"
)

// TestNodesSingleStore: on a store that is not shared, Nodes says so and
// lists none; a negative limit is a query error.
func TestNodesSingleStore(t *testing.T) {
	eng, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	got, err := eng.Nodes(context.Background(), 0)
	if err != nil || got.Shared || got.Nodes == nil || len(got.Nodes) != 0 || got.Self != eng.Owner() {
		t.Errorf("nodes of a single-node store: %+v, %v; want not shared, an empty list, self %s", got, err, eng.Owner())
	}
	if _, err := eng.Nodes(context.Background(), -1); yella.CodeOf(err) != yella.CodeInvalidQuery {
		t.Errorf("negative limit: %v, want %s", err, yella.CodeInvalidQuery)
	}
}

// TestNodesShared: two started engines on one PostgreSQL schema are both
// listed, each marked Self by its own engine, with the runs it holds by
// process; a stopped engine leaves the list.
func TestNodesShared(t *testing.T) {
	if why := pgSkip(); why != "" {
		t.Skip(why)
	}
	ctx := context.Background()
	dir := t.TempDir()
	ps := pgFactory().Open(t, dir).(*pgstore.Store)
	other, err := pgstore.Open(ctx, os.Getenv("YELLA_PG_URL"), pgstore.Options{Schema: ps.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	release := make(chan struct{})
	started := make(chan struct{}, 8)
	a, err := yella.New(yella.Config{Store: ps, Owner: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	a.Register(yella.Process{Name: "hold", On: "go", Run: func(c *yella.Ctx) yella.Result {
		started <- struct{}{}
		<-release
		return c.OK(nil)
	}})
	b, err := yella.New(yella.Config{Store: other, Owner: "node-b"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Stop(ctx)
	defer close(release) // before a stops: its handlers wait for it
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := a.Emit(ctx, "go", nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the runs did not start")
		}
	}
	got, err := b.Nodes(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Shared || got.Self != "node-b" || len(got.Nodes) != 2 {
		t.Fatalf("nodes seen by b: %+v", got)
	}
	na, nb := got.Nodes[0], got.Nodes[1]
	if na.Owner != "node-a" || na.Self || na.Gone || na.Running != 2 || na.ByProcess["hold"] != 2 {
		t.Errorf("node-a seen by b: %+v; want live, not self, holding 2 runs of hold", na)
	}
	if nb.Owner != "node-b" || !nb.Self || nb.Running != 0 || nb.ByProcess != nil {
		t.Errorf("node-b seen by itself: %+v; want self, holding nothing", nb)
	}
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Nodes(ctx, 0); err != nil || len(got.Nodes) != 1 || !got.Nodes[0].Self {
		t.Errorf("after b stopped, a sees %+v, %v; want itself alone", got, err)
	}
}
