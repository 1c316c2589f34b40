package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/sqlitestore"
)

const (
	nRuns     = 20000
	nRoots    = 10000
	nEmits    = 10000
	emitters  = 8
	fleetConc = 50
)

var ctx = context.Background()

// child runs one measurement and prints its result as a JSON line.
func child(name string, args []string) {
	if strings.HasPrefix(name, "pg-") {
		pgChildMain(name, args)
		return
	}
	if name == "recovery-fill" || name == "recovery-resume" {
		recoveryChild(name, args[0])
		return
	}
	if name == "recovery1k-fill" || name == "recovery1k-resume" {
		recovery1kChild(name, args[0])
		return
	}
	m := find(name)
	if m == nil || m.run == nil {
		fatal(fmt.Errorf("no child measurement %q", name))
	}
	r, err := m.run(childConfig{DB: args[0]})
	if err != nil {
		fatal(err)
	}
	r.Name = name
	r.MaxRSSMB = maxRSSMB()
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
}

func openSQLite(path string) (*sqlitestore.Store, error) {
	return sqlitestore.Open(path, sqlitestore.Options{})
}

func newEngine(st store.Store, conc int, procs ...yella.Process) (*yella.Engine, error) {
	e, err := yella.New(yella.Config{Store: st, Concurrency: conc})
	if err != nil {
		return nil, err
	}
	for _, p := range procs {
		if err := e.Register(p); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func noop(c *yella.Ctx) yella.Result { return c.OK(nil) }

func oneEffect(c *yella.Ctx) yella.Result {
	v, err := yella.Effect(c, "e1", func(context.Context) (int, error) { return 1, nil })
	if err != nil {
		return c.Error(err)
	}
	return c.OK(v)
}

// emitAll emits n events from k goroutines.
func emitAll(e *yella.Engine, event string, n, k int) error {
	var wg sync.WaitGroup
	errs := make(chan error, k)
	for g := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += k {
				if _, err := e.Emit(ctx, event, map[string]int{"i": i}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// drainRun measures a drain: backlog (admit first, then start), live (k
// emitters with the engine started) or sequential (one emitter).
func drainRun(cfg childConfig, mode string, runs int, event string, procs ...yella.Process) (result, error) {
	st, err := openSQLite(cfg.DB)
	if err != nil {
		return result{}, err
	}
	defer st.Close()
	return drainOn(st, mode, runs, event, procs...)
}

func drainOn(st store.Store, mode string, runs int, event string, procs ...yella.Process) (result, error) {
	e, err := newEngine(st, fleetConc, procs...)
	if err != nil {
		return result{}, err
	}
	w0, c0 := writeBytes(), cpuSeconds()
	var s0 sqlitestore.Stats
	sq, _ := st.(*sqlitestore.Store)
	roots := runs
	if strings.HasPrefix(event, "cap:a") {
		roots = runs / 2
	}
	var t0 time.Time
	switch mode {
	case "backlog":
		if err := emitAll(e, event, roots, emitters); err != nil {
			return result{}, err
		}
		if sq != nil {
			s0 = sq.Stats()
		}
		c0, t0 = cpuSeconds(), time.Now() // KB/run still counts the admission
		if err := e.Start(ctx); err != nil {
			return result{}, err
		}
	case "live", "seq":
		if err := e.Start(ctx); err != nil {
			return result{}, err
		}
		k := emitters
		if mode == "seq" {
			k = 1
		}
		t0 = time.Now()
		if err := emitAll(e, event, roots, k); err != nil {
			return result{}, err
		}
	}
	if err := e.Drain(ctx); err != nil {
		return result{}, err
	}
	el := time.Since(t0)
	r := window(runs, el, w0, c0)
	if sq != nil {
		s := sq.Stats()
		if n := s.Batches - s0.Batches; n > 0 {
			r.CmdsPerTx = float64(s.Commands-s0.Commands) / float64(n)
		}
	}
	m, err := e.Metrics(ctx)
	if err != nil {
		return result{}, err
	}
	if got := m.Queue[yella.StatusCompleted]; got != int64(runs) {
		return result{}, fmt.Errorf("%d runs completed, want %d", got, runs)
	}
	return r, e.Stop(ctx)
}

func noopBacklog(c childConfig) (result, error) {
	return drainRun(c, "backlog", nRuns, "cap:noop", yella.Process{Name: "noop", On: "cap:noop", Run: noop})
}
func noopLive(c childConfig) (result, error) {
	return drainRun(c, "live", nRuns, "cap:noop", yella.Process{Name: "noop", On: "cap:noop", Run: noop})
}
func noopSeq(c childConfig) (result, error) {
	return drainRun(c, "seq", nRuns, "cap:noop", yella.Process{Name: "noop", On: "cap:noop", Run: noop})
}
func effectBacklog(c childConfig) (result, error) {
	return drainRun(c, "backlog", nRuns, "cap:effect", yella.Process{Name: "effect", On: "cap:effect", Run: oneEffect})
}
func effectLive(c childConfig) (result, error) {
	return drainRun(c, "live", nRuns, "cap:effect", yella.Process{Name: "effect", On: "cap:effect", Run: oneEffect})
}
func effectSeq(c childConfig) (result, error) {
	return drainRun(c, "seq", nRuns, "cap:effect", yella.Process{Name: "effect", On: "cap:effect", Run: oneEffect})
}

var chainProcs = []yella.Process{
	{Name: "stage-a", On: "cap:a", Run: func(c *yella.Ctx) yella.Result { return c.OK(c.Payload(), yella.Then("cap:b")) }},
	{Name: "stage-b", On: "cap:b", Run: noop},
}

func chainBacklog(c childConfig) (result, error) {
	return drainRun(c, "backlog", 2*nRoots, "cap:a", chainProcs...)
}
func chainSeq(c childConfig) (result, error) {
	return drainRun(c, "seq", 2*nRoots, "cap:a", chainProcs...)
}

func noopMemory(c childConfig) (result, error) {
	return drainOn(memstore.New(), "seq", nRuns, "cap:noop", yella.Process{Name: "noop", On: "cap:noop", Run: noop})
}

// emitLatency times sequential emits on an engine that is not started:
// pure admission, with no dispatch competing for the writer (the
// TypeScript engine's emit figures were measured the same way, so the two
// compare).
func emitLatency(st store.Store, nEmits int) (result, error) {
	e, err := newEngine(st, fleetConc, yella.Process{Name: "sink", On: "cap:sink", Run: noop})
	if err != nil {
		return result{}, err
	}
	lat := make([]time.Duration, nEmits)
	w0 := writeBytes()
	t0 := time.Now()
	for i := range lat {
		s := time.Now()
		if _, err := e.Emit(ctx, "cap:sink", map[string]int{"i": i}); err != nil {
			return result{}, err
		}
		lat[i] = time.Since(s)
	}
	el := time.Since(t0)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	return result{Runs: nEmits, Seconds: el.Seconds(), PerSec: float64(nEmits) / el.Seconds(), KBPerRun: float64(writeBytes()-w0) / float64(nEmits) / 1024,
		P50us: us(lat[nEmits/2]), P99us: us(lat[nEmits*99/100]), MaxUs: us(lat[nEmits-1])}, nil
}

func emitSeq(c childConfig) (result, error) {
	st, err := openSQLite(c.DB)
	if err != nil {
		return result{}, err
	}
	defer st.Close()
	return emitLatency(st, nEmits)
}

func emitMemory(childConfig) (result, error) { return emitLatency(memstore.New(), nEmits) }

// inflight holds 10,000 handlers in flight at once and reads the RSS.
func inflight(c childConfig) (result, error) {
	st, err := openSQLite(c.DB)
	if err != nil {
		return result{}, err
	}
	defer st.Close()
	const n = 10000
	e, err := newEngine(st, n, yella.Process{Name: "slow", On: "cap:slow", Run: func(c *yella.Ctx) yella.Result {
		select {
		case <-time.After(5 * time.Second):
		case <-c.Done():
		}
		return c.OK(nil)
	}})
	if err != nil {
		return result{}, err
	}
	if err := e.Start(ctx); err != nil {
		return result{}, err
	}
	t0 := time.Now()
	if err := emitAll(e, "cap:slow", n, emitters); err != nil {
		return result{}, err
	}
	var rss float64
	for {
		m, err := e.Metrics(ctx)
		if err != nil {
			return result{}, err
		}
		if m.Dispatcher.Running == n {
			rss = currentRSSMB()
			break
		}
		if time.Since(t0) > 5*time.Second {
			return result{}, fmt.Errorf("only %d of %d handlers in flight after 5s", m.Dispatcher.Running, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := e.Drain(ctx); err != nil {
		return result{}, err
	}
	el := time.Since(t0)
	return result{Runs: n, Seconds: el.Seconds(), PerSec: n / el.Seconds(), InFlightRSS: rss}, e.Stop(ctx)
}

// recovery: a child admits a 100,000-run backlog and works through it; it
// is killed with SIGKILL mid-drain; a second child opens the same file and
// reports when its first run starts and when everything is drained, both
// measured by the parent from the moment it starts the second process.
func recovery() (result, error) {
	dir, err := os.MkdirTemp("", "yella-recovery-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	db := dir + "/cap.db"
	fill := exec.Command(os.Args[0], "-child", "recovery-fill", db)
	fill.Stderr = os.Stderr
	out, err := fill.StdoutPipe()
	if err != nil {
		return result{}, err
	}
	if err := fill.Start(); err != nil {
		return result{}, err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "working" {
	}
	time.Sleep(300 * time.Millisecond) // mid-drain, with runs in flight
	fill.Process.Signal(syscall.SIGKILL)
	fill.Wait()

	resume := exec.Command(os.Args[0], "-child", "recovery-resume", db)
	resume.Stderr = os.Stderr
	rout, err := resume.StdoutPipe()
	if err != nil {
		return result{}, err
	}
	t0 := time.Now()
	if err := resume.Start(); err != nil {
		return result{}, err
	}
	var r result
	rs := bufio.NewScanner(rout)
	for rs.Scan() {
		line := rs.Text()
		switch {
		case line == "first":
			r.FirstRunMs = float64(time.Since(t0)) / float64(time.Millisecond)
		case line == "drained":
			r.Seconds = time.Since(t0).Seconds()
		case strings.HasPrefix(line, "{"):
			var extra result
			json.Unmarshal([]byte(line), &extra)
			r.Runs, r.Note, r.MaxRSSMB = extra.Runs, extra.Note, extra.MaxRSSMB
		}
	}
	if err := resume.Wait(); err != nil {
		return result{}, err
	}
	if r.FirstRunMs == 0 || r.Seconds == 0 {
		return result{}, errors.New("the resumed engine reported no first run or no drain")
	}
	r.Name = "recovery-100k"
	r.PerSec = float64(r.Runs) / r.Seconds
	return r, nil
}

func recoveryChild(name, db string) {
	st, err := openSQLite(db)
	if err != nil {
		fatal(err)
	}
	var first sync.Once
	e, err := newEngine(st, fleetConc, yella.Process{Name: "noop", On: "cap:noop", Run: func(c *yella.Ctx) yella.Result {
		first.Do(func() { fmt.Println("first") })
		return c.OK(nil)
	}})
	if err != nil {
		fatal(err)
	}
	if name == "recovery-fill" {
		if err := emitAll(e, "cap:noop", 100000, emitters); err != nil {
			fatal(err)
		}
		if err := e.Start(ctx); err != nil {
			fatal(err)
		}
		fmt.Println("working")
		select {} // until killed
	}
	if err := e.Start(ctx); err != nil {
		fatal(err)
	}
	if err := e.Drain(ctx); err != nil {
		fatal(err)
	}
	fmt.Println("drained")
	m, _ := e.Metrics(ctx)
	done := m.Queue[yella.StatusCompleted]
	if done != 100000 {
		fatal(fmt.Errorf("%d of 100000 runs completed after recovery", done))
	}
	b, _ := json.Marshal(result{Runs: int(m.Totals.Completed), MaxRSSMB: maxRSSMB(),
		Note: fmt.Sprintf("%d runs reclaimed from the killed process, %d completed by it", m.Totals.LeaseReclaims, 100000-m.Totals.Completed)})
	fmt.Println(string(b))
	e.Stop(ctx)
	st.Close()
}

func writeBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "write_bytes:"); ok {
			var n int64
			fmt.Sscan(v, &n)
			return n
		}
	}
	return 0
}

func maxRSSMB() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Maxrss) / 1024
}

func currentRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb float64
			fmt.Sscan(strings.TrimSpace(v), &kb)
			return kb / 1024
		}
	}
	return 0
}
