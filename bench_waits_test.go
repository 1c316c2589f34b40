package yella_test

// BenchmarkWaiting measures what 100,000 waiting runs cost on the SQLite
// store (default options, in a temporary directory) and how long waking
// 10,000 of them at once takes:
//
//   - signal-100k: 100,000 runs each wait for their own signal (WaitFor,
//     no timeout); then 10,000 signals are sent one after another.
//   - sleep-100k: 100,000 runs sleep (SleepUntil): 90,000 for an hour,
//     10,000 until a time T a few seconds after they were all admitted;
//     at T the dispatcher starts them.
//
// While all 100,000 wait it reports, against a baseline taken with the
// engine started and no run: goroutines (after a GC, minus the baseline),
// Go heap in use (HeapInuse after a GC), process RSS (VmRSS) and peak RSS
// (VmHWM) from /proc/self/status, and bytes per waiting run for the heap
// and for RSS (what the waiting runs leave, including capacity that grew
// while the admission backlog was queued). SQLite's page cache is outside
// the Go heap (modernc.org/sqlite allocates its own memory), so it shows in
// RSS only. Rates: wait-runs/s is 100,000 over the time from the first
// admission (EmitBatch, 500 at a time, on the started engine) to all
// 100,000 waiting in the store (Counts); wake-10k-ms is from the first
// signal (signal-100k) or from T (sleep-100k) to the 10,000th run
// completed in the store (first-wake-ms: to the first), polled every 5 ms;
// signals/s is the sequential sending alone.
//
// Each sub-benchmark is one whole scenario and ignores b.N (ns/op is the
// scenario's time after the baseline, sleep-100k's idle seconds before T
// included); it skips unless b.N is 1, and under -short. RSS only grows
// within a process, so run each sub-benchmark in a fresh process for RSS
// figures:
//
//	go test -run '^$' -bench 'BenchmarkWaiting/signal' -benchtime 1x .
//	go test -run '^$' -bench 'BenchmarkWaiting/sleep' -benchtime 1x .

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

const (
	waitingRuns = 100_000 // runs that wait at once
	wakeRuns    = 10_000  // runs woken at once
	waitBatch   = 500     // events per EmitBatch
)

// memFigures is the process's memory and goroutines at one moment.
type memFigures struct {
	goroutines int
	heapInuse  uint64 // bytes, after a GC
	rss, hwm   uint64 // bytes; 0 where /proc/self/status is missing
}

// measureMem collects garbage, lets the runtime settle and reads the
// figures.
func measureMem() memFigures {
	runtime.GC()
	time.Sleep(100 * time.Millisecond) // goroutines that just finished exit
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	f := memFigures{goroutines: runtime.NumGoroutine(), heapInuse: ms.HeapInuse}
	f.rss, f.hwm = procStatus()
	return f
}

// procStatus reads VmRSS and VmHWM (bytes) from /proc/self/status.
func procStatus() (rss, hwm uint64) {
	fh, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			continue
		}
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	return rss, hwm
}

const mb = 1 << 20

// reportWaiting reports the figures while every run waits, against base.
func reportWaiting(b *testing.B, base, now memFigures) {
	b.ReportMetric(float64(now.goroutines-base.goroutines), "goroutines")
	b.ReportMetric(float64(base.heapInuse)/mb, "base-heap-MB")
	b.ReportMetric(float64(now.heapInuse)/mb, "heap-MB")
	b.ReportMetric((float64(now.heapInuse)-float64(base.heapInuse))/waitingRuns, "heap-B/run")
	if now.rss > 0 {
		b.ReportMetric(float64(base.rss)/mb, "base-rss-MB")
		b.ReportMetric(float64(now.rss)/mb, "rss-MB")
		b.ReportMetric(float64(now.hwm)/mb, "hwm-MB")
		b.ReportMetric((float64(now.rss)-float64(base.rss))/waitingRuns, "rss-B/run")
	}
}

// waitBench is one scenario: a started engine on a fresh SQLite store
// whose process runs run, and its baseline figures.
type waitBench struct {
	b    *testing.B
	ctx  context.Context
	st   store.Store
	eng  *yella.Engine
	base memFigures
}

func newWaitBench(b *testing.B, run func(*yella.Ctx) yella.Result) *waitBench {
	if testing.Short() {
		b.Skip("100,000 runs: not under -short")
	}
	if b.N != 1 {
		b.Skip("one scenario per sub-benchmark: run with -benchtime 1x")
	}
	st, err := sqlitestore.Open(filepath.Join(b.TempDir(), "bench.db"), sqlitestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	w := &waitBench{b: b, ctx: context.Background(), st: st}
	w.eng, err = yella.New(yella.Config{Store: st})
	if err == nil {
		err = w.eng.Register(yella.Process{Name: "wait", On: "e", Run: run})
	}
	if err == nil {
		err = w.eng.Start(w.ctx)
	}
	if err != nil {
		w.close()
		b.Fatal(err)
	}
	w.base = measureMem()
	b.ResetTimer()
	return w
}

// close stops the engine and closes the store, and drops both, so that a
// later scenario in the same process does not find them in its baseline
// (the testing package keeps its cleanup functions, and what they
// reference, reachable after running them).
func (w *waitBench) close() {
	if w.eng != nil {
		w.eng.Stop(context.Background())
	}
	w.st.Close()
	w.eng, w.st = nil, nil
}

// admit emits payloads from(n) for n in [lo, hi), waitBatch at a time.
func (w *waitBench) admit(lo, hi int, payload func(n int) any) {
	for i := lo; i < hi; i += waitBatch {
		evs := make([]yella.BatchEvent, min(waitBatch, hi-i))
		for j := range evs {
			evs[j] = yella.BatchEvent{Event: "e", Payload: payload(i + j)}
		}
		if _, err := w.eng.EmitBatch(w.ctx, evs); err != nil {
			w.b.Fatal(err)
		}
	}
}

// await polls the store's counts every 5 ms until status has at least n
// runs, and returns when it saw them; it fails after limit.
func (w *waitBench) await(status store.Status, n int64, limit time.Duration) time.Time {
	at, err := poll(w.ctx, w.st, status, n, limit)
	if err != nil {
		w.b.Fatal(err)
	}
	return at
}

// poll is await for any goroutine: it returns the failure instead (a
// closed store's among them).
func poll(ctx context.Context, st store.Store, status store.Status, n int64, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		c, err := st.Counts(ctx)
		if err != nil {
			return time.Time{}, err
		}
		if c[status] >= n {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s: %d runs after %s, want %d (counts %v)", status, c[status], limit, n, c)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// expect fails unless the store counts want runs of each status given.
func (w *waitBench) expect(want map[store.Status]int64) {
	c, err := w.st.Counts(w.ctx)
	if err != nil {
		w.b.Fatal(err)
	}
	for s, n := range want {
		if c[s] != n {
			w.b.Fatalf("%s: %d runs, want %d (counts %v)", s, c[s], n, c)
		}
	}
}

// signalKey is the signal run n waits for.
func signalKey(n int) string { return "k:" + strconv.Itoa(n) }

// napPayload is a sleep-100k run's payload: it sleeps until Until.
type napPayload struct {
	N     int       `json:"n"`
	Until time.Time `json:"until"`
}

// BenchmarkWaiting holds 100,000 waiting runs and wakes 10,000 of them
// at once, by signal and by the end of a sleep (see the top of the file).
func BenchmarkWaiting(b *testing.B) {
	b.Run("signal-100k", func(b *testing.B) {
		w := newWaitBench(b, func(c *yella.Ctx) yella.Result {
			var n int
			if err := c.Decode(&n); err != nil {
				return c.Fail(err)
			}
			v, _, err := yella.WaitFor[int](c, "w", signalKey(n), 0)
			if err != nil {
				return c.Error(err)
			}
			return c.OK(v)
		})
		defer w.close()
		t0 := time.Now()
		w.admit(0, waitingRuns, func(n int) any { return n })
		allWaiting := w.await(store.StatusWaiting, waitingRuns, 10*time.Minute)
		b.ReportMetric(waitingRuns/allWaiting.Sub(t0).Seconds(), "wait-runs/s")
		reportWaiting(b, w.base, measureMem())

		// Wake every tenth run: 10,000 signals, one after another, while
		// the first completion is watched for.
		type seen struct {
			at  time.Time
			err error
		}
		firstSeen := make(chan seen, 1)
		go func(st store.Store) {
			at, err := poll(w.ctx, st, store.StatusCompleted, 1, 10*time.Minute)
			firstSeen <- seen{at, err}
		}(w.st)
		first := time.Now()
		for i := range wakeRuns {
			n := i * (waitingRuns / wakeRuns)
			res, err := w.eng.Signal(w.ctx, signalKey(n), n)
			if err != nil {
				b.Fatal(err)
			}
			if res.RunID == "" {
				b.Fatalf("signal %s reached no waiting run (kept: %v)", signalKey(n), res.Kept)
			}
		}
		sent := time.Since(first)
		fs := <-firstSeen
		if fs.err != nil {
			b.Fatal(fs.err)
		}
		firstDone := fs.at
		done := w.await(store.StatusCompleted, wakeRuns, 10*time.Minute)
		b.ReportMetric(float64(firstDone.Sub(first).Milliseconds()), "first-wake-ms")
		b.StopTimer()
		b.ReportMetric(float64(sent.Milliseconds()), "signal-send-ms")
		b.ReportMetric(wakeRuns/sent.Seconds(), "signals/s")
		b.ReportMetric(float64(done.Sub(first).Milliseconds()), "wake-10k-ms")
		b.ReportMetric(wakeRuns/done.Sub(first).Seconds(), "woken-runs/s")
		w.expect(map[store.Status]int64{store.StatusWaiting: waitingRuns - wakeRuns, store.StatusCompleted: wakeRuns})
	})

	b.Run("sleep-100k", func(b *testing.B) {
		w := newWaitBench(b, func(c *yella.Ctx) yella.Result {
			var p napPayload
			if err := c.Decode(&p); err != nil {
				return c.Fail(err)
			}
			if err := yella.SleepUntil(c, "nap", p.Until); err != nil {
				return c.Error(err)
			}
			return c.OK(p.N)
		})
		defer w.close()
		// The 90,000 long sleepers first, then the 10,000 that wake at T:
		// T is set from the first part's rate, so that all 100,000 are
		// asleep and measured a few seconds before T.
		t0 := time.Now()
		later := t0.Add(time.Hour)
		far := waitingRuns - wakeRuns
		w.admit(0, far, func(n int) any { return napPayload{N: n, Until: later} })
		w.await(store.StatusWaiting, int64(far), 10*time.Minute)
		perRun := time.Since(t0) / time.Duration(far)
		at := time.Now().Add(2*wakeRuns*perRun + 5*time.Second).Truncate(time.Millisecond)
		w.admit(far, waitingRuns, func(n int) any { return napPayload{N: n, Until: at} })
		allWaiting := w.await(store.StatusWaiting, waitingRuns, 10*time.Minute)
		b.ReportMetric(waitingRuns/allWaiting.Sub(t0).Seconds(), "wait-runs/s")
		mem := measureMem()
		if late := time.Since(at); late >= 0 {
			b.Fatalf("T passed %s before all were asleep and measured: increase the margin", late)
		}
		w.expect(map[store.Status]int64{store.StatusWaiting: waitingRuns, store.StatusCompleted: 0})
		reportWaiting(b, w.base, mem)

		firstDone := w.await(store.StatusCompleted, 1, 10*time.Minute+time.Until(at))
		done := w.await(store.StatusCompleted, wakeRuns, 10*time.Minute)
		b.ReportMetric(float64(firstDone.Sub(at).Milliseconds()), "first-wake-ms")
		b.StopTimer()
		b.ReportMetric(float64(done.Sub(at).Milliseconds()), "wake-10k-ms")
		b.ReportMetric(wakeRuns/done.Sub(at).Seconds(), "woken-runs/s")
		w.expect(map[store.Status]int64{store.StatusWaiting: waitingRuns - wakeRuns, store.StatusCompleted: wakeRuns})
	})
}
