package pgstore_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// TestNodesListed: Nodes lists the live nodes first, then the gone ones
// (a heartbeat older than the timeout, on the database's clock), each with
// the runs it holds by process; finished runs are not held, and the limit
// bounds the list.
func TestNodesListed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := openIn(t, dir, pgstore.Options{})
	// b stamps its node's heartbeat only when it joins.
	b := openIn(t, dir, pgstore.Options{Schema: a.Schema(), NodeHeartbeat: time.Hour, NodeTimeout: 2 * time.Hour})
	if got, err := a.Nodes(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("nodes of a new schema: %v, %v", got, err)
	}
	leaveA, err := a.Join(ctx, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	defer leaveA(ctx)
	leaveB, err := b.Join(ctx, "node-b")
	if err != nil {
		t.Fatal(err)
	}
	defer leaveB(ctx)
	admit(t, a, "p", 3, 0)
	admit(t, a, "q", 1, 0)
	admit(t, a, "r", 1, 0)
	now := time.Now()
	claim := func(s *pgstore.Store, owner string, procs ...string) []store.Run {
		t.Helper()
		m := map[string]int{}
		for _, p := range procs {
			m[p] = 0
		}
		res, err := s.ClaimNext(ctx, store.ClaimNextRequest{Owner: owner, Now: now, LeaseUntil: now.Add(time.Hour), Processes: m, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return res.Runs
	}
	held := claim(a, "node-a", "p", "q")
	if len(held) != 4 {
		t.Fatalf("claimed %d runs, want 4", len(held))
	}
	if _, err := a.Update(ctx, store.Update{RunID: held[0].ID, Epoch: held[0].Epoch, Action: store.ActionComplete, To: store.StatusCompleted, Now: now}); err != nil {
		t.Fatal(err)
	}
	claim(b, "node-b", "r")
	setSeen(t, b, "node-b", time.Minute)

	got, err := a.Nodes(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Owner != "node-a" || got[1].Owner != "node-b" {
		t.Fatalf("nodes: %+v, want node-a then node-b", got)
	}
	na, nb := got[0], got[1]
	if na.Gone || na.Running != 3 || !maps.Equal(na.ByProcess, map[string]int64{"p": 2, "q": 1}) {
		t.Errorf("node-a: gone %v, running %d %v; want live, 3 {p:2 q:1}", na.Gone, na.Running, na.ByProcess)
	}
	if na.Age < 0 || na.Age > time.Minute || na.JoinedAt.IsZero() || na.Seen.Before(na.JoinedAt) {
		t.Errorf("node-a times: joined %v, seen %v, age %v", na.JoinedAt, na.Seen, na.Age)
	}
	if !nb.Gone || nb.Running != 1 || nb.ByProcess["r"] != 1 || nb.Age < 59*time.Second {
		t.Errorf("node-b: gone %v, running %d %v, age %v; want gone, 1 {r:1}, at least a minute old", nb.Gone, nb.Running, nb.ByProcess, nb.Age)
	}
	if one, err := a.Nodes(ctx, 1); err != nil || len(one) != 1 || one[0].Owner != "node-a" {
		t.Errorf("limit 1: %+v, %v; want node-a alone", one, err)
	}
	if none, err := a.Nodes(ctx, 0); err != nil || len(none) != 0 {
		t.Errorf("limit 0: %+v, %v; want none", none, err)
	}
	if err := leaveA(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Nodes(ctx, 10); err != nil || len(got) != 1 || got[0].Owner != "node-b" {
		t.Errorf("after node-a left: %+v, %v; want node-b alone", got, err)
	}
}
