package replicate_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella/replicate"
)

// A replication that has stopped is reported by Status.Stalled, though its
// lag (from the last successful sync) stays small and no replica operation
// fails: here the WAL is deleted under the engine, as another process does
// when it closes the database while this one holds no lock on it. The
// engine goes on writing to the deleted file; Litestream copies nothing
// more, and syncs of nothing to the replica succeed.
func TestStalledWhenWALRemoved(t *testing.T) {
	dir := t.TempDir()
	target := fileTarget(t, dir)
	si := 50 * time.Millisecond
	n := openNode(t, filepath.Join(dir, "app.db"), &target, replicate.Options{SyncInterval: si, StallAfter: 20 * si})
	n.emit(t, "before", 0, 50)
	if err := n.eng.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := n.rep.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Healthy, and idle: not stalled, through several StallAfter windows.
	for range 30 {
		if s := n.rep.Status(); s.Stalled != "" {
			t.Fatalf("stalled while healthy: %s", s.Stalled)
		}
		time.Sleep(2 * si)
	}
	if err := os.Remove(n.path + "-wal"); err != nil {
		t.Fatal(err)
	}
	n.emit(t, "after", 0, 50)
	waitFor(t, 30*time.Second, "the stall reported", func() bool {
		// removed, or replaced when a connection opening the database
		// meanwhile has created a new one
		return strings.Contains(n.rep.Status().Stalled, "WAL file "+n.path+"-wal was ")
	})
	s := n.rep.Status()
	t.Logf("stalled: %s; lag %v, %d consecutive replica errors", s.Stalled, s.Lag.Round(time.Millisecond), s.ConsecutiveErrors)
	if s.ConsecutiveErrors != 0 {
		t.Errorf("%d replica errors: the other signals were meant to stay silent here", s.ConsecutiveErrors)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	n.closeCtx(t, ctx) // the final sync cannot copy the deleted WAL: its error is expected
}

// Uploads that keep failing while the engine commits are reported as a
// stall once staged transactions have waited StallAfter; the stall clears
// when the replica is back.
func TestStalledWhileReplicaFails(t *testing.T) {
	dir := t.TempDir()
	target := fileTarget(t, dir)
	si := 50 * time.Millisecond
	n := openNode(t, filepath.Join(dir, "app.db"), &target, replicate.Options{SyncInterval: si, StallAfter: 10 * si})
	n.emit(t, "before", 0, 50)
	if err := n.rep.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The replica's directory becomes a file: every upload fails.
	replica := filepath.Join(dir, "replica")
	if err := os.Rename(replica, replica+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(replica, []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	i := 0
	waitFor(t, 30*time.Second, "the stall reported", func() bool {
		n.emit(t, "during", i, i+5)
		i += 5
		return strings.Contains(n.rep.Status().Stalled, "not reached the replica")
	})
	s := n.rep.Status()
	t.Logf("stalled: %s", s.Stalled)
	if !strings.Contains(s.Stalled, "not a directory") {
		t.Errorf("the stall does not give the cause: %s", s.Stalled)
	}
	if err := os.Remove(replica); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(replica+".away", replica); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the stall cleared", func() bool { return n.rep.Status().Stalled == "" })
	if err := n.close(t); err != nil {
		t.Fatalf("close after the replica came back: %v", err)
	}
	runs, integrity := dbRuns(t, restoreTo(t, target, filepath.Join(dir, "restored.db")))
	if integrity != "ok" || len(runs) != 50+i {
		t.Errorf("the restored replica: integrity %q, %d runs, want %d", integrity, len(runs), 50+i)
	}
}

func restoreTo(t *testing.T, target replicate.Target, to string) string {
	t.Helper()
	if err := replicate.Restore(t.Context(), target, to, replicate.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	return to
}
