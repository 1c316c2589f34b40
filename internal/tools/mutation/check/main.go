// Command check runs the mutation check (package mutation, its parent):
// every mutation of the list is applied in turn, through go test -c
// -overlay (the working tree is never touched), and the tests that must
// catch it are run from the binary built with it, one build per package.
// It prints a table and exits non-zero if the baseline fails, a mutation
// survives, is stale or does not compile.
//
//	go run ./internal/tools/mutation/check                 # short form (CI): the fast, deterministic tests
//	go run ./internal/tools/mutation/check -full           # full form: also the crash and trust tests
//	go run ./internal/tools/mutation/check -run 'epoch'    # only the mutations whose name matches
//	go run ./internal/tools/mutation/check -list           # the mutations and their tests
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/yella-go/yella/internal/tools/mutation"
)

func main() {
	full := flag.Bool("full", false, "also run the crash and trust tests (slow; run on an otherwise idle machine)")
	run := flag.String("run", "", "only the mutations whose name matches this regexp")
	par := flag.Int("parallel", 2, "mutations checked at once (the full form always runs one at a time)")
	list := flag.Bool("list", false, "list the mutations and their tests, and exit")
	jsonOut := flag.String("json", "", "also write the result as JSON to this file")
	flag.Parse()

	var re *regexp.Regexp
	if *run != "" {
		var err error
		if re, err = regexp.Compile(*run); err != nil {
			fail("-run: %v", err)
		}
	}
	ms := mutation.Select(mutation.All, re)
	if len(ms) == 0 {
		fail("-run %q matches no mutation", *run)
	}
	if *list {
		for _, m := range ms {
			fmt.Printf("%s: %s\n", m.Name, m.Guarantee)
			for _, e := range m.Edits {
				fmt.Printf("  edits %s\n", e.File)
			}
			for _, t := range m.Tests {
				form := "short"
				if t.Full {
					form = "full "
				}
				fmt.Printf("  %s  %s\n", form, t)
			}
		}
		return
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		fail("not inside the module: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	p := *par
	if *full {
		p = 1 // crash and trust tests measure time and load: one at a time
	}
	form := "short"
	if *full {
		form = "full"
	}
	fmt.Printf("mutation check (%s form): %d mutations, baseline first\n", form, len(ms))
	res, err := mutation.Check(context.Background(), ms, mutation.Options{Root: root, Full: *full, Parallel: p, Log: os.Stdout})
	if err != nil {
		fail("%v", err)
	}
	fmt.Println()
	res.WriteTable(os.Stdout)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fail("%v", err)
		}
	}
	fmt.Printf("\n%d mutations, %d test runs, %s (%s form)\n", len(ms)-len(res.Skipped), len(res.Rows), res.Elapsed.Round(time.Second), form)
	if len(res.Skipped) > 0 {
		fmt.Printf("skipped, their tests' database not given: %s\n", strings.Join(res.Skipped, ", "))
	}
	if probs := res.Problems(); len(probs) > 0 {
		fmt.Println("\nFAIL: the mutation check proves nothing until these are fixed:")
		for _, pr := range probs {
			fmt.Println("  " + pr)
		}
		os.Exit(1)
	}
	fmt.Println("ok: every mutation was caught by every test named for it")
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mutations: "+format+"\n", args...)
	os.Exit(2)
}
