package yella

import (
	"testing"
	"time"
)

func TestLatestTick(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		spec     string
		loc      *time.Location
		from, to string
		want     string // "" for none
	}{
		{"*/15 * * * *", time.UTC, "2026-11-30T12:00:00Z", "2026-11-30T12:59:59Z", "2026-11-30T12:45:00Z"},
		{"*/15 * * * *", time.UTC, "2026-11-30T12:01:00Z", "2026-11-30T12:14:59Z", ""},
		{"0 9 * * *", time.UTC, "2026-11-30T09:00:00Z", "2026-11-30T09:00:00Z", "2026-11-30T09:00:00Z"}, // both ends count
		{"0 9 * * *", paris, "2026-11-30T00:00:00Z", "2026-12-01T23:00:00Z", "2026-12-01T08:00:00Z"},
		{"30 2 * * *", paris, "2026-03-29T00:00:00Z", "2026-03-29T12:00:00Z", ""}, // 02:30 does not exist that night
		{"@every 90s", time.UTC, "2026-11-30T12:00:00Z", "2026-11-30T12:02:59Z", "2026-11-30T12:01:30Z"},
		{"@every 90s", time.UTC, "2026-11-30T12:01:31Z", "2026-11-30T12:02:59Z", ""},
	} {
		spec, err := parseCron(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := latestTick(spec, at(tc.from), at(tc.to), tc.loc)
		if w := tc.want; (w == "") == ok || (ok && !got.Equal(at(w))) {
			t.Errorf("%s in %s, [%s, %s]: %v %v, want %q", tc.spec, tc.loc, tc.from, tc.to, got, ok, w)
		}
	}
}

// BenchmarkScheduleNext: the cost of finding a tick, paid once per tick
// (and per CatchUp window at start): microseconds, next to the admission
// it precedes.
func BenchmarkScheduleNext(b *testing.B) {
	spec, err := cronParser.Parse("*/15 9-17 * * 1-5")
	if err != nil {
		b.Fatal(err)
	}
	t := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for b.Loop() {
		t = spec.Next(t)
	}
}
