package replicate_test

import (
	"bytes"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella/replicate"
	"github.com/yella-go/yella/store/sqlitestore"
)

// Start refuses what Litestream cannot replicate, with errors that say why.
func TestStartBadInput(t *testing.T) {
	dir := t.TempDir()
	target := fileTarget(t, dir)
	notDB := filepath.Join(dir, "notes.txt")
	os.WriteFile(notDB, []byte("hello, this is not a database at all"), 0o644)
	journal := filepath.Join(dir, "journal.db")
	db, err := sql.Open("sqlite", "file:"+journal)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE t(x)"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	for _, c := range []struct {
		name, path string
		opts       replicate.Options
		want       error
		says       string
	}{
		{"missing file", filepath.Join(dir, "missing.db"), replicate.Options{}, replicate.ErrNotWAL, "open the store before"},
		{"not a database", notDB, replicate.Options{}, replicate.ErrNotWAL, "not an SQLite database"},
		{"a directory", dir, replicate.Options{}, replicate.ErrNotWAL, "directory"},
		{"rollback journal", journal, replicate.Options{}, replicate.ErrNotWAL, "rollback-journal"},
		{"interval too short", journal, replicate.Options{SyncInterval: time.Millisecond}, nil, "SyncInterval must be at least 10ms"},
		{"empty path", "", replicate.Options{}, nil, "path is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, err := replicate.Start(t.Context(), c.path, target, c.opts)
			if err == nil {
				rep.Close(t.Context())
				t.Fatal("Start succeeded")
			}
			if (c.want != nil && !errors.Is(err, c.want)) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("Start: %v; want %v saying %q", err, c.want, c.says)
			}
		})
	}

	// One replicator per database and process.
	n := openNode(t, filepath.Join(dir, "app.db"), &target, replicate.Options{})
	if rep, err := replicate.Start(t.Context(), n.path, target, replicate.Options{}); !errors.Is(err, replicate.ErrAlreadyReplicating) {
		t.Errorf("second Start on %s: %v, want ErrAlreadyReplicating", n.path, err)
		if rep != nil {
			rep.Close(t.Context())
		}
	}
	// Close releases it: a new replicator may start after.
	if err := n.close(t); err != nil {
		t.Fatal(err)
	}
	rep, err := replicate.Start(t.Context(), n.path, target, replicate.Options{})
	if err != nil {
		t.Fatalf("Start after Close: %v", err)
	}
	if err := rep.Close(t.Context()); err != nil {
		t.Error(err)
	}
	if err := rep.Close(t.Context()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Restore refuses to lose anything: an existing destination (or its WAL)
// without Force, a destination an engine has open (even with Force), a
// directory; an empty replica is a clear error that creates nothing. With
// Force it replaces the file and its stale WAL atomically.
func TestRestoreBadInput(t *testing.T) {
	dir := t.TempDir()
	target := fileTarget(t, dir)
	src := openNode(t, filepath.Join(dir, "src.db"), &target, replicate.Options{SyncInterval: 50 * time.Millisecond})
	src.emit(t, "k", 0, 30)
	if err := src.eng.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := src.close(t); err != nil {
		t.Fatal(err)
	}

	existing := filepath.Join(dir, "existing.db")
	content := []byte("precious bytes that must survive")
	os.WriteFile(existing, content, 0o644)
	orphanWAL := filepath.Join(dir, "orphan.db")
	os.WriteFile(orphanWAL+"-wal", content, 0o644)
	emptyDir := filepath.Join(dir, "empty-replica")
	os.Mkdir(emptyDir, 0o755)
	empty, _ := replicate.ParseURL("file://" + emptyDir)
	nowhere, _ := replicate.ParseURL("file://" + filepath.Join(dir, "no-such-replica"))
	inUse := filepath.Join(dir, "in-use.db")
	st, err := sqlitestore.Open(inUse, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	for _, c := range []struct {
		name   string
		target replicate.Target
		to     string
		opts   replicate.RestoreOptions
		want   error
		says   string
	}{
		{"destination exists", target, existing, replicate.RestoreOptions{}, replicate.ErrTargetExists, "use Force"},
		{"orphan WAL", target, orphanWAL, replicate.RestoreOptions{}, replicate.ErrTargetExists, "-wal exists without its database"},
		{"directory", target, dir, replicate.RestoreOptions{Force: true}, replicate.ErrTargetExists, "directory"},
		{"engine running on it", target, inUse, replicate.RestoreOptions{Force: true}, replicate.ErrInUse, "held by pid"},
		{"empty replica", empty, filepath.Join(dir, "new1.db"), replicate.RestoreOptions{}, replicate.ErrEmptyReplica, "nothing has been replicated"},
		{"missing replica", nowhere, filepath.Join(dir, "new2.db"), replicate.RestoreOptions{}, replicate.ErrEmptyReplica, "wrong place"},
		{"missing directory", target, filepath.Join(dir, "no", "such", "dir.db"), replicate.RestoreOptions{}, nil, "destination directory"},
		{"empty destination", target, "", replicate.RestoreOptions{}, nil, "destination is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := snapshotDir(t, dir)
			err := replicate.Restore(t.Context(), c.target, c.to, c.opts)
			if err == nil || (c.want != nil && !errors.Is(err, c.want)) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("Restore: %v; want %v saying %q", err, c.want, c.says)
			}
			after := snapshotDir(t, dir)
			for p, b := range before {
				if !bytes.Equal(after[p], b) && !strings.HasSuffix(p, ".lock") && !strings.Contains(p, "in-use.db") {
					t.Errorf("%s changed", p)
				}
			}
			for p := range after {
				if _, ok := before[p]; !ok && !strings.HasSuffix(p, ".lock") {
					t.Errorf("%s appeared", p)
				}
			}
		})
	}
	if got, _ := os.ReadFile(existing); !bytes.Equal(got, content) {
		t.Error("the existing destination was modified")
	}

	checkForceReplaces(t, dir, target, existing)
	checkReplicatedRefused(t, dir, target)
}

// checkForceReplaces: Force replaces the file existing with the replica's
// database and drops its stale WAL and shared memory, leaving no
// temporary file in dir.
func checkForceReplaces(t *testing.T, dir string, target replicate.Target, existing string) {
	t.Helper()
	os.WriteFile(existing+"-wal", []byte("stale wal"), 0o644)
	os.WriteFile(existing+"-shm", []byte("stale shm"), 0o644)
	if err := replicate.Restore(t.Context(), target, existing, replicate.RestoreOptions{Force: true}); err != nil {
		t.Fatalf("Restore with Force: %v", err)
	}
	for _, s := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(existing + s); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale %s left beside the restored file: %v", s, err)
		}
	}
	runs, integrity := dbRuns(t, existing)
	if len(runs) != 30 || integrity != "ok" {
		t.Errorf("forced restore holds %d runs (want 30), integrity %q", len(runs), integrity)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, ".*.restore-*"))
	if len(matches) > 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

// checkReplicatedRefused: a database this process replicates is refused
// even once its store is closed (the engine lock is free then): Litestream
// still has it open.
func checkReplicatedRefused(t *testing.T, dir string, target replicate.Target) {
	t.Helper()
	rep := filepath.Join(dir, "replicated.db")
	repTarget := fileTarget(t, filepath.Join(dir, "second"))
	n := openNode(t, rep, &repTarget, replicate.Options{SyncInterval: 50 * time.Millisecond})
	n.eng.Stop(t.Context())
	n.st.Close()
	if err := replicate.Restore(t.Context(), target, rep, replicate.RestoreOptions{Force: true}); !errors.Is(err, replicate.ErrInUse) ||
		!strings.Contains(err.Error(), "this process replicates it") {
		t.Errorf("Restore over a database this process replicates: %v, want ErrInUse", err)
	}
	n.eng = nil // stopped and closed above
	if err := n.rep.Close(t.Context()); err != nil {
		t.Error(err)
	}
}

// snapshotDir maps every regular file under dir (outside the replica) to
// its content; the files of in-use.db, which a store of this process has
// open, only to nil: reading them would open and close them, dropping the
// store's SQLite locks.
func snapshotDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if strings.Contains(p, string(filepath.Separator)+"replica"+string(filepath.Separator)) {
			return nil
		}
		if strings.HasPrefix(filepath.Base(p), "in-use.db") {
			out[p] = nil
			return nil
		}
		b, _ := os.ReadFile(p)
		out[p] = b
		return nil
	})
	return out
}
