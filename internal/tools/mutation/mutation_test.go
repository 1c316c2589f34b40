package mutation

import (
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every mutation of the list applies to the tree as it is (its old text
// occurs exactly once) and leaves Go that still parses (other files, SQL
// migrations, are checked by the tests that run them). When the code a
// mutation targets changes, this test names the mutation to re-target.
func TestListAppliesToTheTree(t *testing.T) {
	if err := Validate(All); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range All {
		files, err := m.Apply(root)
		if err != nil {
			t.Error(err)
			continue
		}
		for f, src := range files {
			if !strings.HasSuffix(f, ".go") {
				continue
			}
			if _, err := parser.ParseFile(token.NewFileSet(), f, src, 0); err != nil {
				t.Errorf("mutation %s leaves %s unparsable: %v", m.Name, f, err)
			}
		}
	}
}

// Every test a mutation names exists, down to its case: the test function
// in the package's test files, and for a suite case the store and the case
// name in the suite's sources (a renamed case would otherwise only show as
// NO-TESTS when the check runs).
func TestEveryNamedTestExists(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range All {
		for _, test := range m.Tests {
			if err := namedTestExists(root, test); err != nil {
				t.Errorf("mutation %s: %v", m.Name, err)
			}
			n++
		}
	}
	// The check itself notices a missing function, store and case.
	for _, bad := range []Test{
		{Pkg: "./store/sqlitestore", Run: "^TestNoSuchTest$"},
		{Pkg: ".", Run: "^TestEngineSuite$/^nostore$/^Lease/StaleCompletionWhileRunning$"},
		{Pkg: ".", Run: "^TestEngineSuite$/^memstore$/^Lease/NoSuchCase$"},
		{Pkg: "./store/sqlitestore", Run: "^TestConformance$/^Lease/StaleCompletionWhileRunning$"}, // an engine case, not a store case
		{Pkg: "./store/sqlitestore", Run: "^TestOpenLocked$|^TestOther$"},
	} {
		if namedTestExists(root, bad) == nil {
			t.Errorf("%s: not reported missing", bad)
		}
	}
	t.Logf("%d named tests found", n)
}

// namedTestExists checks the sources for the test a Test selects.
func namedTestExists(root string, test Test) error {
	src, err := sources(filepath.Join(root, test.Pkg), "_test.go")
	if err != nil {
		return err
	}
	top, store, c := test.parts()
	if !regexp.MustCompile(`^Test[A-Za-z0-9_]*$`).MatchString(top) {
		return fmt.Errorf("%s: not one test function, nor a case of a suite", test)
	}
	if !strings.Contains(src, "func "+top+"(t *testing.T)") {
		return fmt.Errorf("%s: no func %s in %s", test, top, test.Pkg)
	}
	switch top {
	case "TestEngineSuite":
		if !strings.Contains(src, `name: "`+store+`"`) {
			return fmt.Errorf("%s: the engine suite runs on no store named %s", test, store)
		}
		if !strings.Contains(src, `Name: "`+c+`"`) {
			return fmt.Errorf("%s: the engine suite has no case %s", test, c)
		}
	case "TestConformance":
		suite, err := sources(filepath.Join(root, "store", "storetest"), ".go")
		if err != nil {
			return err
		}
		if !strings.Contains(suite, `Name: "`+c+`"`) && !strings.Contains(suite, `t.Run("`+c+`"`) {
			return fmt.Errorf("%s: the store suite (store/storetest) has no case %s", test, c)
		}
	}
	return nil
}

// sources returns the concatenated text of dir's files ending in suffix.
func sources(dir, suffix string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil || len(files) == 0 {
		return "", fmt.Errorf("no *%s files in %s (%v)", suffix, dir, err)
	}
	var b strings.Builder
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		b.Write(src)
	}
	return b.String(), nil
}

// The README's table names every mutation and, in its row, every test
// that must catch it.
func TestReadmeNamesEveryMutation(t *testing.T) {
	b, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			if i := strings.Index(name, "`"); i > 0 {
				rows[name[:i]] = line
			}
		}
	}
	for _, m := range All {
		row, ok := rows[m.Name]
		if !ok {
			t.Errorf("README.md: no row for mutation %s", m.Name)
			continue
		}
		for _, test := range m.Tests {
			if !strings.Contains(row, "`"+test.Name()+"`") {
				t.Errorf("README.md: the row of mutation %s does not name %s", m.Name, test.Name())
			}
		}
	}
}

func TestApplyRefusesStaleAndAmbiguousEdits(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "a.go"), []byte("package a\n\nvar x = 1 + 1\n"), 0o644)
	for _, tc := range []struct {
		old, want string
	}{
		{"2 + 2", "mutation m is stale: edit 1's old text is not in a.go"},
		{"1", "mutation m is ambiguous: edit 1's old text occurs 2 times in a.go"},
	} {
		_, err := Mutation{Name: "m", Edits: []Edit{{File: "a.go", Old: tc.old, New: "3"}}}.Apply(root)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("old %q: %v, want an error containing %q", tc.old, err, tc.want)
		}
	}
	got, err := Mutation{Name: "m", Edits: []Edit{{File: "a.go", Old: "1 + 1", New: "1 + 2"}, {File: "a.go", Old: "x", New: "y"}}}.Apply(root)
	if err != nil || string(got["a.go"]) != "package a\n\nvar y = 1 + 2\n" {
		t.Errorf("two edits of one file: %q, %v", got["a.go"], err)
	}
}

func TestLevels(t *testing.T) {
	for re, want := range map[string]int{
		"^TestX$": 1,
		"^TestEngineSuite$/^memstore$/^Lease/Stale$": 4,
		"^TestConformance$/^Lease/Stale$":            3,
		"^TestConformance$/^Caps/(A|B/C)$":           3,
		"TestA/[/]x":                                 2,
	} {
		if got := levels(re); got != want {
			t.Errorf("levels(%q) = %d, want %d", re, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      Parsed
	}{
		{"verbose subtest failure", `=== RUN   TestConformance
=== RUN   TestConformance/Lease/Stale
    cases.go:48: still running = completed, want running
    cases.go:49: owner = , want other
--- FAIL: TestConformance (0.04s)
    --- FAIL: TestConformance/Lease/Stale (0.03s)
FAIL
FAIL	example.com/x	0.1s
`, Parsed{Failed: "TestConformance/Lease/Stale", Message: "cases.go:48: still running = completed, want running"}},
		{"quiet failure", `--- FAIL: TestOpenLocked (0.01s)
    badinput_test.go:86: second open: <nil>
FAIL
`, Parsed{Failed: "TestOpenLocked", Message: "badinput_test.go:86: second open: <nil>"}},
		{"passing, verbose", `=== RUN   TestConformance
=== RUN   TestConformance/Caps/Two
--- PASS: TestConformance (0.04s)
    --- PASS: TestConformance/Caps/Two (0.03s)
PASS
ok  	example.com/x	0.1s
`, Parsed{Deepest: 3}},
		{"panic", `=== RUN   TestConformance/Engine/Dup
--- FAIL: TestConformance (1.5s)
panic: runtime error: index out of range [0] with length 0 [recovered]
`, Parsed{Failed: "TestConformance", Message: "panic: runtime error: index out of range [0] with length 0 [recovered]"}},
		{"timeout", `=== RUN   TestCrashPoints
panic: test timed out after 3m0s
	running tests:
		TestCrashPoints (3m0s)
`, Parsed{Failed: "TestCrashPoints", Message: "panic: test timed out after 3m0s"}},
		{"build failure", `# example.com/x
./a.go:3:9: undefined: y
FAIL	example.com/x [build failed]
`, Parsed{BuildFailed: true, Message: "./a.go:3:9: undefined: y"}},
	} {
		if got := Parse(tc.out, nil); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// A line the passing run logged too is not the failure message.
func TestParseSkipsWhatThePassingRunLogged(t *testing.T) {
	pass := "=== RUN   TestCrash\n    crash_test.go:84: reproduce: SEED=123\n    crash_test.go:63: point-1: 20 acked, ok\n--- PASS: TestCrash (1s)\n"
	fail := "=== RUN   TestCrash\n    crash_test.go:84: reproduce: SEED=987\n    crash_test.go:63: point-1: 19 acked, ok\n    crash_test.go:57: point-1: lost: 1 (k-0)\n--- FAIL: TestCrash (1s)\n"
	got := Parse(fail, Logged(pass))
	if got.Failed != "TestCrash" || got.Message != "crash_test.go:57: point-1: lost: 1 (k-0)" {
		t.Errorf("%+v", got)
	}
	if got := Parse(fail, nil); got.Message != "crash_test.go:84: reproduce: SEED=987" {
		t.Errorf("without what the passing run logged: %+v", got)
	}
}

// The runner itself, end to end on a throwaway module: a mutation its test
// notices is caught, one it does not notice survives, one that does not
// compile is reported, a stale one is named, and a failing baseline stops
// the check before any mutation runs.
func TestCheckOnAThrowawayModule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	root := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.22\n")
	write("m.go", "package m\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n\n// Unused is not tested.\nfunc Unused() int { return 1 }\n")
	write("m_test.go", "package m\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 2) != 4 {\n\t\tt.Fatalf(\"Add(2, 2) = %d\", Add(2, 2))\n\t}\n}\n")
	test := Test{Pkg: "./", Run: "^TestAdd$"}
	ms := []Mutation{
		{Name: "caught", Guarantee: "g", Edits: []Edit{{File: "m.go", Old: "a + b", New: "a - b"}}, Tests: []Test{test}},
		{Name: "survives", Guarantee: "g", Edits: []Edit{{File: "m.go", Old: "return 1", New: "return 2"}}, Tests: []Test{test}},
		{Name: "broken", Guarantee: "g", Edits: []Edit{{File: "m.go", Old: "a + b", New: "a + c"}}, Tests: []Test{test}},
		{Name: "stale", Guarantee: "g", Edits: []Edit{{File: "m.go", Old: "a * b", New: "a"}}, Tests: []Test{test}},
	}
	res, err := Check(context.Background(), ms, Options{Root: root, Parallel: 2, Go: goCmd})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Baseline) != 1 || res.Baseline[0].Outcome != Passed {
		t.Fatalf("baseline %+v", res.Baseline)
	}
	got := map[string]Row{}
	for _, r := range res.Rows {
		got[r.Mutation] = r
	}
	for name, want := range map[string]Outcome{"caught": Caught, "survives": Survived, "broken": NoCompile, "stale": Stale} {
		if got[name].Outcome != want {
			t.Errorf("%s: %s (%s), want %s", name, got[name].Outcome, got[name].Message, want)
		}
	}
	if r := got["caught"]; r.Failed != "TestAdd" || !strings.Contains(r.Message, "Add(2, 2) = 0") {
		t.Errorf("caught: failed test %q, message %q", r.Failed, r.Message)
	}
	if r := got["broken"]; !strings.Contains(r.Message, "undefined: c") {
		t.Errorf("broken: message %q, want the compiler's error", r.Message)
	}
	if res.OK() || len(res.Problems()) != 3 {
		t.Errorf("problems %q, want the 3 mutations not caught", res.Problems())
	}
	var table strings.Builder
	res.WriteTable(&table)
	if !strings.Contains(table.String(), "SURVIVED") {
		t.Errorf("table:\n%s", table.String())
	}

	// A baseline that fails (or selects no test) stops the check.
	for _, bad := range []Test{{Pkg: "./", Run: "^TestNope$"}, {Pkg: "./", Run: "^TestAdd$/^sub$"}} {
		res, err = Check(context.Background(), []Mutation{{Name: "x", Guarantee: "g", Edits: ms[0].Edits, Tests: []Test{bad}}}, Options{Root: root, Go: goCmd})
		if err != nil {
			t.Fatal(err)
		}
		if res.OK() || len(res.Rows) != 0 || res.Baseline[0].Outcome != NoTestsRun {
			t.Errorf("baseline of %s: %+v, rows %d; want NO-TESTS and no mutation run", bad, res.Baseline, len(res.Rows))
		}
	}
}
