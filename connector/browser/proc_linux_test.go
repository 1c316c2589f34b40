//go:build linux

package browser

import "testing"

func TestParseStatParent(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want int
		ok   bool
	}{
		{"1234 (chromium) S 1200 1234 1200 0 -1", 1200, true},
		{"1234 (a) 1 2 (b) R 77 1 1", 77, true}, // a name with spaces, digits and parentheses
		{"1234 (x)) Z 0 0 0", 0, true},
		{"1234 (x) S", 0, false},
		{"1234 (x) S -5", 0, false},
		{"1234 x S 1", 0, false},
		{"", 0, false},
	} {
		got, ok := parseStatParent([]byte(tc.stat))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%q: %d %v, want %d %v", tc.stat, got, ok, tc.want, tc.ok)
		}
	}
}

// The parent is read after the last ')' whatever a process names itself:
// no input makes the parser panic or accept a name's digits.
func FuzzParseStatParent(f *testing.F) {
	for _, s := range []string{"1234 (chromium) S 1200 1234", "1 (a) b) S 2 3", "9 () R 0", ")", "("} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		pp, ok := parseStatParent(b)
		if ok && pp < 0 {
			t.Fatalf("%q: negative parent %d", b, pp)
		}
		if !ok && pp != 0 {
			t.Fatalf("%q: parent %d with ok false", b, pp)
		}
	})
}
