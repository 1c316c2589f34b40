package yella_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

// Flow limits across crashes, with real processes: a child engine on a
// SQLite file runs a rate-limited process and a process with per-key
// concurrency; the parent kills it with SIGKILL at random moments,
// restarts it on the same file each time, and once the last child has
// drained it checks the limits from the runs' timelines alone (every
// attempt's start is its 'running' entry, its end the entry after it: the
// completion, or the reclaim of an attempt its killed process held).
//
// The rate is low and the burst large (10 per second, burst 8: a drained
// bucket takes 800 ms to fill again, longer than a restart), so a
// restarted engine that forgot its keys' state would start a fresh burst
// on top of the starts just before the kill, and break the bound.

// flowCrashEnv turns the test binary into a child; its value is the JSON
// flowCrashConfig.
const flowCrashEnv = "YELLA_FLOWCRASH_CHILD"

// The flow limits under test.
var (
	flowCrashRate = yella.RateLimit{Limit: 10, Per: time.Second, Burst: 8, Key: yella.KeyFromPayload("tenant")}
	flowCrashConc = yella.KeyConcurrency{Max: 2, Key: yella.KeyFromPayload("tenant")}
)

const (
	flowRateKeys = 4 // tenants of the rate-limited process
	flowConcKeys = 3 // tenants of the process with per-key concurrency
)

type flowCrashConfig struct {
	DB   string
	Exit bool // drain and exit rather than wait to be killed
}

// flowCrashProcesses are the processes of the parent (which only admits)
// and of every child: "rated" (flowCrashRate, handlers of 10 to 60 ms, so
// that some kills land in them) and "keyed" (flowCrashConc, handlers of 5
// to 25 ms). first is called at each handler call.
func flowCrashProcesses(first func()) []yella.Process {
	rl, kc := flowCrashRate, flowCrashConc
	work := func(lo, hi int) func(*yella.Ctx) yella.Result {
		return func(c *yella.Ctx) yella.Result {
			first()
			time.Sleep(time.Duration(lo+rand.IntN(hi-lo+1)) * time.Millisecond)
			return c.OK(nil)
		}
	}
	return []yella.Process{
		{Name: "rated", On: "rated", RateLimit: &rl, Run: work(10, 60)},
		{Name: "keyed", On: "keyed", KeyConcurrency: &kc, Run: work(5, 25)},
	}
}

func flowCrashEngine(st store.Store, first func()) (*yella.Engine, error) {
	eng, err := yella.New(yella.Config{Store: st, Concurrency: 32, Retry: &yella.Retry{Max: 1000, Backoff: yella.Fixed(10 * time.Millisecond)}})
	if err != nil {
		return nil, err
	}
	for _, p := range flowCrashProcesses(first) {
		if err := eng.Register(p); err != nil {
			return nil, err
		}
	}
	return eng, nil
}

// flowCrashChild is the child: an engine on the file that runs the runs
// admitted there, until it is killed or, with Exit, until they are done.
// It prints "first" at its first handler call and "drained" once done.
func flowCrashChild(raw string) error {
	var cfg flowCrashConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return err
	}
	st, err := sqlitestore.Open(cfg.DB, sqlitestore.Options{})
	if err != nil {
		return err
	}
	var once sync.Once
	eng, err := flowCrashEngine(st, func() { once.Do(func() { fmt.Println("first") }) })
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		return err
	}
	if !cfg.Exit {
		select {} // until killed
	}
	if err := eng.Drain(ctx); err != nil {
		return err
	}
	if err := eng.Stop(ctx); err != nil {
		return err
	}
	fmt.Println("drained")
	return st.Close()
}

// flowChild is a running child process.
type flowChild struct {
	cmd     *exec.Cmd
	first   chan struct{} // closed at the child's first handler call
	drained chan struct{} // closed when the child reports it drained
	exited  chan struct{} // closed once the child exited and was reaped
	killed  bool          // it ended by SIGKILL
	err     error         // otherwise, how it exited
}

// spawnFlowChild starts a child; a child still running when the test
// ends (it failed early) is killed.
func spawnFlowChild(t *testing.T, cfg flowCrashConfig) *flowChild {
	t.Helper()
	return spawnChild(t, "TestCrashFlowLimits", flowCrashEnv, cfg)
}

// spawnChild starts the test binary as a child running test with env set
// to cfg as JSON; the child prints "first" and "drained" lines as
// flowCrashChild does.
func spawnChild(t *testing.T, test, env string, cfg any) *flowChild {
	t.Helper()
	raw, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &flowChild{cmd: cmd, first: make(chan struct{}), drained: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(c.exited)
		sc := bufio.NewScanner(out)
		var first, drained bool
		for sc.Scan() {
			switch {
			case sc.Text() == "first" && !first:
				first = true
				close(c.first)
			case sc.Text() == "drained" && !drained:
				drained = true
				close(c.drained)
			}
		}
		// The pipe is read to its end before Wait closes it.
		c.err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			c.killed, c.err = true, nil
		}
	}()
	t.Cleanup(func() {
		c.kill()
		<-c.exited
	})
	return c
}

// kill sends SIGKILL to the child (nothing if it was reaped already).
func (c *flowChild) kill() error {
	select {
	case <-c.exited:
		return nil
	default:
		return c.cmd.Process.Signal(syscall.SIGKILL)
	}
}

// wait waits up to d for the child to exit; false if it has not.
func (c *flowChild) wait(d time.Duration) bool {
	select {
	case <-c.exited:
		return true
	case <-time.After(d):
		return false
	}
}

// TestCrashFlowLimits kills child engines with SIGKILL at random moments
// while they run rate-limited and key-limited runs, restarting each time
// on the same SQLite file, then checks from the stored timelines that no
// rate key ever started more than Burst + d×Limit/Per attempts in any span
// d, no concurrency key ever had more than Max attempts running at once,
// and every admitted run completed. Half the kills come soon after the
// child's first handler call, when a restart that forgot the rate state
// would just have granted a fresh burst. Short form: 6 kills; the long
// form (YELLA_CRASH_LONG=1): 25 kills and more runs.
func TestCrashFlowLimits(t *testing.T) {
	if raw := os.Getenv(flowCrashEnv); raw != "" {
		if err := flowCrashChild(raw); err != nil {
			fmt.Fprintln(os.Stderr, "flow crash child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	rated, keyed, kills := 500, 2000, 6
	if os.Getenv("YELLA_CRASH_LONG") != "" {
		rated, keyed, kills = 1500, 6000, 25
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("YELLA_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("reproduce: YELLA_CRASH_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	began := time.Now()
	cfg := flowCrashConfig{DB: filepath.Join(t.TempDir(), "flow.db")}
	admitted := admitFlowRuns(t, cfg.DB, rated, keyed)

	for i := range kills {
		c := spawnFlowChild(t, cfg)
		// Even kills: soon after the first handler call, when the restart
		// has just resumed (or, if it forgot the state, refilled) the rate
		// keys. Odd kills: at any moment, the start included.
		var wait time.Duration
		if i%2 == 0 {
			select {
			case <-c.first:
			case <-c.exited:
				t.Fatalf("kill %d: the child exited before running a handler: killed %v, %v", i, c.killed, c.err)
			case <-time.After(time.Minute):
				t.Fatalf("kill %d: the child ran no handler within a minute", i)
			}
			wait = time.Duration(20+rng.IntN(500)) * time.Millisecond
		} else {
			wait = time.Duration(50+rng.IntN(1500)) * time.Millisecond
		}
		time.Sleep(wait)
		if err := c.kill(); err != nil {
			t.Fatal(err)
		}
		if !c.wait(time.Minute) {
			t.Fatalf("kill %d: the child did not die", i)
		}
		if !c.killed {
			t.Fatalf("kill %d: the child was not killed (it exited: %v)", i, c.err)
		}
	}
	final := cfg
	final.Exit = true
	c := spawnFlowChild(t, final)
	if !c.wait(10 * time.Minute) {
		t.Fatal("final child: not drained within 10 minutes")
	}
	if c.killed || c.err != nil {
		t.Fatalf("final child: killed %v, %v", c.killed, c.err)
	}
	select {
	case <-c.drained:
	default:
		t.Fatal("final child exited without draining")
	}
	ran := time.Since(began)

	fig := checkFlowRuns(t, cfg.DB, admitted)
	t.Logf("%d kills, %d runs (%d rated, %d keyed) in %v; %d attempt starts (%d rated, %d keyed), %d of them ended by a kill (%d rated, %d keyed; reclaimed at the restart)",
		kills, len(admitted), rated, keyed, ran.Round(time.Millisecond), fig.starts, fig.rateN, fig.concN, fig.killed, fig.rateK, fig.concK)
	rl := flowCrashRate
	t.Logf("rate (%d per %v, burst %d): largest window %d starts in %v, bound Burst + d×Limit/Per = %.2f; most starts in any %v: %d (bound %d)",
		rl.Limit, rl.Per, rl.Burst, fig.win.n, fig.win.d.Round(time.Millisecond), fig.win.bound,
		rl.Per, fig.perMax, rl.Burst+rl.Limit)
	t.Logf("concurrency (Max %d per key): most attempts running at once on a key %d", flowCrashConc.Max, fig.concMax)
	if fig.killed == 0 {
		t.Errorf("no kill landed on a running attempt: the concurrency of killed attempts was not exercised")
	}
}

// admitFlowRuns admits the runs (tenants in turn) with an engine that is
// never started, and returns their ids.
func admitFlowRuns(t *testing.T, db string, rated, keyed int) map[string]bool {
	t.Helper()
	st, err := sqlitestore.Open(db, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := flowCrashEngine(st, func() {})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var batch []yella.BatchEvent
	for i := range max(rated, keyed) {
		if i < rated {
			batch = append(batch, yella.BatchEvent{Event: "rated", Payload: map[string]string{"tenant": fmt.Sprintf("r%d", i%flowRateKeys)}})
		}
		if i < keyed {
			batch = append(batch, yella.BatchEvent{Event: "keyed", Payload: map[string]string{"tenant": fmt.Sprintf("c%d", i%flowConcKeys)}})
		}
	}
	admitted := map[string]bool{}
	for chunk := range slices.Chunk(batch, 500) {
		ems, err := eng.EmitBatch(ctx, chunk)
		if err != nil {
			t.Fatal(err)
		}
		for _, em := range ems {
			if len(em.Runs) != 1 {
				t.Fatalf("emission admitted %v, want one run", em)
			}
			admitted[em.Runs[0]] = true
		}
	}
	if err := eng.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	return admitted
}

// flowFigures is what checkFlowRuns measured.
type flowFigures struct {
	starts, killed int
	rateN, concN   int        // starts of the rated and the keyed runs
	rateK, concK   int        // of which ended by a kill
	win            rateWindow // the rate keys' largest window
	perMax         int        // most starts of a rate key within any Per
	concMax        int        // most attempts of a concurrency key at once
}

// attemptSpan is one attempt: from its running entry to the entry that
// ended it (math.MaxInt64 while in progress).
type attemptSpan struct{ start, end int64 }

// checkFlowRuns reads every run of the file and its timeline through the
// store and checks the flow limits and that every admitted run completed.
func checkFlowRuns(t *testing.T, db string, admitted map[string]bool) flowFigures {
	st, err := sqlitestore.Open(db, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	var fig flowFigures
	rateStarts := map[string][]int64{}
	concSpans := map[string][]attemptSpan{}
	seen := 0
	var after int64
	for {
		runs, err := st.Runs(ctx, store.RunFilter{Order: store.OldestFirst, After: after, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			after = r.Seq
			if !admitted[r.ID] {
				t.Errorf("run %s (%s) was never admitted", r.ID, r.Process)
				continue
			}
			seen++
			if r.Status != store.StatusCompleted {
				t.Errorf("run %s (%s) is %s, want completed", r.ID, r.Process, r.Status)
			}
			tl, err := st.Timeline(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range tl {
				if e.Status != store.StatusRunning {
					continue
				}
				fig.starts++
				sp := attemptSpan{start: e.At.UnixNano(), end: math.MaxInt64}
				if i+1 < len(tl) {
					sp.end = tl[i+1].At.UnixNano()
					if tl[i+1].Status != store.StatusCompleted {
						fig.killed++
						if r.RateKey != "" {
							fig.rateK++
						} else {
							fig.concK++
						}
					}
				}
				if r.RateKey != "" {
					fig.rateN++
					rateStarts[r.RateKey] = append(rateStarts[r.RateKey], sp.start)
				}
				if r.ConcurrencyKey != "" {
					fig.concN++
					concSpans[r.ConcurrencyKey] = append(concSpans[r.ConcurrencyKey], sp)
				}
			}
		}
		if len(runs) < 500 {
			break
		}
	}
	if seen != len(admitted) {
		t.Errorf("%d of the %d admitted runs are in the store", seen, len(admitted))
	}
	if len(rateStarts) != flowRateKeys || len(concSpans) != flowConcKeys {
		t.Errorf("%d rate keys and %d concurrency keys, want %d and %d", len(rateStarts), len(concSpans), flowRateKeys, flowConcKeys)
	}
	rl := flowCrashRate
	interval := rl.Per / time.Duration(rl.Limit)
	for _, key := range slices.Sorted(maps.Keys(rateStarts)) {
		w := largestRateWindow(rateStarts[key], interval, rl.Burst)
		// A start is dated when its key granted it, so the bound holds
		// exactly (up to the rounding of the bound).
		if float64(w.n) > w.bound+1e-6 {
			t.Errorf("rate key %q: %d starts within %v (from %v), bound Burst + d×Limit/Per = %.2f",
				key, w.n, time.Duration(w.d), time.Unix(0, w.from).Format("15:04:05.000"), w.bound)
		}
		if w.excess() > fig.win.excess() || fig.win.n == 0 {
			fig.win = w
		}
		fig.perMax = max(fig.perMax, mostWithin(rateStarts[key], int64(rl.Per)))
	}
	for _, key := range slices.Sorted(maps.Keys(concSpans)) {
		n, at := mostOverlapping(concSpans[key])
		if n > flowCrashConc.Max {
			t.Errorf("concurrency key %q: %d attempts running at %v, Max %d", key, n, time.Unix(0, at).Format("15:04:05.000"), flowCrashConc.Max)
		}
		fig.concMax = max(fig.concMax, n)
	}
	return fig
}

// rateWindow is a span between two starts of a rate key: n starts over d,
// against the bound Burst + d/interval.
type rateWindow struct {
	n     int
	d     time.Duration
	from  int64
	bound float64
}

func (w rateWindow) excess() float64 { return float64(w.n) - w.bound }

// largestRateWindow finds, among the windows between two starts, the one
// that most exceeds (or least falls short of) Burst + d/interval, the
// longest of equal ones. With the starts sorted t_0 ≤ t_1 ≤ …, the window
// from i to j holds j-i+1 starts, and j-i+1 - (t_j-t_i)/interval =
// v_j - v_i + 1 where v_k = k - t_k/interval: one pass keeping the
// smallest v_i so far finds the largest in O(n) (after an O(n log n) sort).
func largestRateWindow(starts []int64, interval time.Duration, burst int) rateWindow {
	s := slices.Clone(starts)
	slices.Sort(s)
	v := func(k int) float64 { return float64(k) - float64(s[k]-s[0])/float64(interval) }
	lo, best := 0, rateWindow{}
	bestEx := math.Inf(-1)
	for j := range s {
		if v(j) < v(lo) {
			lo = j
		}
		if ex := v(j) - v(lo) + 1; ex >= bestEx { // of equal ones, the longest
			bestEx = ex
			d := time.Duration(s[j] - s[lo])
			best = rateWindow{n: j - lo + 1, d: d, from: s[lo], bound: float64(burst) + float64(d)/float64(interval)}
		}
	}
	return best
}

// mostWithin is the most starts within any span shorter than per.
func mostWithin(starts []int64, per int64) int {
	s := slices.Clone(starts)
	slices.Sort(s)
	most, i := 0, 0
	for j := range s {
		for s[j]-s[i] >= per {
			i++
		}
		most = max(most, j-i+1)
	}
	return most
}

// mostOverlapping is the most attempts running at once, and when: an
// attempt runs from its start to its end, and one that ends at the moment
// another starts does not overlap it.
func mostOverlapping(spans []attemptSpan) (int, int64) {
	type edge struct {
		at    int64
		delta int
	}
	edges := make([]edge, 0, 2*len(spans))
	for _, sp := range spans {
		edges = append(edges, edge{sp.start, 1}, edge{sp.end, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return a.delta - b.delta // ends first
	})
	most, at, n := 0, int64(0), 0
	for _, e := range edges {
		n += e.delta
		if n > most {
			most, at = n, e.at
		}
	}
	return most, at
}

// The window and overlap sweeps, on hand-made starts (ms).
func TestFlowCrashSweeps(t *testing.T) {
	ms := func(v ...int64) []int64 {
		for i := range v {
			v[i] *= int64(time.Millisecond)
		}
		return v
	}
	const iv = 100 * time.Millisecond
	for _, c := range []struct {
		name   string
		starts []int64
		burst  int
		n      int     // starts of the largest window
		excess float64 // its starts beyond Burst + d/interval
	}{
		{"one", ms(0), 1, 1, 0},
		{"paced", ms(0, 100, 200, 300), 1, 4, 0},
		{"burst then paced", ms(0, 0, 0, 100, 200), 3, 5, 0},
		{"burst then a second burst", ms(0, 0, 0, 100, 200, 250, 250, 250), 3, 8, 2.5},
		{"late burst only", ms(0, 500, 500, 500), 1, 3, 2},
		{"unsorted", ms(200, 0, 100, 100), 1, 4, 1},
	} {
		w := largestRateWindow(c.starts, iv, c.burst)
		if w.n != c.n || math.Abs(w.excess()-c.excess) > 1e-9 {
			t.Errorf("%s: window of %d starts, excess %.2f; want %d, %.2f", c.name, w.n, w.excess(), c.n, c.excess)
		}
	}
	if n := mostWithin(ms(0, 100, 999, 1000, 1001), int64(time.Second)); n != 4 {
		t.Errorf("mostWithin: %d, want 4", n)
	}
	for _, c := range []struct {
		name  string
		spans []attemptSpan
		want  int
	}{
		{"back to back", []attemptSpan{{0, 10}, {10, 20}, {20, 30}}, 1},
		{"nested", []attemptSpan{{0, 100}, {10, 20}, {15, 30}}, 3},
		{"in progress", []attemptSpan{{0, math.MaxInt64}, {50, 60}, {70, 80}}, 2},
	} {
		if n, _ := mostOverlapping(c.spans); n != c.want {
			t.Errorf("%s: %d at once, want %d", c.name, n, c.want)
		}
	}
}
