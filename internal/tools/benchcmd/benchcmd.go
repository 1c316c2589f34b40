// Package benchcmd is the benchmark command shared by "yella bench" and
// examples/benchmarks: argument parsing, the child-process hook, recovery
// verification and report writing around package bench.
package benchcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/yella-go/yella/internal/tools/bench"
	"github.com/yella-go/yella/internal/tools/crashtest"
	"github.com/yella-go/yella/internal/tools/report"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/pgstore"
	"github.com/yella-go/yella/store/sqlitestore"
)

// ChildMain runs a benchmark child process if this process is one (the
// runner re-executes the program); programs call it first in main.
func ChildMain() bool { return bench.ChildMain(openStore) }

func openStore(kind, path string) (store.Store, error) {
	switch kind {
	case "memory":
		return memstore.New(), nil
	case "postgres":
		return openPostgres(path)
	}
	return sqlitestore.Open(path, sqlitestore.Options{})
}

// openPostgres opens the PostgreSQL store of a scenario at $YELLA_PG_URL
// (set from --pg-url): its schema is named after path, the scenario's
// database file, which holds only a marker. The runner removes that file
// before each scenario, so each scenario starts on a fresh schema; the
// children of one scenario (restarts) reopen the same one.
func openPostgres(path string) (store.Store, error) {
	url := os.Getenv("YELLA_PG_URL")
	if url == "" {
		return nil, errors.New("--store postgres needs --pg-url or $YELLA_PG_URL")
	}
	h := fnv.New64a()
	h.Write([]byte(path))
	opts := pgstore.Options{Schema: fmt.Sprintf("bench_%x", h.Sum64())}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if err := pgstore.DropSchema(ctx, url, opts); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, []byte(opts.Schema+"\n"), 0o644); err != nil {
			return nil, err
		}
	}
	return pgstore.Open(ctx, url, opts)
}

// verify checks a recovery scenario's database: lost and doubled runs,
// fenced and re-run effects, integrity.
func verify(db, ledger, witness string) (report.Recovery, error) {
	rep, err := crashtest.Check(db, witness, ledger, "seed-")
	if err != nil {
		return report.Recovery{}, err
	}
	return report.Recovery{Lost: int64(len(rep.Lost)), Doubled: int64(len(rep.CompletedTwice)), Fenced: int64(rep.Fenced),
		EffectsRerun: int64(len(rep.EffectReruns)), AckedSeeds: int64(rep.Acked), IntegrityCheck: rep.Integrity}, nil
}

// Usage is the command's help text; name is how it was invoked.
func Usage(name string) string {
	return fmt.Sprintf(`usage: %[1]s list | report | <scenario or group> [flags]

  list                 the scenarios and groups
  report               charts and the benchmark page from the reports
  <id>                 one scenario; groups: %[2]s

Runs write their reports under --report-dir (default %[3]s),
never into the repository unless asked: --publish writes the reports into
%[4]s and the page into %[5]s, the committed copies (run it at the
repository's root).

flags:
  --scale F            multiply every phase's duration (0 < F <= 1000; minimums 10 s loaded, 5 s idle)
  --report-dir DIR     where reports go, and where report reads them
  --docs DIR           report: where benchmarks.md and its charts go (default <report-dir>/page)
  --publish            use the repository's committed directories for both
  --store KIND         sqlite (default), memory or postgres (a fresh schema per scenario; kill drills are skipped)
  --pg-url URL         the PostgreSQL server of --store postgres (default $YELLA_PG_URL)
  --db-dir DIR         keep the databases here (default: a temporary directory)
`, name, strings.Join(bench.Groups, ", "), DefaultReportDir(), PublishedReports, PublishedDocs)
}

// ReportUsage is the help of "report"; name is how it was invoked.
func ReportUsage(name string) string {
	return fmt.Sprintf(`usage: %[1]s [flags]

Generates benchmarks.md and its charts from the reports in --report-dir
(default %[2]s), into --docs (default <report-dir>/page).
--publish reads %[3]s and writes %[4]s: the committed copies (run it at
the repository's root).

flags:
  --report-dir DIR     where the reports are
  --docs DIR           where benchmarks.md and its charts go
  --publish            use the repository's committed directories for both
`, name, DefaultReportDir(), PublishedReports, PublishedDocs)
}

// The committed reports and page, relative to the repository's root.
const (
	PublishedReports = "examples/reports/benchmarks"
	PublishedDocs    = "docs"
)

// DefaultReportDir is where reports go unless a flag says otherwise: the
// user's cache directory (yella/bench in it), or the temporary directory
// when there is none; never the working directory.
func DefaultReportDir() string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "yella", "bench")
	}
	return filepath.Join(os.TempDir(), "yella-bench")
}

// Run executes the command with args (without the program name). Each
// scenario runs in a fresh child process: this program, re-executed.
func Run(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		args = []string{"list"}
	}
	target, rest := args[0], args[1:]
	if target == "-h" || target == "--help" || target == "help" {
		fmt.Fprint(stdout, Usage(name))
		return nil
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	scaleArg := fs.String("scale", "1", "")
	reportDir := fs.String("report-dir", DefaultReportDir(), "")
	storeKind := fs.String("store", "sqlite", "")
	pgURL := fs.String("pg-url", os.Getenv("YELLA_PG_URL"), "")
	dbDir := fs.String("db-dir", "", "")
	docs := fs.String("docs", "", "")
	publish := fs.Bool("publish", false, "")
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) && target == "report" {
			fmt.Fprint(stdout, ReportUsage(name))
			return err
		}
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, Usage(name))
			return err
		}
		return fmt.Errorf("%v (%s -h lists the flags)", err, name)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if *publish {
		if given["report-dir"] || given["docs"] {
			return errors.New("--publish chooses the directories: give it or --report-dir/--docs, not both")
		}
		if st, err := os.Stat(PublishedReports); err != nil || !st.IsDir() {
			return fmt.Errorf("--publish writes into %s: run it at the repository's root", PublishedReports)
		}
		*reportDir, *docs = PublishedReports, PublishedDocs
	}
	if *docs == "" {
		*docs = filepath.Join(*reportDir, "page")
	}
	switch target {
	case "list":
		fmt.Fprint(stdout, bench.List())
		return nil
	case "report":
		if err := report.Page(*reportDir, *docs); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s and its charts (from the reports in %s)\n", filepath.Join(*docs, "benchmarks.md"), *reportDir)
		return nil
	}
	switch *storeKind {
	case "sqlite", "memory":
	case "postgres":
		if *pgURL == "" {
			return errors.New("--store postgres needs --pg-url (or $YELLA_PG_URL)")
		}
		os.Setenv("YELLA_PG_URL", *pgURL) // the children's store
	default:
		return fmt.Errorf("invalid --store %q: want sqlite, memory or postgres", *storeKind)
	}
	scale, err := bench.ParseScale(*scaleArg)
	if err != nil {
		return err
	}
	scenarios, err := bench.Select(target)
	if err != nil {
		return err
	}
	opts := bench.Options{Scale: scale, Store: *storeKind, DBDir: *dbDir, Verify: verify, Machine: bench.MachineInfo(), Commit: commit()}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		opts.Progress = stderr
	}
	for _, s := range scenarios {
		// A group skips what this machine cannot run (a real-browser
		// scenario without Chromium); a scenario asked for by name fails.
		if err := s.Unavailable(); err != nil {
			if len(scenarios) == 1 {
				return err
			}
			fmt.Fprintf(stderr, "skipping %v\n", err)
			continue
		}
		r, err := bench.RunScenario(ctx, s, opts)
		if opts.Progress != nil {
			fmt.Fprintln(stderr)
		}
		if err != nil {
			return err
		}
		if err := r.Write(*reportDir); err != nil {
			return err
		}
		fmt.Fprint(stdout, report.Text(r))
		fmt.Fprintf(stdout, "report: %s\n", r.Files.Text)
	}
	return nil
}

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	if st, _ := exec.Command("git", "status", "--porcelain").Output(); len(st) > 0 {
		c += "-dirty"
	}
	return c
}
