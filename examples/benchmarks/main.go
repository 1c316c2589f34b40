// Benchmarks runs the benchmark suite (package bench) until the yella CLI
// carries it as "yella bench".
//
//	go run ./examples/benchmarks list
//	go run ./examples/benchmarks public --scale 0.25
//	go run ./examples/benchmarks api-mixed__fleet-c50 --store memory
//	go run ./examples/benchmarks report          # charts and docs/benchmarks.md
//
// Each scenario runs in a fresh child process (this program re-executed);
// reports go to examples/reports/benchmarks unless --report-dir says
// otherwise.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/term"

	"github.com/yella-go/yella/bench"
	"github.com/yella-go/yella/internal/crashtest"
	"github.com/yella-go/yella/report"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/sqlitestore"
)

func openStore(kind, path string) (store.Store, error) {
	if kind == "memory" {
		return memstore.New(), nil
	}
	return sqlitestore.Open(path, sqlitestore.Options{})
}

func main() {
	if bench.ChildMain(openStore) {
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "benchmarks:", err)
		os.Exit(1)
	}
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

func run(args []string) error {
	if len(args) == 0 {
		args = []string{"list"}
	}
	target, rest := args[0], args[1:]
	fs := flag.NewFlagSet("benchmarks", flag.ContinueOnError)
	scaleArg := fs.String("scale", "1", "multiply every phase's duration (minimums 10 s loaded, 5 s idle)")
	reportDir := fs.String("report-dir", "examples/reports/benchmarks", "where reports go")
	storeKind := fs.String("store", "sqlite", "sqlite or memory")
	dbDir := fs.String("db-dir", "", "keep the databases here (default: a temporary directory)")
	docs := fs.String("docs", "docs", "report: where benchmarks.md and the charts go")
	if err := fs.Parse(rest); err != nil {
		return err
	}
	switch target {
	case "list":
		fmt.Print(bench.List())
		return nil
	case "report":
		return report.Page(*reportDir, *docs)
	}
	scale, err := bench.ParseScale(*scaleArg)
	if err != nil {
		return err
	}
	scenarios, err := bench.Select(target)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := bench.Options{Scale: scale, Store: *storeKind, DBDir: *dbDir, Verify: verify, Machine: bench.MachineInfo(), Commit: commit()}
	if term.IsTerminal(int(os.Stderr.Fd())) {
		opts.Progress = os.Stderr
	}
	for _, s := range scenarios {
		r, err := bench.RunScenario(ctx, s, opts)
		if opts.Progress != nil {
			fmt.Fprintln(os.Stderr)
		}
		if err != nil {
			return err
		}
		if err := r.Write(*reportDir); err != nil {
			return err
		}
		fmt.Print(report.Text(r))
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
