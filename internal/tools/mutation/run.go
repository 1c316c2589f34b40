package mutation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Options configures a check.
type Options struct {
	Root     string // module root
	Full     bool   // run the full form (crash and trust tests too)
	Parallel int    // mutations checked at once; 0 means 1
	Go       string // the go command; "" means "go"
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Outcome of one test against one mutation.
type Outcome string

// Outcomes. Only Caught is a success for a mutation; for the baseline only
// Passed is.
const (
	Caught     Outcome = "caught"      // the test failed
	Survived   Outcome = "SURVIVED"    // the test passed with the guarantee broken
	NoCompile  Outcome = "NO-COMPILE"  // the mutated code does not build
	Stale      Outcome = "STALE"       // the mutation no longer applies
	Passed     Outcome = "passed"      // baseline: the test passed
	NoTestsRun Outcome = "NO-TESTS"    // baseline: the -run regexp matched no test
	BaseFailed Outcome = "BASE-FAILED" // baseline: the test failed unmutated
)

// Row is one line of the result table: a test run against a mutation (or
// against the unmutated code, for the baseline).
type Row struct {
	Mutation string        `json:"mutation"`
	Test     string        `json:"test"`
	Outcome  Outcome       `json:"outcome"`
	Failed   string        `json:"failedTest,omitempty"` // the first failing test
	Message  string        `json:"message,omitempty"`    // its first failure message
	Elapsed  time.Duration `json:"elapsedNs"`
}

// Result is a whole check.
type Result struct {
	Full     bool          `json:"full"`
	Baseline []Row         `json:"baseline"`
	Rows     []Row         `json:"rows"`
	Skipped  []string      `json:"skipped,omitempty"` // mutations whose Needs is not set
	Elapsed  time.Duration `json:"elapsedNs"`
}

// OK reports whether the baseline passed and every mutation was caught by
// every test run against it.
func (r *Result) OK() bool { return len(r.Problems()) == 0 }

// Problems lists what makes the check fail.
func (r *Result) Problems() []string {
	var out []string
	for _, b := range r.Baseline {
		if b.Outcome != Passed {
			out = append(out, fmt.Sprintf("baseline %s: %s %s", b.Test, b.Outcome, b.Message))
		}
	}
	for _, row := range r.Rows {
		if row.Outcome != Caught {
			out = append(out, fmt.Sprintf("mutation %s, %s: %s %s", row.Mutation, row.Test, row.Outcome, row.Message))
		}
	}
	return out
}

// WriteTable prints the rows as an aligned table.
func (r *Result) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MUTATION\tRESULT\tTIME\tTEST RUN\tFAILED TEST: FIRST MESSAGE")
	for _, row := range r.Rows {
		detail := row.Message
		if row.Failed != "" {
			detail = row.Failed + ": " + row.Message
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", row.Mutation, row.Outcome, row.Elapsed.Round(100*time.Millisecond), row.Test, clip(detail, 160))
	}
	tw.Flush()
}

func clip(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// Check runs the baseline, then every mutation against its tests.
func Check(ctx context.Context, ms []Mutation, o Options) (*Result, error) {
	if err := Validate(ms); err != nil {
		return nil, err
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Parallel <= 0 {
		o.Parallel = 1
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	start := time.Now()
	res := &Result{Full: o.Full}
	ms = res.available(ms, o.Log)

	// The baseline: each distinct test once, unmutated, with -v to see that
	// the -run regexp selects a test.
	seen := map[string]bool{}
	var base []Test
	for _, m := range ms {
		for _, t := range m.TestsFor(o.Full) {
			if !seen[t.String()] {
				seen[t.String()] = true
				base = append(base, t)
			}
		}
	}
	dir, err := os.MkdirTemp("", "yella-mutation-base-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// Each package's test binary is built once (go test -c) and run once
	// per test: a go test per test would link it again every time.
	keys, of := binaryKeys(base)
	bins := make([]binary, len(keys))
	parallel(len(keys), o.Parallel, func(i int) {
		bins[i] = build(ctx, o, keys[i], "", filepath.Join(dir, fmt.Sprint(i)))
	})
	res.Baseline = make([]Row, len(base))
	logged := make([]map[string]bool, len(base)) // what each test logs when it passes
	parallel(len(base), o.Parallel, func(i int) {
		row, known := runTest(ctx, o, "", base[i], bins[of[i]], nil)
		res.Baseline[i], logged[i] = row, known
		fmt.Fprintf(o.Log, "baseline %-8s %6s  %s\n", row.Outcome, row.Elapsed.Round(100*time.Millisecond), row.Test)
	})
	for _, b := range res.Baseline {
		if b.Outcome != Passed {
			res.Elapsed = time.Since(start)
			return res, nil // mutations against a failing baseline prove nothing
		}
	}

	known := map[string]map[string]bool{}
	for i, t := range base {
		known[t.String()] = logged[i]
	}
	rows := make([][]Row, len(ms))
	parallel(len(ms), o.Parallel, func(i int) {
		rows[i] = runMutation(ctx, o, ms[i], known)
		for _, row := range rows[i] {
			fmt.Fprintf(o.Log, "%-30s %-10s %6s  %s\n", row.Mutation, row.Outcome, row.Elapsed.Round(100*time.Millisecond), row.Test)
		}
	})
	for _, rs := range rows {
		res.Rows = append(res.Rows, rs...)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// available returns the mutations whose tests can run here, recording and
// logging the others: those whose Needs variable is not set.
func (r *Result) available(ms []Mutation, log io.Writer) []Mutation {
	var out []Mutation
	for _, m := range ms {
		if m.Needs != "" && os.Getenv(m.Needs) == "" {
			r.Skipped = append(r.Skipped, m.Name)
			fmt.Fprintf(log, "skipped %s: its tests need %s, which is not set%s\n", m.Name, m.Needs, needsHint[m.Needs])
			continue
		}
		out = append(out, m)
	}
	return out
}

// needsHint says how to set a Needs variable.
var needsHint = map[string]string{
	"YELLA_PG_URL": ` (eval "$(.ci/postgres)" starts a throwaway PostgreSQL and sets it)`,
}

// parallel calls fn(0..n-1) with at most p calls at once.
func parallel(n, p int, fn func(int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, p)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}

// runMutation applies m through an overlay and runs its tests; known maps
// each test to the lines it logs when it passes.
func runMutation(ctx context.Context, o Options, m Mutation, known map[string]map[string]bool) []Row {
	tests := m.TestsFor(o.Full)
	files, err := m.Apply(o.Root)
	if err != nil {
		return []Row{{Mutation: m.Name, Test: "(all)", Outcome: Stale, Message: err.Error()}}
	}
	dir, err := os.MkdirTemp("", "yella-mutation-")
	if err != nil {
		return []Row{{Mutation: m.Name, Test: "(all)", Outcome: NoCompile, Message: err.Error()}}
	}
	defer os.RemoveAll(dir)
	overlay := map[string]map[string]string{"Replace": {}}
	names := make([]string, 0, len(files))
	for f := range files {
		names = append(names, f)
	}
	sort.Strings(names)
	for i, f := range names {
		p := filepath.Join(dir, fmt.Sprintf("%d-%s", i, filepath.Base(f)))
		if err := os.WriteFile(p, files[f], 0o644); err != nil {
			return []Row{{Mutation: m.Name, Test: "(all)", Outcome: NoCompile, Message: err.Error()}}
		}
		overlay["Replace"][filepath.Join(o.Root, f)] = p
	}
	ov := filepath.Join(dir, "overlay.json")
	b, _ := json.Marshal(overlay)
	if err := os.WriteFile(ov, b, 0o644); err != nil {
		return []Row{{Mutation: m.Name, Test: "(all)", Outcome: NoCompile, Message: err.Error()}}
	}
	keys, of := binaryKeys(tests)
	bins := make([]*binary, len(keys))
	var out []Row
	for i, t := range tests {
		k := of[i]
		var took time.Duration
		if bins[k] == nil {
			b := build(ctx, o, keys[k], ov, filepath.Join(dir, fmt.Sprint(k)))
			bins[k], took = &b, b.elapsed
		}
		row, _ := runTest(ctx, o, m.Name, t, *bins[k], known[t.String()])
		row.Elapsed += took // the build counts with the first test that needed it
		out = append(out, row)
	}
	return out
}

// binaryKey names a test binary: a package and its build tags.
type binaryKey struct{ pkg, tags string }

// binaryKeys returns the distinct binaries that tests need, and for each
// test the index of its binary.
func binaryKeys(tests []Test) (keys []binaryKey, of []int) {
	index := map[binaryKey]int{}
	for _, t := range tests {
		k := binaryKey{t.Pkg, t.Tags}
		i, ok := index[k]
		if !ok {
			i = len(keys)
			index[k] = i
			keys = append(keys, k)
		}
		of = append(of, i)
	}
	return keys, of
}

// binary is a built test binary, or the build's failure.
type binary struct {
	path    string
	out     string // go test -c's output
	err     error  // the build failed
	elapsed time.Duration
}

// build builds k's test binary at path, through overlay if not "".
func build(ctx context.Context, o Options, k binaryKey, overlay, path string) binary {
	// -vet=off: go vet has its own stage in CI, and go test's vet pass
	// costs about 0.7 s of CPU a build; -ldflags=-s -w: no symbol table
	// or DWARF (stack traces do not need them), about 0.5 s less link.
	// A mutation's build recompiles every package of the binary above the
	// edited one, so these fixed costs are paid about 200 times a check.
	args := []string{"test", "-c", "-vet=off", "-ldflags=-s -w", "-o", path}
	if k.tags != "" {
		args = append(args, "-tags", k.tags)
	}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	args = append(args, k.pkg)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, o.Go, args...)
	cmd.Dir = o.Root
	start := time.Now()
	out, err := cmd.CombinedOutput()
	b := binary{path: path, out: string(out), err: err, elapsed: time.Since(start)}
	if err == nil {
		if _, serr := os.Stat(path); serr != nil {
			b.err = fmt.Errorf("go test -c wrote no binary (no test files in %s?)", k.pkg)
		}
	}
	return b
}

// runTest runs one test from its package's binary, built with a mutation
// (mutation != "") or without (the baseline), and classifies the outcome.
// It also returns the lines the run logged (see Logged); known holds those
// of the passing run.
func runTest(ctx context.Context, o Options, mutation string, t Test, bin binary, known map[string]bool) (Row, map[string]bool) {
	row := Row{Mutation: mutation, Test: t.String()}
	if bin.err != nil {
		row.Outcome, row.Message = NoCompile, bin.err.Error()
		if mutation == "" {
			row.Outcome = BaseFailed
		}
		if m := firstCompileError(bin.out); m != "" {
			row.Message = m
		} else if bin.out != "" {
			row.Message = lastLines(bin.out, 3)
		}
		return row, nil
	}
	// A hung test is stopped by its own -test.timeout; this bound is the
	// backstop for a child process holding the pipe.
	cctx, cancel := context.WithTimeout(ctx, t.timeout()+2*time.Minute)
	defer cancel()
	// As go test runs it: in the package's directory.
	// -test.failfast: the first failure catches the mutation, so the
	// test's other cases (each of which may wait out its own deadline on
	// a mutated build) are not run.
	cmd := exec.CommandContext(cctx, bin.path, "-test.count=1", "-test.v", "-test.failfast", "-test.timeout", t.timeout().String(), "-test.run", t.Run)
	cmd.Dir = filepath.Join(o.Root, t.Pkg)
	cmd.WaitDelay = 10 * time.Second
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	start := time.Now()
	err := cmd.Run()
	row.Elapsed = time.Since(start)
	p := Parse(buf.String(), known)
	var exit *exec.ExitError
	switch {
	case err == nil && mutation == "":
		row.Outcome = Passed
		if p.Deepest < levels(t.Run) {
			row.Outcome, row.Message = NoTestsRun, fmt.Sprintf("no passing test is %d levels deep", levels(t.Run))
		}
	case err == nil:
		row.Outcome = Survived
	case errors.As(err, &exit) || cctx.Err() != nil:
		row.Outcome, row.Failed, row.Message = Caught, p.Failed, p.Message
		if cctx.Err() != nil {
			row.Message = "killed after " + row.Elapsed.Round(time.Second).String() + ": " + row.Message
		}
		if mutation == "" {
			row.Outcome = BaseFailed
		}
	default:
		row.Outcome, row.Message = BaseFailed, err.Error()
		if mutation != "" {
			row.Outcome = NoCompile // the binary did not start
		}
	}
	if row.Message == "" && row.Outcome != Passed && row.Outcome != Survived {
		row.Message = lastLines(buf.String(), 3)
	}
	return row, Logged(buf.String())
}

// firstCompileError returns the first compiler error in a build's output.
func firstCompileError(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if m := reCompile.FindStringSubmatch(line); m != nil {
			return m[1]
		}
	}
	return ""
}

// levels is how many '/'-separated elements a -run regexp has (slashes
// inside parentheses or brackets do not count).
func levels(re string) int {
	n, depth := 1, 0
	for _, c := range re {
		switch c {
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case '/':
			if depth == 0 {
				n++
			}
		}
	}
	return n
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " | ")
}
