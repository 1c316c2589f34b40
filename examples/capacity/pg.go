package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/pgstore"
)

// PostgreSQL measurements. Each one gets a fresh schema. The parent admits
// the backlog (not timed), starts the engine processes (or the floor) as
// children on that schema, waits until each is ready, tells them all to
// go and times from there until the last one has drained; the server's
// WAL written meanwhile is the pg_current_wal_lsn difference (the whole
// server's WAL, so run it on a server of its own), and rows and bytes per
// run are the schema's tables after the drain (pg_total_relation_size:
// heap, indexes and TOAST).

var pgURL string // -pg-url

// profileOnce reports once that the server profile is left out.
var profileOnce sync.Once

// pgRuns is the number of runs (chain: roots twice this, halved) each
// PostgreSQL drain measures; pgEmits the number of sequential emits.
//
// A drain of 100,000 runs lasts 5 to 15 s on a 2-core machine. Drains of
// 20,000 (1.5 to 2.5 s) gave ratios to the floor that moved by 20 points
// or more from pair to pair, and medians below those of 50,000, 100,000
// and 200,000 runs, which agreed with each other (one effect end to end,
// one engine process: 62% of the floor, then 77%, 81% and 77%): a window
// of two seconds measures the first seconds of a drain (the first
// admission's wait, the writer's first transactions on an empty table)
// and the host's speed of that moment more than the drain.
var pgRuns, pgEmits = 100000, 2000

type pgWorkload struct {
	event string
	procs []yella.Process
}

func pgWorkloadOf(w string) pgWorkload {
	switch w {
	case "noop":
		return pgWorkload{"cap:noop", []yella.Process{{Name: "noop", On: "cap:noop", Run: noop}}}
	case "effect":
		return pgWorkload{"cap:effect", []yella.Process{{Name: "effect", On: "cap:effect", Run: oneEffect}}}
	case "chain":
		return pgWorkload{"cap:a", chainProcs}
	}
	fatal(fmt.Errorf("no workload %q", w))
	return pgWorkload{}
}

// pgMeasure runs one PostgreSQL drain: kind "engine" with procs engine
// processes, "floor", or the diagnostics "schema" (the floor's work on the
// engine's tables) and "cols" (on the floor's table with the engine's
// run columns; see floorRun). The kinds "enginee2e" and "floore2e" are
// the engine and the floor end to end, and "schemae2e" the diagnostic
// "schema" end to end: nothing is admitted before the window, which
// starts before the first admission and ends at the last completion.
func pgMeasure(kind, w string, procs int, env ...string) (result, error) {
	ctx := context.Background()
	schema := fmt.Sprintf("cap_%s_%s_%d_%d", kind, w, procs, time.Now().UnixNano()%1e9)
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return result{}, fmt.Errorf("connect to -pg-url: %w", err)
	}
	defer conn.Close(ctx)
	defer conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	runs := pgRuns
	if kind == "emit" {
		runs = pgEmits
	}
	if kind == "engine" {
		if err := pgAdmit(schema, w, runs); err != nil {
			return result{}, fmt.Errorf("admit: %w", err)
		}
	}
	var children []*pgChild
	defer func() {
		for _, c := range children {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
	}()
	for i := range procs {
		c, err := startPGChild(env, "pg-"+kind, schema, w, strconv.Itoa(runs), strconv.Itoa(i))
		if err != nil {
			return result{}, err
		}
		children = append(children, c)
	}
	for _, c := range children {
		if err := c.expect("ready"); err != nil {
			return result{}, err
		}
	}
	// The server profile is a diagnostic: a server that does not let this
	// user reset its counters gets the measurement without it.
	prof := newProfiler(ctx, conn)
	profiled := true
	if err := prof.reset(ctx, conn); err != nil {
		profiled = false
		profileOnce.Do(func() {
			fmt.Fprintf(os.Stderr, "capacity: the server profile is left out: resetting its counters: %v\n", err)
		})
	}
	wal0, err := walLSN(ctx, conn)
	if err != nil {
		return result{}, err
	}
	t0 := time.Now()
	for _, c := range children {
		io.WriteString(c.in, "go\n")
	}
	for _, c := range children {
		if err := c.expect("drained"); err != nil {
			return result{}, err
		}
	}
	el := time.Since(t0)
	// A node drains when it sees nothing claimable; another node may
	// still be finishing (or, in a chain, admitting) runs: the drain ends
	// when every run is completed.
	for want := runs; kind != "emit"; {
		var got int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+schema+".runs WHERE status = 'completed'").Scan(&got); err != nil {
			return result{}, err
		}
		if got == want {
			break
		}
		if time.Since(t0) > 10*time.Minute {
			return result{}, fmt.Errorf("%d runs completed, want %d", got, want)
		}
		time.Sleep(5 * time.Millisecond)
		el = time.Since(t0)
	}
	wal1, err := walLSN(ctx, conn)
	if err != nil {
		return result{}, err
	}
	r := result{Procs: procs, Runs: runs, Seconds: el.Seconds(), PerSec: float64(runs) / el.Seconds(), WALPerRun: float64(wal1-wal0) / float64(runs)}
	if profiled {
		if sp, err := prof.read(ctx, conn, schema, runs); err != nil {
			fmt.Fprintf(os.Stderr, "capacity: the server profile is left out: %v\n", err)
		} else {
			r.Server = &sp
		}
	}
	var cmds, batches float64
	for _, c := range children {
		io.WriteString(c.in, "stop\n")
		cr, err := c.result()
		if err != nil {
			return result{}, err
		}
		r.MaxRSSMB = max(r.MaxRSSMB, cr.MaxRSSMB)
		if kind == "emit" {
			r.P50us, r.P99us, r.MaxUs = cr.P50us, cr.P99us, cr.MaxUs
			r.Seconds, r.PerSec = cr.Seconds, float64(runs)/cr.Seconds
			continue
		}
		cmds += cr.CmdsPerTx * cr.Seconds // children report commands and batches in these two fields
		batches += cr.Seconds
	}
	children = nil
	if batches > 0 {
		r.CmdsPerTx = cmds / batches
	}
	var rows, bytes int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(sum(c.reltuples::bigint), 0), coalesce(sum(pg_total_relation_size(c.oid)), 0)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`, schema).Scan(&rows, &bytes); err != nil {
		return result{}, err
	}
	// reltuples is an estimate until ANALYZE: count exactly.
	rows = 0
	for _, t := range pgTables(ctx, conn, schema) {
		var n int64
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+schema+"."+t).Scan(&n); err != nil {
			return result{}, err
		}
		rows += n
	}
	r.RowsPerRun, r.BytesPerRun = float64(rows)/float64(runs), float64(bytes)/float64(runs)
	return r, nil
}

func pgTables(ctx context.Context, conn *pgx.Conn, schema string) []string {
	rows, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY tablename`, schema)
	if err != nil {
		return nil
	}
	ts, _ := pgx.CollectRows(rows, pgx.RowTo[string])
	return ts
}

func walLSN(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var n int64
	err := conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").Scan(&n)
	return n, err
}

// pgAdmit admits the backlog through an engine that is not started, from
// 64 concurrent emitters (so admissions share commits).
func pgAdmit(schema, w string, runs int) error {
	ctx := context.Background()
	st, err := pgstore.Open(ctx, pgURL, pgstore.Options{Schema: schema})
	if err != nil {
		return err
	}
	defer st.Close()
	wl := pgWorkloadOf(w)
	e, err := newEngine(st, fleetConc, wl.procs...)
	if err != nil {
		return err
	}
	roots := runs
	if w == "chain" {
		roots = runs / 2
	}
	if err := emitAll(e, wl.event, roots, 64); err != nil {
		return err
	}
	return e.Stop(ctx)
}

// pgChild is a child process of a PostgreSQL measurement.
type pgChild struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// startPGChild starts a child process of a PostgreSQL measurement with
// args, its environment this process's plus env (which wins).
func startPGChild(env []string, args ...string) (*pgChild, error) {
	cmd := exec.Command(os.Args[0], append([]string{"-child"}, args...)...)
	cmd.Env = append(append(os.Environ(), "YELLA_CAPACITY_PG_URL="+pgURL), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &pgChild{cmd: cmd, in: in, out: bufio.NewScanner(out)}, nil
}

func (c *pgChild) expect(line string) error {
	for c.out.Scan() {
		if c.out.Text() == line {
			return nil
		}
	}
	return fmt.Errorf("child %v ended before %q", c.cmd.Args[2:], line)
}

func (c *pgChild) result() (result, error) {
	var r result
	for c.out.Scan() {
		if strings.HasPrefix(c.out.Text(), "{") {
			err := json.Unmarshal(c.out.Bytes(), &r)
			c.in.Close()
			return r, errors.Join(err, c.cmd.Wait())
		}
	}
	c.in.Close()
	return r, errors.Join(errors.New("child sent no result"), c.cmd.Wait())
}

// pgChildMain runs a child of a PostgreSQL measurement: args are the
// kind ("pg-engine", "pg-floor", "pg-schema", "pg-cols"), schema, workload, runs, index.
func pgChildMain(kind string, args []string) {
	url := os.Getenv("YELLA_CAPACITY_PG_URL")
	schema, w := args[0], args[1]
	runs, _ := strconv.Atoi(args[2])
	stdin := bufio.NewScanner(os.Stdin)
	wait := func(line string) {
		for stdin.Scan() {
			if stdin.Text() == line {
				return
			}
		}
		os.Exit(1) // the parent went away
	}
	stopProfile := func() {}
	profile := func() {
		if dir := os.Getenv("YELLA_CAPACITY_CPUPROFILE"); dir != "" {
			f, err := os.Create(fmt.Sprintf("%s/%s-%s-%s.pprof", dir, kind, w, args[3]))
			if err != nil {
				fatal(err)
			}
			pprof.StartCPUProfile(f)
			stopProfile = func() { pprof.StopCPUProfile(); f.Close() }
		}
	}
	switch kind {
	case "pg-floor", "pg-schema", "pg-cols", "pg-floore2e", "pg-schemae2e":
		shape := strings.TrimPrefix(kind, "pg-")
		switch shape {
		case "floore2e":
			shape = "e2e"
		case "schemae2e":
			shape = "schema-e2e"
		}
		cmds, txs, err := floorRun(url, schema, w, runs, shape, func() {
			fmt.Println("ready")
			wait("go")
			profile()
		})
		stopProfile()
		if err != nil {
			fatal(err)
		}
		fmt.Println("drained")
		wait("stop")
		r := result{MaxRSSMB: maxRSSMB(), Seconds: float64(txs)}
		if txs > 0 {
			r.CmdsPerTx = float64(cmds) / float64(txs)
		}
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
	case "pg-engine", "pg-enginee2e":
		ctx := context.Background()
		st, err := pgstore.Open(ctx, url, pgstore.Options{Schema: schema})
		if err != nil {
			fatal(err)
		}
		wl := pgWorkloadOf(w)
		e, err := newEngine(st, fleetConc, wl.procs...)
		if err != nil {
			fatal(err)
		}
		fmt.Println("ready")
		wait("go")
		profile()
		s0 := st.Stats()
		if err := e.Start(ctx); err != nil {
			fatal(err)
		}
		if kind == "pg-enginee2e" {
			// Admission inside the window: batches of 500 emitted one
			// after another to the running engine, as the floor's e2e
			// shape inserts them.
			roots := runs
			if w == "chain" {
				roots = runs / 2
			}
			for i := 0; i < roots; i += 500 {
				evs := make([]yella.BatchEvent, 0, 500)
				for j := i; j < min(i+500, roots); j++ {
					evs = append(evs, yella.BatchEvent{Event: wl.event, Payload: json.RawMessage(fmt.Appendf(nil, `{"i":%d}`, j))})
				}
				if _, err := e.EmitBatch(ctx, evs); err != nil {
					fatal(err)
				}
			}
		}
		if err := e.Drain(ctx); err != nil {
			fatal(err)
		}
		stopProfile()
		s1 := st.Stats()
		fmt.Println("drained")
		wait("stop")
		if err := e.Stop(ctx); err != nil {
			fatal(err)
		}
		st.Close()
		b := s1.Batches - s0.Batches
		r := result{MaxRSSMB: maxRSSMB(), Seconds: float64(b)}
		if b > 0 {
			r.CmdsPerTx = float64(s1.Commands-s0.Commands) / float64(b)
		}
		out, _ := json.Marshal(r)
		fmt.Println(string(out))
	case "pg-emit":
		ctx := context.Background()
		st, err := pgstore.Open(ctx, url, pgstore.Options{Schema: schema})
		if err != nil {
			fatal(err)
		}
		fmt.Println("ready")
		wait("go")
		r, err := emitLatency(st, runs)
		if err != nil {
			fatal(err)
		}
		fmt.Println("drained")
		wait("stop")
		st.Close()
		r.MaxRSSMB = maxRSSMB()
		out, _ := json.Marshal(r)
		fmt.Println(string(out))
	default:
		fatal(fmt.Errorf("no child %q", kind))
	}
}

// pgServer describes the PostgreSQL server of -pg-url.
func pgServer() string {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return "server: " + err.Error()
	}
	defer conn.Close(ctx)
	var v, fsync, sc, sb, wl string
	conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'), current_setting('synchronous_commit'),
		current_setting('shared_buffers'), current_setting('wal_level')`).Scan(&v, &fsync, &sc, &sb, &wl)
	return fmt.Sprintf("server: PostgreSQL %s, fsync=%s, synchronous_commit=%s, shared_buffers=%s, wal_level=%s, on %s", v, fsync, sc, sb, wl, sanitize(pgURL))
}

// printServerProfiles prints where the server spent its time in each
// median drain (see pgprofile.go).
func printServerProfiles(ms []measurement, meds []result) {
	var first *serverProfile
	for i := 0; i < len(meds) && first == nil; i++ {
		first = meds[i].Server
	}
	if first == nil {
		return
	}
	fmt.Printf("\n%s\n", first.describe())
	fmt.Printf("\n%-12s | %11s | %13s | %8s | %s\n", "measurement", "exec µs/run", "flushes/1k run", "ms/flush", "the statements that cost the most, µs of execution per run (calls)")
	fmt.Println(strings.Repeat("-", 170))
	for i, r := range meds {
		sp := r.Server
		if sp == nil {
			continue
		}
		exec, flush := "-", "-"
		if sp.ExecUsPerRun > 0 {
			exec = fmt.Sprintf("%.1f", sp.ExecUsPerRun)
		}
		if sp.MsPerSync > 0 {
			flush = fmt.Sprintf("%.2f", sp.MsPerSync)
		}
		var top []string
		for _, t := range sp.Top {
			top = append(top, fmt.Sprintf("%s: %.1f (%d)", t.Statement, t.UsPerRun, t.Calls))
		}
		fmt.Printf("%-12s | %11s | %14.0f | %8s | %s\n", ms[i].name, exec, sp.SyncsPerKRun, flush, strings.Join(top, "; "))
	}
}

// sanitize hides a password in a connection string.
func sanitize(u string) string {
	if i := strings.Index(u, "@"); i > 0 {
		if j := strings.Index(u, "://"); j > 0 && j < i {
			return u[:j+3] + "…" + u[i:]
		}
	}
	return u
}

// runPG runs the selected PostgreSQL measurements: repetition by
// repetition, so each engine figure is compared with the floor measured
// minutes before it (the machine's load drifts); its fraction of the floor
// is the median of the repetitions' fractions.
func runPG(selected map[string]bool, reps int, jsonOut string) {
	fmt.Println(pgServer())
	fmt.Println("command: go run ./examples/capacity " + strings.Join(os.Args[1:], " "))
	gogc := os.Getenv("GOGC")
	if gogc == "" {
		gogc = "unset (100)"
	}
	fmt.Printf("runs per drain: %d; emits: %d; fleet concurrency 50 per engine process; GOGC %s\n", pgRuns, pgEmits, gogc)
	var ms []measurement
	for _, m := range measurements {
		if len(selected) == 0 || selected[m.name] {
			ms = append(ms, m)
		}
	}
	byName := map[string][]result{}
	var all []result
	for rep := 0; rep < reps; rep++ {
		for _, m := range ms {
			r, err := m.run(childConfig{})
			if err != nil {
				fatal(fmt.Errorf("%s: %w", m.name, err))
			}
			r.Name = m.name
			if f := byName[m.seed]; len(f) > rep && f[rep].PerSec > 0 {
				r.OfFloor = r.PerSec / f[rep].PerSec
			}
			fmt.Fprintf(os.Stderr, "  %s rep %d: %s", m.name, rep+1, brief(m, r))
			if r.OfFloor > 0 {
				fmt.Fprintf(os.Stderr, " (%.0f%% of the floor)", 100*r.OfFloor)
			}
			fmt.Fprintln(os.Stderr)
			byName[m.name] = append(byName[m.name], r)
			all = append(all, r)
		}
	}
	fmt.Printf("\n%-12s | %-36s | %8s | %9s | %8s | %9s | %7s | %s\n", "measurement", "median", "of floor", "WAL B/run", "rows/run", "bytes/run", "cmds/tx", "what")
	fmt.Println(strings.Repeat("-", 170))
	var meds []result
	for _, m := range ms {
		rs := byName[m.name]
		med := median(rs)
		of := ""
		if rs[0].OfFloor > 0 {
			fr := make([]float64, len(rs))
			for i, r := range rs {
				fr[i] = r.OfFloor
			}
			sort.Float64s(fr)
			med.OfFloor = fr[len(fr)/2]
			of = fmt.Sprintf("%.0f%%", 100*med.OfFloor)
		}
		meds = append(meds, med)
		fig := fmt.Sprintf("%.0f %s", med.PerSec, m.unit)
		if med.P50us > 0 {
			fig += fmt.Sprintf(", p50 %.0f µs, p99 %.0f µs", med.P50us, med.P99us)
		}
		wal := fmt.Sprintf("%.0f", med.WALPerRun)
		if strings.HasPrefix(m.name, "sqlite-") {
			wal = fmt.Sprintf("%.1f KB", med.KBPerRun)
		}
		fmt.Printf("%-12s | %-36s | %8s | %9s | %8.1f | %9.0f | %7.1f | %s\n", m.name, fig, of, wal, med.RowsPerRun, med.BytesPerRun, med.CmdsPerTx, m.what)
	}
	printServerProfiles(ms, meds)
	if jsonOut != "" {
		b, _ := json.MarshalIndent(map[string]any{"machine": machine(), "server": pgServer(), "command": "go run ./examples/capacity " + strings.Join(os.Args[1:], " "),
			"reps": reps, "runs_per_drain": pgRuns, "medians": meds, "results": all}, "", "  ")
		if err := os.WriteFile(jsonOut, b, 0o644); err != nil {
			fatal(err)
		}
	}
}
