package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// downgradeLinks takes a schema back to version 6: follow-up runs found
// through indexes of runs on their correlation and parent ids.
func downgradeLinks(t *testing.T, s *pgstore.Store) {
	t.Helper()
	downgradeInflight(t, s)
	sch := s.Schema()
	execAll(t, s,
		"CREATE INDEX runs_correlation ON "+sch+".runs (correlation_id) WHERE correlation_id IS NOT NULL",
		"CREATE INDEX runs_parent ON "+sch+".runs (parent_id) WHERE parent_id IS NOT NULL",
		"ALTER TABLE "+sch+".run_ids DROP COLUMN correlation_id, DROP COLUMN parent_id",
		"UPDATE "+sch+".schema_version SET version = 6",
	)
}

// TestChainLinksMigrated: a schema of version 6 (follow-ups found through
// indexes of runs) is brought to version 7 (run_ids holds them): the
// chains admitted before and after read back whole, by Chain and by a
// listing's correlation filter, and retention keeps a parent while its
// child is kept, both for the migrated chain and for a new one. No index
// of runs is on the correlation or parent id any more.
func TestChainLinksMigrated(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openIn(t, dir, pgstore.Options{})
	now := time.Unix(1_800_000_000, 0)
	// chain admits a root and completes it, admitting a child that stays
	// idle; and another root that completes alone.
	chain := func(s *pgstore.Store, tag string) (root, child, lone string) {
		t.Helper()
		root, child, lone = newID(tag+"root"), newID(tag+"child"), newID(tag+"lone")
		if _, err := s.Admit(ctx, store.Admission{Event: "ev", Runs: []store.NewRun{{ID: root, Process: "p"}, {ID: lone, Process: "p2"}}, Now: now}); err != nil {
			t.Fatal(err)
		}
		runs, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{root, lone}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil || len(runs) != 2 {
			t.Fatalf("claim: %v, %d runs", err, len(runs))
		}
		if _, err := s.Update(ctx, store.Update{RunID: root, Epoch: runs[0].Epoch, Now: now, Action: store.ActionComplete, Then: "next",
			Children: &store.Admission{Event: "next", Runs: []store.NewRun{{ID: child, Process: "q"}}, ParentID: root, CorrelationID: root, Depth: 1, Now: now}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx, store.Update{RunID: lone, Epoch: runs[1].Epoch, Now: now, Action: store.ActionComplete}); err != nil {
			t.Fatal(err)
		}
		return root, child, lone
	}
	oldRoot, oldChild, oldLone := chain(s, "old")
	downgradeLinks(t, s)
	sch := s.Schema()
	s.Close()

	s = openIn(t, dir, pgstore.Options{Schema: sch})
	newRoot, newChild, newLone := chain(s, "new")
	for _, c := range [][2]string{{oldRoot, oldChild}, {newRoot, newChild}} {
		runs, err := s.Chain(ctx, c[0])
		if err != nil || len(runs) != 2 || runs[0].ID != c[0] || runs[1].ID != c[1] {
			t.Fatalf("chain of %s: %v, %+v; want %v", c[0], err, runs, c)
		}
		listed, err := s.Runs(ctx, store.RunFilter{CorrelationID: c[0], Order: store.OldestFirst, Limit: 10})
		if err != nil || len(listed) != 2 || listed[0].ID != c[0] || listed[1].ID != c[1] {
			t.Fatalf("runs of correlation %s: %v, %+v; want %v", c[0], err, listed, c)
		}
	}
	// Retention: every run completed before the cut, but the roots have
	// children (idle) and are kept; the lone runs go.
	if n, err := s.Prune(ctx, store.PruneRequest{CompletedBefore: now.Add(time.Hour), Limit: 100}); err != nil || n != 2 {
		t.Fatalf("retention: %d runs pruned, %v; want the 2 lone runs", n, err)
	}
	for id, kept := range map[string]bool{oldRoot: true, newRoot: true, oldChild: true, newChild: true, oldLone: false, newLone: false} {
		_, err := s.Run(ctx, id)
		if kept && err != nil {
			t.Errorf("%s after retention: %v, want kept", id, err)
		}
		if !kept && err == nil {
			t.Errorf("%s kept by retention, want pruned", id)
		}
	}
	for name, cols := range indexKeys(t, s, "runs") {
		for _, col := range strings.Split(cols, ",") {
			if col == "correlation_id" || col == "parent_id" {
				t.Errorf("index %s of runs on (%s), want no index of runs on the correlation or parent id", name, cols)
			}
		}
	}
}

// TestMigrationWaitsForOlderNodes: a schema of an older version is not
// migrated while a node is live on it (a node of an older build, which
// would go on writing the old way): Open fails with ErrSchemaInUse,
// naming the node, and leaves the version as it was; once the node's
// heartbeat is older than NodeTimeout, Open migrates. A gone node never
// stands in the way.
func TestMigrationWaitsForOlderNodes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openIn(t, dir, pgstore.Options{})
	sch := s.Schema()
	downgradeLinks(t, s)
	execAll(t, s,
		"INSERT INTO "+sch+".nodes (owner) VALUES ('old-build-node')",
		"INSERT INTO "+sch+".nodes (owner, seen, gone) VALUES ('crashed-node', now() - interval '1 hour', true)",
	)
	s.Close()

	opts := pgstore.Options{Schema: sch, NodeTimeout: 5 * time.Second}
	s2, err := pgstore.Open(ctx, pgURL(t), opts)
	if !errors.Is(err, pgstore.ErrSchemaInUse) || !strings.Contains(err.Error(), `"old-build-node"`) || strings.Contains(err.Error(), "crashed-node") {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("open with a live node of the older version: %v; want ErrSchemaInUse naming old-build-node only", err)
	}
	t.Logf("refused: %v", err)
	s = openIn(t, t.TempDir(), pgstore.Options{}) // another schema, to look at this one
	version := func() int {
		t.Helper()
		var v int
		if err := s.Pool().QueryRow(ctx, "SELECT version FROM "+sch+".schema_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := version(); v != 6 {
		t.Fatalf("schema version %d after the refused open, want 6", v)
	}
	if _, err := s.Pool().Exec(ctx, "UPDATE "+sch+".nodes SET seen = now() - interval '10 seconds' WHERE owner = 'old-build-node'"); err != nil {
		t.Fatal(err)
	}
	s2, err = pgstore.Open(ctx, pgURL(t), opts)
	if err != nil {
		t.Fatalf("open once the node's heartbeat is past NodeTimeout: %v", err)
	}
	s2.Close()
	if v := version(); v != pgstore.SchemaVersion() {
		t.Fatalf("schema version %d, want %d", v, pgstore.SchemaVersion())
	}
}
