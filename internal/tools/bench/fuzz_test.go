package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

// FuzzParseScale: a scale is accepted only when it is a finite number in
// (0, 1000]; every scenario scaled by an accepted value keeps each phase
// at or above its minimum and within a second of its scaled length.
func FuzzParseScale(f *testing.F) {
	for _, s := range []string{"1", "0.1", "0", "-1", "NaN", "Inf", "+Inf", "1e309", " 2 ", "0x1p-2", "1000", "1000.5", "", "1_0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseScale(s)
		if err != nil {
			if !strings.Contains(err.Error(), "invalid scale") {
				t.Fatalf("unclear error for %q: %v", s, err)
			}
			return
		}
		if !(v > 0) || v > 1000 || math.IsInf(v, 0) {
			t.Fatalf("ParseScale(%q) accepted %v", s, v)
		}
		for _, sc := range Catalogue() {
			out := sc.Scaled(v, MinLoadedPhase, MinIdlePhase, MinRestart)
			for i, p := range out.Phases {
				lo := MinIdlePhase
				if p.Rate > 0 {
					lo = MinLoadedPhase
				}
				want := max(time.Duration(float64(sc.Phases[i].Dur)*v), lo)
				if p.Dur < lo || (v != 1 && (p.Dur-want > time.Second || want-p.Dur > time.Second)) {
					t.Fatalf("%s phase %d scaled by %v: %v (from %v, minimum %v)", sc.ID, i, v, p.Dur, sc.Phases[i].Dur, lo)
				}
			}
		}
	})
}

// FuzzSelect: any target resolves to scenarios or to an error that names
// it and the groups.
func FuzzSelect(f *testing.F) {
	for _, s := range append([]string{"", "api-mixed__fleet-c20", "public ", "ALL", "capacity"}, Groups...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		out, err := Select(target)
		if err != nil {
			if len(out) != 0 || !strings.Contains(err.Error(), target) || !strings.Contains(err.Error(), "groups:") {
				t.Fatalf("Select(%q): %v, %d scenarios", target, err, len(out))
			}
			return
		}
		if len(out) == 0 {
			t.Fatalf("Select(%q) returned nothing and no error", target)
		}
	})
}
