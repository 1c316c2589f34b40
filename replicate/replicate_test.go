package replicate_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/replicate"
	"github.com/yella-go/yella/store/sqlitestore"
)

// Replication end to end: 10,000 runs written while replicating to a
// file replica. A restore taken while the engine still runs holds every run
// acknowledged (and completed) more than 2 × SyncInterval + 1 s earlier,
// without help from a final sync; after a graceful stop (whose final sync
// copies the rest) a restore holds all 10,000. Both pass integrity_check,
// and an engine opened on the restored file sees every run and keeps the
// idempotency keys.
func TestTenThousandRunsRestore(t *testing.T) {
	n := 10000
	if raceEnabled {
		n = 2000 // modernc under the race detector is several times slower
	}
	dir := t.TempDir()
	target := fileTarget(t, dir)
	src := openNode(t, filepath.Join(dir, "app.db"), &target, replicate.Options{})
	t0 := time.Now()
	acks := src.emit(t, "k", 0, n)
	if err := src.eng.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	drained := time.Now()
	t.Logf("%d runs admitted and completed in %v", n, drained.Sub(t0).Round(time.Millisecond))

	// Live restore: wait out the bound, then restore while still replicating.
	bound := 2*replicate.DefaultSyncInterval + time.Second
	time.Sleep(time.Until(drained.Add(bound)))
	live := filepath.Join(dir, "live.db")
	t1 := time.Now()
	if err := replicate.Restore(t.Context(), target, live, replicate.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("live restore (with integrity_check): %v", time.Since(t1).Round(time.Millisecond))
	runs, integrity := dbRuns(t, live)
	if integrity != "ok" {
		t.Errorf("live restore: integrity_check %q", integrity)
	}
	missing, notDone := 0, 0
	for k, at := range acks {
		if t1.Sub(at) <= bound {
			continue // not required yet (none: every run completed before the wait)
		}
		switch runs[k] {
		case "":
			missing++
		case "completed":
		default:
			notDone++
		}
	}
	if missing > 0 || notDone > 0 {
		t.Errorf("live restore: %d of %d runs acknowledged more than %v earlier missing, %d not completed", missing, n, bound, notDone)
	}

	// Graceful stop: the final sync copies everything.
	if err := src.close(t); err != nil {
		t.Fatalf("close: %v", err)
	}
	final := filepath.Join(dir, "final.db")
	t2 := time.Now()
	if err := replicate.Restore(t.Context(), target, final, replicate.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(final)
	t.Logf("final restore (with integrity_check): %v, %d bytes", time.Since(t2).Round(time.Millisecond), fi.Size())

	dst := openNode(t, final, nil, replicate.Options{})
	m, err := dst.eng.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Queue[yella.StatusCompleted]; got != int64(n) {
		t.Errorf("engine on the restored file counts %d completed runs, want %d (metrics %+v)", got, n, m.Queue)
	}
	em, err := dst.eng.Emit(t.Context(), "job", nil, yella.IdempotencyKey("k-0"))
	if err != nil || len(em.Runs) != 0 || em.Reason != yella.ReasonDuplicate {
		t.Errorf("re-emitting k-0 on the restored file: %+v, %v; want a duplicate", em, err)
	}
	dst.close(t)
	runs, integrity = dbRuns(t, final)
	if integrity != "ok" {
		t.Errorf("final restore: integrity_check %q", integrity)
	}
	for k := range acks {
		if runs[k] != "completed" {
			t.Errorf("final restore: run %s is %q, want completed", k, runs[k])
			break
		}
	}
}

// After a disaster the operator restores, then replicates the restored file
// to the same replica: Litestream sees the database is behind the replica,
// takes a snapshot, and the replica goes on; a second restore holds the
// runs from before and after.
func TestReplicateAgainAfterRestore(t *testing.T) {
	dir := t.TempDir()
	target := fileTarget(t, dir)
	opts := replicate.Options{SyncInterval: 100 * time.Millisecond}
	a := openNode(t, filepath.Join(dir, "a.db"), &target, opts)
	a.emit(t, "before", 0, 200)
	if err := a.eng.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := a.close(t); err != nil {
		t.Fatal(err)
	}
	b := filepath.Join(dir, "b.db")
	if err := replicate.Restore(t.Context(), target, b, replicate.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	bn := openNode(t, b, &target, opts)
	bn.emit(t, "after", 0, 200)
	if err := bn.eng.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := bn.rep.Sync(t.Context()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if s := bn.rep.Status(); s.LastSync.IsZero() || s.ConsecutiveErrors != 0 || s.LocalTXID == 0 || s.ReplicaTXID != s.LocalTXID {
		t.Errorf("status after Sync: %+v, want a recent sync, no errors, replica at the local position", s)
	}
	if err := bn.close(t); err != nil {
		t.Fatal(err)
	}
	c := filepath.Join(dir, "c.db")
	if err := replicate.Restore(t.Context(), target, c, replicate.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	runs, integrity := dbRuns(t, c)
	if integrity != "ok" {
		t.Errorf("integrity_check %q", integrity)
	}
	for _, p := range []string{"before", "after"} {
		for i := range 200 {
			if k := fmt.Sprintf("%s-%d", p, i); runs[k] != "completed" {
				t.Fatalf("second restore: run %s is %q, want completed", k, runs[k])
			}
		}
	}
}

// Point-in-time restore: a timestamp between two batches restores the
// first batch only; a timestamp before anything was replicated is an empty
// replica.
func TestPointInTimeRestore(t *testing.T) {
	dir := t.TempDir()
	target := fileTarget(t, dir)
	n := openNode(t, filepath.Join(dir, "app.db"), &target, replicate.Options{SyncInterval: 100 * time.Millisecond})
	before := time.Now()
	time.Sleep(1100 * time.Millisecond) // file times have 1 s granularity on some file systems
	n.emit(t, "a", 0, 50)
	if err := n.eng.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := n.rep.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	between := time.Now()
	time.Sleep(1100 * time.Millisecond)
	n.emit(t, "b", 0, 50)
	if err := n.eng.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := n.close(t); err != nil {
		t.Fatal(err)
	}

	pit := filepath.Join(dir, "pit.db")
	if err := replicate.Restore(t.Context(), target, pit, replicate.RestoreOptions{Timestamp: between}); err != nil {
		t.Fatal(err)
	}
	runs, integrity := dbRuns(t, pit)
	if integrity != "ok" {
		t.Errorf("integrity_check %q", integrity)
	}
	as, bs := 0, 0
	for k := range runs {
		switch k[0] {
		case 'a':
			as++
		case 'b':
			bs++
		}
	}
	if as != 50 || bs != 0 {
		t.Errorf("restore at %v: %d runs of the first batch (want 50) and %d of the second (want 0)", between, as, bs)
	}
	err := replicate.Restore(t.Context(), target, filepath.Join(dir, "early.db"), replicate.RestoreOptions{Timestamp: before.Add(-time.Hour)})
	if !errors.Is(err, replicate.ErrEmptyReplica) {
		t.Errorf("restore before the first sync: %v, want ErrEmptyReplica", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "early.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed restore left its destination: %v", err)
	}
}

// The WAL stays bounded while replicating under an unpaced burst of writes
// lasting many sync intervals. Litestream copies the new WAL frames every
// SyncInterval and then checkpoints (the store's own autocheckpoint is
// raised to replicate.AutoCheckpoint and stays a backstop), so the WAL
// holds a bounded window of writes however long the burst lasts. Eight
// emitters write at the engine's full speed; the test asserts that at
// least twice the peak went through the WAL (the WAL file was reused: an
// unbounded WAL would hold everything) and that the peak WAL file held at
// most window seconds of writes at the burst's average rate, a window
// well under the burst's length. How much the WAL holds depends on when
// Litestream gets a core (it competes with the writer for the 2 cores),
// so the bound is in seconds of writes at the rate measured, not in
// bytes: with a 250 ms interval, measured peaks of 0.35-1.4 s of writes
// (21-77 MB at 42-58 MB/s of WAL), bound 2.25 s; with the default 1 s,
// up to 3 s (86-223 MB: the WAL also grows unchecked until Litestream's
// first tick and first snapshot after Start), bound 4 s. The restore
// drill checks the WAL under ordinary load (restoredrill).
func TestWALBoundedWhileReplicating(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("an all-out write burst of several hundred MB: not under -race or -short")
	}
	t.Run("250ms", func(t *testing.T) { walBurst(t, 250*time.Millisecond, 6*time.Second, 2250*time.Millisecond) })
	t.Run("1s", func(t *testing.T) { walBurst(t, time.Second, 10*time.Second, 4*time.Second) })
}

// walBurst writes at full speed for burst while replicating every
// interval, and checks that the peak WAL file held at most window of
// writes at the average rate measured. The burst must last at least twice
// the window, so that a WAL holding everything would fail the bound.
func walBurst(t *testing.T, interval, burst, window time.Duration) {
	if burst < 2*window {
		t.Fatalf("a burst of %v cannot tell a window of %v from an unbounded WAL", burst, window)
	}
	dir := t.TempDir()
	target := fileTarget(t, dir)
	path := filepath.Join(dir, "app.db")
	n := openNode(t, path, &target, replicate.Options{SyncInterval: interval})
	var peak int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if fi, err := os.Stat(path + "-wal"); err == nil {
				peak = max(peak, fi.Size())
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	t0 := time.Now()
	runs := 0
	for time.Since(t0) < burst {
		n.emit(t, "burst", runs, runs+4000)
		runs += 4000
	}
	if err := n.eng.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	if err := n.rep.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-done
	walBytes := walBytesSynced(t, path)
	rate := walBytes / took.Seconds()
	limit := rate * window.Seconds()
	t.Logf("%d runs in %v (%.0f runs/s); %.1f MB through the WAL (%.1f MB/s); peak WAL file %.1f MB (%.2f s of writes); bound %.1f MB (%v); %d Litestream checkpoints",
		runs, took.Round(time.Millisecond), float64(runs)/took.Seconds(), walBytes/1e6, rate/1e6, float64(peak)/1e6, float64(peak)/rate, limit/1e6, window, int(checkpoints(t, path)))
	if walBytes < 2*float64(peak) || peak == 0 {
		t.Fatalf("only %.1f MB went through the WAL against a %.1f MB peak: the burst is too short to show a bound", walBytes/1e6, float64(peak)/1e6)
	}
	if float64(peak) > limit {
		t.Errorf("the WAL grew to %.1f MB while replicating (%.2f s of writes), over the bound of %.1f MB (%v)", float64(peak)/1e6, float64(peak)/rate, limit/1e6, window)
	}
}

// walBytesSynced reads Litestream's litestream_total_wal_bytes counter
// for path from the default Prometheus registry (where Litestream
// registers its metrics).
func walBytesSynced(t *testing.T, path string) float64 {
	return metricSum(t, "litestream_total_wal_bytes", path)
}

func checkpoints(t *testing.T, path string) float64 {
	return metricSum(t, "litestream_checkpoint_count", path)
}

func metricSum(t *testing.T, name, path string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	found := false
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "db" && l.GetValue() == path {
					found = true
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	if !found {
		t.Fatalf("metric %s{db=%q} not in the default Prometheus registry", name, path)
	}
	return sum
}

// sqlitestore.Options.AutoCheckpoint takes effect: with it raised and no
// Litestream attached, the WAL grows past SQLite's default 1000-page
// threshold; with the default it stays near it. A negative value is refused.
func TestStoreAutoCheckpoint(t *testing.T) {
	if raceEnabled {
		t.Skip("writes ~20 MB: not under -race")
	}
	if _, err := sqlitestore.Open(filepath.Join(t.TempDir(), "x.db"), sqlitestore.Options{AutoCheckpoint: -1}); err == nil {
		t.Error("AutoCheckpoint -1 accepted")
	}
	peak := func(ac int) int64 {
		path := filepath.Join(t.TempDir(), "app.db")
		st, err := sqlitestore.Open(path, sqlitestore.Options{AutoCheckpoint: ac})
		if err != nil {
			t.Fatal(err)
		}
		eng, err := yella.New(yella.Config{Store: st, Concurrency: 50})
		if err != nil {
			t.Fatal(err)
		}
		eng.Register(yella.Process{Name: "job", On: "job", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
		eng.Start(t.Context())
		n := &node{path: path, st: st, eng: eng}
		n.emit(t, "k", 0, 3000)
		eng.Drain(t.Context())
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		n.close(t)
		return fi.Size()
	}
	def, raised := peak(0), peak(replicate.AutoCheckpoint)
	t.Logf("WAL after 3000 runs: %.1f MB with the default autocheckpoint, %.1f MB with %d pages", float64(def)/1e6, float64(raised)/1e6, replicate.AutoCheckpoint)
	if raised < 2*def || raised < 4<<20 {
		t.Errorf("AutoCheckpoint %d did not take effect: WAL %d bytes, against %d with the default", replicate.AutoCheckpoint, raised, def)
	}
}

// Litestream opens the database at its first sync; a replicator closed
// before that (here the interval never elapses) still copies every commit
// in Close.
func TestCloseBeforeFirstSync(t *testing.T) {
	dir := t.TempDir()
	target := fileTarget(t, dir)
	n := openNode(t, filepath.Join(dir, "app.db"), &target, replicate.Options{SyncInterval: time.Hour})
	n.emit(t, "k", 0, 100)
	if err := n.eng.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := n.rep.Status(); !s.LastSync.IsZero() {
		t.Fatalf("a sync happened before Close (%+v): the test tests nothing", s)
	}
	if err := n.close(t); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(dir, "restored.db")
	if err := replicate.Restore(t.Context(), target, to, replicate.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if runs, integrity := dbRuns(t, to); len(runs) != 100 || integrity != "ok" {
		t.Errorf("restored %d runs (want 100), integrity %q", len(runs), integrity)
	}
}
