package storetest

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
)

// The suite must cover at least 150 behaviours of spec §12 (numbered 1–388).
func TestCoverage(t *testing.T) {
	cov := Coverage()
	for n := range cov {
		if n < 1 || n > 388 {
			t.Errorf("case names spec behaviour %d, which does not exist", n)
		}
	}
	if len(cov) < 150 {
		t.Errorf("suite covers %d behaviours of spec §12, want at least 150", len(cov))
	}
	names := map[string]bool{}
	for _, c := range Cases() {
		if names[c.Name] {
			t.Errorf("duplicate case name %s", c.Name)
		}
		names[c.Name] = true
	}
	t.Logf("%d cases cover %d behaviours of spec §12", len(Cases()), len(cov))
}

// TestCoverageTable keeps testdata/coverage.md, the human-readable table of
// which case checks which behaviour, in step with the cases. Regenerate it
// with UPDATE_GOLDEN=1.
func TestCoverageTable(t *testing.T) {
	var b strings.Builder
	cov := Coverage()
	nums := make([]int, 0, len(cov))
	for n := range cov {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	fmt.Fprintf(&b, "# Conformance coverage of spec §12\n\n")
	fmt.Fprintf(&b, "Generated from the cases in store/storetest (`UPDATE_GOLDEN=1 go test ./store/storetest`).\n")
	fmt.Fprintf(&b, "%d behaviours are covered by %d cases; every store runs all of them.\n\n", len(nums), len(Cases()))
	fmt.Fprintf(&b, "| § 12 item | cases |\n|---|---|\n")
	for _, n := range nums {
		fmt.Fprintf(&b, "| %d | %s |\n", n, strings.Join(cov[n], ", "))
	}
	fmt.Fprintf(&b, "\n## Cases whose semantics differ from the original\n\n")
	for _, c := range Cases() {
		if c.Note != "" {
			fmt.Fprintf(&b, "- **%s**: %s\n", c.Name, c.Note)
		}
	}
	got := b.String()
	const path = "testdata/coverage.md"
	if os.Getenv("UPDATE_GOLDEN") != "" {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_GOLDEN=1)", err)
	}
	if string(want) != got {
		t.Errorf("%s is stale; run UPDATE_GOLDEN=1 go test ./store/storetest", path)
	}
}
