package report

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// seed is the TypeScript engine's result for a scenario (@yellatech/engine
// 0.14.5, its own benchmark harness at --scale=0.25), measured on this
// machine kind on 2026-11-30: the figures the page compares with. Its p95
// is a histogram bucket bound, not a percentile.
type seed struct {
	throughput, p95, rssMB float64
	dropped, retries, dead int
}

var seedRuns = map[string]seed{
	"api-mixed__fleet-c20":                   {11, 1000, 126, 0, 7, 0},
	"api-mixed__fleet-c200":                  {88, 1000, 132, 0, 49, 0},
	"scraper-bounded__fleet-c40__scraper-c1": {35, 1000, 171, 250, 20, 2},
	"scraper-bounded__fleet-c40__scraper-c5": {34, 2500, 287, 78, 26, 0},
	"crash-recovery__mid-load__api-mixed":    {53, 1000, 123, 0, 53, 4},
	"burst-recovery__fleet-c50":              {85, 1000, 135, 0, 53, 0},
}

// LoadDir reads every report JSON in dir of a run on the SQLite or the
// in-memory store and keeps, per scenario, the one at the largest scale,
// the latest among equals. Runs on PostgreSQL are LoadStore's.
func LoadDir(dir string) (map[string]*Report, error) {
	return loadDir(dir, func(r *Report) bool { return r.Store != "postgres" })
}

// LoadStore is LoadDir for the runs on one store kind ("postgres").
func LoadStore(dir, kind string) (map[string]*Report, error) {
	return loadDir(dir, func(r *Report) bool { return r.Store == kind })
}

func loadDir(dir string, keep func(*Report) bool) (map[string]*Report, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	latest := map[string]*Report{}
	for _, p := range paths {
		if filepath.Base(p) == "index.json" {
			continue
		}
		r, err := Load(p)
		if err != nil {
			return nil, err
		}
		if !keep(r) {
			continue
		}
		cur := latest[r.Scenario.ID]
		if cur == nil || r.Scale > cur.Scale || r.Scale == cur.Scale && r.FinishedAt.After(cur.FinishedAt) {
			latest[r.Scenario.ID] = r
		}
	}
	return latest, nil
}

// Page renders docsDir/benchmarks.md and its charts (docsDir/benchmarks/)
// from the reports in dir.
func Page(dir, docsDir string) error {
	latest, err := LoadDir(dir)
	if err != nil {
		return err
	}
	if len(latest) == 0 {
		return fmt.Errorf("no reports in %s", dir)
	}
	charts, err := Charts(latest, filepath.Join(docsDir, "benchmarks"))
	if err != nil {
		return err
	}
	// The page links to the reports relative to where it is written: both
	// made absolute first, so that any pair of directories works.
	absDocs, err := filepath.Abs(docsDir)
	if err != nil {
		return err
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(absDocs, absDir)
	if err != nil {
		return fmt.Errorf("link the reports in %s from %s: %w", dir, docsDir, err)
	}
	pg, err := LoadPGCapacity(filepath.Join(dir, "..", "capacity"))
	if err != nil {
		return err
	}
	pgRuns, err := LoadStore(dir, "postgres")
	if err != nil {
		return err
	}
	md := pageMarkdown(latest, charts, filepath.ToSlash(rel), pg, pgRuns)
	return os.WriteFile(filepath.Join(docsDir, "benchmarks.md"), []byte(md), 0o644)
}

func link(r *Report, reportsRel string) string {
	if r.Files.Text == "" {
		return ""
	}
	base := path.Join(reportsRel, filepath.Base(r.Files.Text))
	return fmt.Sprintf("[txt](%s) / [json](%s)", base, strings.TrimSuffix(base, ".txt")+".json")
}

func scaleNote(r *Report) string {
	if r.Scale == 1 {
		return ""
	}
	return fmt.Sprintf(" (scale %g)", r.Scale)
}

// PageMarkdown is the page's text.
func PageMarkdown(latest map[string]*Report, charts []string, reportsRel string) string {
	return pageMarkdown(latest, charts, reportsRel, nil, nil)
}

// pageMarkdown is the page's text, with a PostgreSQL section if pg or
// pgRuns (the scenarios run on PostgreSQL) is set.
func pageMarkdown(latest map[string]*Report, charts []string, reportsRel string, pg *PGCapacity, pgRuns map[string]*Report) string {
	p := &page{latest: latest, charts: charts, reportsRel: reportsRel, pg: pg, pgRuns: pgRuns}
	p.intro()
	p.apiMixed()
	p.capacity()
	p.postgres()
	p.scraper()
	p.trust()
	p.strengths()
	return p.b.String()
}

// page is the page being written: the latest report of each scenario, the
// charts drawn from them, and where the reports are relative to the page.
type page struct {
	lines
	latest     map[string]*Report
	charts     []string
	reportsRel string
	pg         *PGCapacity        // a capacity run on PostgreSQL, or nil
	pgRuns     map[string]*Report // the scenarios run on PostgreSQL
}

// pick returns the reports of the scenarios ids that ran, in that order.
func (p *page) pick(ids ...string) []*Report {
	var out []*Report
	for _, id := range ids {
		if r := p.latest[id]; r != nil {
			out = append(out, r)
		}
	}
	return out
}

// chart shows the chart file name if it was drawn.
func (p *page) chart(name, alt string) {
	for _, c := range p.charts {
		if filepath.Base(c) == name {
			p.w("![%s](benchmarks/%s)", alt, name)
			p.w("")
		}
	}
}

// table writes one row per report under title; withSeed adds the column
// with the TypeScript engine's figures for the scenario.
func (p *page) table(title string, rows []*Report, withSeed bool) {
	w := p.w
	if len(rows) == 0 {
		return
	}
	w("### %s", title)
	w("")
	if withSeed {
		w("| Scenario | Emit rate achieved | Throughput (avg / loaded) | p50 / p95 / p99 | Peak RSS | Dropped | Retries | Dead | Fenced | SQLite errors | TypeScript engine: throughput, p95*, RSS, dropped, retries, dead | Reports |")
		w("|---|---|---|---|---|---|---|---|---|---|---|---|")
	} else {
		w("| Scenario | Emit rate achieved | Throughput (avg / loaded) | p50 / p95 / p99 | Peak RSS | Dropped | Retries | Dead | Fenced | SQLite errors | Reports |")
		w("|---|---|---|---|---|---|---|---|---|---|---|")
	}
	for _, r := range rows {
		t := r.Totals
		row := fmt.Sprintf("| %s%s | %.1f%% | %.0f / %.0f runs/s | %.0f / %.0f / %.0f ms | %.0f MB | %d | %d | %d | %d | %d |",
			r.Scenario.Label, scaleNote(r), 100*float64(t.SeedAttempts)/max(t.SeedNominal, 1), t.ThroughputAvg, t.ThroughputLoad,
			r.Durations.P50Ms, r.Durations.P95Ms, r.Durations.P99Ms, float64(r.Memory.PeakRSSBytes)/(1<<20),
			t.SeedDropped, t.Retries, t.DeadLetters, t.Fenced, t.SQLiteErrors)
		if withSeed {
			if s, ok := seedRuns[r.Scenario.ID]; ok {
				row += fmt.Sprintf(" %.0f runs/s, %.0f ms, %.0f MB, %d, %d, %d |", s.throughput, s.p95, s.rssMB, s.dropped, s.retries, s.dead)
			} else {
				row += " not measured |"
			}
		}
		w("%s %s |", row, link(r, p.reportsRel))
	}
	w("")
}

// newest is the report that finished last (ties broken by scenario id),
// whose machine the page names: the same reports always give the same
// page.
func newest(latest map[string]*Report) *Report {
	var out *Report
	for _, r := range latest {
		if out == nil || r.FinishedAt.After(out.FinishedAt) ||
			r.FinishedAt.Equal(out.FinishedAt) && r.Scenario.ID > out.Scenario.ID {
			out = r
		}
	}
	return out
}

// intro writes the title, what the page shows, the machine and the method.
func (p *page) intro() {
	w := p.w
	m := newest(p.latest).Machine
	w("# Yella for Go: benchmarks")
	w("")
	w("Generated by `go run ./examples/benchmarks report --publish` from the reports in `examples/reports/benchmarks`; do not edit by hand.")
	w("")
	w("Yella runs handlers inside one Go process with its state in one local SQLite file. These runs show how that")
	w("design behaves under the workloads of the TypeScript engine's benchmark page: an API-style automation mix, a memory-heavy browser")
	w("scraper behind a per-process cap, bursts, degraded downstreams, long soaks and kill -9 restarts. Every figure below")
	w("comes from a report committed beside this page, each run in a fresh process on this machine:")
	w("")
	w("- **Machine**: %s, %d CPUs, %.1f GiB RAM, %s/%s, kernel %s, %s.", m.CPUModel, m.CPUs, float64(m.MemoryBytes)/(1<<30), m.OS, m.Arch, m.Kernel, m.GoVersion)
	w("- **Store**: SQLite file, WAL, `synchronous=NORMAL`, one writer goroutine with group commit.")
	w("- **Method**: the emitter paces seeds to absolute deadlines (the rates below are achieved, not just offered); percentiles come")
	w("  from a sketch within 1%% of a true sample, not from bucket bounds; restart drills kill the process with SIGKILL.")
	w("- **The TypeScript engine's figures** (`@yellatech/engine` 0.14.5) come from its own harness on this same machine kind at")
	w("  `--scale=0.25`, measured on 2026-11-30; its p95 values are histogram bucket bounds (10/50/100/250/500/1000/2500 ms…).")
	w("")
	w("Reproduce: `go run ./examples/benchmarks public` (or a scenario id, or `internal`, `soak`, `recovery`, `capacity`, `all`),")
	w("then `go run ./examples/benchmarks report`.")
	w("")
}

// apiMixed writes the API mixed workload's section.
func (p *page) apiMixed() {
	w := p.w
	w("## API mixed workload")
	w("")
	w("Webhook, billing, document and approval chains (about 2.45 runs per seed) with 2–3%% transient failures, permanent")
	w("failures below 1%%, and latency outliers, at three fleet concurrencies. Throughput follows the offered load: the")
	w("engine has room to spare at every setting, which the capacity family below measures.")
	w("")
	p.table("API mixed", p.pick("api-mixed__fleet-c20", "api-mixed__fleet-c50", "api-mixed__fleet-c200"), true)
	p.chart("throughput-by-concurrency.svg", "Throughput by fleet concurrency: offered vs achieved at the peak phase, and saturation capacity")
}

// capacity writes the saturation runs' section, by fleet concurrency.
func (p *page) capacity() {
	w := p.w
	ids := make([]string, 0, len(p.latest))
	for id := range p.latest {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	w("## Capacity")
	w("")
	w("The same process shapes with zero handler latency, emitted as fast as admission allows (with a bounded backlog):")
	w("the saturation throughput of the engine itself. The TypeScript engine's harness never measured this; its published")
	w("throughput was the offered load.")
	w("")
	var caps []*Report
	for _, id := range ids {
		if r := p.latest[id]; r.Capacity != nil {
			caps = append(caps, r)
		}
	}
	sort.SliceStable(caps, func(i, j int) bool { return caps[i].Capacity.Concurrency < caps[j].Capacity.Concurrency })
	if len(caps) > 0 {
		w("| Scenario | Saturation | Seeds/s | p95 attempt | Peak RSS | Reports |")
		w("|---|---|---|---|---|---|")
		for _, r := range caps {
			w("| %s%s | %.0f runs/s | %.0f | %.2f ms | %.0f MB | %s |", r.Scenario.Label, scaleNote(r), r.Capacity.RunsPerSec, r.Capacity.SeedsPerSec,
				r.Durations.P95Ms, float64(r.Memory.PeakRSSBytes)/(1<<20), link(r, p.reportsRel))
		}
		w("")
	}
}

// scraper writes the bounded scraper workload's section.
func (p *page) scraper() {
	w := p.w
	w("## Bounded scraper workload")
	w("")
	w("The API mix plus a browser-style scraper that allocates and touches 24 MB per active run, capped per process with")
	w("`Overflow: yella.Drop` (what the TypeScript engine does at a cap, so that the dropped counts compare). Raising the cap")
	w("admits more scrapes and costs memory; when dropped work is not acceptable, leave `Overflow` at its default (a bounded")
	w("queue) or set `Overflow: yella.Queue(n)`.")
	w("")
	p.table("Bounded scraper", p.pick("scraper-bounded__fleet-c40__scraper-c1", "scraper-bounded__fleet-c40__scraper-c5", "scraper-bounded__fleet-c40__scraper-c10"), true)
	p.chart("scraper-cap.svg", "Scraper cap against peak RSS and admissions")
	p.browserScraper()
}

// browserScraper writes the real-browser scraper scenarios (family
// scraper-browser), each beside the simulated scraper of the same cap.
func (p *page) browserScraper() {
	var rows []*Report
	for id, r := range p.latest {
		if strings.HasPrefix(id, "scraper-browser__") && r.Browser != nil {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	sort.Slice(rows, func(i, j int) bool { return naturalLess(rows[i].Scenario.ID, rows[j].Scenario.ID) })
	w := p.w
	w("### Real browser")
	w("")
	w("The same mix, with the scrape step reading pages in headless Chromium (`connector/browser`, Debian's `chromium`): a")
	w("local site served by the benchmark itself (75% of pages 2–20 KB, 20% 50–200 KB, 5% 1 MB; 10% slow (1–3 s), 1% hung")
	w("past the 5 s page timeout, 2% not found, 3% answered 503), the per-process cap and the pool swept. Chromium's memory")
	w("is its process trees' at the largest sample, in PSS (shared pages counted once) and as the sum of RSS; the simulated")
	w("scraper of the same cap is the table above, at its own scale (drops count over a run: compare them at equal scales).")
	w("")
	w("| Scenario | Pool (browsers × tabs) | Pages read (failed) | Pages/s | Page read p50 / p95 | Scrapes dropped | Chromium peak, PSS / RSS sum | Engine peak RSS | Simulated, same cap: dropped, p95, peak RSS | Reports |")
	w("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		b := r.Browser
		sim := "not run"
		if s := p.latest["scraper-bounded__fleet-c40__scraper-c"+capOf(r.Scenario.ID)]; s != nil {
			sim = fmt.Sprintf("%d, %.0f ms, %.0f MB (scale %g)", s.Totals.SeedDropped, s.Durations.P95Ms, float64(s.Memory.PeakRSSBytes)/(1<<20), s.Scale)
		}
		w("| %s%s | %d × %d | %d (%d) | %.2f | %.0f / %.0f ms | %d | %.0f / %.0f MB | %.0f MB | %s | %s |",
			r.Scenario.Label, scaleNote(r), b.MaxBrowsers, b.TabsPerBrowser, b.Pages, b.PageErrors, b.PagesPerSec, b.P50Ms, b.P95Ms,
			b.Dropped, float64(b.PeakPSSBytes)/(1<<20), float64(b.PeakRSSBytes)/(1<<20), float64(r.Memory.PeakRSSBytes)/(1<<20), sim, link(r, p.reportsRel))
	}
	w("")
}

// capOf is the scraper cap a scenario id names ("…__scraper-c5__…": "5").
func capOf(id string) string {
	_, rest, ok := strings.Cut(id, "__scraper-c")
	if !ok {
		return ""
	}
	return rest[:digits(rest)]
}

// trust writes the section of bursts, degraded downstreams, soaks and
// restart drills, with what each restart drill found.
func (p *page) trust() {
	w := p.w
	w("## Trust checks")
	w("")
	p.table("Bursts, degraded downstreams, soaks and restart drills",
		p.pick("burst-recovery__fleet-c50", "burst-recovery__scraper-capped", "degraded-downstream__api-mixed", "degraded-downstream__scraper-capped",
			"overnight-soak__api-mixed", "overnight-soak__scraper-bounded", "crash-recovery__mid-load__api-mixed", "crash-recovery__mid-load__scraper-bounded"), true)
	for _, r := range p.pick("crash-recovery__mid-load__api-mixed", "crash-recovery__mid-load__scraper-bounded") {
		if rec := r.Recovery; rec != nil {
			w("- **%s**: SIGKILL at %.0f s; the new process ran its first resumed run %.0f ms after it started and reclaimed %d runs at once (no lease wait);"+
				" %d of %d acknowledged seeds lost, %d runs doubled, %d effects fenced (cut off mid-flight, left for an operator), %d effect bodies re-run; integrity_check %s.",
				r.Scenario.Label, rec.KilledAtS, rec.FirstRunMs, rec.Reclaimed, rec.Lost, rec.AckedSeeds, rec.Doubled, rec.Fenced, rec.EffectsRerun, rec.IntegrityCheck)
		}
	}
	for _, r := range p.pick("overnight-soak__api-mixed", "overnight-soak__scraper-bounded") {
		if r.Scale != 1 {
			w("- **%s** ran at scale %g: %.0f minutes instead of %.0f, with the same rates and phase shapes. The full run is"+
				" `go run ./examples/benchmarks %s --scale 1`.", r.Scenario.Label, r.Scale, r.Totals.DurationS/60, r.Totals.DurationS/60/r.Scale, r.Scenario.ID)
		}
	}
	w("")
	p.chart("queue-under-stress.svg", "Queue depth over time under bursts and degraded downstreams")
	p.chart("storage-over-soak.svg", "Database and WAL size over the soak")
}

// strengths writes where Yella fits and where it does not.
func (p *page) strengths() {
	w := p.w
	w("## Where Yella is strong, and where to choose something else")
	w("")
	w("Yella is strong where the work is automation-shaped: events that fan out into short chains of API calls, LLM calls and")
	w("browser sessions, at tens to thousands of runs per second on one machine. State lives next to the code, so a run costs")
	w("microseconds of bookkeeping and a few kilobytes of disk, a crash loses nothing that was acknowledged, and a restart")
	w("resumes in milliseconds. Effects that completed are never repeated, and effects cut off by a crash are fenced for a")
	w("decision instead of being silently retried.")
	w("")
	w("Choose something else when one machine is not enough: sustained tens of thousands of events per second, work that")
	w("must keep running through the loss of a host without a restore, or strict zero-loss across a disk failure. The")
	w("SQLite file is replicated off the box asynchronously (about a second behind), so a restore can lose the last second;")
	w("a replicated log or a database cluster costs more to run and answers those needs.")
}
