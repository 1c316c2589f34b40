package yella_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/sqlitestore"
)

// Schedules across crashes, with real processes: a child engine on a
// SQLite file holds a schedule ticking every second (CatchUp one hour);
// the parent kills it with SIGKILL at random moments (ticks are being
// admitted most of the time: one a second) and restarts it on the same
// file. Then, from the runs alone: no tick ran twice, every tick while a
// child ran was admitted, and for every restart the latest tick missed
// while no child ran was admitted (the CatchUp policy).

const cronCrashEnv = "YELLA_CRONCRASH_CHILD"

type cronCrashConfig struct {
	DB     string
	ExitIn time.Duration // run this long, drain and exit (0: until killed)
}

var cronCrashSchedule = yella.Schedule{Name: "every", Cron: "@every 1s", Event: "tick", CatchUp: time.Hour}

func cronCrashChild(raw string) error {
	var cfg cronCrashConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return err
	}
	st, err := sqlitestore.Open(cfg.DB, sqlitestore.Options{})
	if err != nil {
		return err
	}
	eng, err := yella.New(yella.Config{Store: st, Retry: &yella.Retry{Max: 1000, Backoff: yella.Fixed(10 * time.Millisecond)}})
	if err != nil {
		return err
	}
	if err := eng.Register(yella.Process{Name: "tick", On: "tick", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }}); err != nil {
		return err
	}
	if err := eng.AddSchedule(cronCrashSchedule); err != nil {
		return err
	}
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		return err
	}
	fmt.Println("first") // started: its schedule is armed
	if cfg.ExitIn == 0 {
		select {} // until killed
	}
	time.Sleep(cfg.ExitIn)
	if err := eng.Stop(ctx); err != nil {
		return err
	}
	fmt.Println("drained")
	return st.Close()
}

// TestCrashCronTicks: see above. Short form 6 kills; YELLA_CRASH_LONG=1:
// 20.
func TestCrashCronTicks(t *testing.T) {
	if raw := os.Getenv(cronCrashEnv); raw != "" {
		if err := cronCrashChild(raw); err != nil {
			fmt.Fprintln(os.Stderr, "cron crash child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	kills := 6
	if os.Getenv("YELLA_CRASH_LONG") != "" {
		kills = 20
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("YELLA_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("reproduce: YELLA_CRASH_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	cfg := cronCrashConfig{DB: filepath.Join(t.TempDir(), "cron.db")}
	type life struct{ start, end time.Time } // a child's armed span
	var lives []life
	for i := range kills + 1 {
		c := cfg
		if i == kills {
			c.ExitIn = 3 * time.Second
		}
		child := spawnChild(t, "TestCrashCronTicks", cronCrashEnv, c)
		select {
		case <-child.first:
		case <-child.exited:
			t.Fatalf("child %d exited before starting: killed %v, %v", i, child.killed, child.err)
		case <-time.After(time.Minute):
			t.Fatalf("child %d did not start within a minute", i)
		}
		start := time.Now()
		if i == kills {
			if !child.wait(time.Minute) || child.err != nil {
				t.Fatalf("the last child: %v", child.err)
			}
			lives = append(lives, life{start, start.Add(c.ExitIn)})
			break
		}
		time.Sleep(time.Duration(300+rng.IntN(2200)) * time.Millisecond)
		if err := child.kill(); err != nil {
			t.Fatal(err)
		}
		end := time.Now()
		if !child.wait(time.Minute) || !child.killed {
			t.Fatalf("child %d was not killed: %v", i, child.err)
		}
		lives = append(lives, life{start, end})
	}

	st, err := sqlitestore.OpenReadOnly(cfg.DB, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	// The last child stops gracefully: Stop pauses dispatch, then waits for
	// the runs in flight, and only then stops the schedule; a tick that
	// fires in between is admitted and left idle for the next start, so
	// ticks from just before that stop on may be idle. Every other tick
	// must have completed.
	const margin = 300 * time.Millisecond
	stopping := lives[len(lives)-1].end.Add(-margin)
	leftIdle := 0
	q := yella.RunQuery{Process: "tick", Order: yella.OldestFirst, Limit: 500}
	for {
		page, err := eng.Runs(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Runs {
			tick, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(r.IdempotencyKey, "cron:every:"))
			if err != nil {
				t.Fatalf("run %s: key %q: %v", r.ID, r.IdempotencyKey, err)
			}
			seen[tick.Unix()]++
			if r.Status == yella.StatusIdle && !tick.Before(stopping) {
				leftIdle++
				continue
			}
			if r.Status != yella.StatusCompleted {
				t.Errorf("tick %v: run %s is %s", tick, r.ID, r.Status)
			}
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	for tick, n := range seen {
		if n != 1 {
			t.Errorf("tick %d ran %d times", tick, n)
		}
	}
	// Every tick while a child ran (but for a margin at either end, for
	// timer latency and a kill landing mid-admission) was admitted, and at
	// every restart the latest tick missed while none ran.
	missed := 0
	for i, l := range lives {
		for s := l.start.Add(margin).Unix() + 1; s <= l.end.Add(-margin).Unix(); s++ {
			if seen[s] == 0 {
				t.Errorf("child %d ran from %v to %v: tick %d not admitted", i, l.start.Format("15:04:05.000"), l.end.Format("15:04:05.000"), s)
			}
		}
		if i > 0 {
			latest := l.start.Add(-margin).Unix()
			if latest > lives[i-1].end.Unix() && seen[latest] == 0 {
				t.Errorf("restart %d at %v: the latest missed tick %d was not caught up", i, l.start.Format("15:04:05.000"), latest)
			}
			for s := lives[i-1].end.Unix() + 1; s < latest; s++ {
				if seen[s] == 0 {
					missed++
				}
			}
		}
	}
	ticks := slices.Sorted(maps.Keys(seen))
	t.Logf("%d kills, %d ticks admitted once each (%d to %d), %d skipped while no child ran (CatchUp runs the latest only), %d admitted during the last stop and left idle",
		kills, len(ticks), ticks[0], ticks[len(ticks)-1], missed, leftIdle)
}
