// Benchmarks runs the benchmark suite (package bench), as "yella bench"
// does:
//
//	go run ./examples/benchmarks list
//	go run ./examples/benchmarks public --scale 0.25
//	go run ./examples/benchmarks api-mixed__fleet-c50 --store memory
//	go run ./examples/benchmarks report          # charts and benchmarks.md
//	go run ./examples/benchmarks report --publish  # the committed docs/benchmarks.md
//
// Each scenario runs in a fresh child process (this program re-executed);
// reports go to the user's cache directory (yella/bench) unless
// --report-dir says otherwise, and into the committed
// examples/reports/benchmarks only with --publish.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/yella-go/yella/internal/tools/benchcmd"
)

func main() {
	if benchcmd.ChildMain() {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := benchcmd.Run(ctx, "benchmarks", os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchmarks:", err)
		os.Exit(1)
	}
}
