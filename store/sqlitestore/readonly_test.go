package sqlitestore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

func admitOne(t *testing.T, s store.Store, process string) store.Run {
	t.Helper()
	res, err := s.Admit(context.Background(), store.Admission{Event: "e", Now: time.Now(),
		Runs: []store.NewRun{{ID: uuid.NewString(), Process: process}}})
	if err != nil || len(res.Admitted) != 1 {
		t.Fatalf("admit: %v %+v", err, res)
	}
	return res.Admitted[0]
}

// TestReadOnly: a read-only store reads a database while its owner holds
// the engine lock and writes, follows the owner's writes, refuses every
// write with ErrReadOnly, and never creates a database.
func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "owned.db")
	owner, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	first := admitOne(t, owner, "p")

	ro, err := sqlitestore.OpenReadOnly(path, sqlitestore.Options{})
	if err != nil {
		t.Fatalf("read-only open while the owner holds the lock: %v", err)
	}
	defer ro.Close()
	if r, err := ro.Run(ctx, first.ID); err != nil || r.Process != "p" {
		t.Fatalf("run: %+v %v", r, err)
	}
	admitOne(t, owner, "p") // the owner keeps writing
	if c, err := ro.Counts(ctx); err != nil || c[store.StatusIdle] != 2 {
		t.Fatalf("counts follow the owner's writes: %v %v", c, err)
	}
	if runs, err := ro.Runs(ctx, store.RunFilter{Limit: 10}); err != nil || len(runs) != 2 {
		t.Fatalf("runs: %d %v", len(runs), err)
	}

	now := time.Now()
	writes := map[string]func() error{
		"Admit": func() error {
			_, err := ro.Admit(ctx, store.Admission{Event: "e", Now: now, Runs: []store.NewRun{{ID: uuid.NewString(), Process: "p"}}})
			return err
		},
		"Claim": func() error {
			_, err := ro.Claim(ctx, store.ClaimRequest{IDs: []string{first.ID}, Owner: "x", Now: now, LeaseUntil: now.Add(time.Minute)})
			return err
		},
		"Update": func() error {
			_, err := ro.Update(ctx, store.Update{RunID: first.ID, Now: now, From: []store.Status{store.StatusIdle}, To: store.StatusErrored})
			return err
		},
		"Heartbeat":   func() error { _, err := ro.Heartbeat(ctx, "x", now, now.Add(time.Minute)); return err },
		"SetContext":  func() error { return ro.SetContext(ctx, first.ID, 1, []byte(`{}`)) },
		"StartEffect": func() error { return ro.StartEffect(ctx, first.ID, 1, "k", now) },
		"AddErrors":   func() error { return ro.AddErrors(ctx, []store.ErrorRecord{{At: now, Message: "m"}}) },
		"Signal": func() error {
			_, err := ro.Signal(ctx, store.SignalRequest{Key: "k", Now: now, KeepUntil: now.Add(time.Hour)})
			return err
		},
		"PauseSchedule": func() error { return ro.PauseSchedule(ctx, "nightly", true, now) },
		"Prune": func() error {
			_, err := ro.Prune(ctx, store.PruneRequest{CompletedBefore: now.Add(time.Hour), Limit: 10})
			return err
		},
	}
	for name, write := range writes {
		if err := write(); !errors.Is(err, sqlitestore.ErrReadOnly) {
			t.Errorf("%s on a read-only store: %v, want ErrReadOnly", name, err)
		}
	}
	if r, err := owner.Run(ctx, first.ID); err != nil || r.Status != store.StatusIdle || r.Epoch != 0 {
		t.Fatalf("the run changed: %+v %v", r, err)
	}
	// Paused schedules are read, the owner's pauses included.
	if err := owner.PauseSchedule(ctx, "hourly", true, now); err != nil {
		t.Fatal(err)
	}
	if p, err := ro.PausedSchedules(ctx); err != nil || len(p) != 1 || !p["hourly"].Equal(now.Round(0)) {
		t.Fatalf("paused schedules read-only: %v %v", p, err)
	}

	// Nothing is created for a missing or empty file, and other files are refused.
	missing := filepath.Join(dir, "missing.db")
	if _, err := sqlitestore.OpenReadOnly(missing, sqlitestore.Options{}); err == nil {
		t.Fatal("a missing database opened read-only")
	}
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o644)
	if _, err := sqlitestore.OpenReadOnly(empty, sqlitestore.Options{}); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("an empty file: %v", err)
	}
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte("hello, not a database"), 0o644)
	if _, err := sqlitestore.OpenReadOnly(text, sqlitestore.Options{}); !errors.Is(err, sqlitestore.ErrNotDatabase) {
		t.Fatalf("a text file: %v", err)
	}
	for _, p := range []string{missing, missing + ".lock", empty + ".lock", empty + "-wal", text + ".lock"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was created", filepath.Base(p))
		}
	}
}
