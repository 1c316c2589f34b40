package sqlitestore

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

// A database written by schema version 1 opens at the current version with
// every run, timeline entry and count intact; it then takes the cancelled
// status and keeps the keys of pruned runs.
func TestMigrateFromVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	stmts := []string{ms[0].sql, "PRAGMA user_version = 1"}
	for i, st := range []string{"idle", "running", "completed", "deferred", "errored", "dead-letter", "fenced"} {
		stmts = append(stmts, `INSERT INTO runs (seq, id, process, event, status, idem_key, created_at, completed_at, tl)
			VALUES (`+itoa(i+1)+`, 'r`+itoa(i+1)+`', 'p', 'ev', '`+st+`', 'k`+itoa(i+1)+`', `+itoa64(t0)+`, `+itoa64(t0)+`, 2)`,
			`INSERT INTO timeline (run_seq, n, at, status, attempt, note) VALUES (`+itoa(i+1)+`, 2, `+itoa64(t0)+`, '`+st+`', 1, 'v1')`)
	}
	for _, st := range stmts {
		if _, err := raw.Exec(st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
	raw.Close()

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var v int
	s.rdb.QueryRow("PRAGMA user_version").Scan(&v)
	if v != SchemaVersion() || v < 2 {
		t.Fatalf("user_version %d, want %d", v, SchemaVersion())
	}
	var ok string
	s.rdb.QueryRow("PRAGMA integrity_check").Scan(&ok)
	if ok != "ok" {
		t.Fatalf("integrity_check: %s", ok)
	}
	counts, _ := s.Counts(ctx)
	for _, st := range store.Statuses {
		want := int64(1)
		if st == store.StatusCancelled {
			want = 0
		}
		if counts[st] != want {
			t.Errorf("count of %s = %d, want %d", st, counts[st], want)
		}
	}
	tl, err := s.Timeline(ctx, "r3")
	if err != nil || len(tl) != 2 || tl[1].Note != "v1" {
		t.Fatalf("timeline of r3 after the migration: %+v, %v", tl, err)
	}
	// The live run's key still admits nothing new.
	res, err := s.Admit(ctx, store.Admission{Event: "ev", IdempotencyKey: "k1", Runs: []store.NewRun{{ID: "new", Process: "p"}}, Now: time.Unix(0, t0)})
	if err != nil || len(res.Existing) != 1 || res.Existing[0].ID != "r1" {
		t.Fatalf("admit k1: %+v, %v", res, err)
	}
	// The new status is accepted.
	if _, err := s.Update(ctx, store.Update{RunID: "r1", Now: time.Unix(0, t0), From: []store.Status{store.StatusIdle}, To: store.StatusCancelled}); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	// A pruned run's key is kept.
	if n, err := s.Prune(ctx, store.PruneRequest{CompletedBefore: time.Unix(0, t0+1), Limit: 10}); err != nil || n != 1 {
		t.Fatalf("prune: %d, %v", n, err)
	}
	res, err = s.Admit(ctx, store.Admission{Event: "ev", IdempotencyKey: "k3", Runs: []store.NewRun{{ID: "new3", Process: "p"}}, Now: time.Unix(0, t0)})
	if err != nil || len(res.Pruned) != 1 || res.Pruned[0].ID != "r3" {
		t.Fatalf("admit k3 after its run was pruned: %+v, %v", res, err)
	}
}

func itoa(n int) string     { return itoa64(int64(n)) }
func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
