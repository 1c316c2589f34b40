// Command yella is Yella's operator tool: it serves an engine with its
// dashboard and HTTP API, inspects and steers runs, runs the benchmark
// suite and restores replicas. "yella help" lists the commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/yella-go/yella/internal/tools/benchcmd"
)

func main() {
	if benchcmd.ChildMain() { // "yella bench" re-executes this binary per scenario
		return
	}
	err := Run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	if err == nil {
		return
	}
	var u usageError
	if !errors.As(err, &u) || u.msg != "" {
		fmt.Fprintln(os.Stderr, "yella:", err)
	}
	if errors.As(err, &u) {
		os.Exit(2)
	}
	os.Exit(1)
}
