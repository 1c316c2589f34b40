package yella_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

// Waits across crashes, with real processes: a child engine on a SQLite
// file runs N runs that each record an effect, sleep until a time fixed in
// their payload, wait for a signal (three in four; the fourth waits 1.5 s
// for a signal never sent and times out; one in five instead starts three
// child runs and joins them), record a second effect and complete with
// what the wait returned. The child sends the signals at
// random moments, again after every restart (a signal sent twice is kept
// for a wait that never comes). The parent kills the child with SIGKILL at
// random moments and restarts it on the same file, then checks from the
// store and the effects' log alone: every run completed (or was fenced by
// a kill inside an effect's body), with its own signal's payload or a
// timeout; no sleep ended before its time; each wait was entered and
// signalled at most once; no completed effect ran twice.

const waitCrashEnv = "YELLA_WAITCRASH_CHILD"

type waitCrashConfig struct {
	DB, Log string
	Runs    int
	Base    time.Time // the sleeps end at Base + 1 s + n × 10 ms
	Seed    uint64
	Last    bool // run until every run is final, then exit
}

type waitCrashPayload struct {
	N      int       `json:"n"`
	WakeAt time.Time `json:"wakeAt"`
}

func waitCrashChild(raw string) error {
	var cfg waitCrashConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return err
	}
	logf, err := os.OpenFile(cfg.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	var logMu sync.Mutex
	body := func(c *yella.Ctx, name string) func(context.Context) (int, error) {
		return func(context.Context) (int, error) {
			logMu.Lock()
			defer logMu.Unlock()
			_, err := fmt.Fprintf(logf, "%s %s\n", c.RunID(), name)
			return 1, err
		}
	}
	st, err := sqlitestore.Open(cfg.DB, sqlitestore.Options{})
	if err != nil {
		return err
	}
	eng, err := yella.New(yella.Config{Store: st, Concurrency: 8, Retry: &yella.Retry{Max: 1000, Backoff: yella.Fixed(10 * time.Millisecond)}})
	if err != nil {
		return err
	}
	err = eng.Register(yella.Process{Name: "w", On: "ev", Run: yella.Handle(func(c *yella.Ctx, p waitCrashPayload) yella.Result {
		if _, err := yella.Effect(c, "a", body(c, "a")); err != nil {
			return c.Error(err)
		}
		if err := yella.SleepUntil(c, "nap", p.WakeAt); err != nil {
			return c.Error(err)
		}
		if p.N%5 == 1 { // a fan-out of three children, joined
			ids, err := yella.Children(c, "kids", "kid", []any{p.N * 10, p.N*10 + 1, p.N*10 + 2})
			if err != nil {
				return c.Error(err)
			}
			res, err := yella.Join(c, "kids", ids, 0)
			if err != nil {
				return c.Error(err)
			}
			sum := 0
			for _, r := range res {
				var v int
				if r.Status == yella.StatusFenced {
					continue // killed inside its effect's body: left to an operator
				}
				if err := r.Decode(&v); err != nil || !r.OK() {
					return c.Fail(fmt.Errorf("child %s: %s %v", r.RunID, r.Status, err))
				}
				sum += v
			}
			if _, err := yella.Effect(c, "b", body(c, "b")); err != nil {
				return c.Error(err)
			}
			return c.OK(sum)
		}
		timeout := time.Duration(0)
		if p.N%4 == 0 {
			timeout = 1500 * time.Millisecond
		}
		v, ok, err := yella.WaitFor[int](c, "sig", fmt.Sprint("k:", p.N), timeout)
		if err != nil {
			return c.Error(err)
		}
		if _, err := yella.Effect(c, "b", body(c, "b")); err != nil {
			return c.Error(err)
		}
		if !ok {
			return c.OK("timeout")
		}
		return c.OK(v)
	})})
	if err != nil {
		return err
	}
	err = eng.Register(yella.Process{Name: "kid", On: "kid", Run: yella.Handle(func(c *yella.Ctx, v int) yella.Result {
		if _, err := yella.Effect(c, "c", body(c, "c")); err != nil {
			return c.Error(err)
		}
		return c.OK(v)
	})})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		return err
	}
	for n := range cfg.Runs { // every child emits all: the keys admit each once
		p := waitCrashPayload{N: n, WakeAt: cfg.Base.Add(time.Second + time.Duration(n)*10*time.Millisecond)}
		if _, err := eng.Emit(ctx, "ev", p, yella.IdempotencyKey(fmt.Sprint("run-", n))); err != nil {
			return err
		}
	}
	fmt.Println("first")
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	for _, n := range rng.Perm(cfg.Runs) {
		if n%4 == 0 || n%5 == 1 {
			continue
		}
		time.Sleep(time.Duration(rng.IntN(4)) * time.Millisecond)
		if _, err := eng.Signal(ctx, fmt.Sprint("k:", n), n); err != nil {
			return err
		}
	}
	if !cfg.Last {
		select {} // until killed
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		cs, err := st.Counts(ctx)
		if err != nil {
			return err
		}
		if cs[store.StatusIdle]+cs[store.StatusRunning]+cs[store.StatusWaiting] == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := eng.Stop(ctx); err != nil {
		return err
	}
	fmt.Println("drained")
	return st.Close()
}

// TestCrashWaits: see above. Short form 6 kills over 300 runs;
// YELLA_CRASH_LONG=1: 25 kills over 1,000.
func TestCrashWaits(t *testing.T) {
	if raw := os.Getenv(waitCrashEnv); raw != "" {
		if err := waitCrashChild(raw); err != nil {
			fmt.Fprintln(os.Stderr, "wait crash child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	kills, runs := 6, 300
	if os.Getenv("YELLA_CRASH_LONG") != "" {
		kills, runs = 25, 1000
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("YELLA_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("reproduce: YELLA_CRASH_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	cfg := waitCrashConfig{DB: filepath.Join(dir, "waits.db"), Log: filepath.Join(dir, "bodies.log"), Runs: runs, Base: time.Now()}
	for i := range kills + 1 {
		c := cfg
		c.Seed, c.Last = rng.Uint64(), i == kills
		child := spawnChild(t, "TestCrashWaits", waitCrashEnv, c)
		select {
		case <-child.first:
		case <-child.exited:
			t.Fatalf("child %d exited before starting: killed %v, %v", i, child.killed, child.err)
		case <-time.After(time.Minute):
			t.Fatalf("child %d did not start within a minute", i)
		}
		if c.Last {
			if !child.wait(2*time.Minute) || child.err != nil {
				t.Fatalf("the last child: %v", child.err)
			}
			break
		}
		time.Sleep(time.Duration(100+rng.IntN(900)) * time.Millisecond)
		if err := child.kill(); err != nil {
			t.Fatal(err)
		}
		if !child.wait(time.Minute) || !child.killed {
			t.Fatalf("child %d was not killed: %v", i, child.err)
		}
	}

	bodies := map[string]int{} // "run effect" → body runs
	f, err := os.Open(cfg.Log)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		bodies[sc.Text()]++
	}
	f.Close()
	st, err := sqlitestore.OpenReadOnly(cfg.DB, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	all, err := st.Runs(ctx, store.RunFilter{Process: "w", Order: store.OldestFirst, Limit: runs + 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != runs {
		t.Fatalf("%d runs stored, want %d", len(all), runs)
	}
	fenced, signalled, timedOut, joined, waits := 0, 0, 0, 0, 0
	for _, r := range all {
		var p waitCrashPayload
		if err := json.Unmarshal(r.Payload, &p); err != nil {
			t.Fatal(err)
		}
		for _, e := range []string{"a", "b"} {
			if n := bodies[r.ID+" "+e]; n > 1 {
				t.Errorf("run %d: effect %s ran %d times", p.N, e, n)
			}
		}
		if r.Status == store.StatusFenced {
			fenced++ // a kill inside an effect's body: its outcome is unknown
			continue
		}
		if r.Status != store.StatusCompleted {
			t.Errorf("run %d is %s: %s", p.N, r.Status, r.Error)
			continue
		}
		want := strconv.Itoa(p.N)
		switch {
		case p.N%5 == 1:
			joined++
			chain, err := st.Chain(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(chain) != 4 {
				t.Errorf("run %d: a chain of %d runs, want itself and 3 children admitted once", p.N, len(chain))
			}
			sum := 0
			for _, k := range chain[1:] {
				n := bodies[k.ID+" c"]
				switch {
				case k.Status == store.StatusFenced && n <= 1: // killed between its effect's start and its record
					fenced++
				case k.Status != store.StatusCompleted || n != 1:
					t.Errorf("run %d: child %s is %s, its effect ran %d times", p.N, k.ID, k.Status, n)
				default:
					var v int
					json.Unmarshal(k.Output, &v)
					sum += v
				}
			}
			want = strconv.Itoa(sum)
		case p.N%4 == 0:
			want, timedOut = `"timeout"`, timedOut+1
		default:
			signalled++
		}
		if string(r.Output) != want {
			t.Errorf("run %d: output %s, want %s", p.N, r.Output, want)
		}
		for _, e := range []string{"a", "b"} {
			if n := bodies[r.ID+" "+e]; n != 1 {
				t.Errorf("run %d: completed, effect %s ran %d times", p.N, e, n)
			}
		}
		tl, err := st.Timeline(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		entered, woken := 0, 0
		for i, e := range tl {
			switch e.Note {
			case "waiting":
				entered++
				waits++
				if entered == 1 { // the sleep: the next attempt starts at its time or later
					for _, next := range tl[i+1:] {
						if next.Status == store.StatusRunning {
							if next.At.Before(p.WakeAt) {
								t.Errorf("run %d: the sleep until %s ended at %s", p.N, p.WakeAt.Format("15:04:05.000"), next.At.Format("15:04:05.000"))
							}
							break
						}
					}
				}
			case "signalled":
				woken++
			}
		}
		if p.N%5 != 1 && (entered > 2 || woken > 1) {
			t.Errorf("run %d: %d waits entered (want at most 2), %d signals received (want at most 1)", p.N, entered, woken)
		}
		if r.CompletedAt.Before(p.WakeAt) {
			t.Errorf("run %d completed at %s, before its sleep's time %s", p.N, r.CompletedAt.Format("15:04:05.000"), p.WakeAt.Format("15:04:05.000"))
		}
	}
	if fenced > runs/20 {
		t.Errorf("%d of %d runs fenced: more than kills inside effect bodies explain", fenced, runs)
	}
	t.Logf("%d kills, %d runs: %d completed with their signal, %d timed out, %d joined their 3 children, %d fenced by a kill inside an effect; %d waits entered",
		kills, runs, signalled, timedOut, joined, fenced, waits)
}
