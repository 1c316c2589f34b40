// Package report holds the result of a benchmark or trust run and renders
// it: a text report laid out like the TypeScript engine's benchmark reports
// (so the two read side by side), a JSON summary, the append-only index,
// SVG charts and the benchmark page. Rendering is pure: the same Report
// renders to the same bytes (golden-tested).
package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Report is one scenario run.
type Report struct {
	Scenario   Scenario   `json:"scenario"`
	Scale      float64    `json:"scale"`
	Store      string     `json:"store"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt time.Time  `json:"finishedAt"`
	Machine    Machine    `json:"machine"`
	Commit     string     `json:"commit,omitempty"`
	Samples    []Sample   `json:"samples"`
	Phases     []Phase    `json:"phaseResults"`
	Totals     Totals     `json:"totals"`
	ByEvent    []Admitted `json:"byEvent"`
	Durations  Durations  `json:"durations"`
	Memory     Memory     `json:"memory"`
	Effects    Effects    `json:"effects"`
	Recovery   *Recovery  `json:"recovery,omitempty"`
	Capacity   *Capacity  `json:"capacity,omitempty"`
	Browser    *Browser   `json:"browser,omitempty"`
	Notes      []string   `json:"notes,omitempty"`
	Files      Files      `json:"reportFiles"`
}

// Scenario describes what ran.
type Scenario struct {
	ID          string      `json:"id"`
	Label       string      `json:"label"`
	Description string      `json:"description"`
	Family      string      `json:"family"`
	Kind        string      `json:"kind"`
	Visibility  string      `json:"visibility"`
	Tags        []string    `json:"tags"`
	Concurrency int         `json:"concurrency"`
	ScraperCap  int         `json:"scraperCap,omitempty"`
	Retry       string      `json:"retry"`
	Phases      []PhaseSpec `json:"phases"`
	RestartAtS  float64     `json:"restartAtSeconds,omitempty"`
	Notes       []string    `json:"notes,omitempty"`
}

// PhaseSpec is a scaled phase.
type PhaseSpec struct {
	Label    string  `json:"label"`
	Rate     float64 `json:"rate"`
	Seconds  float64 `json:"seconds"`
	Mode     string  `json:"mode,omitempty"`
	Nominal  float64 `json:"nominalSeeds"`
	Achieved float64 `json:"achievedSeeds"`
}

// Machine says where it ran.
type Machine struct {
	Hostname    string `json:"hostname"`
	CPUModel    string `json:"cpuModel"`
	CPUs        int    `json:"cpus"`
	MemoryBytes int64  `json:"totalMemoryBytes"`
	OS          string `json:"platform"`
	Arch        string `json:"arch"`
	Kernel      string `json:"kernel"`
	GoVersion   string `json:"goVersion"`
}

// Sample is one 2-second sample.
type Sample struct {
	ElapsedS     float64 `json:"elapsedSec"`
	Phase        string  `json:"phase"`
	OfferedRate  float64 `json:"emitRate"`
	AchievedRate float64 `json:"achievedRate"`
	Idle         int64   `json:"idle"`
	Running      int64   `json:"running"`
	Completed    int64   `json:"completed"`
	Errored      int64   `json:"errored"`
	RunsPerSec   float64 `json:"runsPerSec"`
	P95Ms        float64 `json:"p95Ms"`
	RSSBytes     int64   `json:"rssBytes"`
	HeapBytes    int64   `json:"heapUsedBytes"`
	DBBytes      int64   `json:"dbSizeBytes"`
	WALBytes     int64   `json:"walSizeBytes"`
	Restart      bool    `json:"restart,omitempty"` // first sample of a restarted process
	// BrowserRSSBytes and BrowserPSSBytes are the memory of the Chromium
	// process trees of a real-browser scenario: the sum of their processes'
	// RSS (shared pages counted in each process) and of their PSS (shared
	// pages split between the processes).
	BrowserRSSBytes int64 `json:"browserRssBytes,omitempty"`
	BrowserPSSBytes int64 `json:"browserPssBytes,omitempty"`
}

// Phase is what a phase achieved.
type Phase struct {
	Label        string  `json:"label"`
	NominalRate  float64 `json:"nominalRate"`
	AchievedRate float64 `json:"achievedRate"`
	Attempts     int64   `json:"attempts"`
	Seconds      float64 `json:"seconds"`
}

// Totals are the run's counters.
type Totals struct {
	DurationS      float64 `json:"durationSec"`
	SeedNominal    float64 `json:"seedNominal"`
	SeedAttempts   int64   `json:"seedAttempts"`
	SeedAdmitted   int64   `json:"seedAdmitted"`
	SeedDropped    int64   `json:"seedDropped"`
	RunsCompleted  int64   `json:"runsCompleted"`
	RunsErrored    int64   `json:"runsErrored"`
	DeadLetters    int64   `json:"deadLetters"`
	Fenced         int64   `json:"fenced"`
	Retries        int64   `json:"retries"`
	Restarts       int     `json:"restarts"`
	SQLiteErrors   int64   `json:"sqliteErrors"`
	InternalErrors int64   `json:"internalErrors"`
	ThroughputAvg  float64 `json:"throughputAvg"` // terminal runs / duration, cool-down and drain included
	ThroughputLoad float64 `json:"throughputLoaded"`
}

// Admitted is the admission of one seed event.
type Admitted struct {
	Event     string `json:"event"`
	Attempted int64  `json:"attempted"`
	Admitted  int64  `json:"admitted"`
	Dropped   int64  `json:"dropped"`
}

// Durations summarises run (attempt) durations, from a sketch within 1%.
type Durations struct {
	Count int64   `json:"count"`
	AvgMs float64 `json:"avgMs"`
	MinMs float64 `json:"minMs"`
	P50Ms float64 `json:"p50Ms"`
	P95Ms float64 `json:"p95Ms"`
	P99Ms float64 `json:"p99Ms"`
	MaxMs float64 `json:"maxMs"`
}

// Memory and storage.
type Memory struct {
	PeakRSSBytes  int64 `json:"peakRssBytes"`
	FinalRSSBytes int64 `json:"finalRssBytes"`
	PeakHeapBytes int64 `json:"peakHeapBytes"`
	PeakQueue     int64 `json:"peakQueueDepth"`
	DBBytes       int64 `json:"dbFileBytes"`
	WALBytes      int64 `json:"walFileBytes"`
	PeakWALBytes  int64 `json:"peakWalBytes"`
}

// Effects counts effect events.
type Effects struct {
	Completed int64 `json:"completed"`
	Errored   int64 `json:"errored"`
	Replayed  int64 `json:"replayed"`
}

// Recovery is what kills and restarts cost.
type Recovery struct {
	KilledAtS      float64 `json:"killedAtSec"`       // the first kill
	FirstRunMs     float64 `json:"firstResumedRunMs"` // from starting the new process; the slowest restart
	Kills          []Kill  `json:"kills,omitempty"`
	Reclaimed      int64   `json:"reclaimed"`
	Lost           int64   `json:"runsLost"`
	Doubled        int64   `json:"runsDoubled"`
	Fenced         int64   `json:"effectsFenced"`
	EffectsRerun   int64   `json:"effectsRerun"`
	AckedSeeds     int64   `json:"ackedSeeds"`
	IntegrityCheck string  `json:"integrityCheck"`
}

// Kill is one SIGKILL and the restart after it.
type Kill struct {
	AtS        float64 `json:"atSec"`
	FirstRunMs float64 `json:"firstResumedRunMs"`
}

// Capacity is a saturation measurement.
type Capacity struct {
	RunsPerSec  float64 `json:"saturationRunsPerSec"`
	SeedsPerSec float64 `json:"saturationSeedsPerSec"`
	Concurrency int     `json:"concurrency"`
}

// Browser is the account of a real-browser scraper: its Chromium pool,
// the pages it read and the memory its browsers held.
type Browser struct {
	MaxBrowsers    int     `json:"maxBrowsers"`
	TabsPerBrowser int     `json:"tabsPerBrowser"`
	Pages          int64   `json:"pages"`          // page reads that succeeded
	PageErrors     int64   `json:"pageErrors"`     // page reads that failed (each attempt)
	Dropped        int64   `json:"scrapesDropped"` // scrape requests dropped at the per-process cap
	PagesPerSec    float64 `json:"pagesPerSec"`
	P50Ms          float64 `json:"pageP50Ms"` // page read durations, successes and failures
	P95Ms          float64 `json:"pageP95Ms"`
	MaxMs          float64 `json:"pageMaxMs"`
	PeakRSSBytes   int64   `json:"peakBrowserRssBytes"` // Chromium process trees, the largest sample (sum of RSS)
	PeakPSSBytes   int64   `json:"peakBrowserPssBytes"` // the same in PSS
	Starts         int64   `json:"browserStarts"`
	Crashes        int64   `json:"browserCrashes"`
}

// Files are where the report was written.
type Files struct {
	Text string `json:"text"`
	JSON string `json:"json"`
}

// Basename is <scenario>__<yyyymmdd-hhmmss>.
func (r *Report) Basename() string {
	return r.Scenario.ID + "__" + r.FinishedAt.Format("20060102-150405")
}

// Write writes the text report and the JSON summary to dir and appends the
// summary to dir/index.json.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(dir, r.Basename())
	r.Files = Files{Text: base + ".txt", JSON: base + ".json"}
	if err := os.WriteFile(r.Files.Text, []byte(Text(r)), 0o644); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(r.Files.JSON, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return AppendIndex(filepath.Join(dir, "index.json"), r)
}

// AppendIndex appends a summary (without samples) to the JSON array in path.
func AppendIndex(path string, r *Report) error {
	var idx []json.RawMessage
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &idx); err != nil {
			return fmt.Errorf("%s is not a JSON array: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	summary := *r
	summary.Samples = nil
	b, err := json.Marshal(summary)
	if err != nil {
		return err
	}
	idx = append(idx, b)
	out, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(out, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Load reads a JSON summary.
func Load(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}
