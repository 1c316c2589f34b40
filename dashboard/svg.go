package dashboard

import (
	"strconv"
	"strings"
	"time"

	"github.com/yella-go/yella"
)

// Charts are computed here as plain geometry (numbers and short labels)
// and drawn by the templates, so every text in an SVG goes through
// html/template's escaping like the rest of the page.

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// sparkline is a small line chart of one series per bucket.
type sparkline struct {
	W, H  int
	Area  string // path of the filled series
	Line  string // path of the main line
	Line2 string // path of a secondary series (failures), if any
	Peak  string // the largest value, formatted
	Last  string // the latest complete bucket, formatted
	Empty bool
	Desc  string // for screen readers
}

const sparkW, sparkH, sparkPad = 300, 56, 3

// peakOf is the largest of values (0 for none).
func peakOf(values []float64) float64 {
	peak := 0.0
	for _, v := range values {
		peak = max(peak, v)
	}
	return peak
}

// spark builds the path of values scaled to peak, and with area the path
// of the region under it. A negative value is a hole in the line (no data
// in that bucket).
func spark(values []float64, peak float64, area bool) (line, fill string) {
	n := len(values)
	if n == 0 {
		return "", ""
	}
	x := func(i int) float64 {
		if n == 1 {
			return sparkW / 2
		}
		return float64(i) * sparkW / float64(n-1)
	}
	y := func(v float64) float64 {
		if peak <= 0 {
			return sparkH - sparkPad
		}
		return sparkH - sparkPad - min(v/peak, 1)*(sparkH-2*sparkPad)
	}
	var b strings.Builder
	pen := false
	for i, v := range values {
		if v < 0 {
			pen = false
			continue
		}
		if pen {
			b.WriteString("L")
		} else {
			b.WriteString("M")
			pen = true
		}
		lone := !drawn(values, i-1) && !drawn(values, i+1)
		if lone { // a point without neighbours is drawn as a short dash
			b.WriteString(f1(max(x(i)-2, 0)) + "," + f1(y(v)) + "H" + f1(min(x(i)+2, sparkW)))
			continue
		}
		b.WriteString(f1(x(i)) + "," + f1(y(v)))
	}
	line = b.String()
	if area && line != "" {
		fill = "M0," + f1(sparkH) + "L" + strings.TrimPrefix(line, "M") + "L" + f1(x(n-1)) + "," + f1(sparkH) + "Z"
	}
	return line, fill
}

// drawn reports whether values[i] exists and is drawn.
func drawn(values []float64, i int) bool { return i >= 0 && i < len(values) && values[i] >= 0 }

// throughputLine charts finished runs (completed or failed) per bucket,
// with failures as a second line on the same scale.
func throughputLine(rep yella.ObservabilityReport) sparkline {
	done := make([]float64, len(rep.Buckets))
	failed := make([]float64, len(rep.Buckets))
	for i, b := range rep.Buckets {
		done[i] = float64(b.Runs.Completed + b.Runs.Failed)
		failed[i] = float64(b.Runs.Failed)
	}
	peak := peakOf(done)
	sp := sparkline{W: sparkW, H: sparkH, Empty: peak == 0}
	sp.Line, sp.Area = spark(done, peak, true)
	if peakOf(failed) > 0 {
		sp.Line2, _ = spark(failed, peak, false)
	}
	per := "per " + coarse(rep.BucketSize)
	sp.Peak = strconv.FormatFloat(peak, 'f', 0, 64) + " " + per
	if n := len(done); n > 0 { // the current bucket, still filling
		sp.Last = strconv.FormatFloat(done[n-1], 'f', 0, 64)
	}
	sp.Desc = "Runs finished " + per + ", peak " + sp.Peak
	return sp
}

// p95Line charts the 95th percentile run duration per bucket; buckets
// without finished runs are holes.
func p95Line(rep yella.ObservabilityReport) sparkline {
	vals := make([]float64, len(rep.Buckets))
	var peak time.Duration
	var last time.Duration = -1
	seen := false
	for i, b := range rep.Buckets {
		vals[i] = -1
		if d := b.Runs.Duration; d.Count > 0 {
			vals[i] = float64(d.P95)
			peak = max(peak, d.P95)
			last, seen = d.P95, true
		}
	}
	sp := sparkline{W: sparkW, H: sparkH, Empty: !seen}
	sp.Line, _ = spark(vals, float64(peak), false)
	sp.Peak = human(peak)
	if last >= 0 {
		sp.Last = human(last)
	}
	sp.Desc = "95th percentile run duration per " + coarse(rep.BucketSize) + ", peak " + sp.Peak
	return sp
}

// clip shortens s to n runes with an ellipsis.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
