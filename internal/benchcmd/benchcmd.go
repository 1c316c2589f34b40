// Package benchcmd is the benchmark command shared by "yella bench" and
// examples/benchmarks: argument parsing, the child-process hook, recovery
// verification and report writing around package bench.
package benchcmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/term"

	"github.com/yella-go/yella/bench"
	"github.com/yella-go/yella/internal/crashtest"
	"github.com/yella-go/yella/report"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/sqlitestore"
)

// ChildMain runs a benchmark child process if this process is one (the
// runner re-executes the program); programs call it first in main.
func ChildMain() bool { return bench.ChildMain(openStore) }

func openStore(kind, path string) (store.Store, error) {
	if kind == "memory" {
		return memstore.New(), nil
	}
	return sqlitestore.Open(path, sqlitestore.Options{})
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

flags:
  --scale F            multiply every phase's duration (0 < F <= 1000; minimums 10 s loaded, 5 s idle)
  --report-dir DIR     where reports go (default examples/reports/benchmarks)
  --store KIND         sqlite (default) or memory
  --db-dir DIR         keep the databases here (default: a temporary directory)
  --docs DIR           report: where benchmarks.md and the charts go (default docs)
`, name, strings.Join(bench.Groups, ", "))
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
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, Usage(name)) }
	scaleArg := fs.String("scale", "1", "")
	reportDir := fs.String("report-dir", "examples/reports/benchmarks", "")
	storeKind := fs.String("store", "sqlite", "")
	dbDir := fs.String("db-dir", "", "")
	docs := fs.String("docs", "docs", "")
	if err := fs.Parse(rest); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	switch target {
	case "list":
		fmt.Fprint(stdout, bench.List())
		return nil
	case "report":
		return report.Page(*reportDir, *docs)
	}
	if *storeKind != "sqlite" && *storeKind != "memory" {
		return fmt.Errorf("invalid --store %q: want sqlite or memory", *storeKind)
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
