package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// PGCapacity is a capacity run on PostgreSQL: the JSON that
// `go run ./examples/capacity -store postgres -json FILE` writes, with the
// medians of its repetitions.
type PGCapacity struct {
	Machine string `json:"machine"`
	Server  string `json:"server"`
	Command string `json:"command"`
	Reps    int    `json:"reps"`
	// RunsPerDrain is the runs each drain measured (a chain's: its roots
	// and their follow-ups); 0 in runs that did not record it.
	RunsPerDrain int        `json:"runs_per_drain"`
	Medians      []PGResult `json:"medians"`
	file         string     // the JSON's file name
}

// PGResult is one measurement of a PGCapacity run.
type PGResult struct {
	Name        string  `json:"name"`
	Runs        int     `json:"runs"`
	PerSec      float64 `json:"per_sec"`
	KBPerRun    float64 `json:"kb_written_per_run"`
	P50us       float64 `json:"p50_us"`
	P99us       float64 `json:"p99_us"`
	Procs       int     `json:"engine_processes"`
	WALPerRun   float64 `json:"wal_bytes_per_run"`
	RowsPerRun  float64 `json:"rows_per_run"`
	BytesPerRun float64 `json:"bytes_per_run"`
	OfFloor     float64 `json:"fraction_of_floor"`
}

// LoadPGCapacity reads the newest postgres-*.json capacity run in dir (by
// name: they are named by date); nil if there is none.
func LoadPGCapacity(dir string) (*PGCapacity, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "postgres-*.json"))
	if len(files) == 0 {
		return nil, nil
	}
	sort.Strings(files)
	b, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		return nil, err
	}
	var c PGCapacity
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", files[len(files)-1], err)
	}
	c.file = filepath.Base(files[len(files)-1])
	return &c, nil
}

// postgres writes the PostgreSQL section: the capacity run's table, each
// engine figure beside the floor measured in the same run and SQLite's
// figure for the same drain.
func (p *page) postgres() {
	c := p.pg
	if c == nil {
		p.pgScenarios(true)
		return
	}
	w := p.w
	by := map[string]PGResult{}
	for _, r := range c.Medians {
		by[r.Name] = r
	}
	base := path.Join(p.reportsRel, "..", "capacity", c.file)
	w("## PostgreSQL")
	w("")
	w("The engine on the PostgreSQL store (`store/pgstore`), several engine processes sharing one schema, each with fleet")
	w("concurrency 50: a backlog admitted, then drained. Each engine figure is a fraction of the **floor** measured in the same")
	w("run on the same server: the least durable work of this design in a few dozen lines (examples/capacity/floor.go): each run")
	w("inserted, claimed with `FOR UPDATE SKIP LOCKED` in claims sized as the engine's, completed by an update fenced on its epoch,")
	w("one writer committing up to 256 commands per transaction; an effect recorded as started before its body and completed")
	w("with its run; a chain's stage 2 inserted with stage 1's completion. WAL is the server's `pg_current_wal_lsn` difference")
	w("over the drain; rows and bytes are the schema's tables afterwards (`pg_total_relation_size`). SQLite is the same drain")
	w("on the SQLite file store in one process (bytes written per run instead of WAL), in the same run.")
	w("")
	w("- %s", strings.TrimPrefix(c.Machine, "machine: "))
	w("- %s", strings.TrimPrefix(c.Server, "server: "))
	drain := ""
	if c.RunsPerDrain > 0 {
		drain = fmt.Sprintf(", %d runs a drain", c.RunsPerDrain)
	}
	w("- `%s`, medians of %d repetitions%s: [json](%s) / [txt](%s)", c.Command, c.Reps, drain, base, strings.TrimSuffix(base, ".json")+".txt")
	w("")
	w("| Drain | Floor | 1 engine process | 2 processes | 4 processes | WAL per run (floor / engine) | Rows, bytes per run (engine) | SQLite, one process |")
	w("|---|---|---|---|---|---|---|---|")
	names := map[string]string{"noop": "no-op runs", "effect": "one effect per run", "chain": "2-stage chain"}
	for _, wl := range []string{"noop", "effect", "chain"} {
		f, ok := by["floor-"+wl]
		if !ok {
			continue
		}
		cells := []string{names[wl], fmt.Sprintf("%.0f runs/s", f.PerSec)}
		for _, n := range []int{1, 2, 4} {
			if e, ok := by[fmt.Sprintf("%s-%dp", wl, n)]; ok {
				cells = append(cells, fmt.Sprintf("%.0f runs/s (**%.0f%%**)", e.PerSec, 100*e.OfFloor))
			} else {
				cells = append(cells, "—")
			}
		}
		e := by[wl+"-1p"]
		cells = append(cells, fmt.Sprintf("%.0f B / %.0f B", f.WALPerRun, e.WALPerRun), fmt.Sprintf("%.1f rows, %.0f B", e.RowsPerRun, e.BytesPerRun))
		if s, ok := by["sqlite-"+wl]; ok {
			cells = append(cells, fmt.Sprintf("%.0f runs/s, %.1f KB written", s.PerSec, s.KBPerRun))
		} else {
			cells = append(cells, "—")
		}
		w("| %s |", strings.Join(cells, " | "))
	}
	w("")
	var e2e [][]string
	for _, wl := range []string{"noop", "effect", "chain"} {
		f, okf := by["floor-e2e-"+wl]
		e, oke := by["e2e-"+wl+"-1p"]
		if okf && oke {
			e2e = append(e2e, []string{names[wl], fmt.Sprintf("%.0f runs/s", f.PerSec), fmt.Sprintf("%.0f runs/s (**%.0f%%**)", e.PerSec, 100*e.OfFloor),
				fmt.Sprintf("%.0f B / %.0f B", f.WALPerRun, e.WALPerRun)})
		}
	}
	if len(e2e) > 0 {
		w("End to end, as a user pays it: nothing admitted beforehand, the window from the first admission to the last completion,")
		w("the runs (a chain's roots) admitted in batches of 500 one after another while one engine process drains them")
		w("(`EmitBatch` to the running engine; the floor inserts them through its writer), in the same run:")
		w("")
		w("| Workload | Floor end to end | 1 engine process end to end | WAL per run (floor / engine) |")
		w("|---|---|---|---|")
		for _, cells := range e2e {
			w("| %s |", strings.Join(cells, " | "))
		}
		w("")
	}
	var gc []string
	for _, wl := range []string{"noop", "effect", "chain"} {
		if e, ok := by[wl+"-gc400"]; ok {
			gc = append(gc, fmt.Sprintf("%s %.0f runs/s (**%.0f%%**)", names[wl], e.PerSec, 100*e.OfFloor))
		}
	}
	if len(gc) > 0 {
		w("One engine process run with `GOGC=400` (a diagnostic: the engine's live heap in these drains is about 1 MB, so at the")
		w("default `GOGC=100` it collects every few MB allocated, dozens of times a second): %s.", strings.Join(gc, ", "))
		w("")
	}
	if e, ok := by["emit-seq"]; ok {
		w("Sequential `Emit` (the engine not started, each emit its own commit): %.0f emits/s, p50 %.0f µs, p99 %.0f µs, %.0f B of WAL each.",
			e.PerSec, e.P50us, e.P99us, e.WALPerRun)
		w("")
	}
	p.pgScenarios(false)
}

// pgScenarios writes the public scenarios run on PostgreSQL (one engine
// process, a fresh schema each), beside the same scenario on SQLite;
// heading says whether the section's title is still to be written.
func (p *page) pgScenarios(heading bool) {
	ids := make([]string, 0, len(p.pgRuns))
	for id := range p.pgRuns {
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return
	}
	sort.Slice(ids, func(i, j int) bool { return naturalLess(ids[i], ids[j]) })
	w := p.w
	if heading {
		w("## PostgreSQL")
		w("")
	}
	w("### The scenarios on PostgreSQL")
	w("")
	w("The same scenarios with the engine on `store/pgstore` (one engine process, a fresh schema per scenario; the kill drills")
	w("are skipped), at the scale each names; SQLite is the same scenario's report above, at its own scale.")
	w("")
	w("| Scenario | Emit rate achieved | Throughput (avg / loaded) | p50 / p95 / p99 | Peak RSS | Dropped | Retries | Dead | Fenced | SQLite: throughput, p95 | Reports |")
	w("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, id := range ids {
		r := p.pgRuns[id]
		t := r.Totals
		sq := "not run"
		if s := p.latest[id]; s != nil {
			sq = fmt.Sprintf("%.0f runs/s, %.0f ms%s", s.Totals.ThroughputLoad, s.Durations.P95Ms, scaleNote(s))
		}
		w("| %s%s | %.1f%% | %.0f / %.0f runs/s | %.0f / %.0f / %.0f ms | %.0f MB | %d | %d | %d | %d | %s | %s |",
			r.Scenario.Label, scaleNote(r), 100*float64(t.SeedAttempts)/max(t.SeedNominal, 1), t.ThroughputAvg, t.ThroughputLoad,
			r.Durations.P50Ms, r.Durations.P95Ms, r.Durations.P99Ms, float64(r.Memory.PeakRSSBytes)/(1<<20),
			t.SeedDropped, t.Retries, t.DeadLetters, t.Fenced, sq, link(r, p.reportsRel))
	}
	w("")
}

// naturalLess orders scenario ids as people read them: runs of digits
// compare as numbers, so "fleet-c50" comes before "fleet-c200".
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

// digits is the length of s's leading run of ASCII digits.
func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
