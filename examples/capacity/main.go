// Capacity measures what the engine does on this machine: throughput of
// no-op, one-effect and chained runs, emit latency, bytes written per run,
// memory with 10,000 in-flight handlers, and recovery after kill -9 with a
// 100,000-run backlog. Each measurement runs in a fresh child process, so
// its memory and I/O counters are its own; the table shows the median of
// -reps repetitions beside the TypeScript engine's figures
// (@yellatech/engine 0.14.5, the median of 3 repetitions on a quiet machine
// of the same kind, measured on 2026-11-30; "—" where it has none). The
// end-to-end measurements (e2e.go: admission inside the window) are also
// shown as a fraction of the floor (floor_sqlite.go), the minimal durable
// work of the design, measured in the same run.
//
//	go run ./examples/capacity              # everything, 3 reps
//	go run ./examples/capacity -only noop-backlog,emit-seq -reps 5
//	go run ./examples/capacity -json results.json
//
// With -store postgres (and -pg-url, default $YELLA_PG_URL) it measures the
// engine on PostgreSQL instead: no-op, one-effect and 2-stage chain drains
// with 1, 2 and 4 engine processes on one schema, each beside the
// PostgreSQL floor measured in the same run (floor.go: the least durable
// work of this design, batched as the engine batches), and sequential emit
// latency; with the server's WAL, rows and bytes per run, and where the
// server spent its time (pgprofile.go: statement execution per run and
// WAL flushes, fuller on a server started with the settings it names):
//
//	YELLA_PG_SETTINGS="-c shared_preload_libraries=pg_stat_statements -c track_wal_io_timing=on" .ci/postgres  # prints the exports
//	go run ./examples/capacity -store postgres -reps 3
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"
)

// result is what a child reports.
type result struct {
	Name        string  `json:"name"`
	Runs        int     `json:"runs"`
	Seconds     float64 `json:"seconds"`
	PerSec      float64 `json:"per_sec"`
	KBPerRun    float64 `json:"kb_written_per_run"`
	MaxRSSMB    float64 `json:"max_rss_mb"`
	P50us       float64 `json:"p50_us,omitempty"`
	P99us       float64 `json:"p99_us,omitempty"`
	MaxUs       float64 `json:"max_us,omitempty"`
	CmdsPerTx   float64 `json:"cmds_per_tx,omitempty"`
	FirstRunMs  float64 `json:"first_run_ms,omitempty"`
	InFlightRSS float64 `json:"inflight_rss_mb,omitempty"`
	CPUSeconds  float64 `json:"cpu_seconds,omitempty"` // user+system CPU in the window
	Note        string  `json:"note,omitempty"`
	// PostgreSQL measurements.
	Procs       int     `json:"engine_processes,omitempty"`
	WALPerRun   float64 `json:"wal_bytes_per_run,omitempty"`
	RowsPerRun  float64 `json:"rows_per_run,omitempty"`
	BytesPerRun float64 `json:"bytes_per_run,omitempty"`
	OfFloor     float64 `json:"fraction_of_floor,omitempty"`
	// Server is where the PostgreSQL server spent its time (pgprofile.go).
	Server *serverProfile `json:"server,omitempty"`
}

// measurement describes one figure and, in seed, the TypeScript engine's
// value for it.
type measurement struct {
	name, what, unit string
	seed             string
	run              func(cfg childConfig) (result, error)
}

var measurements = []measurement{
	{"noop-backlog", "no-op runs, 20,000 admitted then drained, c50, SQLite", "runs/s", "—", noopBacklog},
	{"noop-live", "no-op runs, 8 concurrent emitters, first emit → drained, c50, SQLite", "runs/s", "—", noopLive},
	{"noop-seq", "no-op runs, one sequential emitter (the TypeScript engine's method), c50, SQLite", "runs/s", "3,488", noopSeq},
	{"effect-backlog", "one effect per run, 20,000 admitted then drained, c50, SQLite", "runs/s", "—", effectBacklog},
	{"effect-live", "one effect per run, 8 concurrent emitters, c50, SQLite", "runs/s", "—", effectLive},
	{"effect-seq", "one effect per run, one sequential emitter, c50, SQLite", "runs/s", "2,899", effectSeq},
	{"chain-backlog", "2-stage chain, 10,000 roots admitted then drained, c50, SQLite", "runs/s", "—", chainBacklog},
	{"chain-seq", "2-stage chain, 10,000 roots, one sequential emitter, c50, SQLite", "runs/s", "3,205", chainSeq},
	{"emit-seq", "emit admission, 10,000 sequential calls, SQLite", "emits/s", "14,433 (p50 33.8 µs, p99 366 µs)", emitSeq},
	{"noop-memory", "no-op runs, one sequential emitter, c50, in-memory store", "runs/s", "10,481", noopMemory},
	{"emit-memory", "emit admission, 10,000 sequential calls, in-memory store", "emits/s", "136,713 (p50 4.6 µs, p99 29 µs)", emitMemory},
	{"inflight-10k", "10,000 in-flight handlers that each sleep 5 s, c10000, SQLite", "RSS MB", "—", inflight},
	{"recovery-100k", "kill -9 with a 100,000-run backlog, restart: first resumed run and drained", "ms", "30,070 ms to all terminal (lease-bound)", nil},
}

// pgMeasurements are the measurements of -store postgres: each workload's
// floor first, then the engine with 1, 2 and 4 processes, so each engine
// figure is shown as a fraction of the floor measured just before it.
var pgMeasurements = func() []measurement {
	var ms []measurement
	whats := map[string]string{"noop": "no-op runs", "effect": "one effect per run", "chain": "2-stage chain"}
	for _, w := range []string{"noop", "effect", "chain"} {
		n := "the runs"
		if w == "chain" {
			n = "the roots (half the runs)"
		}
		ms = append(ms, measurement{"floor-" + w, fmt.Sprintf("the PostgreSQL floor: %s, %s admitted then drained", whats[w], n), "runs/s", "", func(childConfig) (result, error) {
			return pgMeasure("floor", w, 1)
		}})
		if w == "noop" {
			ms = append(ms, measurement{"cols-noop", "DIAGNOSTIC (not an engine): the floor's no-op work on its own table and index with the engine's run columns, admitted then drained", "runs/s", "floor-noop", func(childConfig) (result, error) {
				return pgMeasure("cols", w, 1)
			}})
		}
		if w == "noop" || w == "effect" {
			ms = append(ms, measurement{"schema-" + w, fmt.Sprintf("DIAGNOSTIC (not an engine): the floor's %s work on the engine's tables and indexes, admitted then drained", map[string]string{"noop": "no-op", "effect": "one-effect"}[w]), "runs/s", "floor-" + w, func(childConfig) (result, error) {
				return pgMeasure("schema", w, 1)
			}})
		}
		for _, p := range []int{1, 2, 4} {
			ms = append(ms, measurement{fmt.Sprintf("%s-%dp", w, p), fmt.Sprintf("%s, %s admitted then drained by %d engine process(es), PostgreSQL", whats[w], n, p), "runs/s", "floor-" + w, func(childConfig) (result, error) {
				return pgMeasure("engine", w, p)
			}})
		}
		// The engine's live heap in these drains is about 1 MB, so at the
		// default GOGC it collects every few MB allocated, dozens of times
		// a second; the diagnostic shows what an application that raises
		// GOGC (or sets GOMEMLIMIT) gets.
		ms = append(ms, measurement{w + "-gc400", fmt.Sprintf("DIAGNOSTIC: as %s-1p, the engine's process run with GOGC=400", w), "runs/s", "floor-" + w, func(childConfig) (result, error) {
			return pgMeasure("engine", w, 1, "GOGC=400")
		}})
		// End to end, admission inside the window, as a user pays it.
		ms = append(ms, measurement{"floor-e2e-" + w, fmt.Sprintf("the PostgreSQL floor end to end: %s, %s inserted 500 a command through its writer while it drains, first insert to last completion", whats[w], n), "runs/s", "", func(childConfig) (result, error) {
			return pgMeasure("floore2e", w, 1)
		}})
		if w == "noop" {
			ms = append(ms, measurement{"schema-e2e-noop", "DIAGNOSTIC (not an engine): the floor's no-op work on the engine's tables and indexes end to end, the runs inserted 500 a command while it drains", "runs/s", "floor-e2e-noop", func(childConfig) (result, error) {
				return pgMeasure("schemae2e", w, 1)
			}})
		}
		ms = append(ms, measurement{"e2e-" + w + "-1p", fmt.Sprintf("%s end to end: %s emitted with EmitBatch of 500 to 1 running engine process, first emit to last completion, PostgreSQL", whats[w], n), "runs/s", "floor-e2e-" + w, func(childConfig) (result, error) {
			return pgMeasure("enginee2e", w, 1)
		}})
		sq := map[string]string{"noop": "noop-backlog", "effect": "effect-backlog", "chain": "chain-backlog"}[w]
		ms = append(ms, measurement{"sqlite-" + w, fmt.Sprintf("%s, the same drain on the SQLite file store (one process, c50; KB written per run instead of WAL)", whats[w]), "runs/s", "", func(childConfig) (result, error) {
			return runChild(sq)
		}})
	}
	ms = append(ms, measurement{"emit-seq", "emit admission, 2,000 sequential calls, PostgreSQL", "emits/s", "", func(childConfig) (result, error) {
		return pgMeasure("emit", "noop", 1)
	}})
	return ms
}()

type childConfig struct {
	DB string `json:"db"`
	N  int    `json:"n"`
}

func main() {
	if len(os.Args) > 2 && os.Args[1] == "-child" {
		child(os.Args[2], os.Args[3:])
		return
	}
	reps := flag.Int("reps", 3, "repetitions per measurement (the median is shown)")
	only := flag.String("only", "", "comma-separated measurements to run (default all)")
	jsonOut := flag.String("json", "", "also write every result to this JSON file")
	list := flag.Bool("list", false, "list the measurements")
	storeKind := flag.String("store", "sqlite", "the store measured: sqlite (with the in-memory figures) or postgres")
	flag.StringVar(&pgURL, "pg-url", os.Getenv("YELLA_PG_URL"), "the PostgreSQL server of -store postgres (a connection string; default $YELLA_PG_URL); use a server of its own: its WAL is measured")
	flag.IntVar(&pgRuns, "pg-runs", pgRuns, "runs per PostgreSQL drain (-store postgres)")
	flag.Parse()
	switch *storeKind {
	case "sqlite":
	case "postgres":
		if pgURL == "" {
			fatal(fmt.Errorf("-store postgres needs -pg-url (or $YELLA_PG_URL)"))
		}
		if pgRuns < 100 {
			fatal(fmt.Errorf("-pg-runs must be at least 100"))
		}
		measurements = pgMeasurements
	default:
		fatal(fmt.Errorf("-store must be sqlite or postgres, got %q", *storeKind))
	}
	if *list {
		for _, m := range measurements {
			fmt.Printf("%-15s %s\n", m.name, m.what)
		}
		return
	}
	if *reps < 1 {
		fatal(fmt.Errorf("-reps must be at least 1"))
	}
	selected := map[string]bool{}
	for _, n := range strings.Split(*only, ",") {
		if n = strings.TrimSpace(n); n != "" {
			selected[n] = true
		}
	}
	for n := range selected {
		if b := baseFor[n]; b != "" {
			selected[b] = true // the limiter's cost is measured against the same run
			n = b
		}
		if f := floorFor[n]; f != "" {
			selected[f] = true // a ratio is only ever to a floor of the same run
		}
		if find(n) == nil {
			fatal(fmt.Errorf("unknown measurement %q (see -list)", n))
		}
	}
	fmt.Println(machine())
	if *storeKind == "postgres" {
		runPG(selected, *reps, *jsonOut)
		return
	}
	var all []result
	type row struct {
		m   measurement
		med result
	}
	var rows []row
	for _, m := range measurements {
		if len(selected) > 0 && !selected[m.name] {
			continue
		}
		var rs []result
		for rep := 0; rep < *reps; rep++ {
			var r result
			var err error
			switch m.name {
			case "recovery-100k":
				r, err = recovery()
			case "recovery-1k":
				r, err = recovery1k()
			default:
				r, err = runChild(m.name)
			}
			if err != nil {
				fatal(fmt.Errorf("%s: %w", m.name, err))
			}
			fmt.Fprintf(os.Stderr, "  %s rep %d: %s\n", m.name, rep+1, brief(m, r))
			rs = append(rs, r)
		}
		all = append(all, rs...)
		rows = append(rows, row{m, median(rs)})
	}
	meds := map[string]result{}
	for _, r := range rows {
		meds[r.m.name] = r.med
	}
	fmt.Printf("\n%-19s | %-46s | %-42s | %-26s | %s\n", "measurement", "Yella for Go (median)", "vs the floor, same run", "TypeScript engine", "what")
	fmt.Println(strings.Repeat("-", 190))
	for _, r := range rows {
		fmt.Printf("%-19s | %-46s | %-42s | %-26s | %s\n", r.m.name, brief(r.m, r.med), vsFloor(r.m.name, meds), r.m.seed, r.m.what)
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(map[string]any{"machine": machine(), "reps": *reps, "results": all}, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			fatal(err)
		}
	}
}

func find(name string) *measurement {
	for i := range measurements {
		if measurements[i].name == name {
			return &measurements[i]
		}
	}
	return nil
}

func brief(m measurement, r result) string {
	if s, ok := briefExtra(m, r); ok {
		return s
	}
	switch {
	case m.name == "recovery-100k":
		return fmt.Sprintf("first run %.0f ms, drained %.0f ms", r.FirstRunMs, r.Seconds*1000)
	case m.name == "inflight-10k":
		return fmt.Sprintf("%.0f MB RSS with 10,000 in flight", r.InFlightRSS)
	case r.Procs > 0 || r.WALPerRun > 0:
		s := fmt.Sprintf("%.0f %s, %.0f B WAL/run, %.1f rows/run, %.0f B/run", r.PerSec, m.unit, r.WALPerRun, r.RowsPerRun, r.BytesPerRun)
		if r.P50us > 0 {
			s += fmt.Sprintf(", p50 %.0f µs, p99 %.0f µs", r.P50us, r.P99us)
		}
		return s
	case r.P50us > 0:
		return fmt.Sprintf("%.0f %s (p50 %.1f µs, p99 %.0f µs)", r.PerSec, m.unit, r.P50us, r.P99us)
	}
	return fmt.Sprintf("%.0f %s, %.1f KB/run, %.0f MB RSS", r.PerSec, m.unit, r.KBPerRun, r.MaxRSSMB)
}

// median takes, field by field, the result whose main figure is the median.
func median(rs []result) result {
	sorted := append([]result(nil), rs...)
	key := func(r result) float64 {
		switch {
		case r.FirstRunMs > 0:
			return r.FirstRunMs
		case r.InFlightRSS > 0:
			return r.InFlightRSS
		}
		return r.PerSec
	}
	sort.Slice(sorted, func(i, j int) bool { return key(sorted[i]) < key(sorted[j]) })
	return sorted[len(sorted)/2]
}

func runChild(name string) (result, error) {
	dir, err := os.MkdirTemp("", "yella-capacity-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command(os.Args[0], "-child", name, dir+"/cap.db")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return result{}, err
	}
	var r result
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "{") {
			err = json.Unmarshal(sc.Bytes(), &r)
		}
	}
	return r, err
}

func machine() string {
	mem := "?"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb)
		mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("machine: %s, %d CPUs (nproc), %s RAM, %s/%s, %s, %s",
		host, runtime.NumCPU(), mem, runtime.GOOS, runtime.GOARCH, runtime.Version(), time.Now().UTC().Format(time.RFC3339))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "capacity:", err)
	os.Exit(1)
}
