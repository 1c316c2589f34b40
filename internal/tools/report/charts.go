package report

import (
	"fmt"
	"image/color"
	"os"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

var palette = []color.Color{
	color.RGBA{0x1f, 0x4e, 0x79, 0xff}, color.RGBA{0xe0, 0x8e, 0x0b, 0xff}, color.RGBA{0x2e, 0x8b, 0x57, 0xff},
	color.RGBA{0xb2, 0x22, 0x22, 0xff}, color.RGBA{0x6a, 0x5a, 0xcd, 0xff},
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.X.Min, p.Y.Min = 0, 0 // every axis starts at zero
	p.Legend.Top = true
	p.X.Tick.Marker, p.Y.Tick.Marker = cleanTicks{}, cleanTicks{}
	p.Add(plotter.NewGrid())
	return p
}

// roomForLegend raises the Y axis so that a legend of n entries, drawn in
// the top corner, does not cover the data.
func roomForLegend(p *plot.Plot, n int) {
	if p.Y.Max > 0 {
		p.Y.Max *= 1.1 + 0.12*float64(n)
	}
}

// cleanTicks are gonum's default ticks labelled without trailing zeros
// ("500", not "500.00").
type cleanTicks struct{}

// Ticks implements plot.Ticker.
func (cleanTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 12, 64) // 12 digits: 0.3, not 0.30000000000000004
		}
	}
	return ts
}

// saveTiles writes plots side by side as one SVG.
func saveTiles(path string, plots ...*plot.Plot) error {
	w, h := vg.Length(len(plots))*4.2*vg.Inch, 3.4*vg.Inch
	img := vgsvg.New(w, h)
	dc := draw.New(img)
	row := make([]*plot.Plot, len(plots))
	copy(row, plots)
	canvases := plot.Align([][]*plot.Plot{row}, draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 4}, dc)
	for i, p := range row {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = img.WriteTo(f)
	return err
}

// bars adds one bar series per name over the categories.
func bars(p *plot.Plot, categories []string, series []string, values [][]float64) error {
	width := vg.Points(14)
	for i, name := range series {
		b, err := plotter.NewBarChart(plotter.Values(values[i]), width)
		if err != nil {
			return err
		}
		b.Color = palette[i%len(palette)]
		b.LineStyle.Width = 0
		b.Offset = vg.Length(i-len(series)/2) * width
		if len(series)%2 == 0 {
			b.Offset += width / 2
		}
		p.Add(b)
		p.Legend.Add(name, b)
	}
	p.NominalX(categories...)
	p.X.Min = -0.5
	p.X.Max = float64(len(categories)) - 0.5
	return nil
}

func line(p *plot.Plot, name string, i int, xs, ys []float64) error {
	pts := make(plotter.XYs, len(xs))
	for j := range xs {
		pts[j].X, pts[j].Y = xs[j], ys[j]
	}
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = palette[i%len(palette)]
	l.Width = vg.Points(1.5)
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// peakPhaseRate is the mean sampled runs/s during the scenario's busiest
// phase.
func peakPhaseRate(r *Report) (offeredSeeds, achievedRuns float64) {
	best := ""
	for _, p := range r.Scenario.Phases {
		if p.Rate > offeredSeeds {
			offeredSeeds, best = p.Rate, p.Label
		}
	}
	var sum float64
	var n int
	for _, s := range r.Samples {
		if s.Phase == best {
			sum += s.RunsPerSec
			n++
		}
	}
	if n > 0 {
		achievedRuns = sum / float64(n)
	}
	return offeredSeeds, achievedRuns
}

// runsPerSeed is terminal runs per admitted seed.
func runsPerSeed(r *Report) float64 {
	if r.Totals.SeedAdmitted == 0 {
		return 0
	}
	return float64(r.Totals.RunsCompleted+r.Totals.RunsErrored) / float64(r.Totals.SeedAdmitted)
}

// Charts writes the four charts into dir from the latest reports; a chart
// whose scenarios have no report is left out.
func Charts(latest map[string]*Report, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, c := range []struct {
		name string
		draw func(latest map[string]*Report) ([]*plot.Plot, error)
	}{
		{"throughput-by-concurrency.svg", throughputChart},
		{"scraper-cap.svg", scraperChart},
		{"queue-under-stress.svg", queueChart},
		{"storage-over-soak.svg", storageChart},
	} {
		plots, err := c.draw(latest)
		if err != nil {
			return nil, err
		}
		if len(plots) == 0 {
			continue
		}
		path := dir + "/" + c.name
		if err := saveTiles(path, plots...); err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		written = append(written, path)
	}
	sort.Strings(written)
	return written, nil
}

// barPlot is a bar chart of one bar series per name over the categories,
// its Y axis up to yMax when yMax > 0, with room for the legend.
func barPlot(title, x, y string, categories, series []string, values [][]float64, yMax float64) (*plot.Plot, error) {
	p := newPlot(title, x, y)
	if err := bars(p, categories, series, values); err != nil {
		return nil, err
	}
	if yMax > 0 {
		p.Y.Max = yMax
	}
	roomForLegend(p, len(series))
	return p, nil
}

// throughputChart is the API mix's offered and achieved runs/s at its peak
// phase, beside the saturation throughput, by fleet concurrency.
func throughputChart(latest map[string]*Report) ([]*plot.Plot, error) {
	concs := []int{20, 50, 200}
	var cats []string
	offered, achieved, capacity := make([]float64, 3), make([]float64, 3), make([]float64, 3)
	have := false
	for i, c := range concs {
		cats = append(cats, fmt.Sprintf("c%d", c))
		if r := latest[fmt.Sprintf("api-mixed__fleet-c%d", c)]; r != nil {
			seeds, runs := peakPhaseRate(r)
			offered[i], achieved[i] = seeds*runsPerSeed(r), runs
			have = true
		}
		if r := latest[fmt.Sprintf("capacity__api-mixed__fleet-c%d", c)]; r != nil && r.Capacity != nil {
			capacity[i] = r.Capacity.RunsPerSec
		}
	}
	if !have {
		return nil, nil
	}
	a, err := barPlot("API mixed: peak phase", "fleet concurrency", "runs/s", cats, []string{"offered", "achieved"}, [][]float64{offered, achieved}, 0)
	if err != nil {
		return nil, err
	}
	b, err := barPlot("Capacity (zero-latency handlers)", "fleet concurrency", "runs/s", cats, []string{"saturation"}, [][]float64{capacity}, 0)
	if err != nil {
		return nil, err
	}
	return []*plot.Plot{a, b}, nil
}

// scraperChart is the bounded scraper's peak RSS and share of scrape
// events admitted, by cap.
func scraperChart(latest map[string]*Report) ([]*plot.Plot, error) {
	caps := []int{1, 5, 10}
	rssMB, admitted := make([]float64, 3), make([]float64, 3)
	var cats []string
	have := false
	for i, c := range caps {
		cats = append(cats, fmt.Sprintf("cap %d", c))
		if r := latest[fmt.Sprintf("scraper-bounded__fleet-c40__scraper-c%d", c)]; r != nil {
			rssMB[i] = float64(r.Memory.PeakRSSBytes) / (1 << 20)
			for _, e := range r.ByEvent {
				if e.Event == "page:scrape-requested" && e.Attempted > 0 {
					admitted[i] = 100 * float64(e.Admitted) / float64(e.Attempted)
				}
			}
			have = true
		}
	}
	if !have {
		return nil, nil
	}
	a, err := barPlot("Scraper cap vs peak RSS", "scraper cap", "peak RSS (MB)", cats, []string{"peak RSS"}, [][]float64{rssMB}, 0)
	if err != nil {
		return nil, err
	}
	b, err := barPlot("Scraper cap vs admissions", "scraper cap", "scrape events admitted (%)", cats, []string{"admitted"}, [][]float64{admitted}, 100)
	if err != nil {
		return nil, err
	}
	return []*plot.Plot{a, b}, nil
}

// queueChart is the queue depth (idle and running runs) over time under
// bursts and degraded downstreams.
func queueChart(latest map[string]*Report) ([]*plot.Plot, error) {
	q := newPlot("Queue depth under stress", "time (s)", "queued + running runs")
	n := 0
	for _, id := range []string{"burst-recovery__fleet-c50", "burst-recovery__scraper-capped", "degraded-downstream__api-mixed", "degraded-downstream__scraper-capped"} {
		if r := latest[id]; r != nil {
			var xs, ys []float64
			for _, s := range r.Samples {
				xs, ys = append(xs, s.ElapsedS), append(ys, float64(s.Idle+s.Running))
			}
			if err := line(q, r.Scenario.Label, n, xs, ys); err != nil {
				return nil, err
			}
			n++
		}
	}
	if n == 0 {
		return nil, nil
	}
	roomForLegend(q, n)
	return []*plot.Plot{q}, nil
}

// storageChart is the database and WAL sizes over the soaks.
func storageChart(latest map[string]*Report) ([]*plot.Plot, error) {
	d := newPlot("Storage over the soak", "time (h)", "size (MB)")
	n := 0
	for _, id := range []string{"overnight-soak__api-mixed", "overnight-soak__scraper-bounded"} {
		if r := latest[id]; r != nil {
			var xs, db, wal []float64
			for _, s := range r.Samples {
				xs = append(xs, s.ElapsedS/3600)
				db, wal = append(db, float64(s.DBBytes)/(1<<20)), append(wal, float64(s.WALBytes)/(1<<20))
			}
			short := strings.TrimPrefix(r.Scenario.Label, "Overnight soak, ")
			if err := line(d, "DB, "+short, n, xs, db); err != nil {
				return nil, err
			}
			if err := line(d, "WAL, "+short, n+1, xs, wal); err != nil {
				return nil, err
			}
			n += 2
		}
	}
	if n == 0 {
		return nil, nil
	}
	roomForLegend(d, n)
	return []*plot.Plot{d}, nil
}
