package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// downgradeInflight takes a schema back to version 7: the running runs
// indexed by lease owner (runs_running) and the idle or running runs by
// process (runs_active), instead of runs_inflight.
func downgradeInflight(t *testing.T, s *pgstore.Store) {
	t.Helper()
	downgradeLeaseNodes(t, s)
	sch := s.Schema()
	execAll(t, s,
		"CREATE INDEX runs_running ON "+sch+".runs (lease_owner) WHERE status = 'running'",
		"CREATE INDEX runs_active ON "+sch+".runs (process) WHERE status IN ('idle', 'running')",
		"DROP INDEX "+sch+".runs_inflight",
		"UPDATE "+sch+".schema_version SET version = 7",
	)
}

// TestInflightIndexMigrated: a schema of version 7 is brought to version 8
// (one index of the in-flight runs): its indexes of runs are replaced, an
// idle run left holding a lease owner (which no transition leaves: a
// migrated schema cannot be trusted with it) is cleared of it, so a
// process's cap at admission counts its idle and running runs as before,
// and the running run of the migrated schema is still found by its owner
// once its node is gone.
func TestInflightIndexMigrated(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openIn(t, dir, pgstore.Options{})
	now := time.Now()
	res := admit(t, s, "p", 3, 0)
	runs, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{res.Admitted[0].ID}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(runs) != 1 {
		t.Fatalf("claim: %v, %d runs", err, len(runs))
	}
	downgradeInflight(t, s)
	sch := s.Schema()
	execAll(t, s, "UPDATE "+sch+".runs SET lease_owner = 'ghost' WHERE status = 'idle' AND seq = (SELECT min(seq) FROM "+sch+".runs WHERE status = 'idle')")
	s.Close()

	s = openIn(t, dir, pgstore.Options{Schema: sch})
	keys := indexKeys(t, s, "runs")
	if keys["runs_inflight"] != "lease_node,process" {
		t.Errorf("runs_inflight on (%s), want (lease_node,process); indexes %v", keys["runs_inflight"], keys)
	}
	for _, gone := range []string{"runs_running", "runs_active"} {
		if _, ok := keys[gone]; ok {
			t.Errorf("index %s still there after the migration", gone)
		}
	}
	// Three active runs (two idle, one running): a cap of 3 drops the
	// next run, a cap of 4 admits it.
	if r := admit(t, s, "p", 1, 3); len(r.Dropped) != 1 {
		t.Errorf("cap 3 with 3 active runs: %d admitted, %d dropped; want it dropped", len(r.Admitted), len(r.Dropped))
	}
	if r := admit(t, s, "p", 1, 4); len(r.Admitted) != 1 {
		t.Errorf("cap 4 with 3 active runs: %d admitted, %d dropped; want it admitted", len(r.Admitted), len(r.Dropped))
	}
	// The migrated running run's owner never joined as a node: its
	// expired lease makes it abandoned.
	ab, err := s.Abandoned(ctx, "other", now.Add(2*time.Minute), 10)
	if err != nil || len(ab) != 1 || ab[0].ID != res.Admitted[0].ID {
		t.Fatalf("abandoned after the migration: %v, %+v; want the run claimed before it", err, ab)
	}
}
