// Command pgbloat measures what a long steady load does to the PostgreSQL
// store's tables with retention on: one engine process runs one-effect
// runs admitted under idempotency keys at a fixed rate, retention deletes
// completed runs and their keys after -retention, and every -sample the
// tool records each table's heap, index and TOAST sizes, live and dead
// tuples, HOT updates and autovacuum runs. It prints a text report (and
// -json writes the samples) comparing the sizes once retention has reached
// its steady state (-steady after the start) with the sizes at the end:
// growth past the steady state is bloat.
//
//	eval "$(.ci/postgres)"
//	go run ./internal/tools/pgbloat -duration 30m -rate 300 -json bloat.json > bloat.txt
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/pgstore"
)

// table is one table's footprint at a sample.
type table struct {
	Name        string `json:"name"`
	HeapBytes   int64  `json:"heap_bytes"`
	IndexBytes  int64  `json:"index_bytes"`
	ToastBytes  int64  `json:"toast_bytes"`
	Live        int64  `json:"live_tuples"`
	Dead        int64  `json:"dead_tuples"`
	Updates     int64  `json:"updates"`
	HOTUpdates  int64  `json:"hot_updates"`
	Autovacuums int64  `json:"autovacuums"`
}

// sample is the state of the schema at one time.
type sample struct {
	At        time.Duration `json:"at_ns"`
	Emitted   int64         `json:"emitted"`
	Completed int64         `json:"completed"`
	Pruned    int64         `json:"pruned"`
	Tables    []table       `json:"tables"`
}

func (s sample) total() (heap, index int64) {
	for _, t := range s.Tables {
		heap += t.HeapBytes + t.ToastBytes
		index += t.IndexBytes
	}
	return heap, index
}

func main() {
	url := flag.String("pg-url", os.Getenv("YELLA_PG_URL"), "the PostgreSQL database (default $YELLA_PG_URL)")
	duration := flag.Duration("duration", 30*time.Minute, "how long the load runs")
	rate := flag.Int("rate", 300, "runs admitted per second")
	retention := flag.Duration("retention", 2*time.Minute, "retention of completed runs and of idempotency keys")
	steady := flag.Duration("steady", 5*time.Minute, "when retention has reached its steady state: sizes then are the baseline")
	every := flag.Duration("sample", time.Minute, "how often sizes are sampled")
	jsonOut := flag.String("json", "", "write the samples as JSON to this file")
	tableSettings := flag.String("table-settings", "", "storage parameters set on the tables runs, effects, timeline and pruned_keys before the load (e.g. autovacuum_vacuum_scale_factor=0.02)")
	flag.Parse()
	if *url == "" {
		fail(`no database: pass -pg-url or set YELLA_PG_URL (eval "$(.ci/postgres)" starts a throwaway one)`)
	}
	if *rate <= 0 || *duration <= 0 || *steady >= *duration {
		fail("-rate and -duration must be positive and -steady shorter than -duration")
	}
	if err := run(*url, *duration, *rate, *retention, *steady, *every, *jsonOut, *tableSettings); err != nil {
		fail("%v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pgbloat: "+format+"\n", args...)
	os.Exit(1)
}

func run(url string, duration time.Duration, rate int, retention, steady, every time.Duration, jsonOut, tableSettings string) error {
	ctx := context.Background()
	opts := pgstore.Options{Schema: fmt.Sprintf("bloat_%d", time.Now().UnixNano())}
	st, err := pgstore.Open(ctx, url, opts)
	if err != nil {
		return err
	}
	defer func() {
		st.Close()
		pgstore.DropSchema(context.Background(), url, opts)
	}()
	if tableSettings != "" {
		for _, t := range []string{"runs", "effects", "timeline", "pruned_keys"} {
			if _, err := st.Pool().Exec(ctx, "ALTER TABLE "+st.Schema()+"."+t+" SET ("+tableSettings+")"); err != nil {
				return fmt.Errorf("-table-settings on %s: %w", t, err)
			}
		}
	}
	eng, err := yella.New(yella.Config{Store: st, Concurrency: 50, Retention: retention, KeyRetention: retention})
	if err != nil {
		return err
	}
	eng.Register(yella.Process{Name: "work", On: "order", Run: func(c *yella.Ctx) yella.Result {
		v, err := yella.Effect(c, "charge", func(context.Context) (int, error) { return 1, nil })
		if err != nil {
			return c.Fail(err)
		}
		return c.OK(v)
	}})
	if err := eng.Start(ctx); err != nil {
		return err
	}
	defer eng.Stop(context.Background())

	var emitted atomic.Int64
	stop := make(chan struct{})
	emitErr := make(chan error, 1)
	go func() { emitErr <- emit(ctx, eng, rate, &emitted, stop) }()

	start := time.Now()
	var samples []sample
	take := func() error {
		s, err := measure(ctx, st.Pool(), st.Schema())
		if err != nil {
			return err
		}
		m, err := eng.Metrics(ctx)
		if err != nil {
			return err
		}
		s.At, s.Emitted, s.Completed, s.Pruned = time.Since(start), emitted.Load(), m.Totals.Completed, m.Totals.Pruned
		samples = append(samples, s)
		heap, index := s.total()
		fmt.Fprintf(os.Stderr, "%6s emitted %d completed %d pruned %d: heap %s, indexes %s\n",
			s.At.Round(time.Second), s.Emitted, s.Completed, s.Pruned, mb(heap), mb(index))
		return nil
	}
	if err := take(); err != nil {
		return err
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	end := time.After(duration)
loop:
	for {
		select {
		case <-tick.C:
			if err := take(); err != nil {
				return err
			}
		case err := <-emitErr:
			return fmt.Errorf("emit: %w", err)
		case <-end:
			break loop
		}
	}
	close(stop)
	if err := <-emitErr; err != nil {
		return fmt.Errorf("emit: %w", err)
	}
	if err := take(); err != nil {
		return err
	}
	var version string
	if err := st.Pool().QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return err
	}
	settings, err := autovacuumSettings(ctx, st.Pool())
	if err != nil {
		return err
	}
	command := fmt.Sprintf("go run ./internal/tools/pgbloat -duration %s -rate %d -retention %s -steady %s -sample %s",
		duration, rate, retention, steady, every)
	if tableSettings != "" {
		command += fmt.Sprintf(" -table-settings %q", tableSettings)
		settings += "; tables runs, effects, timeline, pruned_keys: " + tableSettings
	}
	report(os.Stdout, samples, steady, command, version, settings)
	if jsonOut != "" {
		b, err := json.MarshalIndent(samples, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(jsonOut, b, 0o644)
	}
	return nil
}

// emit admits rate runs per second, each under its own idempotency key,
// from 8 emitters (one sequential emitter cannot keep a high rate: each
// emit waits for its commit), until stop is closed.
func emit(ctx context.Context, eng *yella.Engine, rate int, n *atomic.Int64, stop <-chan struct{}) error {
	const tick = 10 * time.Millisecond
	tokens := make(chan struct{}, rate)
	errc := make(chan error, 8)
	done := make(chan struct{})
	for range 8 {
		go func() {
			for {
				select {
				case <-done:
					errc <- nil
					return
				case <-tokens:
				}
				i := n.Add(1)
				if _, err := eng.Emit(ctx, "order", map[string]any{"order": i, "note": strings.Repeat("x", 64)},
					yella.IdempotencyKey(fmt.Sprintf("order-%d", i))); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	defer func() {
		close(done)
	}()
	perTick := float64(rate) * tick.Seconds()
	t := time.NewTicker(tick)
	defer t.Stop()
	var owed float64
	for {
		select {
		case <-stop:
			return nil
		case err := <-errc:
			return err
		case <-t.C:
		}
		for owed += perTick; owed >= 1; owed-- {
			select {
			case tokens <- struct{}{}:
			default: // the emitters are a second behind: the rate is not kept (the report shows the rate reached)
			}
		}
	}
}

// measure reads every table's sizes and counters in schema.
func measure(ctx context.Context, pool *pgxpool.Pool, schema string) (sample, error) {
	rows, err := pool.Query(ctx, `SELECT c.relname, pg_relation_size(c.oid), pg_indexes_size(c.oid),
			coalesce(pg_total_relation_size(c.reltoastrelid), 0),
			s.n_live_tup, s.n_dead_tup, s.n_tup_upd, s.n_tup_hot_upd, s.autovacuum_count
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_stat_user_tables s ON s.relid = c.oid
		WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY c.relname`, schema)
	if err != nil {
		return sample{}, err
	}
	defer rows.Close()
	var s sample
	for rows.Next() {
		var t table
		if err := rows.Scan(&t.Name, &t.HeapBytes, &t.IndexBytes, &t.ToastBytes, &t.Live, &t.Dead, &t.Updates, &t.HOTUpdates, &t.Autovacuums); err != nil {
			return s, err
		}
		s.Tables = append(s.Tables, t)
	}
	return s, rows.Err()
}

// autovacuumSettings reads the server's autovacuum settings, for the
// report.
func autovacuumSettings(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	rows, err := pool.Query(ctx, `SELECT name, setting FROM pg_settings
		WHERE name IN ('autovacuum', 'autovacuum_naptime', 'autovacuum_vacuum_scale_factor', 'autovacuum_vacuum_threshold',
			'autovacuum_vacuum_cost_limit', 'autovacuum_vacuum_cost_delay', 'fsync', 'synchronous_commit') ORDER BY name`)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return "", err
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, " "), rows.Err()
}

// report prints the samples and compares the steady state with the end.
func report(out *os.File, samples []sample, steady time.Duration, command, version, settings string) {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	fmt.Fprintf(out, "PostgreSQL store bloat under steady load with retention\n\n")
	fmt.Fprintf(out, "command:  %s\n", command)
	fmt.Fprintf(out, "commit:   %s\n", revision())
	fmt.Fprintf(out, "machine:  %d CPUs (%s), %s/%s; PostgreSQL %s on 127.0.0.1\n", runtime.NumCPU(), cpu, runtime.GOOS, runtime.GOARCH, version)
	fmt.Fprintf(out, "server:   %s\n", settings)
	fmt.Fprintf(out, "workload: one engine process (fleet 50), one-effect runs under idempotency keys, retention of runs and keys as in the command\n\n")

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "at\temitted\tcompleted\tpruned\theap+toast\tindexes\t")
	for _, s := range samples {
		heap, index := s.total()
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t\n", s.At.Round(time.Second), s.Emitted, s.Completed, s.Pruned, mb(heap), mb(index))
	}
	tw.Flush()

	base := samples[0]
	for _, s := range samples {
		if s.At >= steady {
			base = s
			break
		}
	}
	last := samples[len(samples)-1]
	fmt.Fprintf(out, "\nper table: at %s (steady state) → at %s (end)\n", base.At.Round(time.Second), last.At.Round(time.Second))
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "table\theap+toast\tindexes\tlive\tdead\tHOT updates\tautovacuums\t")
	byName := map[string]table{}
	for _, t := range base.Tables {
		byName[t.Name] = t
	}
	names := make([]string, 0, len(last.Tables))
	for _, t := range last.Tables {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	for _, n := range names {
		var e table
		for _, t := range last.Tables {
			if t.Name == n {
				e = t
			}
		}
		b := byName[n]
		hot := "—"
		if e.Updates > 0 {
			hot = fmt.Sprintf("%.0f%%", 100*float64(e.HOTUpdates)/float64(e.Updates))
		}
		fmt.Fprintf(tw, "%s\t%s → %s\t%s → %s\t%d → %d\t%d → %d\t%s\t%d\t\n", n,
			mb(b.HeapBytes+b.ToastBytes), mb(e.HeapBytes+e.ToastBytes), mb(b.IndexBytes), mb(e.IndexBytes),
			b.Live, e.Live, b.Dead, e.Dead, hot, e.Autovacuums)
	}
	tw.Flush()
	bh, bi := base.total()
	lh, li := last.total()
	fmt.Fprintf(out, "\ntotal: heap+toast %s → %s (%+.0f%%), indexes %s → %s (%+.0f%%), while %d more runs were admitted and %d pruned\n",
		mb(bh), mb(lh), pct(bh, lh), mb(bi), mb(li), pct(bi, li), last.Emitted-base.Emitted, last.Pruned-base.Pruned)
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }

func pct(a, b int64) float64 {
	if a == 0 {
		return 0
	}
	return 100 * float64(b-a) / float64(a)
}

// revision is the commit the tool was built from, as Go records it.
func revision() string {
	rev, dirty := "unknown", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, st := range bi.Settings {
			switch st.Key {
			case "vcs.revision":
				rev = st.Value
			case "vcs.modified":
				if st.Value == "true" {
					dirty = " (with uncommitted changes)"
				}
			}
		}
	}
	if rev == "unknown" { // go run stamps no VCS settings: ask git
		if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
			rev = strings.TrimSpace(string(out))
			if st, _ := exec.Command("git", "status", "--porcelain").Output(); len(st) > 0 {
				dirty = " (with uncommitted changes)"
			}
		}
	}
	return rev + dirty
}
