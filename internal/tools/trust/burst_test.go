//go:build trust

package trust

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/sqlitestore"
)

// rssMiB reads this process's resident set size.
func rssMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// burstSample is one look at the engine during the test.
type burstSample struct {
	at         time.Duration
	phase      string
	queued     int64 // idle runs of every process
	capped     int64 // idle and running runs of the capped process
	rss        float64
	goroutines int
}

// TestBurst (T13) offers a steady load, a burst far above what the engine
// executes, and the steady load again, on the SQLite store. The unbounded
// process's queue must grow during the burst and drain to 0 within the
// stated time after it; the capped process (4 at a time, 500 queued) must
// never hold more than its bound, never execute more than 4 handlers at
// once (counted in the handler), and must report every event beyond its
// bound as dropped; no emission fails, every acknowledged run completes, emit
// latency stays low (admission is a commit, not a wait for a slot), RSS
// stays bounded and the goroutines return to their baseline.
func TestBurst(t *testing.T) {
	r := newResult(t, "burst")
	base, burst, burstFor := 200.0, 3000.0, 5*time.Second
	if *long {
		burstFor = 30 * time.Second
	}
	const capConc, capQueue = 4, 500
	st, err := sqlitestore.Open(filepath.Join(t.TempDir(), "burst.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st, Concurrency: 16})
	if err != nil {
		t.Fatal(err)
	}
	work := func(d time.Duration) func(*yella.Ctx) yella.Result {
		return func(c *yella.Ctx) yella.Result {
			time.Sleep(d) // a downstream call
			return c.OK(nil)
		}
	}
	must(t, eng.Register(yella.Process{Name: "work", On: "job", Run: work(10 * time.Millisecond)}))
	// The capped process's handlers count themselves: the peak of handlers
	// executing at once, which the cap bounds.
	var capRunning, capRunningPeak atomic.Int64
	cappedWork := work(5 * time.Millisecond)
	must(t, eng.Register(yella.Process{Name: "capped", On: "job", Concurrency: capConc, Overflow: yella.Queue(capQueue), Run: func(c *yella.Ctx) yella.Result {
		n := capRunning.Add(1)
		defer capRunning.Add(-1)
		for p := capRunningPeak.Load(); n > p && !capRunningPeak.CompareAndSwap(p, n); p = capRunningPeak.Load() {
		}
		return cappedWork(c)
	}}))
	ctx := context.Background()
	must(t, eng.Start(ctx))
	defer eng.Stop(ctx)
	runtime.GC()
	baseGoroutines, baseRSS := runtime.NumGoroutine(), rssMiB()

	var (
		phase                   atomic.Value
		mu                      sync.Mutex
		latBurst, latBase       []float64
		acked, dropped, emitErr atomic.Int64
		firstErr                atomic.Value
	)
	phase.Store("baseline")
	start := time.Now()
	// emit offers rate events/s for d from 16 goroutines on a fixed
	// schedule (a late emitter catches up rather than lowering the rate).
	emit := func(rate float64, d time.Duration, label string) {
		phase.Store(label)
		const workers = 16
		interval := time.Duration(float64(time.Second) * workers / rate)
		var wg sync.WaitGroup
		end := time.Now().Add(d)
		for range workers {
			wg.Go(func() {
				var lats []float64
				for next := time.Now(); next.Before(end); next = next.Add(interval) {
					time.Sleep(time.Until(next))
					t0 := time.Now()
					em, err := eng.Emit(ctx, "job", map[string]int{"n": 1})
					lats = append(lats, time.Since(t0).Seconds())
					if err != nil {
						emitErr.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
						continue
					}
					acked.Add(int64(len(em.Runs)))
					dropped.Add(int64(len(em.Dropped)))
				}
				mu.Lock()
				if label == "burst" {
					latBurst = append(latBurst, lats...)
				} else {
					latBase = append(latBase, lats...)
				}
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	count := func(process string, statuses ...yella.Status) int64 {
		page, err := eng.Runs(ctx, yella.RunQuery{Process: process, Status: statuses, Limit: 1, WithTotal: true})
		if err != nil {
			t.Errorf("count runs: %v", err)
		}
		return page.Total
	}
	var samples []burstSample
	var sampMu sync.Mutex
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			s := burstSample{at: time.Since(start), phase: phase.Load().(string), queued: count("", yella.StatusIdle),
				capped: count("capped", yella.StatusIdle, yella.StatusRunning), rss: rssMiB(), goroutines: runtime.NumGoroutine()}
			sampMu.Lock()
			samples = append(samples, s)
			sampMu.Unlock()
		}
	}()

	emit(base, 3*time.Second, "baseline")
	completedAt := func() int64 {
		m, err := eng.Metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return m.Totals.Completed
	}
	c0, t0 := completedAt(), time.Now()
	emit(burst, burstFor, "burst")
	burstEnd := time.Now()
	// The rate the engine executed at while saturated sets the stated
	// drain bound: the backlog at that rate, plus 10s.
	execRate := float64(completedAt()-c0) / burstEnd.Sub(t0).Seconds()
	backlog := count("", yella.StatusIdle)
	// The steady load resumes; the queue must drain back to (about) 0.
	var drained time.Duration
	drainDone := make(chan struct{})
	go func() {
		defer close(drainDone)
		for time.Since(burstEnd) < 120*time.Second {
			if count("", yella.StatusIdle) <= int64(base) { // at most a second of the steady load waiting
				drained = time.Since(burstEnd)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	for {
		emit(base, time.Second, "after")
		select {
		case <-drainDone:
		default:
			continue
		}
		break
	}
	emit(base, 2*time.Second, "after")
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	must(t, eng.Drain(dctx))
	cancel()
	close(stopSampling)
	<-sampled
	time.Sleep(200 * time.Millisecond) // let finished workers exit
	runtime.GC()
	endGoroutines := runtime.NumGoroutine()

	var peakQueue, peakCapped int64
	var peakRSS float64
	for _, s := range samples {
		peakQueue, peakCapped, peakRSS = max(peakQueue, s.queued), max(peakCapped, s.capped), max(peakRSS, s.rss)
	}
	m, err := eng.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	completed := count("", yella.StatusCompleted)
	bound := time.Duration(float64(backlog)/execRate*float64(time.Second)) + 10*time.Second

	r.figure("offered_burst_per_s", burst)
	r.figure("burst_s", burstFor.Seconds())
	r.figure("peak_queue", float64(peakQueue))
	r.figure("backlog_at_burst_end", float64(backlog))
	r.figure("drain_s", drained.Seconds())
	r.figure("exec_per_s_saturated", execRate)
	r.figure("drain_bound_s", bound.Seconds())
	r.figure("capped_peak", float64(peakCapped))
	r.figure("capped_running_peak", float64(capRunningPeak.Load()))
	r.figure("dropped", float64(dropped.Load()))
	r.figure("acked_runs", float64(acked.Load()))
	r.figure("emit_p99_burst_ms", percentile(latBurst, 0.99)*1000)
	r.figure("emit_p50_burst_ms", percentile(latBurst, 0.50)*1000)
	r.figure("emit_p99_steady_ms", percentile(latBase, 0.99)*1000)
	r.figure("rss_baseline_mib", baseRSS)
	r.figure("rss_peak_mib", peakRSS)
	r.figure("goroutines_baseline", float64(baseGoroutines))
	r.figure("goroutines_end", float64(endGoroutines))

	r.check(t, "queue grows during the burst", peakQueue >= 1000, "peak queue %d", peakQueue)
	r.check(t, "queue drains after the burst", drained > 0 && drained <= bound, "drained in %v (backlog %d, bound %v)", drained.Round(time.Millisecond), backlog, bound.Round(time.Second))
	r.check(t, "capped process stays within its bound", peakCapped <= capConc+capQueue, "peak %d idle+running, bound %d", peakCapped, capConc+capQueue)
	r.check(t, "capped process never executes more than its cap at once", capRunningPeak.Load() <= capConc && capRunningPeak.Load() > 0,
		"peak %d handlers executing at once (counted in the handler), cap %d", capRunningPeak.Load(), capConc)
	r.check(t, "beyond the bound, events are dropped and reported", dropped.Load() > 0 && dropped.Load() == m.Processes["capped"].Dropped,
		"%d drops reported by Emit, %d counted by the engine", dropped.Load(), m.Processes["capped"].Dropped)
	r.check(t, "no emission fails", emitErr.Load() == 0, "%d failed emits (first: %v)", emitErr.Load(), firstErr.Load())
	r.check(t, "every acknowledged run completes", completed == acked.Load(), "%d completed of %d acknowledged", completed, acked.Load())
	r.check(t, "emit stays fast during the burst", percentile(latBurst, 0.99) < 1, "p99 %.1f ms", percentile(latBurst, 0.99)*1000)
	r.check(t, "RSS stays bounded", peakRSS-baseRSS < 64, "peak %.1f MiB, baseline %.1f MiB (bound: baseline + 64 MiB)", peakRSS, baseRSS)
	r.check(t, "goroutines return to baseline", endGoroutines <= baseGoroutines+10, "%d at the end, %d at the baseline", endGoroutines, baseGoroutines)
	var line []string
	for i, s := range samples {
		if i%4 == 0 {
			line = append(line, fmt.Sprintf("%.0fs %s q=%d cap=%d rss=%.0f", s.at.Seconds(), s.phase, s.queued, s.capped, s.rss))
		}
	}
	t.Logf("samples (every second): %s", strings.Join(line, " | "))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
