package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// downgradeLeaseNodes takes a schema back to version 8: a running run's
// lease owner as text in runs (lease_owner), no owners table.
func downgradeLeaseNodes(t *testing.T, s *pgstore.Store) {
	t.Helper()
	sch := s.Schema()
	execAll(t, s,
		"ALTER TABLE "+sch+".runs ADD COLUMN lease_owner text",
		"UPDATE "+sch+".runs r SET lease_owner = o.owner FROM "+sch+".owners o WHERE o.num = r.lease_node",
		"DROP INDEX "+sch+".runs_inflight",
		"ALTER TABLE "+sch+".runs DROP COLUMN lease_node",
		"CREATE INDEX runs_inflight ON "+sch+".runs (lease_owner, process) WHERE status IN ('idle', 'running')",
		"DROP TABLE "+sch+".owners",
		"UPDATE "+sch+".schema_version SET version = 8",
	)
}

// TestLeaseNodesMigrated: a schema of version 8 (lease owners as text) is
// brought to version 9 (owners by number): its running runs keep their
// owners, read back, heartbeat and judged abandoned by them; an owner
// that claims again after the migration keeps its number, so one
// heartbeat covers the runs it claimed before and after; runs_inflight is
// keyed by the number.
func TestLeaseNodesMigrated(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openIn(t, dir, pgstore.Options{})
	now := time.Now()
	res := admit(t, s, "p", 4, 0)
	id := func(i int) string { return res.Admitted[i].ID }
	for i, owner := range []string{"o", "o2"} {
		runs, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{id(i)}, Owner: owner, Now: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil || len(runs) != 1 {
			t.Fatalf("claim for %s: %v, %d runs", owner, err, len(runs))
		}
	}
	downgradeLeaseNodes(t, s)
	sch := s.Schema()
	s.Close()

	s = openIn(t, dir, pgstore.Options{Schema: sch})
	if keys := indexKeys(t, s, "runs"); keys["runs_inflight"] != "lease_node,process" {
		t.Errorf("runs_inflight on (%s), want (lease_node,process); indexes %v", keys["runs_inflight"], keys)
	}
	var textCols int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = 'runs' AND column_name = 'lease_owner'`, sch).Scan(&textCols); err != nil || textCols != 0 {
		t.Errorf("runs.lease_owner after the migration: %d columns, %v; want none", textCols, err)
	}
	for i, owner := range []string{"o", "o2"} {
		r, err := s.Run(ctx, id(i))
		if err != nil || r.LeaseOwner != owner || r.Status != store.StatusRunning {
			t.Errorf("run %d after the migration: %v, owner %q, %s; want running for %q", i, err, r.LeaseOwner, r.Status, owner)
		}
	}
	runs, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{id(2)}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(runs) != 1 {
		t.Fatalf("claim for o after the migration: %v, %d runs", err, len(runs))
	}
	leases, err := s.Heartbeat(ctx, "o", now, now.Add(time.Hour))
	got := map[string]bool{}
	for _, l := range leases {
		got[l.RunID] = true
	}
	if err != nil || len(leases) != 2 || !got[id(0)] || !got[id(2)] {
		t.Errorf("heartbeat of o: %v, %+v; want the runs it claimed before and after the migration", err, leases)
	}
	if leases, err := s.Heartbeat(ctx, "nobody", now, now.Add(time.Hour)); err != nil || len(leases) != 0 {
		t.Errorf("heartbeat of an owner that never claimed: %v, %+v; want no leases", err, leases)
	}
	// o2's lease was not extended: it expires first, and its owner is no
	// node, so it is abandoned at a time past it; o's runs are not.
	ab, err := s.Abandoned(ctx, "other", now.Add(2*time.Minute), 10)
	if err != nil || len(ab) != 1 || ab[0].ID != id(1) || ab[0].LeaseOwner != "o2" {
		t.Fatalf("abandoned after the migration: %v, %+v; want o2's run alone", err, ab)
	}
}
