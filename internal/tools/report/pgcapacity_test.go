package report

import (
	"strings"
	"testing"
)

func TestNaturalLess(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"api-mixed__fleet-c50", "api-mixed__fleet-c200", true},
		{"api-mixed__fleet-c200", "api-mixed__fleet-c50", false},
		{"api-mixed__fleet-c20", "api-mixed__fleet-c50", true},
		{"scraper__c1", "scraper__c10", true},
		{"scraper__c10", "scraper__c5", false},
		{"a", "b", true},
		{"a", "a", false},
		{"a", "a1", true},
		{"c007", "c8", true},
		{"c8", "c007", false},
	} {
		if got := naturalLess(tc.a, tc.b); got != tc.want {
			t.Errorf("naturalLess(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestPGCapacityEndToEnd: the benchmark page shows the end-to-end
// figures of a capacity run beside their floor, a workload without both
// not at all, and no end-to-end table for a run that has none.
func TestPGCapacityEndToEnd(t *testing.T) {
	run := &PGCapacity{Machine: "machine: m", Server: "server: s", Command: "c", Reps: 3, RunsPerDrain: 100000, file: "postgres-x.json", Medians: []PGResult{
		{Name: "floor-noop", PerSec: 20000, WALPerRun: 450},
		{Name: "noop-1p", PerSec: 14000, WALPerRun: 720, OfFloor: 0.7},
		{Name: "floor-e2e-noop", PerSec: 10000, WALPerRun: 600},
		{Name: "e2e-noop-1p", PerSec: 7500, WALPerRun: 1300, OfFloor: 0.75},
		{Name: "floor-e2e-chain", PerSec: 9000, WALPerRun: 700}, // no engine figure
	}}
	p := &page{pg: run, reportsRel: "r"}
	p.postgres()
	out := p.b.String()
	for _, want := range []string{
		"| Workload | Floor end to end | 1 engine process end to end | WAL per run (floor / engine) |",
		"| no-op runs | 10000 runs/s | 7500 runs/s (**75%**) | 600 B / 1300 B |",
		"medians of 3 repetitions, 100000 runs a drain:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "| 2-stage chain | 9000 runs/s") {
		t.Errorf("page shows a workload without its engine figure:\n%s", out)
	}

	run.Medians = run.Medians[:2]
	p = &page{pg: run, reportsRel: "r"}
	p.postgres()
	if out := p.b.String(); strings.Contains(out, "end to end") {
		t.Errorf("page shows an end-to-end table for a run without one:\n%s", out)
	}
}
