package dashboard

import (
	"runtime"
	"strings"
	"testing"
)

// TestPrettyJSONBounded: indenting a deep, wide document stops at what is
// shown; it once built the whole indented text first (1.4 GB and 12 s for
// this 1 MB payload).
func TestPrettyJSONBounded(t *testing.T) {
	raw := strings.Repeat("[", 190) + strings.TrimSuffix(strings.Repeat("0,", 500000), ",") + strings.Repeat("]", 190)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	v := prettyJSON([]byte(raw))
	runtime.ReadMemStats(&after)
	if !v.Truncated || v.Invalid || len(v.Text) > maxJSONShown || !strings.HasPrefix(v.Text, "[\n  [\n") {
		t.Fatalf("truncated %v, invalid %v, %d characters", v.Truncated, v.Invalid, len(v.Text))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
		t.Fatalf("%d MB allocated to show %d KB", alloc>>20, maxJSONShown>>10)
	}
}
