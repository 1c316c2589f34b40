package report

import (
	"fmt"
	"sort"
	"strings"
)

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }

// sampleLine is one row of the per-sample table.
func sampleLine(s Sample) string {
	return fmt.Sprintf("%5.0fs │ %-12s │ q: %5d idle %4d run │ done: %7d │ %7.1f run/s │ p95: %6.0fms │ rss: %6.1f MB │ wal: %5.1f MB",
		s.ElapsedS, s.Phase, s.Idle, s.Running, s.Completed, s.RunsPerSec, s.P95Ms, float64(s.RSSBytes)/(1<<20), float64(s.WALBytes)/(1<<20))
}

// Text renders the report: header, one line per sample, then the
// post-mortem, laid out like the TypeScript engine's benchmark reports so
// that the two read side by side. Percentiles are true percentiles, not
// bucket bounds.
func Text(r *Report) string {
	var l lines
	rule := strings.Repeat("═", 96)
	textHeader(&l, r, rule)
	textSamples(&l, r)
	l.w("Post-Mortem Report [%s]", r.Scenario.Label)
	l.w("%s", rule)
	textTotals(&l, r)
	textAdmission(&l, r)
	textResources(&l, r)
	textRecovery(&l, r)
	textTrend(&l, r)
	return l.b.String()
}

// lines builds a text one line at a time.
type lines struct{ b strings.Builder }

// w writes one line: format and args as in fmt.Printf.
func (l *lines) w(format string, args ...any) { fmt.Fprintf(&l.b, format+"\n", args...) }

// textHeader writes the scenario, the machine, the settings and the
// phases.
func textHeader(l *lines, r *Report, rule string) {
	w := l.w
	s := r.Scenario
	w("Yella Engine Benchmark  [%s]", s.Label)
	w("%s", rule)
	w("Scenario      %s", s.ID)
	w("Family        %s (%s, %s)", s.Family, s.Kind, s.Visibility)
	w("Description   %s", s.Description)
	w("Fleet conc.   %d", s.Concurrency)
	if s.ScraperCap > 0 {
		w("Scraper cap   %d (drop policy)", s.ScraperCap)
	}
	var dur float64
	for _, p := range s.Phases {
		dur += p.Seconds
	}
	w("Duration      %.0fs across %d phases", dur, len(s.Phases))
	w("Seed attempts ~%.0f", r.Totals.SeedNominal)
	m := r.Machine
	w("Machine       %s, %d CPUs, %d MB RAM, %s/%s, kernel %s, %s", m.CPUModel, m.CPUs, m.MemoryBytes>>20, m.OS, m.Arch, m.Kernel, m.GoVersion)
	w("Store         %s", r.Store)
	if r.Scale != 1 {
		w("Scale         %g", r.Scale)
	}
	if r.Commit != "" {
		w("Commit        %s", r.Commit)
	}
	w("Retry policy  %s", s.Retry)
	if s.RestartAtS > 0 {
		w("Restart       kill -9 at %.0fs, restart on the same database", s.RestartAtS)
	}
	if len(s.Notes)+len(r.Notes) > 0 {
		w("Notes")
		for _, n := range append(append([]string(nil), s.Notes...), r.Notes...) {
			w("  - %s", n)
		}
	}
	w("Phases")
	for _, p := range s.Phases {
		mode := ""
		if p.Mode != "" {
			mode = "  [" + p.Mode + "]"
		}
		w("  %-12s %4g events/s × %.0fs%s", p.Label, p.Rate, p.Seconds, mode)
	}
	w("%s", rule)
	w("")
}

// textSamples writes one line per sample, marking restarts and the drain.
func textSamples(l *lines, r *Report) {
	w := l.w
	w("  t s │ phase        │ queue                 │ completed     │ throughput    │ p95          │ rss           │ wal")
	w("%s", strings.Repeat("─", 112))
	for i, smp := range r.Samples {
		if smp.Restart {
			w("── restart after kill -9; new engine process on the same database ──")
		}
		if i == len(r.Samples)-1 {
			w("Draining remaining queue...")
		}
		w("%s", sampleLine(smp))
	}
	w("")
}

// textTotals writes the run's totals.
func textTotals(l *lines, r *Report) {
	w := l.w
	t := r.Totals
	w("Totals")
	w("  Duration          %.0f s", t.DurationS)
	if t.SeedNominal > 0 {
		w("  Seed attempts     %d (nominal %.0f, %.1f%% achieved)", t.SeedAttempts, t.SeedNominal, 100*float64(t.SeedAttempts)/t.SeedNominal)
	} else {
		w("  Seed attempts     %d (saturating: as fast as admission allows)", t.SeedAttempts)
	}
	w("  Seed admitted     %d", t.SeedAdmitted)
	w("  Seed dropped      %d", t.SeedDropped)
	w("  Runs completed    %d", t.RunsCompleted)
	w("  Runs errored      %d (dead letters %d, fenced %d)", t.RunsErrored, t.DeadLetters, t.Fenced)
	w("  Retries           %d", t.Retries)
	w("  Effect replays    %d", r.Effects.Replayed)
	w("  Restarts          %d", t.Restarts)
	w("  SQLite errors     %d", t.SQLiteErrors)
	w("  Internal errors   %d", t.InternalErrors)
	w("  Throughput        %.0f runs/s avg (%.0f runs/s while loaded)", t.ThroughputAvg, t.ThroughputLoad)
	if c := r.Capacity; c != nil {
		w("  Saturation        %.0f runs/s (%.0f seeds/s) at fleet c%d", c.RunsPerSec, c.SeedsPerSec, c.Concurrency)
	}
	w("")
}

// textAdmission writes the emit rate achieved per phase and the seeds
// admitted per event.
func textAdmission(l *lines, r *Report) {
	w := l.w
	w("Phases (offered vs achieved emit rate)")
	for _, p := range r.Phases {
		switch {
		case p.NominalRate > 0:
			w("  %-12s %6.2f/s nominal  %6.2f/s achieved (%5.1f%%)  %6d attempts in %.0fs", p.Label, p.NominalRate, p.AchievedRate, 100*p.AchievedRate/p.NominalRate, p.Attempts, p.Seconds)
		case p.Attempts > 0:
			w("  %-12s    max nominal  %6.0f/s achieved          %6d attempts in %.0fs", p.Label, p.AchievedRate, p.Attempts, p.Seconds)
		default:
			w("  %-12s   idle          %6d attempts in %.0fs", p.Label, p.Attempts, p.Seconds)
		}
	}
	w("")
	w("Seed Admission By Event")
	evs := append([]Admitted(nil), r.ByEvent...)
	sort.Slice(evs, func(i, j int) bool { return evs[i].Event < evs[j].Event })
	for _, e := range evs {
		w("  %-26s attempted %6d  admitted %6d  dropped %6d", e.Event, e.Attempted, e.Admitted, e.Dropped)
	}
	w("")
}

// textResources writes the run durations, memory and storage.
func textResources(l *lines, r *Report) {
	w := l.w
	d := r.Durations
	w("Run Duration (%d attempts; percentiles within 1%%)", d.Count)
	w("  avg %.0fms  p50 %.0fms  p95 %.0fms  p99 %.0fms  max %.0fms", d.AvgMs, d.P50Ms, d.P95Ms, d.P99Ms, d.MaxMs)
	w("")
	mem := r.Memory
	w("Memory and Storage")
	w("  Peak RSS          %s", mb(mem.PeakRSSBytes))
	w("  Final RSS         %s", mb(mem.FinalRSSBytes))
	w("  Peak Go heap      %s", mb(mem.PeakHeapBytes))
	w("  Peak queue        %d", mem.PeakQueue)
	w("  DB file           %s", mb(mem.DBBytes))
	w("  WAL file          %s (peak %s)", mb(mem.WALBytes), mb(mem.PeakWALBytes))
	if b := r.Browser; b != nil {
		w("")
		w("Browser Pool (Chromium, %d×%d tabs)", b.MaxBrowsers, b.TabsPerBrowser)
		w("  Pages read        %d (%.2f pages/s), %d failed reads", b.Pages, b.PagesPerSec, b.PageErrors)
		w("  Scrapes dropped   %d (at the per-process cap)", b.Dropped)
		w("  Page read         p50 %.0fms  p95 %.0fms  max %.0fms", b.P50Ms, b.P95Ms, b.MaxMs)
		w("  Peak browser mem  PSS %s, RSS %s (process trees; engine peak RSS %s)", mb(b.PeakPSSBytes), mb(b.PeakRSSBytes), mb(mem.PeakRSSBytes))
		w("  Browsers          %d started, %d crashed", b.Starts, b.Crashes)
	}
}

// textRecovery writes what a restart drill found, if the run had one.
func textRecovery(l *lines, r *Report) {
	w := l.w
	if rec := r.Recovery; rec != nil {
		w("")
		w("Recovery (kill -9)")
		if len(rec.Kills) > 1 {
			w("  Kills             %d, the first at %.0fs", len(rec.Kills), rec.KilledAtS)
			w("  First resumed run %.0f ms after the new process started, at worst", rec.FirstRunMs)
		} else {
			w("  Killed at         %.0fs", rec.KilledAtS)
			w("  First resumed run %.0f ms after the new process started", rec.FirstRunMs)
		}
		w("  Runs reclaimed    %d", rec.Reclaimed)
		w("  Runs lost         %d of %d acknowledged seeds", rec.Lost, rec.AckedSeeds)
		w("  Runs doubled      %d", rec.Doubled)
		w("  Effects fenced    %d", rec.Fenced)
		w("  Effects re-run    %d", rec.EffectsRerun)
		w("  integrity_check   %s", rec.IntegrityCheck)
	}
	w("")
}

// textTrend writes the p95 trend and where the report was saved.
func textTrend(l *lines, r *Report) {
	w := l.w
	w("P95 Trend (10s buckets)")
	for _, line := range p95Trend(r.Samples) {
		w("%s", line)
	}
	if r.Files.Text != "" {
		w("")
		w("Saved %s", r.Files.Text)
		w("Saved %s", r.Files.JSON)
	}
}

// p95Trend draws, per 10 s of samples, the largest sliding-window p95.
func p95Trend(samples []Sample) []string {
	type point struct{ end, p95 float64 }
	var pts []point
	for _, s := range samples {
		bucket := float64(int(s.ElapsedS/10)+1) * 10
		if n := len(pts); n > 0 && pts[n-1].end == bucket {
			pts[n-1].p95 = max(pts[n-1].p95, s.P95Ms)
			continue
		}
		pts = append(pts, point{bucket, s.P95Ms})
	}
	var top float64
	for _, p := range pts {
		top = max(top, p.p95)
	}
	var out []string
	for _, p := range pts {
		if p.p95 == 0 {
			continue
		}
		bar := int(32 * p.p95 / top)
		out = append(out, fmt.Sprintf("  %5.0fs %6.0fms %s", p.end, p.p95, strings.Repeat("▓", max(bar, 1))))
	}
	return out
}
