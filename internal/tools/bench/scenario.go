// Package bench is the benchmark suite: the scenario catalogue of the
// TypeScript engine's published benchmark page (@yellatech/engine 0.14.5;
// the same workloads, phases and failure rates, so the two engines' figures
// compare run for run) plus a capacity family, a runner that drives the engine through a scenario and samples it
// every two seconds, and the orchestration that runs each scenario in a
// fresh child process (killing it where a scenario says so). It produces
// report.Report values; package report renders them.
//
// bench depends on the engine and the storage contract only: the caller
// (cmd/yella, examples/benchmarks) opens stores.
package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Phase is a stretch of a scenario at one offered rate.
type Phase struct {
	Label string        `json:"label"`
	Rate  float64       `json:"rate"` // seed events per second; 0 = idle
	Dur   time.Duration `json:"duration_ns"`
	// Mode is the downstream mode during the phase (degraded scenarios).
	Mode Mode `json:"mode,omitempty"`
}

// Mode is a downstream's health, which selects latencies and failure rates.
type Mode string

// Downstream modes.
const (
	Healthy     Mode = "healthy"
	Slow        Mode = "slow"
	RateLimited Mode = "rate-limited"
	Recovering  Mode = "recovering"
)

// RetrySpec is the engine-wide retry policy of a scenario: Max retries,
// waiting Base·2^(n-1) before retry n.
type RetrySpec struct {
	Max  int           `json:"max"`
	Base time.Duration `json:"base_ns"`
}

// Scraper adds the memory-heavy browser-scrape process.
type Scraper struct {
	Cap    int `json:"cap"`    // per-process concurrency cap (drop policy)
	Weight int `json:"weight"` // seed weight of page:scrape-requested
	MB     int `json:"mb"`     // memory allocated and touched per active scrape
}

// Scenario is one benchmark.
type Scenario struct {
	ID          string   `json:"id"`
	Label       string   `json:"label"`
	Description string   `json:"description"`
	Family      string   `json:"family"`
	Kind        string   `json:"kind"`       // benchmark, soak, recovery, capacity
	Visibility  string   `json:"visibility"` // public, internal
	Tags        []string `json:"tags"`
	Concurrency int      `json:"concurrency"`
	Scraper     *Scraper `json:"scraper,omitempty"`
	// Browser makes the scraper load real pages in a Chromium pool of this
	// size (Debian's chromium package) instead of simulating them.
	Browser *BrowserPool `json:"browser,omitempty"`
	Retry   RetrySpec    `json:"retry"`
	Phases  []Phase      `json:"phases"`
	// RestartAt kills the engine process with SIGKILL at this offset and
	// restarts it on the same database (recovery scenarios).
	RestartAt time.Duration `json:"restart_at_ns,omitempty"`
	// Saturate emits as fast as admission allows (capacity family), with
	// zero handler latency.
	Saturate bool `json:"saturate,omitempty"`
	// Retention prunes completed runs this long after they completed.
	// Zero means 30 minutes for soaks, so that a soak measures a steady
	// state instead of a database that grows for six hours, and none
	// otherwise.
	Retention time.Duration `json:"retention_ns,omitempty"`
	Notes     []string      `json:"notes,omitempty"`
}

// RetentionOrDefault is the retention the scenario runs with.
func (s Scenario) RetentionOrDefault() time.Duration {
	if s.Retention == 0 && s.Kind == "soak" {
		return 30 * time.Minute
	}
	return s.Retention
}

// Duration is the scenario's nominal length.
func (s Scenario) Duration() time.Duration {
	var d time.Duration
	for _, p := range s.Phases {
		d += p.Dur
	}
	return d
}

// NominalSeeds is Σ rate × duration.
func (s Scenario) NominalSeeds() float64 {
	var n float64
	for _, p := range s.Phases {
		n += p.Rate * p.Dur.Seconds()
	}
	return n
}

// Minimums for scaled phases: a loaded phase lasts at least 10 s (five
// samples, enough for a rate and a p95), an idle one 5 s, and a restart is
// at least 5 s in, after the first samples. A small --scale shortens a
// scenario, never below what a report can describe.
var (
	MinLoadedPhase = 10 * time.Second
	MinIdlePhase   = 5 * time.Second
	MinRestart     = 5 * time.Second
)

// ParseScale parses a scale factor (the --scale flag): a finite number
// greater than 0 and at most 1000.
func ParseScale(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || !(f > 0) || f > 1000 {
		return 0, fmt.Errorf("invalid scale %q: want a number greater than 0 and at most 1000 (1 is full length)", s)
	}
	return f, nil
}

// Scaled returns s with every phase (and the restart) scaled by f, bounded
// below by the given minimums.
func (s Scenario) Scaled(f float64, minLoaded, minIdle, minRestart time.Duration) Scenario {
	if f == 1 {
		return s
	}
	round := func(d time.Duration) time.Duration {
		return time.Duration(math.Round(d.Seconds()*f)) * time.Second
	}
	out := s
	out.Phases = make([]Phase, len(s.Phases))
	for i, p := range s.Phases {
		p.Dur = round(p.Dur)
		if p.Rate > 0 {
			p.Dur = max(p.Dur, minLoaded)
		} else {
			p.Dur = max(p.Dur, minIdle)
		}
		out.Phases[i] = p
	}
	if s.RestartAt > 0 {
		out.RestartAt = max(round(s.RestartAt), minRestart)
	}
	return out
}

func phases(spec ...any) []Phase {
	var ps []Phase
	for i := 0; i < len(spec); i += 3 {
		ps = append(ps, Phase{Label: spec[i].(string), Rate: float64(spec[i+1].(int)), Dur: time.Duration(spec[i+2].(int)) * time.Second})
	}
	return ps
}

func withModes(ps []Phase, modes ...Mode) []Phase {
	for i := range ps {
		ps[i].Mode = modes[min(i, len(modes)-1)]
	}
	return ps
}

// Catalogue returns every scenario: the fourteen of the published
// benchmark page, with their workloads, plus the real-browser scraper and
// the capacity families.
func Catalogue() []Scenario {
	var out []Scenario
	api := func(conc int) Scenario {
		base := max(4, int(math.Round(float64(conc)/5)))
		return Scenario{
			ID: fmt.Sprintf("api-mixed__fleet-c%d", conc), Label: fmt.Sprintf("API mixed, fleet c%d", conc),
			Description: "Webhook, billing, document and approval chains against healthy downstreams.",
			Family:      "api-mixed", Kind: "benchmark", Visibility: "public", Tags: []string{"sqlite", "wal", "retries", "concurrency-sweep"},
			Concurrency: conc, Retry: RetrySpec{2, 300 * time.Millisecond},
			Phases: phases("warm-up", max(2, int(math.Round(float64(base)/3))), 30, "steady", base, 90, "peak", 2*base, 120, "cool-down", 0, 60),
		}
	}
	// The published rates of c50 (3/10/20) and c200 (13/40/80), spelled
	// out: the formula gives them today, and the runs compared with the
	// published figures must keep them if it changes.
	a20, a50, a200 := api(20), api(50), api(200)
	a50.Phases = phases("warm-up", 3, 30, "steady", 10, 90, "peak", 20, 120, "cool-down", 0, 60)
	a200.Phases = phases("warm-up", 13, 30, "steady", 40, 90, "peak", 80, 120, "cool-down", 0, 60)
	out = append(out, a20, a50, a200)
	for _, c := range []int{1, 5, 10} {
		out = append(out, Scenario{
			ID: fmt.Sprintf("scraper-bounded__fleet-c40__scraper-c%d", c), Label: fmt.Sprintf("Scraper bounded, cap %d", c),
			Description: "The API mix plus a browser-style scraper that holds 24 MB per active run, capped per process.",
			Family:      "scraper-bounded", Kind: "benchmark", Visibility: "public", Tags: []string{"memory", "scraper", "bounded-concurrency"},
			Concurrency: 40, Scraper: &Scraper{Cap: c, Weight: 3, MB: 24}, Retry: RetrySpec{1, 400 * time.Millisecond},
			Phases: phases("warm-up", 6, 30, "steady", 18, 90, "burst", 36, 120, "cool-down", 0, 60),
		})
	}
	// The same scraper mix with the scrape step in real Chromium, reading
	// a local site: the per-process cap and the pool size swept together.
	for _, b := range []struct{ cap, browsers, tabs int }{{1, 1, 1}, {5, 1, 5}, {10, 2, 5}} {
		out = append(out, Scenario{
			ID:          fmt.Sprintf("scraper-browser__fleet-c40__scraper-c%d__pool-%dx%d", b.cap, b.browsers, b.tabs),
			Label:       fmt.Sprintf("Scraper in Chromium, cap %d, %d×%d tabs", b.cap, b.browsers, b.tabs),
			Description: "The scraper-bounded mix with each scrape loading a page of a local site (varied sizes, slow pages, failures) in headless Chromium.",
			Family:      "scraper-browser", Kind: "benchmark", Visibility: "internal", Tags: []string{"memory", "scraper", "browser", "chromium", "bounded-concurrency"},
			Concurrency: 40, Scraper: &Scraper{Cap: b.cap, Weight: 3, MB: 0}, Browser: &BrowserPool{MaxBrowsers: b.browsers, TabsPerBrowser: b.tabs},
			Retry:  RetrySpec{1, 400 * time.Millisecond},
			Phases: phases("warm-up", 6, 30, "steady", 18, 90, "burst", 36, 120, "cool-down", 0, 60),
		})
	}
	out = append(out,
		Scenario{ID: "burst-recovery__fleet-c50", Label: "Burst recovery, API mixed", Description: "A surge and a spike, then recovery: the queue must grow and drain back.",
			Family: "burst-recovery", Kind: "benchmark", Visibility: "internal", Tags: []string{"burst", "queue"},
			Concurrency: 50, Retry: RetrySpec{2, 300 * time.Millisecond},
			Phases: phases("steady", 20, 60, "surge", 55, 60, "spike", 90, 60, "recovery", 15, 60, "cool-down", 0, 60)},
		Scenario{ID: "burst-recovery__scraper-capped", Label: "Burst recovery, scraper capped", Description: "Bursts with the capped scraper in the mix.",
			Family: "burst-recovery", Kind: "benchmark", Visibility: "internal", Tags: []string{"burst", "scraper"},
			Concurrency: 50, Scraper: &Scraper{Cap: 5, Weight: 3, MB: 24}, Retry: RetrySpec{2, 300 * time.Millisecond},
			Phases: phases("steady", 12, 60, "surge", 28, 60, "spike", 45, 60, "recovery", 10, 60, "cool-down", 0, 60)},
		Scenario{ID: "degraded-downstream__api-mixed", Label: "Degraded downstream, API mixed", Description: "Downstreams slow down, rate-limit, then recover.",
			Family: "degraded-downstream", Kind: "benchmark", Visibility: "internal", Tags: []string{"degraded", "retries"},
			Concurrency: 50, Retry: RetrySpec{2, 400 * time.Millisecond},
			Phases: withModes(phases("healthy", 22, 60, "slow", 30, 60, "rate-limited", 30, 60, "recovering", 22, 60, "cool-down", 0, 60), Healthy, Slow, RateLimited, Recovering, Recovering)},
		Scenario{ID: "degraded-downstream__scraper-capped", Label: "Degraded downstream, scraper capped", Description: "Degraded downstreams with the capped scraper.",
			Family: "degraded-downstream", Kind: "benchmark", Visibility: "internal", Tags: []string{"degraded", "scraper"},
			Concurrency: 40, Scraper: &Scraper{Cap: 5, Weight: 2, MB: 24}, Retry: RetrySpec{2, 400 * time.Millisecond},
			Phases: withModes(phases("healthy", 14, 60, "slow", 18, 60, "rate-limited", 18, 60, "recovering", 14, 60, "cool-down", 0, 60), Healthy, Slow, RateLimited, Recovering, Recovering)},
		Scenario{ID: "overnight-soak__api-mixed", Label: "Overnight soak, API mixed", Description: "Six hours of the normal automation workload with bursts.",
			Family: "overnight-soak", Kind: "soak", Visibility: "internal", Tags: []string{"soak", "long-run"},
			Concurrency: 50, Retry: RetrySpec{2, 500 * time.Millisecond},
			Phases: phases("warm-up", 12, 900, "steady-a", 18, 5400, "burst-a", 35, 1800, "steady-b", 18, 5400, "burst-b", 35, 1800, "steady-c", 18, 5400, "cool-down", 0, 900)},
		Scenario{ID: "overnight-soak__scraper-bounded", Label: "Overnight soak, bounded scraper", Description: "Six hours with the memory-heavy scraper capped at 5.",
			Family: "overnight-soak", Kind: "soak", Visibility: "internal", Tags: []string{"soak", "scraper"},
			Concurrency: 40, Scraper: &Scraper{Cap: 5, Weight: 2, MB: 24}, Retry: RetrySpec{2, 500 * time.Millisecond},
			Phases: phases("warm-up", 8, 900, "steady-a", 12, 5400, "burst-a", 22, 1800, "steady-b", 12, 5400, "burst-b", 22, 1800, "steady-c", 12, 5400, "cool-down", 0, 900)},
		Scenario{ID: "crash-recovery__mid-load__api-mixed", Label: "Crash recovery, API mixed", Description: "kill -9 of the engine process mid-load, restart on the same database.",
			Family: "restart-drill", Kind: "recovery", Visibility: "internal", Tags: []string{"recovery", "sigkill"},
			Concurrency: 50, Retry: RetrySpec{2, 400 * time.Millisecond}, RestartAt: 120 * time.Second,
			Phases: phases("warm-up", 16, 60, "active-load", 35, 180, "post-restart", 28, 120, "cool-down", 0, 60)},
		Scenario{ID: "crash-recovery__mid-load__scraper-bounded", Label: "Crash recovery, scraper load", Description: "kill -9 mid-load with the capped scraper in the mix.",
			Family: "restart-drill", Kind: "recovery", Visibility: "internal", Tags: []string{"recovery", "sigkill", "scraper"},
			Concurrency: 40, Scraper: &Scraper{Cap: 5, Weight: 2, MB: 24}, Retry: RetrySpec{2, 400 * time.Millisecond}, RestartAt: 120 * time.Second,
			Phases: phases("warm-up", 10, 60, "active-load", 20, 180, "post-restart", 16, 120, "cool-down", 0, 60)},
	)
	for _, c := range []int{20, 50, 200} {
		out = append(out, Scenario{
			ID: fmt.Sprintf("capacity__api-mixed__fleet-c%d", c), Label: fmt.Sprintf("Capacity, fleet c%d", c),
			Description: "The API-mixed shape with zero handler latency, emitted as fast as admission allows: saturation throughput.",
			Family:      "capacity", Kind: "capacity", Visibility: "internal", Tags: []string{"capacity", "saturation"},
			Concurrency: c, Retry: RetrySpec{2, 300 * time.Millisecond}, Saturate: true,
			Phases: phases("saturate", 1, 30, "cool-down", 0, 10),
		})
	}
	return out
}

// Groups are the names accepted besides scenario ids.
var Groups = []string{"public", "internal", "soak", "recovery", "capacity", "browser", "all"}

// Select resolves a scenario id or a group.
func Select(target string) ([]Scenario, error) {
	var out []Scenario
	for _, s := range Catalogue() {
		switch {
		case target == s.ID, target == "all",
			target == "public" && s.Visibility == "public",
			target == "internal" && s.Visibility == "internal",
			target == "soak" && s.Kind == "soak",
			target == "recovery" && s.Kind == "recovery",
			target == "capacity" && s.Kind == "capacity",
			target == "browser" && s.Browser != nil:
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("unknown benchmark scenario or group: %s (groups: %s)", target, strings.Join(Groups, ", "))
	}
	return out, nil
}

// List renders the catalogue, one scenario a line (id, minutes at full
// scale, visibility, kind, description), then the groups.
func List() string {
	var b strings.Builder
	for _, s := range Catalogue() {
		fmt.Fprintf(&b, "%-44s %6.1f min  %-8s %-9s %s\n", s.ID, s.Duration().Minutes(), s.Visibility, s.Kind, s.Description)
	}
	fmt.Fprintf(&b, "\nGroups: %s\n", strings.Join(Groups, ", "))
	return b.String()
}
