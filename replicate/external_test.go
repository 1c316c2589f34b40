package replicate_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/yella-go/yella/internal/tools/restoredrill"
	"github.com/yella-go/yella/replicate"
)

// needSQLite3 returns the sqlite3 command-line shell, or skips the test.
func needSQLite3(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Skip("the sqlite3 command-line shell is not installed (Debian: apt-get install sqlite3): " +
			"this test runs it as another process against the live database")
	}
	return bin
}

// sqlite3 runs one sqlite3 shell process on db: it opens the database, runs
// script with a 10 s busy timeout, and closes it (the close is when SQLite
// deletes the WAL if it finds no other process holding the database).
func sqlite3(bin, db, script string) (string, error) {
	out, err := exec.Command(bin, "-bail", "-cmd", ".timeout 10000", db, script).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("sqlite3 %q: %v: %s", script, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// inode is the inode of path, 0 if it is missing.
func inode(path string) uint64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// externalLoad is what the sqlite3 shells did.
type externalLoad struct {
	runs, writes, checkpoints, checks int   // successful invocations by kind
	written                           []int // rows the shells inserted into ext_writes (acknowledged: the shell exited 0)
	errs                              []string
}

// hammer runs sqlite3 shells on db one after the other until stop closes:
// reads of the engine's tables, writes to a table of their own, passive
// checkpoints and quick_checks. Every shell opens and closes the database.
func hammer(bin, db string, stop <-chan struct{}) externalLoad {
	var l externalLoad
	for i := 0; ; i++ {
		select {
		case <-stop:
			return l
		default:
		}
		var err error
		var out string
		switch i % 8 {
		case 0, 2, 4:
			out, err = sqlite3(bin, db, "SELECT count(*) FROM runs")
			if _, perr := strconv.Atoi(out); err == nil && perr != nil {
				err = fmt.Errorf("count(*) said %q", out)
			}
			if err == nil {
				l.runs++
			}
		case 1, 5:
			_, err = sqlite3(bin, db, fmt.Sprintf("CREATE TABLE IF NOT EXISTS ext_writes (n INTEGER PRIMARY KEY); INSERT INTO ext_writes (n) VALUES (%d)", i))
			if err == nil {
				l.writes++
				l.written = append(l.written, i)
			}
		case 3, 7:
			_, err = sqlite3(bin, db, "PRAGMA wal_checkpoint")
			if err == nil {
				l.checkpoints++
			}
		case 6:
			out, err = sqlite3(bin, db, "PRAGMA quick_check")
			if err == nil && out != "ok" {
				err = fmt.Errorf("quick_check: %s", out)
			}
			if err == nil {
				l.checks++
			}
		}
		if err != nil && len(l.errs) < 10 {
			l.errs = append(l.errs, err.Error())
		}
	}
}

// TestExternalSQLite3WhileReplicating: the real sqlite3 shell, run again and
// again by another process (reads, writes to a table of its own, passive
// checkpoints, quick_checks; every run opens and closes the database),
// against a child engine replicating under load. The WAL the engine writes
// is never unlinked or replaced (every -wal descriptor the child holds is
// the file on disk), replication never reports a stall, and after a
// graceful stop: the child's view of the runs is the file's,
// integrity_check is ok, every acknowledged admission and every external
// write is in the file, and the replica restores to the same runs, one by
// one. Before the fix, the first sqlite3 to close deleted the live WAL:
// replicate.Start had opened and closed the database file, which drops
// every POSIX lock the process holds on it, SQLite's included.
func TestExternalSQLite3WhileReplicating(t *testing.T) {
	bin := needSQLite3(t)
	if testing.Short() {
		t.Skip("spawns a child engine and sqlite3 shells for several seconds")
	}
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc/self/fd to see the WAL the child holds")
	}
	dir := t.TempDir()
	cfg := restoredrill.Config{Dir: dir, SyncInterval: 100 * time.Millisecond}
	load := 5 * time.Second
	if raceEnabled {
		cfg.Rate, load = 40, 4*time.Second
	}
	statuses, ext := replicateUnderSQLite3(t, bin, cfg, load)
	checkWALHeld(t, statuses)
	final := statuses[len(statuses)-1]
	t.Logf("child: %d admissions acknowledged; its final view %d runs; replica TXID %d of %d; %d status lines",
		final.Acked, final.Runs, final.ReplicaTXID, final.LocalTXID, len(statuses))
	fileRuns, fileExt := checkFileHoldsAcknowledged(t, bin, dir, final, ext)
	checkReplicaRestoresFile(t, dir, fileRuns, fileExt)
}

// replicateUnderSQLite3 runs a child engine replicating under load while
// sqlite3 shells hammer its database for load, stops the child gracefully
// and returns its status lines and what the shells did.
func replicateUnderSQLite3(t *testing.T, bin string, cfg restoredrill.Config, load time.Duration) ([]restoredrill.Status, externalLoad) {
	t.Helper()
	child, err := restoredrill.StartChild(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			child.Kill()
		}
	}()
	db := restoredrill.DBPath(cfg.Dir)

	var statuses []restoredrill.Status
	var lineErr []string
	take := func(l string) {
		if s, ok := restoredrill.ParseStatus(l); ok {
			statuses = append(statuses, s)
		} else if l != "stopped" {
			lineErr = append(lineErr, l)
		}
	}
	stop := make(chan struct{})
	done := make(chan externalLoad, 1)
	go func() { done <- hammer(bin, db, stop) }()
	deadline := time.After(load)
	var ext externalLoad
	for running := true; running; {
		select {
		case l, ok := <-child.Lines():
			if !ok {
				t.Fatal("the child exited under load (see its stderr)")
			}
			take(l)
		case <-deadline:
			close(stop)
			deadline = nil
		case ext = <-done:
			running = false
		}
	}
	rest, err := child.Stop(60 * time.Second)
	stopped = true
	for _, l := range rest {
		take(l)
	}
	if err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	t.Logf("sqlite3 shells: %d counts, %d writes, %d checkpoints, %d quick_checks; %d errors %q",
		ext.runs, ext.writes, ext.checkpoints, ext.checks, len(ext.errs), ext.errs)
	for _, e := range ext.errs {
		t.Errorf("sqlite3 shell failed: %s", e)
	}
	if ext.runs == 0 || ext.writes == 0 || ext.checkpoints == 0 {
		t.Fatal("the sqlite3 shells did not run: the test tested nothing")
	}
	if len(lineErr) > 0 {
		t.Errorf("unexpected child output: %q", lineErr)
	}
	if len(statuses) < 10 {
		t.Fatalf("only %d status lines from the child", len(statuses))
	}
	return statuses, ext
}

// checkWALHeld: while the child ran, the WAL it writes was the file on
// disk, and replication never stalled.
func checkWALHeld(t *testing.T, statuses []restoredrill.Status) {
	t.Helper()
	bad := 0
	for i, s := range statuses {
		ok := s.WALInode != 0 && !s.WALHeldDeleted && len(s.WALHeld) > 0
		for _, ino := range s.WALHeld {
			ok = ok && ino == s.WALInode
		}
		if !ok {
			if bad++; bad <= 3 {
				t.Errorf("status %d of %d: the child holds WAL inodes %v (deleted: %v), the file on disk is inode %d (0: missing)",
					i, len(statuses), s.WALHeld, s.WALHeldDeleted, s.WALInode)
			}
		}
		if s.Stalled != "" && bad <= 3 {
			bad++
			t.Errorf("status %d: replication reported stalled: %s", i, s.Stalled)
		}
	}
}

// checkFileHoldsAcknowledged: after the stop, the file passes
// integrity_check and holds every run the child saw, every admission it
// acknowledged and every external write; it returns the file's runs and
// external writes.
func checkFileHoldsAcknowledged(t *testing.T, bin, dir string, final restoredrill.Status, ext externalLoad) (map[string]runRow, []int) {
	t.Helper()
	db := restoredrill.DBPath(dir)
	if out, err := sqlite3(bin, db, "PRAGMA integrity_check"); err != nil || out != "ok" {
		t.Fatalf("integrity_check of the file: %.300q… %v", out, err)
	}
	fileRuns, fileExt := readRuns(t, db)
	if int64(len(fileRuns)) != final.Runs {
		t.Errorf("the child counted %d runs when it stopped, the file holds %d", final.Runs, len(fileRuns))
	}
	acks, err := restoredrill.ReadAcks(restoredrill.AcksPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, r := range fileRuns {
		keys[r.key] = true
	}
	lost := 0
	for k := range acks {
		if !keys[k] {
			lost++
		}
	}
	if lost > 0 || len(acks) == 0 {
		t.Errorf("%d of %d acknowledged admissions are missing from the file", lost, len(acks))
	}
	for _, n := range ext.written {
		if !slices.Contains(fileExt, n) {
			t.Errorf("external write %d (acknowledged: its sqlite3 exited 0) is missing from the file", n)
			break
		}
	}
	return fileRuns, fileExt
}

// checkReplicaRestoresFile: the replica restores to the file, run by run.
func checkReplicaRestoresFile(t *testing.T, dir string, fileRuns map[string]runRow, fileExt []int) {
	t.Helper()
	target, err := replicate.ParseURL(restoredrill.ReplicaURL(dir))
	if err != nil {
		t.Fatal(err)
	}
	restored := filepath.Join(dir, "restored.db")
	if err := replicate.Restore(t.Context(), target, restored, replicate.RestoreOptions{}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	repRuns, repExt := readRuns(t, restored)
	diff := 0
	for id, r := range fileRuns {
		if repRuns[id] != r {
			if diff++; diff <= 3 {
				t.Errorf("run %s: the file has %+v, the restored replica %+v", id, r, repRuns[id])
			}
		}
	}
	if diff > 0 || len(repRuns) != len(fileRuns) {
		t.Errorf("the restored replica differs from the file: %d runs differ; %d runs restored, %d in the file", diff, len(repRuns), len(fileRuns))
	}
	if !slices.Equal(repExt, fileExt) {
		t.Errorf("the restored replica has %d external writes, the file %d", len(repExt), len(fileExt))
	}
}

// runRow is a run as the comparison sees it.
type runRow struct {
	key, status string
	attempts    int
	output      string
}

// readRuns reads every run of the database at path by id, and the rows of
// the external writers' table (sorted).
func readRuns(t *testing.T, path string) (map[string]runRow, []int) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT id, coalesce(idem_key, ''), status, attempts, coalesce(hex(output), '') FROM runs")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]runRow{}
	for rows.Next() {
		var id string
		var r runRow
		if err := rows.Scan(&id, &r.key, &r.status, &r.attempts, &r.output); err != nil {
			t.Fatal(err)
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var ext []int
	xr, err := db.Query("SELECT n FROM ext_writes ORDER BY n")
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return out, nil
		}
		t.Fatal(err)
	}
	defer xr.Close()
	for xr.Next() {
		var n int
		xr.Scan(&n)
		ext = append(ext, n)
	}
	return out, ext
}

// TestExternalSQLite3WhileLitestreamFails: whenever its setup fails,
// Litestream closes the descriptor of the database it opened, which drops
// every POSIX lock the process holds on the file, the store's SQLite locks
// included. With a replica it cannot use (its path is a regular file)
// that happens at every sync. The sqlite3 shell opening and closing the
// database meanwhile must still not delete the WAL the engine writes: the
// replicator holds SQLite's shared lock for the process in a way no close
// drops (Linux). The shell sees every run the engine committed, and the
// replicator reports the stall.
func TestExternalSQLite3WhileLitestreamFails(t *testing.T) {
	bin := needSQLite3(t)
	dir := t.TempDir()
	replicaPath := filepath.Join(dir, "replica")
	if err := os.WriteFile(replicaPath, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	target, err := replicate.ParseURL("file://" + replicaPath)
	if err != nil {
		t.Fatal(err)
	}
	n := openNode(t, filepath.Join(dir, "app.db"), &target,
		replicate.Options{SyncInterval: 50 * time.Millisecond, StallAfter: 500 * time.Millisecond})
	waitFor(t, 30*time.Second, "two failed Litestream setups", func() bool { return n.rep.Status().ConsecutiveErrors >= 2 })
	wal := inode(n.path + "-wal")
	if wal == 0 {
		t.Fatal("no WAL file")
	}
	for i := range 5 {
		n.emit(t, fmt.Sprintf("k%d", i), 0, 20)
		if err := n.eng.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		out, err := sqlite3(bin, n.path, "SELECT count(*) FROM runs WHERE status = 'completed'")
		if err != nil {
			t.Fatal(err)
		}
		if got := inode(n.path + "-wal"); got != wal {
			t.Fatalf("after sqlite3 run %d closed the database, the WAL file is inode %d (0: deleted), the engine's is %d", i, got, wal)
		}
		if want := strconv.Itoa((i + 1) * 20); out != want {
			t.Fatalf("sqlite3 run %d sees %s completed runs in the file, the engine completed %s", i, out, want)
		}
	}
	waitFor(t, 30*time.Second, "the stall reported", func() bool {
		return strings.Contains(n.rep.Status().Stalled, "not been copied from the WAL")
	})
	s := n.rep.Status()
	t.Logf("stalled: %s (lag %v, %d consecutive replica errors)", s.Stalled, s.Lag.Round(time.Millisecond), s.ConsecutiveErrors)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := n.closeCtx(t, ctx); err == nil {
		t.Error("Close said the replica is in sync")
	}
}
