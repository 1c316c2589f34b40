package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/yella-go/yella"
)

// End-to-end measurements: the window starts before the first emit and
// ends at the last durable completion, so admission is paid inside it, as
// a user pays it. Each engine figure has a floor measured in the same run
// (floor_sqlite.go) and is printed as a fraction of it.
var e2eMeasurements = []measurement{
	{"floor-noop-batch", "THE FLOOR (not an engine): no-op, 20,000 runs, 500-row inserts, c50", "runs/s", "—", sqliteFloorRun("noop", "batch")},
	{"e2e-noop-batch", "no-op, 20,000 runs, EmitBatch of 500, first emit → last durable completion, c50", "runs/s", "—", e2eRun("noop", "batch")},
	{"floor-noop-single", "THE FLOOR: no-op, 20,000 runs, 8 concurrent single-row inserts, c50", "runs/s", "—", sqliteFloorRun("noop", "single")},
	{"e2e-noop-single", "no-op, 20,000 runs, 8 concurrent Emit callers, first emit → last durable completion, c50", "runs/s", "—", e2eRun("noop", "single")},
	{"floor-effect-batch", "THE FLOOR: one effect, 20,000 runs, 500-row inserts, c50", "runs/s", "—", sqliteFloorRun("effect", "batch")},
	{"e2e-effect-batch", "one effect, 20,000 runs, EmitBatch of 500, end to end, c50", "runs/s", "—", e2eRun("effect", "batch")},
	{"floor-effect-single", "THE FLOOR: one effect, 20,000 runs, 8 concurrent single-row inserts, c50", "runs/s", "—", sqliteFloorRun("effect", "single")},
	{"e2e-effect-single", "one effect, 20,000 runs, 8 concurrent Emit callers, end to end, c50", "runs/s", "—", e2eRun("effect", "single")},
	{"floor-chain-batch", "THE FLOOR: 2-stage chain, 10,000 roots (20,000 runs), 500-row inserts, c50", "runs/s", "—", sqliteFloorRun("chain", "batch")},
	{"e2e-chain-batch", "2-stage chain, 10,000 roots, EmitBatch of 500, end to end, c50", "runs/s", "—", e2eRun("chain", "batch")},
	{"floor-chain-single", "THE FLOOR: 2-stage chain, 10,000 roots, 8 concurrent single-row inserts, c50", "runs/s", "—", sqliteFloorRun("chain", "single")},
	{"e2e-chain-single", "2-stage chain, 10,000 roots, 8 concurrent Emit callers, end to end, c50", "runs/s", "—", e2eRun("chain", "single")},
	{"e2e-noop-rate-batch", "no-op as e2e-noop-batch, with a rate limit that never binds, 1,000 keys read from the payload", "runs/s", "—", e2eRun("noop-rate", "batch")},
	{"e2e-noop-keys-batch", "no-op as e2e-noop-batch, with per-key concurrency (Max 1,000), 1,000 keys read from the payload", "runs/s", "—", e2eRun("noop-keys", "batch")},
	{"floor-insert", "THE FLOOR: 10,000 sequential single-row durable inserts", "inserts/s", "—", func(c childConfig) (result, error) { return floorInsert(c.DB) }},
	{"recovery-1k", "kill -9 with 1,000 running and 100,000 idle, restart: first resumed run and all 1,000 reclaimed, from Start", "ms", "—", nil},
}

// floorFor names, for each engine figure measured against a floor, the
// floor measurement it is divided by; selecting the figure selects its
// floor, so every ratio comes from one run of the tool.
var floorFor = map[string]string{
	"e2e-noop-batch": "floor-noop-batch", "e2e-noop-single": "floor-noop-single",
	"e2e-effect-batch": "floor-effect-batch", "e2e-effect-single": "floor-effect-single",
	"e2e-chain-batch": "floor-chain-batch", "e2e-chain-single": "floor-chain-single",
	"emit-seq": "floor-insert",
}

// baseFor names, for the flow-control figures, the figure without flow
// control they are divided by (the limiter's cost), measured in the same
// run.
var baseFor = map[string]string{"e2e-noop-rate-batch": "e2e-noop-batch", "e2e-noop-keys-batch": "e2e-noop-batch"}

// key1000 reads the payload's id, as a user's key would be read, and
// spreads the runs over 1,000 keys.
func key1000(k yella.KeyOf) string {
	h := fnv.New32a()
	h.Write([]byte(idKey(k)))
	return strconv.Itoa(int(h.Sum32() % 1000))
}

var idKey = yella.KeyFromPayload("id")

func init() { measurements = append(measurements, e2eMeasurements...) }

// vsFloor is an engine figure as a fraction of its floor measured in the
// same run: runs/s for the drains (higher is better), the p50 latency for
// emits (floor p50 / engine p50, so 0.5 means twice the floor's latency).
func vsFloor(name string, meds map[string]result) string {
	if b := baseFor[name]; b != "" {
		base, ok := meds[b]
		r, ok2 := meds[name]
		if !ok || !ok2 || base.PerSec == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f × %s", r.PerSec/base.PerSec, b)
	}
	f, ok := meds[floorFor[name]]
	r, ok2 := meds[name]
	if !ok || !ok2 {
		return "—"
	}
	if r.P50us > 0 && f.P50us > 0 {
		return fmt.Sprintf("%.2f (p50 %.1f× floor)", f.P50us/r.P50us, r.P50us/f.P50us)
	}
	if f.PerSec == 0 {
		return "—"
	}
	s := fmt.Sprintf("%.2f × floor", r.PerSec/f.PerSec)
	if r.CPUSeconds > 0 && f.CPUSeconds > 0 {
		s += fmt.Sprintf(", CPU/run %.1f×", (r.CPUSeconds/float64(r.Runs))/(f.CPUSeconds/float64(f.Runs)))
	}
	if f.KBPerRun > 0 {
		s += fmt.Sprintf(", KB/run %.1f×", r.KBPerRun/f.KBPerRun)
	}
	return s
}

// briefExtra formats the figures of this file's measurements that the
// default format does not fit.
func briefExtra(m measurement, r result) (string, bool) {
	switch {
	case m.name == "recovery-1k":
		return fmt.Sprintf("first run %.1f ms, 1,000 reclaimed %.1f ms", r.FirstRunMs, r.Seconds*1000), true
	case r.P50us > 0:
		return fmt.Sprintf("%.0f %s (p50 %.1f µs, p99 %.0f µs), %.1f KB/op", r.PerSec, m.unit, r.P50us, r.P99us, r.KBPerRun), true
	case r.CPUSeconds > 0:
		return fmt.Sprintf("%.0f %s, %.2f KB/run, %.0f runs/CPU-s, %.0f MB RSS", r.PerSec, m.unit, r.KBPerRun, float64(r.Runs)/r.CPUSeconds, r.MaxRSSMB), true
	}
	return "", false
}

func sqliteFloorRun(work, mode string) func(childConfig) (result, error) {
	return func(c childConfig) (result, error) {
		roots := nRuns
		if work == "chain" {
			roots = nRoots
		}
		return runFloor(c.DB, ownTable, work, mode, roots)
	}
}

func e2eRun(work, mode string) func(childConfig) (result, error) {
	return func(c childConfig) (result, error) {
		st, err := openSQLite(c.DB)
		if err != nil {
			return result{}, err
		}
		defer st.Close()
		procs, event, roots, runs := []yella.Process{{Name: "noop", On: "cap:noop", Run: noop}}, "cap:noop", nRuns, nRuns
		switch work {
		case "effect":
			procs, event = []yella.Process{{Name: "effect", On: "cap:effect", Run: oneEffect}}, "cap:effect"
		case "chain":
			procs, event, roots, runs = chainProcs, "cap:a", nRoots, 2*nRoots
		case "noop-rate":
			procs[0].RateLimit = &yella.RateLimit{Limit: 1_000_000, Per: time.Second, Burst: 100_000, Key: key1000}
		case "noop-keys":
			procs[0].KeyConcurrency = &yella.KeyConcurrency{Max: 1000, Key: key1000}
		}
		e, err := newEngine(st, fleetConc, procs...)
		if err != nil {
			return result{}, err
		}
		if err := e.Start(ctx); err != nil {
			return result{}, err
		}
		payload := func(i int) json.RawMessage { return payload100(newFloorID(i)) }
		w0, c0, t0 := writeBytes(), cpuSeconds(), time.Now()
		if mode == "batch" {
			for i := 0; i < roots; i += 500 {
				evs := make([]yella.BatchEvent, 0, 500)
				for j := i; j < min(i+500, roots); j++ {
					evs = append(evs, yella.BatchEvent{Event: event, Payload: payload(j)})
				}
				if _, err := e.EmitBatch(ctx, evs); err != nil {
					return result{}, err
				}
			}
		} else {
			var wg sync.WaitGroup
			var failed atomic.Value
			for g := range emitters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := g; i < roots; i += emitters {
						if _, err := e.Emit(ctx, event, payload(i)); err != nil {
							failed.Store(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if err, _ := failed.Load().(error); err != nil {
				return result{}, err
			}
		}
		if err := e.Drain(ctx); err != nil {
			return result{}, err
		}
		r := window(runs, time.Since(t0), w0, c0)
		m, err := e.Metrics(ctx)
		if err != nil {
			return result{}, err
		}
		if got := m.Queue[yella.StatusCompleted]; got != int64(runs) {
			return result{}, fmt.Errorf("%d runs completed, want %d", got, runs)
		}
		return r, e.Stop(ctx)
	}
}

// window is the result of n runs done in el, from the write and CPU
// counters read at its start.
func window(n int, el time.Duration, w0 int64, c0 float64) result {
	return result{Runs: n, Seconds: el.Seconds(), PerSec: float64(n) / el.Seconds(),
		KBPerRun: float64(writeBytes()-w0) / float64(n) / 1024, CPUSeconds: cpuSeconds() - c0}
}

// cpuSeconds is the process's user and system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// recovery1k: a child starts 1,000 handlers that never return, admits
// 100,000 more runs behind them and is killed with SIGKILL; a second child
// opens the file and reports, from the moment it calls Start, when its
// first handler runs and when Start has reclaimed the 1,000 (Start returns
// after reclaiming what the killed process held).
func recovery1k() (result, error) {
	dir, err := os.MkdirTemp("", "yella-recovery1k-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	db := dir + "/cap.db"
	if err := killChild("recovery1k-fill", db, "ready"); err != nil {
		return result{}, err
	}
	r, err := runChildOn("recovery1k-resume", db)
	if err != nil {
		return result{}, err
	}
	return r, nil
}

// recovery1kChild is either side of recovery1k.
func recovery1kChild(name, db string) {
	st, err := openSQLite(db)
	if err != nil {
		fatal(err)
	}
	const held, idle = 1000, 100000
	var first atomic.Int64
	var t0 time.Time
	e, err := newEngine(st, held, yella.Process{Name: "noop", On: "cap:noop", Run: func(c *yella.Ctx) yella.Result {
		if name == "recovery1k-fill" {
			<-c.Done() // held until the process is killed
			return c.OK(nil)
		}
		first.CompareAndSwap(0, int64(time.Since(t0)))
		return c.OK(nil)
	}})
	if err != nil {
		fatal(err)
	}
	if name == "recovery1k-fill" {
		if err := e.Start(ctx); err != nil {
			fatal(err)
		}
		if err := emitAll(e, "cap:noop", held, emitters); err != nil {
			fatal(err)
		}
		for {
			m, err := e.Metrics(ctx)
			if err != nil {
				fatal(err)
			}
			if m.Dispatcher.Running == held {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		for i := 0; i < idle; i += 500 {
			evs := make([]yella.BatchEvent, 500)
			for j := range evs {
				evs[j] = yella.BatchEvent{Event: "cap:noop", Payload: payload100(newFloorID(i + j))}
			}
			if _, err := e.EmitBatch(ctx, evs); err != nil {
				fatal(err)
			}
		}
		fmt.Println("ready")
		select {} // until killed
	}
	t0 = time.Now()
	if err := e.Start(ctx); err != nil {
		fatal(err)
	}
	started := time.Since(t0)
	m, err := e.Metrics(ctx)
	if err != nil {
		fatal(err)
	}
	if m.Totals.LeaseReclaims != held {
		fatal(fmt.Errorf("%d runs reclaimed at Start, want %d", m.Totals.LeaseReclaims, held))
	}
	for first.Load() == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	r := result{Name: "recovery-1k", Runs: held, Seconds: started.Seconds(), FirstRunMs: float64(first.Load()) / 1e6, MaxRSSMB: maxRSSMB()}
	if r.FirstRunMs == 0 {
		r.FirstRunMs = 0.001
	}
	r.PerSec = float64(held) / r.Seconds
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	os.Exit(0) // no drain of the 101,000: the figure is the recovery
}

// killChild starts a child on db, waits for it to print ready and kills it
// with SIGKILL.
func killChild(name, db, ready string) error {
	c := exec.Command(os.Args[0], "-child", name, db)
	c.Stderr = os.Stderr
	out, err := c.StdoutPipe()
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != ready {
	}
	c.Process.Signal(syscall.SIGKILL)
	c.Wait()
	return nil
}

// runChildOn runs a child on db and returns the result it prints.
func runChildOn(name, db string) (result, error) {
	c := exec.Command(os.Args[0], "-child", name, db)
	c.Stderr = os.Stderr
	out, err := c.Output()
	if err != nil {
		return result{}, err
	}
	var r result
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if bytes.HasPrefix(sc.Bytes(), []byte("{")) {
			err = json.Unmarshal(sc.Bytes(), &r)
		}
	}
	return r, err
}
