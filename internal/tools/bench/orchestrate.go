package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/yella-go/yella/internal/obs"
	"github.com/yella-go/yella/internal/tools/report"
	"github.com/yella-go/yella/store"
)

// ChildEnv turns a process into a benchmark child; its value is a
// ChildSpec in JSON.
const ChildEnv = "YELLA_BENCH_CHILD"

// ChildSpec tells a child process what to run.
type ChildSpec struct {
	Scenario  Scenario      `json:"scenario"` // scaled
	Store     string        `json:"store"`
	DB        string        `json:"db"`
	Witness   string        `json:"witness"`
	Ledger    string        `json:"ledger"`
	Acks      string        `json:"acks"`
	StartAt   time.Duration `json:"startAt"`
	FirstSeed int64         `json:"firstSeed"`
}

// OpenStore opens a store of a kind ("sqlite", "memory" or "postgres") at a path; the
// caller provides it, so that bench does not depend on concrete stores.
type OpenStore func(kind, path string) (store.Store, error)

// ChildMain runs a benchmark child if the environment asks for it, then
// exits; otherwise it returns false. Call it first in main.
func ChildMain(open OpenStore) bool {
	raw := os.Getenv(ChildEnv)
	if raw == "" {
		return false
	}
	if err := runChild(raw, open); err != nil {
		json.NewEncoder(os.Stdout).Encode(Line{Error: err.Error()})
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

func runChild(raw string, open OpenStore) error {
	var spec ChildSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return fmt.Errorf("bad child spec: %w", err)
	}
	st, err := open(spec.Store, spec.DB)
	if err != nil {
		return err
	}
	defer st.Close()
	cfg := RunConfig{Scenario: spec.Scenario, Store: st, StartAt: spec.StartAt, FirstSeed: spec.FirstSeed, Out: os.Stdout}
	if spec.Store == "sqlite" {
		cfg.DBPath = spec.DB
	}
	for _, f := range []struct {
		path string
		set  func(*os.File)
	}{{spec.Witness, func(f *os.File) { cfg.Witness = f }}, {spec.Ledger, func(f *os.File) { cfg.Ledger = f }}, {spec.Acks, func(f *os.File) { cfg.Acks = f }}} {
		if f.path == "" {
			continue
		}
		file, err := os.OpenFile(f.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		defer file.Close()
		f.set(file)
	}
	return Run(context.Background(), cfg)
}

// Options configure a scenario run in child processes.
type Options struct {
	Scale float64
	Store string // "sqlite" (default), "memory" or "postgres"
	// DBDir holds the databases, witness and ledger files (default: a new
	// temporary directory, removed afterwards).
	DBDir string
	// Binary is the executable re-run as the child (default os.Args[0]);
	// it must call ChildMain first.
	Binary string
	// Progress, if set, receives a live progress line per sample.
	Progress io.Writer
	// Minimum phase and restart times when scaling (defaults:
	// MinLoadedPhase, MinIdlePhase and MinRestart).
	MinLoaded, MinIdle, MinRestart time.Duration
	// Verify checks the database after a recovery scenario (lost and
	// doubled runs, fenced and re-run effects, integrity).
	Verify func(db, acks, witness string) (report.Recovery, error)
	// Kills, if set, replaces the scenario's restart with SIGKILLs at these
	// offsets (the trust suite's random kills).
	Kills   []time.Duration
	Machine report.Machine
	Commit  string
}

type child struct {
	cmd     *exec.Cmd
	started time.Time
	lines   chan timedLine
	errOut  strings.Builder
}

type timedLine struct {
	Line
	at time.Time
}

func spawn(bin string, spec ChildSpec) (*child, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	c := &child{cmd: exec.Command(bin), lines: make(chan timedLine, 64)}
	c.cmd.Env = append(os.Environ(), ChildEnv+"="+string(raw))
	c.cmd.Stderr = &c.errOut
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c.started = time.Now()
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var l Line
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				c.lines <- timedLine{l, time.Now()}
			}
		}
		close(c.lines)
	}()
	return c, nil
}

// RunScenario runs s (scaled by opts.Scale) in fresh child processes,
// killing and restarting the engine where s says so, and returns the
// report.
func RunScenario(ctx context.Context, s Scenario, opts Options) (*report.Report, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	scn := s.Scaled(opts.Scale, opts.MinLoaded, opts.MinIdle, opts.MinRestart)
	dir := opts.DBDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "yella-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	sr := newScenarioRun(scn, opts, dir)
	for generation := 0; ; generation++ {
		killed, err := sr.generation(ctx, generation)
		if err != nil {
			return nil, err
		}
		if !killed {
			break
		}
		if err := sr.restart(); err != nil {
			return nil, err
		}
	}
	return sr.finish()
}

// withDefaults checks opts and fills in the defaults: the SQLite store,
// this executable as the child, the package's minimum phase and restart
// times.
func (opts Options) withDefaults() (Options, error) {
	if opts.Scale <= 0 {
		return opts, errors.New("scale must be positive")
	}
	if opts.Store == "" {
		opts.Store = "sqlite"
	}
	if opts.Store != "sqlite" && opts.Store != "memory" && opts.Store != "postgres" {
		return opts, fmt.Errorf("unknown store %q (sqlite, memory or postgres)", opts.Store)
	}
	if opts.Binary == "" {
		opts.Binary = os.Args[0]
	}
	if opts.MinLoaded == 0 {
		opts.MinLoaded, opts.MinIdle, opts.MinRestart = MinLoadedPhase, MinIdlePhase, MinRestart
	}
	return opts, nil
}

// scenarioRun is one RunScenario: what the next child runs, the kills
// still to come, and the report and counters gathered so far.
type scenarioRun struct {
	scn   Scenario
	opts  Options
	spec  ChildSpec       // the next child's part
	kills []time.Duration // offsets from start; nil when nothing is killed
	start time.Time       // scenario time zero
	r     *report.Report
	all   []Counters // each child's last counters
	final *Counters  // the last child's final counters
}

// newScenarioRun lays out the scenario's files in dir (removing any left
// by an earlier run) and decides its kills: a restart needs a durable
// store, so on the in-memory store a kill is skipped and the report says
// so.
func newScenarioRun(scn Scenario, opts Options, dir string) *scenarioRun {
	base := filepath.Join(dir, strings.ReplaceAll(scn.ID, "__", "-"))
	spec := ChildSpec{Scenario: scn, Store: opts.Store, DB: base + ".db", Witness: base + ".witness", Ledger: base + ".ledger", Acks: base + ".acks"}
	for _, suffix := range []string{".db", ".db-wal", ".db-shm", ".db.lock", ".witness", ".ledger", ".acks"} {
		os.Remove(base + suffix)
	}
	kills := opts.Kills
	if kills == nil && scn.RestartAt > 0 {
		kills = []time.Duration{scn.RestartAt}
	}
	restart := len(kills) > 0 && opts.Store == "sqlite"
	r := &report.Report{Scenario: reportScenario(scn), Scale: opts.Scale, Store: opts.Store, StartedAt: time.Now().UTC(), Machine: opts.Machine, Commit: opts.Commit}
	if len(kills) > 0 && !restart {
		if opts.Store == "postgres" {
			r.Notes = append(r.Notes, "kill drills run on SQLite here (the PostgreSQL store's are its kill tests): the kill was skipped")
		} else {
			r.Notes = append(r.Notes, "the in-memory store keeps nothing across a restart: the kill was skipped")
		}
	}
	if !restart {
		kills = nil
	}
	return &scenarioRun{scn: scn, opts: opts, spec: spec, kills: kills, start: time.Now(), r: r}
}

// generation runs one child process until it ends, or until it is killed
// at the generation's kill offset, and records its samples and counters.
func (sr *scenarioRun) generation(ctx context.Context, generation int) (killed bool, err error) {
	c, err := spawn(sr.opts.Binary, sr.spec)
	if err != nil {
		return false, err
	}
	var timer <-chan time.Time
	if generation < len(sr.kills) {
		timer = time.After(time.Until(sr.start.Add(sr.kills[generation])))
	}
	last, killed, firstRun, err := sr.read(ctx, c, generation, timer)
	if err != nil {
		return false, err
	}
	werr := c.cmd.Wait()
	if last != nil {
		sr.all = append(sr.all, *last)
	}
	if rec := sr.r.Recovery; generation > 0 && rec != nil {
		k := &rec.Kills[len(rec.Kills)-1]
		k.FirstRunMs = float64(firstRun) / float64(time.Millisecond)
		rec.FirstRunMs = max(rec.FirstRunMs, k.FirstRunMs)
	}
	if !killed && werr != nil {
		return false, fmt.Errorf("%s: child failed: %v\n%s", sr.scn.ID, werr, c.errOut.String())
	}
	return killed, nil
}

// read reads child c's progress lines until its output ends, sending it
// SIGKILL when timer fires; it returns the child's last counters, whether
// it was killed, and when its first run started after the process did.
func (sr *scenarioRun) read(ctx context.Context, c *child, generation int, timer <-chan time.Time) (last *Counters, killed bool, firstRun time.Duration, err error) {
	firstSample := true
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				return last, killed, firstRun, nil
			}
			switch {
			case l.Error != "":
				c.cmd.Process.Kill()
				return nil, false, 0, fmt.Errorf("%s: child: %s", sr.scn.ID, l.Error)
			case l.FirstRun:
				firstRun = l.at.Sub(c.started)
			case l.Final:
				sr.final = l.Counters
			}
			if l.Sample != nil {
				l.Sample.Restart = generation > 0 && firstSample
				firstSample = false
				sr.r.Samples = append(sr.r.Samples, *l.Sample)
				progress(sr.opts.Progress, sr.scn, *l.Sample)
			}
			if l.Counters != nil {
				last = l.Counters
			}
		case <-timer:
			c.cmd.Process.Signal(syscall.SIGKILL)
			killed = true
			timer = nil
		case <-ctx.Done():
			c.cmd.Process.Kill()
			c.cmd.Wait()
			return nil, false, 0, ctx.Err()
		}
	}
}

// restart records a kill and points the next child at the same database,
// continuing the timeline and the seeds after the last acknowledged one.
func (sr *scenarioRun) restart() error {
	r, start := sr.r, sr.start
	r.Totals.Restarts++
	if r.Recovery == nil {
		r.Recovery = &report.Recovery{KilledAtS: time.Since(start).Seconds()}
	}
	r.Recovery.Kills = append(r.Recovery.Kills, report.Kill{AtS: time.Since(start).Seconds()})
	acked, err := maxLedger(sr.spec.Ledger)
	if err != nil {
		return err
	}
	sr.spec.StartAt, sr.spec.FirstSeed = time.Since(start), acked+1
	return nil
}

// finish completes the report from the children's counters and the
// ledger, and, after a recovery, from opts.Verify's check of the database.
func (sr *scenarioRun) finish() (*report.Report, error) {
	r, scn, spec := sr.r, sr.scn, sr.spec
	if sr.final == nil {
		return nil, errNoFinal
	}
	r.FinishedAt = time.Now().UTC()
	ledger, err := readLedger(spec.Ledger)
	if err != nil {
		return nil, err
	}
	summarize(r, scn, sr.all, ledger, *sr.final, time.Since(sr.start))
	if r.Recovery != nil && sr.opts.Verify != nil {
		rec, err := sr.opts.Verify(spec.DB, spec.Acks, spec.Witness)
		if err != nil {
			return nil, fmt.Errorf("%s: verify: %w", scn.ID, err)
		}
		rec.FirstRunMs, rec.KilledAtS, rec.Reclaimed, rec.Kills = r.Recovery.FirstRunMs, r.Recovery.KilledAtS, r.Recovery.Reclaimed, r.Recovery.Kills
		r.Recovery = &rec
	}
	return r, nil
}

func progress(w io.Writer, s Scenario, smp report.Sample) {
	if w == nil {
		return
	}
	fmt.Fprintf(w, "\r\033[K%s  %5.0f/%.0fs  %-12s  q %d/%d  done %d  %.1f run/s  p95 %.0fms  rss %.0f MB",
		s.ID, smp.ElapsedS, s.Duration().Seconds(), smp.Phase, smp.Idle, smp.Running, smp.Completed, smp.RunsPerSec, smp.P95Ms, float64(smp.RSSBytes)/(1<<20))
}

type ledgerLine struct{ key, event, phase, outcome string }

// readLedger reads every emission the children reported.
func readLedger(path string) ([]ledgerLine, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []ledgerLine
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 4 {
			out = append(out, ledgerLine{f[0], f[1], f[2], f[3]})
		}
	}
	return out, nil
}

func maxLedger(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return -1, nil
		}
		return 0, err
	}
	best := int64(-1)
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimPrefix(f[0], "seed-"), 10, 64); err == nil && n > best {
			best = n
		}
	}
	return best, nil
}

func reportScenario(s Scenario) report.Scenario {
	out := report.Scenario{ID: s.ID, Label: s.Label, Description: s.Description, Family: s.Family, Kind: s.Kind,
		Visibility: s.Visibility, Tags: s.Tags, Concurrency: s.Concurrency, RestartAtS: s.RestartAt.Seconds(), Notes: s.Notes,
		Retry: fmt.Sprintf("%d retries, %s·2^(n-1) backoff", s.Retry.Max, s.Retry.Base)}
	if s.Scraper != nil {
		out.ScraperCap = s.Scraper.Cap
	}
	if d := s.RetentionOrDefault(); d > 0 {
		out.Notes = append(out.Notes, fmt.Sprintf("retention %s (the TypeScript engine's published runs kept every run)", d))
	}
	for _, p := range s.Phases {
		ps := report.PhaseSpec{Label: p.Label, Rate: p.Rate, Seconds: p.Dur.Seconds(), Mode: string(p.Mode), Nominal: p.Rate * p.Dur.Seconds()}
		if s.Saturate && p.Rate > 0 {
			ps.Rate, ps.Nominal, ps.Mode = 0, 0, "as fast as admission allows"
		}
		out.Phases = append(out.Phases, ps)
	}
	return out
}

// summarize fills the totals from the children's counters (the killed
// ones' last reports) and the samples.
func summarize(r *report.Report, s Scenario, all []Counters, ledger []ledgerLine, final Counters, elapsed time.Duration) {
	t := &r.Totals
	t.DurationS = elapsed.Seconds()
	if !s.Saturate {
		t.SeedNominal = s.NominalSeeds()
	}
	// Admissions come from the ledger, which survives a killed child; the
	// other counters from each child's last report.
	events := map[string]*report.Admitted{}
	phaseAttempts := map[string]int64{}
	for _, l := range ledger {
		if events[l.event] == nil {
			events[l.event] = &report.Admitted{Event: l.event}
		}
		e := events[l.event]
		e.Attempted++
		if l.outcome == "admitted" {
			e.Admitted++
		} else {
			e.Dropped++
		}
		phaseAttempts[l.phase]++
	}
	durations := obs.NewSketch()
	for _, c := range all {
		t.Retries += c.Retries
		t.SQLiteErrors += c.SQLiteErrors
		t.InternalErrors += c.InternalErrors
		r.Effects.Completed += c.EffCompleted
		r.Effects.Errored += c.EffErrored
		r.Effects.Replayed += c.EffReplayed
		if k, err := obs.DecodeSketch(c.Durations); err == nil {
			durations.Merge(k)
		}
	}
	for _, e := range events {
		r.ByEvent = append(r.ByEvent, *e)
		t.SeedAttempts += e.Attempted
		t.SeedAdmitted += e.Admitted
		t.SeedDropped += e.Dropped
	}
	sort.Slice(r.ByEvent, func(i, j int) bool { return r.ByEvent[i].Event < r.ByEvent[j].Event })
	q := final.Queue
	var pruned int64 // retention deletes completed runs; each child counts its own
	for _, c := range all {
		pruned += c.Pruned
	}
	t.RunsCompleted = q["completed"] + q["deferred"] + pruned
	t.RunsErrored = q["errored"] + q["dead-letter"] + q["fenced"]
	t.DeadLetters, t.Fenced = q["dead-letter"], q["fenced"]
	t.ThroughputAvg = float64(t.RunsCompleted+t.RunsErrored) / t.DurationS
	var loadedEnd time.Duration
	for _, p := range s.Phases {
		ph := report.Phase{Label: p.Label, NominalRate: p.Rate, Attempts: phaseAttempts[p.Label], Seconds: p.Dur.Seconds()}
		if s.Saturate {
			ph.NominalRate = 0
		}
		ph.AchievedRate = float64(ph.Attempts) / ph.Seconds
		r.Phases = append(r.Phases, ph)
		for i := range r.Scenario.Phases {
			if r.Scenario.Phases[i].Label == p.Label {
				r.Scenario.Phases[i].Achieved = float64(ph.Attempts)
			}
		}
	}
	for _, p := range s.Phases { // the loaded part: up to the first idle phase
		if p.Rate == 0 {
			break
		}
		loadedEnd += p.Dur
	}
	for _, smp := range r.Samples {
		if smp.ElapsedS <= loadedEnd.Seconds() && smp.ElapsedS > 0 {
			t.ThroughputLoad = float64(smp.Completed+smp.Errored) / smp.ElapsedS
		}
		m := &r.Memory
		m.PeakRSSBytes = max(m.PeakRSSBytes, smp.RSSBytes)
		m.PeakHeapBytes = max(m.PeakHeapBytes, smp.HeapBytes)
		m.PeakQueue = max(m.PeakQueue, smp.Idle+smp.Running)
		m.PeakWALBytes = max(m.PeakWALBytes, smp.WALBytes)
	}
	if n := len(r.Samples); n > 0 {
		last := r.Samples[n-1]
		r.Memory.FinalRSSBytes, r.Memory.DBBytes, r.Memory.WALBytes = last.RSSBytes, last.DBBytes, last.WALBytes
	}
	if durations.Count() > 0 {
		q := func(p float64) float64 { v, _ := durations.Quantile(p); return v }
		r.Durations = report.Durations{Count: durations.Count(), AvgMs: durations.Sum() / float64(durations.Count()),
			MinMs: durations.Min(), P50Ms: q(0.5), P95Ms: q(0.95), P99Ms: q(0.99), MaxMs: durations.Max()}
	}
	if b := s.Browser; b != nil {
		r.Browser = browserSummary(*b, all, r.Samples, t.DurationS)
		if e := events["page:scrape-requested"]; e != nil {
			r.Browser.Dropped = e.Dropped
		}
	}
	if s.Saturate {
		r.Capacity = &report.Capacity{RunsPerSec: final.SaturationRPS, SeedsPerSec: final.SaturationSPS, Concurrency: s.Concurrency}
	}
	if r.Recovery != nil {
		r.Recovery.Reclaimed = final.Reclaims
		r.Recovery.Fenced = final.Fenced
	}
}

// browserSummary totals the real-browser scraper's page reads over the
// children and takes the peak of its browsers' memory from the samples.
func browserSummary(b BrowserPool, all []Counters, samples []report.Sample, seconds float64) *report.Browser {
	out := &report.Browser{MaxBrowsers: b.MaxBrowsers, TabsPerBrowser: b.TabsPerBrowser}
	pages := obs.NewSketch()
	for _, c := range all {
		out.Pages += c.Pages
		out.PageErrors += c.PageErrors
		out.Starts += c.BrowserStarts
		out.Crashes += c.BrowserCrashes
		if k, err := obs.DecodeSketch(c.PageDurations); err == nil {
			pages.Merge(k)
		}
	}
	if seconds > 0 {
		out.PagesPerSec = float64(out.Pages) / seconds
	}
	if pages.Count() > 0 {
		q := func(p float64) float64 { v, _ := pages.Quantile(p); return v }
		out.P50Ms, out.P95Ms, out.MaxMs = q(0.5), q(0.95), pages.Max()
	}
	for _, smp := range samples {
		out.PeakRSSBytes = max(out.PeakRSSBytes, smp.BrowserRSSBytes)
		out.PeakPSSBytes = max(out.PeakPSSBytes, smp.BrowserPSSBytes)
	}
	return out
}

// MachineInfo describes this machine.
func MachineInfo() report.Machine {
	m := report.Machine{CPUs: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, GoVersion: runtime.Version()}
	m.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb)
		m.MemoryBytes = kb << 10
	}
	return m
}
