package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// sample builds a deterministic report exercising every section.
func sample() *Report {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	r := &Report{
		Scenario: Scenario{ID: "crash-recovery__mid-load__api-mixed", Label: "Crash recovery, API mixed", Description: "kill -9 mid-load.",
			Family: "restart-drill", Kind: "recovery", Visibility: "internal", Tags: []string{"recovery"}, Concurrency: 50, Retry: "2 retries, 400ms·2^(n-1) backoff",
			RestartAtS: 6, Phases: []PhaseSpec{{Label: "warm-up", Rate: 16, Seconds: 10, Nominal: 160, Achieved: 160}, {Label: "cool-down", Seconds: 5}}},
		Scale: 0.05, Store: "sqlite", StartedAt: t0, FinishedAt: t0.Add(35 * time.Second),
		Machine: Machine{Hostname: "h", CPUModel: "AMD EPYC", CPUs: 2, MemoryBytes: 24 << 30, OS: "linux", Arch: "amd64", Kernel: "6.18", GoVersion: "go1.26.8"},
		Commit:  "abc1234",
		Samples: []Sample{
			{ElapsedS: 2, Phase: "warm-up", OfferedRate: 16, AchievedRate: 16, Idle: 1, Running: 9, Completed: 58, RunsPerSec: 29.5, P95Ms: 620, RSSBytes: 14 << 20, WALBytes: 2 << 20},
			{ElapsedS: 8, Phase: "warm-up", Restart: true, Running: 10, Completed: 288, RunsPerSec: 37, P95Ms: 529, RSSBytes: 15 << 20, WALBytes: 2 << 20},
			{ElapsedS: 35, Phase: "draining", Completed: 1905, Errored: 9, P95Ms: 584, RSSBytes: 20 << 20, DBBytes: 1 << 20, WALBytes: 2 << 20},
		},
		Phases:    []Phase{{Label: "warm-up", NominalRate: 16, AchievedRate: 16, Attempts: 160, Seconds: 10}, {Label: "cool-down", Seconds: 5}},
		Totals:    Totals{DurationS: 35, SeedNominal: 160, SeedAttempts: 160, SeedAdmitted: 158, SeedDropped: 2, RunsCompleted: 1905, RunsErrored: 9, Fenced: 2, Retries: 26, Restarts: 1, ThroughputAvg: 54.7, ThroughputLoad: 63.1},
		ByEvent:   []Admitted{{Event: "webhook:received", Attempted: 100, Admitted: 98, Dropped: 2}, {Event: "approval:needed", Attempted: 60, Admitted: 60}},
		Durations: Durations{Count: 1844, AvgMs: 210, MinMs: 8, P50Ms: 73, P95Ms: 584, P99Ms: 1437, MaxMs: 2153},
		Memory:    Memory{PeakRSSBytes: 20 << 20, FinalRSSBytes: 20 << 20, PeakHeapBytes: 3 << 20, PeakQueue: 24, DBBytes: 1 << 20, WALBytes: 2 << 20, PeakWALBytes: 2 << 20},
		Effects:   Effects{Completed: 700, Replayed: 1},
		Recovery:  &Recovery{KilledAtS: 6, FirstRunMs: 6.7, Reclaimed: 8, Fenced: 2, AckedSeeds: 158, IntegrityCheck: "ok"},
		Notes:     []string{"a note"},
	}
	return r
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if os.Getenv("UPDATE_GOLDEN") != "" {
		os.WriteFile(path, []byte(got), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_GOLDEN=1)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file; rerun with UPDATE_GOLDEN=1 and review the diff\ngot:\n%s", name, got)
	}
}

func TestTextGolden(t *testing.T) { golden(t, "text.golden", Text(sample())) }

// The JSON summary has every field of the TypeScript engine's summaries,
// under the same names and types, so that a tool written for those reads
// these; Yella's own fields (the recovery figures among them) come in
// addition.
func TestJSONSchema(t *testing.T) {
	dir := t.TempDir()
	r := sample()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(r.Files.JSON)
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	schema := map[string]string{
		"scenario.id": "string", "scenario.label": "string", "scenario.description": "string", "scenario.family": "string",
		"scenario.kind": "string", "scenario.visibility": "string", "scenario.tags": "array", "scenario.phases": "array", "scenario.concurrency": "number",
		"startedAt": "string", "finishedAt": "string",
		"machine.hostname": "string", "machine.platform": "string", "machine.arch": "string", "machine.cpus": "number",
		"machine.totalMemoryBytes": "number", "machine.goVersion": "string", "machine.cpuModel": "string", "machine.kernel": "string", "commit": "string",
		"totals.seedAttempts": "number", "totals.seedAdmitted": "number", "totals.seedDropped": "number", "totals.runsCompleted": "number",
		"totals.runsErrored": "number", "totals.retries": "number", "totals.deadLetters": "number", "totals.restarts": "number",
		"totals.sqliteErrors": "number", "totals.throughputAvg": "number",
		"durations.count": "number", "durations.p50Ms": "number", "durations.p95Ms": "number", "durations.p99Ms": "number", "durations.maxMs": "number",
		"memory.peakRssBytes": "number", "memory.finalRssBytes": "number", "memory.peakQueueDepth": "number", "memory.dbFileBytes": "number", "memory.walFileBytes": "number",
		"effects.completed": "number", "effects.errored": "number", "effects.replayed": "number",
		"byEvent": "array", "samples": "array", "reportFiles.text": "string", "reportFiles.json": "string",
		"recovery.firstResumedRunMs": "number", "recovery.runsLost": "number", "recovery.runsDoubled": "number", "recovery.effectsFenced": "number",
	}
	for path, kind := range schema {
		var v any = doc
		for _, part := range strings.Split(path, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[part]
		}
		got := ""
		switch v.(type) {
		case string:
			got = "string"
		case float64:
			got = "number"
		case []any:
			got = "array"
		case map[string]any:
			got = "object"
		}
		if got != kind {
			t.Errorf("%s: %s, want %s", path, got, kind)
		}
	}
	// The index gains one summary (without samples) per report.
	r2 := sample()
	r2.FinishedAt = r2.FinishedAt.Add(time.Minute)
	if err := r2.Write(dir); err != nil {
		t.Fatal(err)
	}
	var idx []map[string]any
	b, _ = os.ReadFile(filepath.Join(dir, "index.json"))
	if err := json.Unmarshal(b, &idx); err != nil || len(idx) != 2 {
		t.Fatalf("index: %d entries, %v", len(idx), err)
	}
	if idx[0]["samples"] != nil {
		t.Error("the index repeats the samples")
	}
	if !strings.HasSuffix(r2.Files.Text, "crash-recovery__mid-load__api-mixed__20261130-120135.txt") {
		t.Errorf("file name %s", r2.Files.Text)
	}
}

// TestPageLinks: the page's links to the reports and charts resolve from
// the directory it is written to, whatever the two directories are (one
// relative, one absolute, in different trees).
func TestPageLinks(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := sample().Write("reports"); err != nil {
		t.Fatal(err)
	}
	docs := t.TempDir()
	if err := Page("reports", docs); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(docs, "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	links := regexp.MustCompile(`\]\(([^)]+)\)`).FindAllStringSubmatch(string(md), -1)
	if len(links) < 2 {
		t.Fatalf("the page has %d links", len(links))
	}
	for _, l := range links {
		if strings.Contains(l[1], "://") {
			continue
		}
		if _, err := os.Stat(filepath.Join(docs, filepath.FromSlash(l[1]))); err != nil {
			t.Errorf("broken link %s: %v", l[1], err)
		}
	}
}

// A scenario run on PostgreSQL is listed in the page's PostgreSQL section,
// beside the same scenario on SQLite, and never replaces the SQLite run in
// the other sections, whatever its scale or date.
func TestPostgresRunsListedApart(t *testing.T) {
	t.Chdir(t.TempDir())
	sq := sample()
	pg := sample()
	pg.Store, pg.Scale = "postgres", 0.5 // larger than the SQLite run's scale: LoadDir must still keep SQLite's
	pg.FinishedAt = pg.FinishedAt.Add(time.Hour)
	pg.StartedAt = pg.StartedAt.Add(time.Hour)
	pg.Totals.ThroughputLoad = 12.5
	for _, r := range []*Report{sq, pg} {
		if err := r.Write("reports"); err != nil {
			t.Fatal(err)
		}
	}
	latest, err := LoadDir("reports")
	if err != nil {
		t.Fatal(err)
	}
	if r := latest[sq.Scenario.ID]; r == nil || r.Store != "sqlite" {
		t.Fatalf("LoadDir kept %+v, want the SQLite run", r)
	}
	pgRuns, err := LoadStore("reports", "postgres")
	if err != nil {
		t.Fatal(err)
	}
	if r := pgRuns[sq.Scenario.ID]; r == nil || r.Store != "postgres" || len(pgRuns) != 1 {
		t.Fatalf("LoadStore kept %v, want the PostgreSQL run only", pgRuns)
	}
	row := pageRow(t, "### The scenarios on PostgreSQL", sq.Scenario.Label)
	if !strings.Contains(row, "(scale 0.5)") || !strings.Contains(row, "/ 12 runs/s") || !strings.Contains(row, "63 runs/s, 584 ms (scale 0.05)") {
		t.Errorf("the PostgreSQL row does not show the run beside SQLite's: %s", row)
	}
}

// A real-browser scraper's report adds the browser pool's account.
func TestTextGoldenBrowser(t *testing.T) {
	r := sample()
	r.Browser = &Browser{MaxBrowsers: 2, TabsPerBrowser: 5, Pages: 812, PageErrors: 31, Dropped: 44, PagesPerSec: 6.77,
		P50Ms: 412, P95Ms: 2310, MaxMs: 5004, PeakRSSBytes: 1734 << 20, PeakPSSBytes: 734 << 20, Starts: 2, Crashes: 0}
	golden(t, "text_browser.golden", Text(r))
}

// A real-browser scraper run is listed in the page's real-browser table
// with its pool's account, beside the simulated scraper of the same cap.
func TestBrowserRunsOnPage(t *testing.T) {
	t.Chdir(t.TempDir())
	sim := sample()
	sim.Scenario.ID, sim.Scenario.Label = "scraper-bounded__fleet-c40__scraper-c5", "Scraper bounded, cap 5"
	sim.Totals.SeedDropped = 78
	br := sample()
	br.Scenario.ID, br.Scenario.Label = "scraper-browser__fleet-c40__scraper-c5__pool-1x5", "Scraper, real browser, cap 5"
	br.Browser = &Browser{MaxBrowsers: 1, TabsPerBrowser: 5, Pages: 93, PageErrors: 2, Dropped: 33, PagesPerSec: 2.42,
		P50Ms: 561, P95Ms: 3262, PeakRSSBytes: 2053 << 20, PeakPSSBytes: 919 << 20}
	for _, r := range []*Report{sim, br} {
		if err := r.Write("reports"); err != nil {
			t.Fatal(err)
		}
	}
	row := pageRow(t, "### Real browser", br.Scenario.Label)
	for _, want := range []string{"| 1 × 5 |", "| 93 (2) |", "| 2.42 |", "| 561 / 3262 ms |", "| 33 |", "| 919 / 2053 MB |", "| 78, 584 ms,"} {
		if !strings.Contains(row, want) {
			t.Errorf("the real-browser row has no %q: %s", want, row)
		}
	}
	if capOf(br.Scenario.ID) != "5" || capOf("api-mixed__fleet-c20") != "" {
		t.Errorf("capOf: %q, %q", capOf(br.Scenario.ID), capOf("api-mixed__fleet-c20"))
	}
}

// pageRow writes the page from the reports in ./reports and returns the
// row of the scenario labelled label in the section under heading.
func pageRow(t *testing.T, heading, label string) string {
	t.Helper()
	docs := t.TempDir()
	if err := Page("reports", docs); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(docs, "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(md), heading)
	if !ok {
		t.Fatalf("no section %q:\n%s", heading, md)
	}
	_, row, ok := strings.Cut(sec, "| "+label)
	if !ok {
		t.Fatalf("no row %q in %q:\n%s", label, heading, sec)
	}
	row, _, _ = strings.Cut(row, "\n")
	return "| " + label + row
}

// The page names the machine of the newest report, whatever order the
// reports are read in: the same reports always give the same page.
func TestPageMachineFromNewestReport(t *testing.T) {
	latest := map[string]*Report{}
	for i, cpu := range []string{"old cpu", "newest cpu", "older cpu"} {
		r := sample()
		r.Scenario.ID = "s" + string(rune('a'+i))
		r.FinishedAt = r.FinishedAt.Add(time.Duration([]int{1, 3, 0}[i]) * time.Hour)
		r.Machine.CPUModel = cpu
		latest[r.Scenario.ID] = r
	}
	for range 20 { // map order varies between iterations
		md := PageMarkdown(latest, nil, "reports")
		if !strings.Contains(md, "**Machine**: newest cpu,") {
			t.Fatalf("the page does not name the newest report's machine:\n%s", md)
		}
	}
}
