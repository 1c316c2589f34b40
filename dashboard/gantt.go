package dashboard

import (
	"math"
	"net/url"
	"sort"
	"time"

	"github.com/yella-go/yella"
)

// The trace Gantt chart: one row per run of the chain, depth-first, with a
// light bar while the run waited in the queue and a solid bar while it ran
// (coloured by status), and the chain's gaps (a deferred run waiting for
// its approval, typically) as hatched bands. A long gap during which
// nothing else happened is collapsed to a fixed width, so a chain that
// waited a day for an approval still shows its milliseconds of work.

const (
	ganttW      = 960
	ganttLabelW = 250
	ganttRight  = 80 // room for the duration after the last bar
	ganttHead   = 34
	ganttRowH   = 30
	ganttCut    = 40 // width of a collapsed gap
	maxSpans    = 500
)

type gantt struct {
	W, H       int
	ChartX     int // left edge of the time axis
	ChartW     int
	Rows       []ganttRow
	Gaps       []ganttGap
	Ticks      []ganttTick
	Wall       time.Duration
	Hidden     int // spans beyond maxSpans, not drawn
	Collapsed  int // gaps drawn collapsed
	BottomLine int
}

type ganttRow struct {
	Y, TextY     int
	IndentX      int
	Label, Event string
	URL          string
	Status       yella.Status
	QX, QW       float64    // the run's lifetime, drawn light: waiting
	Segs         []ganttSeg // each attempt's running time, drawn solid
	DurX         float64
	Dur          string
	Title        string
	Odd          bool
}

type ganttSeg struct {
	X, W   float64
	Status yella.Status // how the attempt ended
}

// interval is one attempt's running time and how it ended; a zero To is
// still running.
type interval struct {
	From, To time.Time
	End      yella.Status
}

// attempts reads the running intervals of a run from its timeline: from
// each "running" entry to the entry after it.
func attempts(tl []yella.TimelineEntry) []interval {
	var out []interval
	for i, e := range tl {
		if e.Status != yella.StatusRunning {
			continue
		}
		iv := interval{From: e.At, End: yella.StatusRunning}
		if i+1 < len(tl) {
			iv.To, iv.End = tl[i+1].At, tl[i+1].Status
			if iv.End == yella.StatusIdle { // a retry was scheduled: the attempt failed
				iv.End = yella.StatusErrored
			}
		}
		out = append(out, iv)
	}
	return out
}

type ganttGap struct {
	X, W      float64
	Label     string
	Collapsed bool
}

type ganttTick struct {
	X     float64
	Label string
}

// timeMap maps times to x offsets along the axis, with cut intervals drawn
// ganttCut wide.
type timeMap struct {
	t0    time.Time
	cuts  [][2]time.Duration // offsets from t0, sorted
	scale float64            // px per nanosecond outside cuts
}

func (m timeMap) x(t time.Time) float64 {
	d := t.Sub(m.t0)
	x, prev := 0.0, time.Duration(0)
	for _, c := range m.cuts {
		if d <= c[0] {
			break
		}
		if d < c[1] {
			return x + float64(c[0]-prev)*m.scale + float64(d-c[0])/float64(c[1]-c[0])*ganttCut
		}
		x += float64(c[0]-prev)*m.scale + ganttCut
		prev = c[1]
	}
	return x + float64(d-prev)*m.scale
}

// offset is the inverse of x, and whether x falls inside a cut.
func (m timeMap) offset(x float64) (time.Duration, bool) {
	pos, prev := 0.0, time.Duration(0)
	for _, c := range m.cuts {
		seg := float64(c[0]-prev) * m.scale
		if x < pos+seg {
			break
		}
		if x < pos+seg+ganttCut {
			return c[0], true
		}
		pos += seg + ganttCut
		prev = c[1]
	}
	return prev + time.Duration((x-pos)/m.scale), false
}

// newGantt lays out tr at time now. runs holds the attempts of spans that
// ran more than once (read from their timelines); a span without an entry
// is drawn from its first start to its end.
func newGantt(tr yella.Trace, runs map[string][]interval, now time.Time) gantt {
	g := gantt{W: ganttW, ChartX: ganttLabelW, ChartW: ganttW - ganttLabelW - ganttRight}
	spans := tr.Spans
	if len(spans) > maxSpans {
		g.Hidden = len(spans) - maxSpans
		spans = spans[:maxSpans]
	}
	end := func(sp yella.Span) time.Time { // where a span's bars stop
		if !sp.EndedAt.IsZero() {
			return sp.EndedAt
		}
		return now
	}
	t0, t1 := tr.Start, tr.End
	for _, sp := range spans {
		if t0.IsZero() || sp.QueuedAt.Before(t0) {
			t0 = sp.QueuedAt
		}
		if e := end(sp); e.After(t1) {
			t1 = e
		}
	}
	wall := max(t1.Sub(t0), 0)
	g.Wall = wall
	m := timeMap{t0: t0}
	var cutTotal time.Duration
	for _, gp := range tr.Gaps {
		if gp.End.Sub(gp.Start) > wall/10 && quiet(spans, gp, end) {
			m.cuts = append(m.cuts, [2]time.Duration{gp.Start.Sub(t0), gp.End.Sub(t0)})
			cutTotal += gp.End.Sub(gp.Start)
		}
	}
	sort.Slice(m.cuts, func(i, j int) bool { return m.cuts[i][0] < m.cuts[j][0] })
	g.Collapsed = len(m.cuts)
	busy := max(wall-cutTotal, time.Millisecond)
	m.scale = float64(g.ChartW-len(m.cuts)*ganttCut) / float64(busy)
	x := func(t time.Time) float64 { return r1(float64(g.ChartX) + m.x(t)) }

	for i, sp := range spans {
		y := ganttHead + i*ganttRowH
		r := ganttRow{Y: y, TextY: y + 19, IndentX: 10 + min(sp.Level, 10)*12, Status: sp.Status, Odd: i%2 == 1,
			Label: clip(sp.Process, 30-min(sp.Level, 10)), Event: sp.Event, URL: "/runs/" + url.PathEscape(sp.RunID)}
		ivs, ok := runs[sp.RunID]
		if !ok && !sp.StartedAt.IsZero() {
			ivs = []interval{{From: sp.StartedAt, To: sp.EndedAt, End: sp.Status}}
		}
		r.QX = x(sp.QueuedAt)
		r.QW = r1(max(x(end(sp))-r.QX, 1))
		for _, iv := range ivs {
			to := iv.To
			if to.IsZero() {
				to = now
			}
			sx := x(iv.From)
			r.Segs = append(r.Segs, ganttSeg{X: sx, W: r1(max(x(to)-sx, 2)), Status: iv.End})
		}
		r.DurX = r1(r.QX + r.QW + 6)
		if n := len(r.Segs); n > 0 {
			r.DurX = max(r.DurX, r1(r.Segs[n-1].X+r.Segs[n-1].W+6))
		}
		queued := sinceOrZero(sp.QueuedAt, end(sp))
		if !sp.StartedAt.IsZero() {
			queued = sinceOrZero(sp.QueuedAt, sp.StartedAt)
		}
		switch {
		case len(ivs) == 0:
			r.Dur = "queued " + human(queued)
		case len(ivs) > 1:
			r.Dur = human(sp.Running) + " in " + plural(len(ivs), "attempt")
		default:
			r.Dur = human(sp.Running)
		}
		r.Title = sp.Process + " on " + sp.Event + " — " + statusLabel(sp.Status) + "; queued " +
			human(queued) + " before its first start, ran " + human(sp.Running) + " in " + plural(len(ivs), "attempt")
		g.Rows = append(g.Rows, r)
	}
	g.H = ganttHead + len(g.Rows)*ganttRowH + 8
	g.BottomLine = g.H - 8
	for _, gp := range tr.Gaps {
		gx, gw := x(gp.Start), x(gp.End)-x(gp.Start)
		cut := false
		for _, c := range m.cuts {
			cut = cut || c[0] == gp.Start.Sub(t0)
		}
		g.Gaps = append(g.Gaps, ganttGap{X: gx, W: r1(max(gw, 2)), Label: "⏸ " + human(gp.End.Sub(gp.Start)), Collapsed: cut})
	}
	for i := 0; i <= 5; i++ {
		px := float64(g.ChartW) * float64(i) / 5
		off, inCut := m.offset(px)
		if inCut {
			continue
		}
		g.Ticks = append(g.Ticks, ganttTick{X: r1(float64(g.ChartX) + px), Label: "+" + human(off)})
	}
	return g
}

// r1 rounds a coordinate to a tenth of a unit.
func r1(v float64) float64 { return math.Round(v*10) / 10 }

// quiet reports whether no span was queued or running inside the gap, so
// collapsing it hides nothing.
func quiet(spans []yella.Span, gp yella.Gap, end func(yella.Span) time.Time) bool {
	for _, sp := range spans {
		if sp.QueuedAt.Before(gp.End) && end(sp).After(gp.Start) {
			return false
		}
	}
	return true
}
