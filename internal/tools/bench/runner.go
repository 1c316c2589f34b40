package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/obs"
	"github.com/yella-go/yella/internal/tools/report"
	"github.com/yella-go/yella/store"
)

// SampleEvery is the sampling interval.
const SampleEvery = 2 * time.Second

// RunConfig is one engine process's part of a scenario.
type RunConfig struct {
	Scenario Scenario // already scaled
	Store    store.Store
	DBPath   string // sampled for its size; "" for none
	// StartAt is where in the scenario's timeline this process starts (after
	// a restart), and FirstSeed the index of the next seed to emit.
	StartAt   time.Duration
	FirstSeed int64
	Witness   *os.File // effect executions (optional)
	// Ledger gets one line per emission once Emit returns ("seed-N event
	// phase outcome"), Acks the idempotency key of each admitted seed: the
	// parent's exact account of a process that may be killed.
	Ledger io.Writer
	Acks   io.Writer
	// Out receives the progress lines (JSON) the parent reads.
	Out io.Writer
}

// Counters are one process's cumulative counts, streamed to the parent.
type Counters struct {
	Attempted      map[string]int64 `json:"attempted"`
	Admitted       map[string]int64 `json:"admitted"`
	Dropped        map[string]int64 `json:"dropped"`
	PhaseAttempts  map[string]int64 `json:"phaseAttempts"`
	Completed      int64            `json:"completed"`
	Errored        int64            `json:"errored"`
	Retries        int64            `json:"retries"`
	Dead           int64            `json:"dead"`
	Fenced         int64            `json:"fenced"`
	Reclaims       int64            `json:"reclaims"`
	EffCompleted   int64            `json:"effectsCompleted"`
	EffErrored     int64            `json:"effectsErrored"`
	EffReplayed    int64            `json:"effectsReplayed"`
	InternalErrors int64            `json:"internalErrors"`
	SQLiteErrors   int64            `json:"sqliteErrors"`
	Pruned         int64            `json:"pruned"`    // completed runs deleted by retention
	Durations      []byte           `json:"durations"` // encoded sketch of attempt durations (ms)
	Queue          map[string]int64 `json:"queue,omitempty"`
	SaturationRPS  float64          `json:"saturationRunsPerSec,omitempty"`
	SaturationSPS  float64          `json:"saturationSeedsPerSec,omitempty"`
	// The real-browser scraper's page reads (effect bodies that ran, not
	// replays), their durations (encoded sketch, ms), and its pool's
	// browser starts and crashes.
	Pages          int64  `json:"pages,omitempty"`
	PageErrors     int64  `json:"pageErrors,omitempty"`
	PageDurations  []byte `json:"pageDurations,omitempty"`
	BrowserStarts  int64  `json:"browserStarts,omitempty"`
	BrowserCrashes int64  `json:"browserCrashes,omitempty"`
}

// Line is one progress line from a child.
type Line struct {
	Sample   *report.Sample `json:"sample,omitempty"`
	Counters *Counters      `json:"counters,omitempty"`
	FirstRun bool           `json:"firstRun,omitempty"`
	Final    bool           `json:"final,omitempty"`
	Error    string         `json:"error,omitempty"`
}

type tally struct {
	mu        sync.Mutex
	c         Counters
	total     *obs.Sketch
	window    []*obs.Sketch // the last 5 sampling windows, for the sliding p95
	pages     *obs.Sketch   // real-browser page reads
	completed atomic.Int64
	errored   atomic.Int64
	emits     atomic.Int64
	first     sync.Once
	firstRun  chan struct{}
}

func newTally() *tally {
	return &tally{
		c:     Counters{Attempted: map[string]int64{}, Admitted: map[string]int64{}, Dropped: map[string]int64{}, PhaseAttempts: map[string]int64{}},
		total: obs.NewSketch(), window: []*obs.Sketch{obs.NewSketch()}, pages: obs.NewSketch(), firstRun: make(chan struct{}),
	}
}

func isSQLiteError(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "sqlite_busy") || strings.Contains(s, "sqlite_locked") || strings.Contains(s, "database is locked") || strings.Contains(s, "table is locked")
}

func (t *tally) event(ev yella.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	observe := func() {
		ms := float64(ev.Duration) / float64(time.Millisecond)
		t.total.AddMs(ms)
		t.window[len(t.window)-1].AddMs(ms)
	}
	switch ev.Type {
	case yella.RunStarted:
		t.first.Do(func() { close(t.firstRun) })
	case yella.RunCompleted:
		t.c.Completed++
		t.completed.Add(1)
		observe()
	case yella.RunFailed:
		t.c.Errored++
		t.errored.Add(1)
		observe()
	case yella.RunRetryScheduled:
		t.c.Retries++
		if ev.Duration > 0 {
			observe()
		}
	case yella.RunDeadLettered:
		t.c.Dead++
	case yella.RunFenced:
		t.c.Fenced++
	case yella.LeaseReclaimed:
		t.c.Reclaims++
	case yella.EffectCompleted:
		t.c.EffCompleted++
		if isPageRead(ev.EffectKey) {
			t.c.Pages++
			t.pages.AddMs(float64(ev.Duration) / float64(time.Millisecond))
		}
	case yella.EffectFailed:
		t.c.EffErrored++
		if isPageRead(ev.EffectKey) {
			t.c.PageErrors++
			t.pages.AddMs(float64(ev.Duration) / float64(time.Millisecond))
		}
	case yella.EffectReplayed:
		t.c.EffReplayed++
	case yella.InternalError:
		t.c.InternalErrors++
		if isSQLiteError(ev.Error) {
			t.c.SQLiteErrors++
		}
	}
}

// emitted counts one emission and returns its outcome: admitted, dropped
// or error. An error also counts as a drop: the seed was not admitted, and
// the report's admission figures (attempted = admitted + dropped) stay
// whole.
func (t *tally) emitted(event, phase string, em yella.Emission, err error) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.c.Attempted[event]++
	t.c.PhaseAttempts[phase]++
	switch {
	case err != nil:
		t.c.Dropped[event]++
		if isSQLiteError(err.Error()) {
			t.c.SQLiteErrors++
		}
		return "error"
	case len(em.Runs) > 0 || len(em.Existing) > 0:
		t.c.Admitted[event]++
		return "admitted"
	}
	t.c.Dropped[event]++
	return "dropped"
}

// snapshot copies the counters, with the durations sketch encoded, and
// returns the sliding-window p95; roll starts a new window.
func (t *tally) snapshot(roll bool) (Counters, float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.c
	clone := func(m map[string]int64) map[string]int64 {
		out := make(map[string]int64, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	c.Attempted, c.Admitted, c.Dropped, c.PhaseAttempts = clone(c.Attempted), clone(c.Admitted), clone(c.Dropped), clone(c.PhaseAttempts)
	c.Durations = t.total.Encode()
	if t.pages.Count() > 0 {
		c.PageDurations = t.pages.Encode()
	}
	win := obs.NewSketch()
	for _, w := range t.window {
		win.Merge(w)
	}
	p95, _ := win.Quantile(0.95)
	if roll {
		t.window = append(t.window, obs.NewSketch())
		if len(t.window) > 5 {
			t.window = t.window[1:]
		}
	}
	return c, p95
}

// Run executes this process's part of a scenario: it registers the
// workload, starts the engine, emits the seeds of the remaining phases at
// their rates (paced to absolute deadlines, so the achieved rate does not
// drift below the nominal one), drains, and streams a sample every 2 s.
func Run(ctx context.Context, cfg RunConfig) error {
	r, err := startRun(ctx, cfg)
	if err != nil {
		return err
	}
	defer r.wl.closeBrowser()
	stopSampling, sampling := r.startSampling(ctx)
	if err := r.emitPhases(ctx); err != nil {
		return err
	}
	r.phase.Store("draining")
	r.offered.Store(0.0)
	dctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	derr := r.eng.Drain(dctx)
	cancel()
	close(stopSampling)
	sampling.Wait()
	r.sample(ctx)
	if err := r.sendFinal(ctx); err != nil {
		return err
	}
	if err := r.eng.Stop(ctx); err != nil {
		return err
	}
	if derr != nil {
		return fmt.Errorf("drain: %w", derr)
	}
	return nil
}

// runner is one Run: the engine with its workload, the counts, the
// progress stream and the emitter's position in the scenario.
type runner struct {
	cfg RunConfig
	t   *tally
	eng *yella.Engine
	wl  *Workload

	outMu sync.Mutex
	out   *json.Encoder

	start   time.Time    // scenario time zero
	phase   atomic.Value // the current phase's label
	offered atomic.Value // the current phase's nominal rate (float64)
	// The capacity family emits from several goroutines: each seed number
	// (its idempotency key) is taken once.
	nextSeed atomic.Int64

	// The previous sample's counts, for the rates of the next one; only
	// the sampler touches them, and the final sample after it stopped.
	lastCompleted, lastEmits int64
	lastAt                   time.Time
}

// startRun builds the engine and the workload for cfg, starts the engine
// and announces the first run to the parent when it starts.
func startRun(ctx context.Context, cfg RunConfig) (*runner, error) {
	scn := cfg.Scenario
	r := &runner{cfg: cfg, t: newTally(), out: json.NewEncoder(cfg.Out)}
	ecfg := yella.Config{Store: cfg.Store, Concurrency: scn.Concurrency, Retention: scn.RetentionOrDefault()}
	if ecfg.Retention > 0 {
		// Seeds are emitted with idempotency keys, which outlive their runs
		// for Config.KeyRetention (7 days by default): a scenario with
		// retention keeps them as long as its runs, so its database is
		// bounded by the retention it states.
		ecfg.KeyRetention = ecfg.Retention
	}
	eng, err := yella.New(ecfg)
	if err != nil {
		return nil, err
	}
	r.eng = eng
	r.wl = NewWorkload(scn, cfg.Witness)
	if err := r.wl.Register(eng); err != nil {
		return nil, err
	}
	if err := r.wl.startBrowser(); err != nil {
		return nil, err
	}
	eng.Subscribe(r.t.event)
	if err := eng.Start(ctx); err != nil {
		return nil, err
	}
	go func() {
		select {
		case <-r.t.firstRun:
			r.send(Line{FirstRun: true})
		case <-ctx.Done():
		}
	}()
	r.start = time.Now().Add(-cfg.StartAt)
	r.phase.Store("")
	r.offered.Store(0.0)
	r.nextSeed.Store(cfg.FirstSeed)
	r.lastAt = time.Now()
	return r, nil
}

// send writes one progress line; the sampler and the emitter share the
// stream.
func (r *runner) send(l Line) {
	r.outMu.Lock()
	r.out.Encode(l)
	r.outMu.Unlock()
}

// startSampling samples every SampleEvery until stop is closed; wait ends
// when the sampler has.
func (r *runner) startSampling(ctx context.Context) (stop chan struct{}, wait *sync.WaitGroup) {
	stop = make(chan struct{})
	wait = &sync.WaitGroup{}
	wait.Add(1)
	go func() {
		defer wait.Done()
		tick := time.NewTicker(SampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				r.sample(ctx)
			case <-stop:
				return
			}
		}
	}()
	return stop, wait
}

// sample sends one sample with the counters so far, the rates since the
// previous sample and the sizes of the process and its database.
func (r *runner) sample(ctx context.Context) {
	m, err := r.eng.Metrics(ctx)
	if err != nil {
		r.send(Line{Error: err.Error()})
		return
	}
	now := time.Now()
	dt := now.Sub(r.lastAt).Seconds()
	done := r.t.completed.Load() + r.t.errored.Load()
	emits := r.t.emits.Load()
	c, p95 := r.t.snapshot(true)
	withQueue(&c, m)
	browserRSS, browserPSS, starts, crashes := r.wl.browserMemory()
	c.BrowserStarts, c.BrowserCrashes = starts, crashes
	db := r.cfg.DBPath
	s := report.Sample{
		ElapsedS: now.Sub(r.start).Seconds(), Phase: r.phase.Load().(string), OfferedRate: r.offered.Load().(float64),
		AchievedRate: float64(emits-r.lastEmits) / dt, Idle: m.Queue[yella.StatusIdle], Running: m.Queue[yella.StatusRunning],
		Completed: m.Queue[yella.StatusCompleted] + m.Queue[yella.StatusDeferred] + m.Totals.Pruned, Errored: m.Queue[yella.StatusErrored] + m.Queue[yella.StatusDead] + m.Queue[yella.StatusFenced],
		RunsPerSec: float64(done-r.lastCompleted) / dt, P95Ms: p95, RSSBytes: rss(), HeapBytes: heap(),
		DBBytes: fileSize(db), WALBytes: fileSize(db + "-wal"), BrowserRSSBytes: browserRSS, BrowserPSSBytes: browserPSS,
	}
	r.lastCompleted, r.lastEmits, r.lastAt = done, emits, now
	r.send(Line{Sample: &s, Counters: &c})
}

// sendFinal sends the final counters, with the queue as the store counts
// it now.
func (r *runner) sendFinal(ctx context.Context) error {
	c, _ := r.t.snapshot(false)
	m, err := r.eng.Metrics(ctx)
	if err != nil {
		return err
	}
	withQueue(&c, m)
	_, _, c.BrowserStarts, c.BrowserCrashes = r.wl.browserMemory()
	r.send(Line{Counters: &c, Final: true})
	return nil
}

// withQueue sets c's queue by status and its pruned count from m.
func withQueue(c *Counters, m yella.Metrics) {
	c.Queue, c.Pruned = map[string]int64{}, m.Totals.Pruned
	for st, n := range m.Queue {
		c.Queue[string(st)] = n
	}
}

// emit emits one seed of the workload's mix and accounts for it: the
// counters, the ledger line and, when admitted, the acknowledgement.
func (r *runner) emit(ctx context.Context, phaseLabel string) {
	s := r.wl.NextSeed()
	k := r.nextSeed.Add(1) - 1
	em, err := r.eng.Emit(ctx, s.Event, s.Payload, yella.IdempotencyKey(fmt.Sprintf("seed-%d", k)))
	r.t.emits.Add(1)
	outcome := r.t.emitted(s.Event, phaseLabel, em, err)
	if r.cfg.Ledger != nil {
		fmt.Fprintf(r.cfg.Ledger, "seed-%d %s %s %s\n", k, s.Event, phaseLabel, outcome)
	}
	if outcome == "admitted" && r.cfg.Acks != nil {
		fmt.Fprintf(r.cfg.Acks, "seed-%d\n", k)
	}
}

// emitPhases runs the phases that end after cfg.StartAt, each until its
// end on the scenario's clock.
func (r *runner) emitPhases(ctx context.Context) error {
	scn := r.cfg.Scenario
	var phaseStart time.Duration
	for _, p := range scn.Phases {
		end := phaseStart + p.Dur
		if end <= r.cfg.StartAt {
			phaseStart = end
			continue
		}
		r.phase.Store(p.Label)
		r.offered.Store(p.Rate)
		r.wl.SetMode(p.Mode)
		switch {
		case scn.Saturate && p.Rate > 0:
			rps, sps := saturate(ctx, r.eng, r.t, r.start, r.start.Add(end), func() { r.emit(ctx, p.Label) })
			r.t.mu.Lock()
			r.t.c.SaturationRPS, r.t.c.SaturationSPS = rps, sps
			r.t.mu.Unlock()
		case p.Rate > 0:
			if err := r.pace(ctx, p, phaseStart, end); err != nil {
				return err
			}
		default:
			select {
			case <-time.After(time.Until(r.start.Add(end))):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		phaseStart = end
	}
	return nil
}

// pace emits phase p's seeds at its rate between phaseStart and end (from
// cfg.StartAt when the phase began before this process): seed k of the
// phase is due at phaseStart + k/rate, so a late emitter catches up
// instead of drifting.
func (r *runner) pace(ctx context.Context, p Phase, phaseStart, end time.Duration) error {
	start := r.start
	from := max(r.cfg.StartAt, phaseStart)
	k := int64(float64((from - phaseStart).Seconds()) * p.Rate)
	for {
		due := start.Add(phaseStart + time.Duration(float64(k)/p.Rate*float64(time.Second)))
		if !due.Before(start.Add(end)) {
			break
		}
		if d := time.Until(due); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		r.emit(ctx, p.Label)
		k++
	}
	if d := time.Until(start.Add(end)); d > 0 {
		time.Sleep(d)
	}
	return nil
}

// saturate emits from 8 goroutines as fast as admission allows until end,
// pausing while the backlog exceeds 2,000 runs so the queue stays bounded,
// and returns the runs and seeds completed per second over the window
// after the first 2 s.
func saturate(ctx context.Context, eng *yella.Engine, t *tally, start, end time.Time, emit func()) (float64, float64) {
	var wg sync.WaitGroup
	var seeds atomic.Int64
	stop := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				m, err := eng.Metrics(ctx)
				if err == nil && m.Dispatcher.Ready > 2000 {
					time.Sleep(time.Millisecond)
					continue
				}
				emit()
				seeds.Add(1)
			}
		}()
	}
	warm := time.Now().Add(2 * time.Second)
	time.Sleep(time.Until(warm))
	r0, s0, t0 := t.completed.Load()+t.errored.Load(), seeds.Load(), time.Now()
	time.Sleep(time.Until(end))
	r1, s1, el := t.completed.Load()+t.errored.Load(), seeds.Load(), time.Since(t0).Seconds()
	close(stop)
	wg.Wait()
	return float64(r1-r0) / el, float64(s1-s0) / el
}

func fileSize(path string) int64 {
	if path == "" {
		return 0
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(v), &kb)
			return kb << 10
		}
	}
	return 0
}

var heapSample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

func heap() int64 {
	metrics.Read(heapSample)
	if heapSample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(heapSample[0].Value.Uint64())
}

var errNoFinal = errors.New("child ended without its final counters")
