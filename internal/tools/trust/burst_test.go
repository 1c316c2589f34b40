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
	st, err := sqlitestore.Open(filepath.Join(t.TempDir(), "burst.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, capPeak := burstEngine(t, st)
	ctx := context.Background()
	must(t, eng.Start(ctx))
	defer eng.Stop(ctx)
	runtime.GC()
	baseGoroutines, baseRSS := runtime.NumGoroutine(), rssMiB()

	l := &burstLoad{t: t, eng: eng, start: time.Now()}
	l.phase.Store("baseline")
	stopSampling := l.sampleEvery(250 * time.Millisecond)
	l.emit(base, 3*time.Second, "baseline")
	c0, t0 := l.completed(), time.Now()
	l.emit(burst, burstFor, "burst")
	burstEnd := time.Now()
	// The rate the engine executed at while saturated sets the stated
	// drain bound: the backlog at that rate, plus 10s.
	execRate := float64(l.completed()-c0) / burstEnd.Sub(t0).Seconds()
	backlog := l.count("", yella.StatusIdle)
	drained := l.steadyUntilDrained(base, burstEnd)
	l.emit(base, 2*time.Second, "after")
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	must(t, eng.Drain(dctx))
	cancel()
	samples := stopSampling()
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
	completed := l.count("", yella.StatusCompleted)
	bound := time.Duration(float64(backlog)/execRate*float64(time.Second)) + 10*time.Second

	r.figure("offered_burst_per_s", burst)
	r.figure("burst_s", burstFor.Seconds())
	r.figure("peak_queue", float64(peakQueue))
	r.figure("backlog_at_burst_end", float64(backlog))
	r.figure("drain_s", drained.Seconds())
	r.figure("exec_per_s_saturated", execRate)
	r.figure("drain_bound_s", bound.Seconds())
	r.figure("capped_peak", float64(peakCapped))
	r.figure("capped_running_peak", float64(capPeak.Load()))
	r.figure("dropped", float64(l.dropped.Load()))
	r.figure("acked_runs", float64(l.acked.Load()))
	r.figure("emit_p99_burst_ms", percentile(l.latBurst, 0.99)*1000)
	r.figure("emit_p50_burst_ms", percentile(l.latBurst, 0.50)*1000)
	r.figure("emit_p99_steady_ms", percentile(l.latBase, 0.99)*1000)
	r.figure("rss_baseline_mib", baseRSS)
	r.figure("rss_peak_mib", peakRSS)
	r.figure("goroutines_baseline", float64(baseGoroutines))
	r.figure("goroutines_end", float64(endGoroutines))

	r.check(t, "queue grows during the burst", peakQueue >= 1000, "peak queue %d", peakQueue)
	r.check(t, "queue drains after the burst", drained > 0 && drained <= bound, "drained in %v (backlog %d, bound %v)", drained.Round(time.Millisecond), backlog, bound.Round(time.Second))
	r.check(t, "capped process stays within its bound", peakCapped <= burstCapConc+burstCapQueue, "peak %d idle+running, bound %d", peakCapped, burstCapConc+burstCapQueue)
	r.check(t, "capped process never executes more than its cap at once", capPeak.Load() <= burstCapConc && capPeak.Load() > 0,
		"peak %d handlers executing at once (counted in the handler), cap %d", capPeak.Load(), burstCapConc)
	r.check(t, "beyond the bound, events are dropped and reported", l.dropped.Load() > 0 && l.dropped.Load() == m.Processes["capped"].Dropped,
		"%d drops reported by Emit, %d counted by the engine", l.dropped.Load(), m.Processes["capped"].Dropped)
	r.check(t, "no emission fails", l.emitErr.Load() == 0, "%d failed emits (first: %v)", l.emitErr.Load(), l.firstErr.Load())
	r.check(t, "every acknowledged run completes", completed == l.acked.Load(), "%d completed of %d acknowledged", completed, l.acked.Load())
	r.check(t, "emit stays fast during the burst", percentile(l.latBurst, 0.99) < 1, "p99 %.1f ms", percentile(l.latBurst, 0.99)*1000)
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

// The capped process's bounds in TestBurst.
const burstCapConc, burstCapQueue = 4, 500

// burstEngine is TestBurst's engine on st: an unbounded process and a
// capped one (burstCapConc at a time, burstCapQueue queued) on the same
// event. The capped process's handlers count themselves: capPeak is the
// peak of them executing at once, which the cap bounds.
func burstEngine(t *testing.T, st *sqlitestore.Store) (eng *yella.Engine, capPeak *atomic.Int64) {
	t.Helper()
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
	var capRunning, capRunningPeak atomic.Int64
	cappedWork := work(5 * time.Millisecond)
	must(t, eng.Register(yella.Process{Name: "capped", On: "job", Concurrency: burstCapConc, Overflow: yella.Queue(burstCapQueue), Run: func(c *yella.Ctx) yella.Result {
		n := capRunning.Add(1)
		defer capRunning.Add(-1)
		for p := capRunningPeak.Load(); n > p && !capRunningPeak.CompareAndSwap(p, n); p = capRunningPeak.Load() {
		}
		return cappedWork(c)
	}}))
	return eng, &capRunningPeak
}

// burstLoad offers TestBurst's load and keeps what it saw: emit latencies
// by phase, the runs acknowledged and dropped, failed emits.
type burstLoad struct {
	t     *testing.T
	eng   *yella.Engine
	start time.Time
	phase atomic.Value // the current phase's label

	mu                      sync.Mutex
	latBurst, latBase       []float64 // emit latencies (s)
	acked, dropped, emitErr atomic.Int64
	firstErr                atomic.Value
}

// emit offers rate events/s for d from 16 goroutines on a fixed
// schedule (a late emitter catches up rather than lowering the rate).
func (l *burstLoad) emit(rate float64, d time.Duration, label string) {
	l.phase.Store(label)
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
				em, err := l.eng.Emit(context.Background(), "job", map[string]int{"n": 1})
				lats = append(lats, time.Since(t0).Seconds())
				if err != nil {
					l.emitErr.Add(1)
					l.firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				l.acked.Add(int64(len(em.Runs)))
				l.dropped.Add(int64(len(em.Dropped)))
			}
			l.mu.Lock()
			if label == "burst" {
				l.latBurst = append(l.latBurst, lats...)
			} else {
				l.latBase = append(l.latBase, lats...)
			}
			l.mu.Unlock()
		})
	}
	wg.Wait()
}

// count counts the runs of process ("": every process) in statuses.
func (l *burstLoad) count(process string, statuses ...yella.Status) int64 {
	page, err := l.eng.Runs(context.Background(), yella.RunQuery{Process: process, Status: statuses, Limit: 1, WithTotal: true})
	if err != nil {
		l.t.Errorf("count runs: %v", err)
	}
	return page.Total
}

// completed is how many runs the engine has completed.
func (l *burstLoad) completed() int64 {
	m, err := l.eng.Metrics(context.Background())
	if err != nil {
		l.t.Fatal(err)
	}
	return m.Totals.Completed
}

// sampleEvery samples the queues, RSS and goroutines every interval until
// the returned function is called; it returns the samples.
func (l *burstLoad) sampleEvery(interval time.Duration) (stop func() []burstSample) {
	var samples []burstSample
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			samples = append(samples, burstSample{at: time.Since(l.start), phase: l.phase.Load().(string), queued: l.count("", yella.StatusIdle),
				capped: l.count("capped", yella.StatusIdle, yella.StatusRunning), rss: rssMiB(), goroutines: runtime.NumGoroutine()})
		}
	}()
	return func() []burstSample {
		close(stopSampling)
		<-sampled
		return samples
	}
}

// steadyUntilDrained offers the steady load again, a second at a time,
// until the queue is back to about 0 (at most a second of the steady load
// waiting) or 120 s after burstEnd, and returns how long after burstEnd it
// drained (0: it did not).
func (l *burstLoad) steadyUntilDrained(rate float64, burstEnd time.Time) time.Duration {
	var drained time.Duration
	drainDone := make(chan struct{})
	go func() {
		defer close(drainDone)
		for time.Since(burstEnd) < 120*time.Second {
			if l.count("", yella.StatusIdle) <= int64(rate) {
				drained = time.Since(burstEnd)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	for {
		l.emit(rate, time.Second, "after")
		select {
		case <-drainDone:
			return drained
		default:
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
