package bench

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella/connector/browser"
	"github.com/yella-go/yella/internal/tools/report"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/sqlitestore"
)

func openStore(kind, path string) (store.Store, error) {
	if kind == "memory" {
		return memstore.New(), nil
	}
	return sqlitestore.Open(path, sqlitestore.Options{})
}

func TestMain(m *testing.M) {
	if ChildMain(openStore) {
		return
	}
	os.Exit(m.Run())
}

func TestCatalogue(t *testing.T) {
	cat := Catalogue()
	if len(cat) != 20 {
		t.Fatalf("%d scenarios, want the published page's 14 plus 3 real-browser and 3 capacity", len(cat))
	}
	groups := map[string]int{"public": 6, "recovery": 2, "soak": 2, "capacity": 3, "browser": 3, "all": 20}
	for g, n := range groups {
		got, err := Select(g)
		if err != nil || len(got) != n {
			t.Errorf("group %s: %d scenarios (%v), want %d", g, len(got), err, n)
		}
	}
	if _, err := Select("nope"); err == nil || !strings.Contains(err.Error(), "unknown benchmark scenario or group: nope") {
		t.Errorf("unknown target: %v", err)
	}
	list := List()
	for _, s := range cat {
		if !strings.Contains(list, s.ID) {
			t.Errorf("list lacks %s", s.ID)
		}
	}
	// The published workload's rates and durations.
	c50, _ := Select("api-mixed__fleet-c50")
	if p := c50[0].Phases; p[0].Rate != 3 || p[1].Rate != 10 || p[2].Rate != 20 || p[2].Dur != 120*time.Second {
		t.Errorf("api-mixed c50 phases %+v", p)
	}
	soak, _ := Select("overnight-soak__api-mixed")
	if soak[0].Duration() != 6*time.Hour {
		t.Errorf("soak lasts %v, want 6h", soak[0].Duration())
	}
}

func TestScaled(t *testing.T) {
	s, _ := Select("crash-recovery__mid-load__api-mixed")
	tests := []struct {
		f       float64
		phases  []time.Duration
		restart time.Duration
	}{
		{1, []time.Duration{60 * time.Second, 180 * time.Second, 120 * time.Second, 60 * time.Second}, 120 * time.Second},
		{0.25, []time.Duration{15 * time.Second, 45 * time.Second, 30 * time.Second, 15 * time.Second}, 30 * time.Second},
		{0.01, []time.Duration{10 * time.Second, 10 * time.Second, 10 * time.Second, 5 * time.Second}, 5 * time.Second},
	}
	for _, tt := range tests {
		got := s[0].Scaled(tt.f, MinLoadedPhase, MinIdlePhase, MinRestart)
		for i, p := range got.Phases {
			if p.Dur != tt.phases[i] {
				t.Errorf("scale %g phase %s: %v, want %v", tt.f, p.Label, p.Dur, tt.phases[i])
			}
		}
		if got.RestartAt != tt.restart {
			t.Errorf("scale %g restart %v, want %v", tt.f, got.RestartAt, tt.restart)
		}
	}
}

// The runner, end to end at a tiny scale in a child process on memstore:
// samples arrive, the emitter holds its rate, the report is complete.
func TestRunScenarioTiny(t *testing.T) {
	s, _ := Select("api-mixed__fleet-c20")
	var progress bytes.Buffer
	r, err := RunScenario(context.Background(), s[0], Options{Scale: 0.01, Store: "memory", MinLoaded: 2 * time.Second, MinIdle: time.Second,
		MinRestart: time.Second, Progress: &progress, Machine: MachineInfo()})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Samples) < 3 {
		t.Errorf("%d samples", len(r.Samples))
	}
	if r.Totals.SeedAttempts == 0 || r.Totals.RunsCompleted == 0 || r.Durations.Count == 0 {
		t.Errorf("empty totals: %+v", r.Totals)
	}
	for _, p := range r.Phases {
		if p.NominalRate > 0 && p.AchievedRate < 0.9*p.NominalRate {
			t.Errorf("phase %s achieved %.2f/s of %.2f/s", p.Label, p.AchievedRate, p.NominalRate)
		}
	}
	if r.Totals.SeedAdmitted != r.Totals.SeedAttempts {
		t.Errorf("api-mixed drops nothing: %+v", r.Totals)
	}
	if !strings.Contains(progress.String(), "api-mixed__fleet-c20") {
		t.Error("no progress line")
	}
	text := report.Text(r)
	for _, want := range []string{"Post-Mortem Report", "Seed Admission By Event", "webhook:received", "P95 Trend"} {
		if !strings.Contains(text, want) {
			t.Errorf("text report lacks %q", want)
		}
	}
}

// The runner's restart path, end to end on SQLite: each scheduled kill
// SIGKILLs the child, a new child resumes on the same database after the
// last acknowledged seed, and the report counts every restart with its
// recovery figures.
func TestRunScenarioRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts child processes for about 15 s")
	}
	scn := Scenario{ID: "restarts", Label: "Restarts", Family: "api-mixed", Kind: "recovery", Visibility: "internal",
		Concurrency: 20, Retry: RetrySpec{Max: 2, Base: 100 * time.Millisecond},
		Phases: []Phase{{Label: "load", Rate: 20, Dur: 12 * time.Second}, {Label: "cool-down", Dur: 2 * time.Second}}}
	kills := []time.Duration{4 * time.Second, 9 * time.Second}
	r, err := RunScenario(context.Background(), scn, Options{Scale: 1, Store: "sqlite", DBDir: t.TempDir(), Kills: kills, Machine: MachineInfo()})
	if err != nil {
		t.Fatal(err)
	}
	if r.Totals.Restarts != len(kills) || r.Recovery == nil || len(r.Recovery.Kills) != len(kills) {
		t.Fatalf("%d restarts, recovery %+v; want %d", r.Totals.Restarts, r.Recovery, len(kills))
	}
	if r.Recovery.KilledAtS < kills[0].Seconds() || r.Recovery.Kills[1].AtS < kills[1].Seconds() {
		t.Errorf("kills at %+v, scheduled at %v", r.Recovery.Kills, kills)
	}
	restarts := 0
	for _, s := range r.Samples {
		if s.Restart {
			restarts++
		}
	}
	if restarts > len(kills) {
		t.Errorf("%d samples marked as the first after a restart, want at most %d", restarts, len(kills))
	}
	if r.Totals.SeedAdmitted == 0 || r.Totals.RunsCompleted == 0 {
		t.Errorf("totals %+v", r.Totals)
	}
}

// The real-browser scraper, end to end at a tiny scale in a child process:
// pages are read in Chromium from the benchmark's own site, and the report
// accounts for them and for the browsers' memory.
func TestBrowserScenarioTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Chromium")
	}
	if _, err := browser.FindChromium(); err != nil {
		t.Skip("no Chromium (apt-get install chromium)")
	}
	scn := Scenario{ID: "browser-tiny", Label: "Browser tiny", Family: "scraper-browser", Kind: "benchmark", Visibility: "internal",
		Concurrency: 10, Scraper: &Scraper{Cap: 2, Weight: 30}, Browser: &BrowserPool{MaxBrowsers: 1, TabsPerBrowser: 2},
		Retry:  RetrySpec{Max: 1, Base: 100 * time.Millisecond},
		Phases: []Phase{{Label: "load", Rate: 4, Dur: 4 * time.Second}, {Label: "cool-down", Dur: time.Second}}}
	r, err := RunScenario(context.Background(), scn, Options{Scale: 1, Store: "memory", Machine: MachineInfo()})
	if err != nil {
		t.Fatal(err)
	}
	b := r.Browser
	if b == nil || b.Pages == 0 || b.PeakRSSBytes <= 0 || b.PeakPSSBytes <= 0 || b.PeakPSSBytes > b.PeakRSSBytes || b.Starts < 1 || b.P95Ms <= 0 || b.MaxBrowsers != 1 || b.TabsPerBrowser != 2 {
		t.Fatalf("browser account %+v", b)
	}
	var scrapes int64
	for _, e := range r.ByEvent {
		if e.Event == "page:scrape-requested" {
			scrapes = e.Attempted
			if e.Dropped != b.Dropped {
				t.Errorf("dropped %d by event, %d in the browser account", e.Dropped, b.Dropped)
			}
		}
	}
	if b.Pages+b.PageErrors > scrapes*2 || scrapes == 0 {
		t.Errorf("%d reads, %d failed, for %d scrape requests (one retry each at most)", b.Pages, b.PageErrors, scrapes)
	}
	text := report.Text(r)
	if !strings.Contains(text, "Browser Pool (Chromium, 1×2 tabs)") || !strings.Contains(text, "Peak browser mem") {
		t.Errorf("text report lacks the browser pool:\n%s", text)
	}
}
