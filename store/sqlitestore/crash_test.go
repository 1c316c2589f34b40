package sqlitestore_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella/internal/tools/crashtest"
)

// These tests kill real engine processes with SIGKILL (see
// internal/tools/crashtest). The long form runs with YELLA_CRASH_LONG=1.

func crashFiles(t *testing.T) crashtest.Config {
	dir := t.TempDir()
	return crashtest.Config{DB: filepath.Join(dir, "crash.db"), Witness: filepath.Join(dir, "witness.jsonl"), Acks: filepath.Join(dir, "acks.txt")}
}

func mustSpawn(t *testing.T, cfg crashtest.Config) *crashtest.Child {
	t.Helper()
	c, err := crashtest.Spawn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// check verifies the invariants and fails the test on any violation.
func check(t *testing.T, cfg crashtest.Config) crashtest.Report {
	t.Helper()
	rep, err := crashtest.Check(cfg.DB, cfg.Witness, cfg.Acks, "k-")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Failures() {
		t.Error(f)
	}
	return rep
}

// TestCrashPoints kills a child at each commit boundary, restarts on the
// same file and checks the invariants (internal/tools/crashtest.Matrix): nothing
// acknowledged is lost (checked right after the kill too), nothing runs or
// completes twice, every completed job has its follow-up, and the run the
// killed child held is claimed again within a second of the restart.
func TestCrashPoints(t *testing.T) {
	results, err := crashtest.Matrix(t.TempDir(), 20, []int{1, 7})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results { // the failures first, then every point's summary
		for _, f := range r.Failures {
			t.Errorf("%s-%d: %s", r.Point, r.K, f)
		}
	}
	for _, r := range results {
		reclaim := "held no run"
		if r.Held > 0 {
			reclaim = fmt.Sprintf("its %d held run(s) claimed again %v after the restart", r.Held, r.Reclaim.Round(time.Millisecond))
		}
		t.Logf("%s-%d: %s; %s", r.Point, r.K, r.Report, reclaim)
	}
	if len(results) != 2*len(crashtest.Points) {
		t.Errorf("%d results, want %d", len(results), 2*len(crashtest.Points))
	}
}

// TestCrashRandom kills children at random moments while they drain runs
// with effects, restarting each time on the same file.
func TestCrashRandom(t *testing.T) {
	runs, kills := 5000, 20
	if raceEnabled {
		runs, kills = 600, 6
	}
	if os.Getenv("YELLA_CRASH_LONG") != "" {
		runs, kills = 20000, 100
	}
	rng := crashRNG(t)
	cfg := crashFiles(t)
	cfg.Runs, cfg.EffectDelay = runs, 10*time.Millisecond
	// Each child must claim the runs the previous killed one held within a
	// second of its start (or leave them to the next if killed sooner).
	rc := &crashtest.Reclaims{DB: cfg.DB}
	held := 0
	ran := func(i int, c *crashtest.Child) {
		t.Helper()
		late, err := rc.Ran(c.Started, time.Now(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range late {
			t.Errorf("child %d: %s", i, l)
		}
	}
	for i := range kills {
		c := mustSpawn(t, cfg)
		// Every other kill comes at a random moment of the start (the
		// schema being created, runs being loaded); the others while
		// handlers run, so that some runs are held when the child dies.
		if i%2 == 1 {
			select {
			case <-c.Running():
			case <-time.After(time.Minute):
			}
		}
		time.Sleep(time.Duration(30+rng.IntN(400)) * time.Millisecond)
		c.Kill()
		o := c.Wait()
		if !o.Killed && o.Err != nil {
			t.Fatalf("kill %d: child failed: %v", i, o.Err)
		}
		ran(i, c)
		rep, err := crashtest.Check(cfg.DB, cfg.Witness, cfg.Acks, "k-")
		if err != nil || rep.Integrity != "ok" {
			t.Fatalf("kill %d: integrity %q, %v", i, rep.Integrity, err)
		}
		if len(rep.Lost) > 0 { // checked before a later child emits the keys again
			t.Errorf("kill %d: %d acknowledged admissions lost (%v)", i, len(rep.Lost), rep.Lost)
		}
		n, err := rc.Killed()
		if err != nil {
			t.Fatal(err)
		}
		held += n
	}
	final := cfg
	final.Exit = true
	fc := mustSpawn(t, final)
	o := fc.Wait()
	if !o.Drained || o.Err != nil {
		t.Fatalf("final child: drained %v, err %v", o.Drained, o.Err)
	}
	ran(kills, fc)
	rep := check(t, cfg)
	if rep.Runs != runs || rep.Acked < runs {
		t.Errorf("runs %d, acked %d, want %d", rep.Runs, rep.Acked, runs)
	}
	if rep.Completed+rep.Fenced != runs {
		t.Errorf("%d completed + %d fenced, want %d", rep.Completed, rep.Fenced, runs)
	}
	if held == 0 || rc.Taken == 0 {
		t.Errorf("the killed children held %d runs, %d taken up again: the reclaim was not measured", held, rc.Taken)
	}
	t.Logf("%d kills: %s; %d runs held by killed children, the slowest claimed again %v after its restart", kills, rep, held, rc.Max.Round(time.Millisecond))
}

// TestCrashReconciled: the job's effect has a Reconcile function that
// reads the witness (a body that wrote its line happened; one that did not
// never ran). Under random SIGKILLs, many of them inside effect bodies, no
// run ends fenced and no body runs twice: every effect a kill left started
// is resolved, as done or as not done, and the report counts each.
func TestCrashReconciled(t *testing.T) {
	// Effects of 100 ms keep about 50 in flight at every kill; the runs
	// outlast the 50 kills (about 150 complete per child).
	runs, kills := 8000, 50
	if raceEnabled {
		runs, kills = 400, 6
	}
	rng := crashRNG(t)
	cfg := crashFiles(t)
	cfg.Runs, cfg.EffectDelay = runs, 100*time.Millisecond
	cfg.Reconciled = filepath.Join(filepath.Dir(cfg.DB), "reconciled.txt")
	for i := range kills {
		c := mustSpawn(t, cfg)
		select { // kill while handlers run, so that effects are left started
		case <-c.Running():
		case <-time.After(5 * time.Second): // every run may be done already
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		c.Kill()
		if o := c.Wait(); !o.Killed && o.Err != nil {
			t.Fatalf("kill %d: child failed: %v", i, o.Err)
		}
	}
	final := cfg
	final.Exit = true
	fc := mustSpawn(t, final)
	if o := fc.Wait(); !o.Drained || o.Err != nil {
		t.Fatalf("final child: drained %v, err %v", o.Drained, o.Err)
	}
	rep := check(t, cfg)
	if rep.Runs != runs || rep.Completed != runs || rep.Fenced != 0 {
		t.Errorf("%d runs, %d completed, %d fenced; want %d completed, none fenced", rep.Runs, rep.Completed, rep.Fenced, runs)
	}
	lines, err := crashtest.ReadLines(cfg.Reconciled)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := map[string]int{}
	for _, l := range lines {
		v, _, _ := strings.Cut(l, " ")
		verdicts[v]++
	}
	if !raceEnabled && verdicts["done"]+verdicts["not-done"] == 0 {
		t.Errorf("no kill left an effect started: nothing was reconciled")
	}
	t.Logf("%d kills: %s; effects left started and reconciled: %d done, %d not done", kills, rep, verdicts["done"], verdicts["not-done"])
}

// crashRNG is the random source of a crash test: seeded from the clock, or
// from YELLA_CRASH_SEED to reproduce a run (the test logs its seed).
func crashRNG(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("YELLA_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("reproduce: YELLA_CRASH_SEED=%d", seed)
	return rand.New(rand.NewPCG(seed, 0))
}
