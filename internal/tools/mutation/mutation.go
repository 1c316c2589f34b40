// Package mutation is the mutation check: one deliberate break per
// reliability guarantee of the README, each applied in turn, with the tests
// the README names run against it. A guarantee whose break no test notices
// is not proven by those tests; the check fails then, and also when a
// mutation no longer applies (its target text changed: re-target it) or
// does not compile.
//
// A mutation never touches the working tree: the mutated files are written
// to a temporary directory and handed to the go command as an overlay
// (go test -c -overlay). Each package's test binary is built once per
// mutation and runs each of its tests, as go test would, in the package's
// directory. Before any mutation runs, every test is run once from the
// unmutated binaries and must pass: a check whose baseline fails proves
// nothing.
//
// The short form (the tests not marked Full: fast, deterministic ones) runs
// in CI (.ci/run); the full form adds the crash and trust tests:
//
//	go run ./internal/tools/mutation/check            # short form
//	go run ./internal/tools/mutation/check -full      # with the crash and trust tests
//	go run ./internal/tools/mutation/check -list      # the mutations and their tests
package mutation

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Edit replaces Old, which must occur exactly once in File, with New.
type Edit struct {
	File string // relative to the module root
	Old  string
	New  string
}

// Test is one go test invocation that must fail when a mutation is
// applied.
type Test struct {
	Pkg  string // package, relative to the module root: "." or "./store/sqlitestore"
	Run  string // the -run regexp
	Tags string // build tags, if any
	// Full marks a slow test (crash, trust) run only by the full form.
	Full bool
	// Timeout is go test's -timeout; 0 means 3 minutes.
	Timeout time.Duration
}

func (t Test) String() string {
	s := t.Pkg + " -run '" + t.Run + "'"
	if t.Tags != "" {
		s += " -tags " + t.Tags
	}
	return s
}

// Name is the test the -run regexp selects, for people: the case of the
// engine suite or of a store's conformance suite
// ("Lease/StaleCompletionWhileRunning"), or the test function.
func (t Test) Name() string {
	top, _, c := t.parts()
	if c != "" {
		return c
	}
	return top
}

// parts splits the -run regexp into the test function, the store and the
// case: ^TestEngineSuite$/^<store>$/^<case>$ (the engine suite on one
// store), ^TestConformance$/^<case>$ (a store's conformance suite) or
// ^TestX$ (a test function).
func (t Test) parts() (top, store, c string) {
	if m := engineRun.FindStringSubmatch(t.Run); m != nil {
		return "TestEngineSuite", m[1], m[2]
	}
	if m := storeRun.FindStringSubmatch(t.Run); m != nil {
		return "TestConformance", "", m[1]
	}
	return strings.TrimSuffix(strings.TrimPrefix(t.Run, "^"), "$"), "", ""
}

var (
	engineRun = regexp.MustCompile(`^\^TestEngineSuite\$/\^([a-z]+)\$/\^(.+)\$$`)
	storeRun  = regexp.MustCompile(`^\^TestConformance\$/\^(.+)\$$`)
)

func (t Test) timeout() time.Duration {
	if t.Timeout == 0 {
		return 3 * time.Minute
	}
	return t.Timeout
}

// Mutation is one deliberate break of one guarantee.
type Mutation struct {
	Name      string
	Guarantee string // the README's guarantee it breaks
	Edits     []Edit
	Tests     []Test // every one must fail with the mutation applied
	// Needs names an environment variable its tests need (the PostgreSQL
	// store's: YELLA_PG_URL). Without it the mutation is skipped, and the
	// check says so.
	Needs string
}

// TestsFor returns the mutation's tests run by the short or the full form.
func (m Mutation) TestsFor(full bool) []Test {
	var out []Test
	for _, t := range m.Tests {
		if full || !t.Full {
			out = append(out, t)
		}
	}
	return out
}

// Apply returns the mutated content of each file the mutation edits, or an
// error naming the mutation when an edit's old text does not occur exactly
// once (the code moved on: the mutation must be re-targeted).
func (m Mutation) Apply(root string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for i, e := range m.Edits {
		src, ok := out[e.File]
		if !ok {
			b, err := os.ReadFile(filepath.Join(root, e.File))
			if err != nil {
				return nil, fmt.Errorf("mutation %s, edit %d: %w", m.Name, i+1, err)
			}
			src = b
		}
		switch n := strings.Count(string(src), e.Old); n {
		case 1:
		case 0:
			return nil, fmt.Errorf("mutation %s is stale: edit %d's old text is not in %s any more (re-target it):\n%s", m.Name, i+1, e.File, indent(e.Old))
		default:
			return nil, fmt.Errorf("mutation %s is ambiguous: edit %d's old text occurs %d times in %s (make it unique):\n%s", m.Name, i+1, n, e.File, indent(e.Old))
		}
		out[e.File] = []byte(strings.Replace(string(src), e.Old, e.New, 1))
	}
	return out, nil
}

func indent(s string) string {
	return "\t| " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\t| ")
}

// Select returns the mutations whose name matches re (all if re is nil).
func Select(ms []Mutation, re *regexp.Regexp) []Mutation {
	if re == nil {
		return ms
	}
	var out []Mutation
	for _, m := range ms {
		if re.MatchString(m.Name) {
			out = append(out, m)
		}
	}
	return out
}

// Validate checks a list: unique names, at least one edit and one short
// test per mutation, and well-formed tests.
func Validate(ms []Mutation) error {
	seen := map[string]bool{}
	for _, m := range ms {
		switch {
		case m.Name == "" || seen[m.Name]:
			return fmt.Errorf("mutation %q: empty or duplicate name", m.Name)
		case m.Guarantee == "":
			return fmt.Errorf("mutation %s: no guarantee", m.Name)
		case len(m.Edits) == 0:
			return fmt.Errorf("mutation %s: no edit", m.Name)
		case len(m.TestsFor(false)) == 0:
			return fmt.Errorf("mutation %s: no test in the short form", m.Name)
		}
		seen[m.Name] = true
		for _, e := range m.Edits {
			if e.Old == "" || e.Old == e.New {
				return fmt.Errorf("mutation %s: an edit of %s changes nothing", m.Name, e.File)
			}
		}
		for _, t := range m.Tests {
			if (t.Pkg != "." && !strings.HasPrefix(t.Pkg, "./")) || t.Run == "" {
				return fmt.Errorf("mutation %s: test %s needs a package (. or ./path) and a -run regexp", m.Name, t)
			}
			if _, err := regexp.Compile(t.Run); err != nil {
				return fmt.Errorf("mutation %s: test %s: %v", m.Name, t, err)
			}
		}
	}
	return nil
}
