package yella_test

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/yella-go/yella"

// The import rules keep data flowing one way. Each rule names the packages
// it applies to and the dependencies they must never have. Dependencies are
// followed through every package in between, standard library and
// third-party ones included (go list -deps), so a rule cannot be dodged by
// importing a package that imports the forbidden one. Packages are named
// by their import path with the module path shortened to "yella": the
// engine (the root package) is "yella", the SQLite store
// "yella/store/sqlitestore".
var importRules = []importRule{
	{
		rule:  "a store never reaches the engine, not even indirectly",
		scope: isStore,
		bad:   is("yella"),
	},
	{
		rule:  "a store depends only on store packages and internal helpers of the module",
		scope: isStore,
		bad:   func(dep string) bool { return inModule(dep) && !isStore(dep) && !isInternal(dep) },
	},
	{
		rule:  "the conformance suite uses store and the standard library only",
		scope: is("yella/store/storetest"),
		bad:   func(dep string) bool { return !isStd(dep) && dep != "yella/store" },
	},
	{
		rule:  "the engine depends only on store and internal helpers: never a concrete store, an operator edge, replication, tooling or a test kit",
		scope: is("yella"),
		bad:   func(dep string) bool { return inModule(dep) && dep != "yella/store" && !isInternal(dep) },
	},
	{
		rule:  "internal helpers never reach the engine",
		scope: isInternal,
		bad:   func(dep string) bool { return dep == "yella" },
	},
	{
		rule:  "operator edges never reach each other (a connector may build on another connector)",
		scope: isEdge,
		bad:   isEdge,
		except: func(p, dep string) bool {
			return isConnector(p) && isConnector(dep) // stripe and slack build on httpx
		},
	},
	{
		rule:  "the guard in front of the operator edges is plain net/http: it reaches nothing of the module, so embedders use it alone",
		scope: is("yella/httpguard"),
		bad:   inModule,
	},
	{
		rule:  "operator edges never reach a concrete store",
		scope: isEdge,
		bad:   isConcreteStore,
	},
	{
		rule: "only commands wire the operator edges and replication",
		scope: func(p string) bool {
			return !isCommand(p) && !isEdge(p) // edges reaching edges: the rule above
		},
		bad: func(dep string) bool { return isEdge(dep) || dep == "yella/replicate" },
		except: func(p, dep string) bool {
			return (dep == "yella/replicate" && isTooling(p)) || // the restore drill exercises replication
				(dep == "yella/connector/browser" && isTooling(p)) // the real-browser scraper benchmark drives the pool
		},
	},
	{
		rule:  "only the test kits use package testing (a library linking testing registers its flags in every program)",
		scope: func(p string) bool { return !isKit(p) },
		bad:   func(dep string) bool { return dep == "testing" },
	},
	{
		rule:  "libraries never reach tooling (benchmarks, reports, harnesses): only commands and examples run it",
		scope: func(p string) bool { return !isTooling(p) && !isCommand(p) },
		bad:   isTooling,
	},
	{
		rule:  "the benchmark report renders result files: it never reaches the engine or a store",
		scope: is("yella/internal/tools/report"),
		bad:   func(dep string) bool { return dep == "yella" || isStore(dep) },
	},
	{
		rule:   "only commands and tooling parse flags",
		scope:  func(p string) bool { return !isCommand(p) && !isTooling(p) },
		bad:    func(dep string) bool { return dep == "flag" },
		direct: true, // package testing imports flag: the kits reach it that way
	},
}

// Tooling lives under internal/tools: the benchmark suite and its command
// (bench, benchcmd), the report and page generator (report), the trust
// suite (trust), the crash and restore harnesses (crashtest, restoredrill)
// and the mutation check (mutation). Not library code: only commands,
// examples and tests use it.
func isTooling(p string) bool { return strings.HasPrefix(p, "yella/internal/tools/") }

// Operator edges: packages that expose an engine to operators.
func isEdge(p string) bool {
	switch p {
	case "yella/httpapi", "yella/dashboard", "yella/prommetrics", "yella/otel":
		return true
	}
	return isConnector(p)
}

// Connectors (below yella/connector) call downstream services from
// handlers: edges of the engine that nothing of the engine, the stores or
// the operator packages needs.
func isConnector(p string) bool { return strings.HasPrefix(p, "yella/connector/") }

func isStore(p string) bool { return p == "yella/store" || strings.HasPrefix(p, "yella/store/") }
func isConcreteStore(p string) bool {
	return strings.HasPrefix(p, "yella/store/") && p != "yella/store/storetest"
}
func isKit(p string) bool      { return p == "yella/store/storetest" || p == "yella/yellatest" }
func isInternal(p string) bool { return strings.HasPrefix(p, "yella/internal/") && !isTooling(p) } // internal helpers
func isCommand(p string) bool {
	return strings.HasPrefix(p, "yella/cmd/") || strings.HasPrefix(p, "yella/examples/")
}
func inModule(p string) bool { return p == "yella" || strings.HasPrefix(p, "yella/") }

// isStd: a standard library package (outside the module, and its first
// path element has no dot).
func isStd(p string) bool { return !inModule(p) && !strings.Contains(strings.Split(p, "/")[0], ".") }

func is(name string) func(string) bool { return func(p string) bool { return p == name } }

// importRule forbids the packages in scope a set of dependencies.
type importRule struct {
	rule   string
	scope  func(pkg string) bool
	bad    func(dep string) bool
	except func(pkg, dep string) bool // allowed after all (nil: none)
	direct bool                       // direct imports only
}

// importGraph maps each package (module packages shortened to "yella…")
// to its direct imports.
type importGraph map[string][]string

// checkImports returns one message per package and broken rule, naming the
// nearest forbidden dependency and the import chain that reaches it.
func checkImports(g importGraph) []string {
	var msgs []string
	pkgs := make([]string, 0, len(g))
	for p := range g {
		if inModule(p) {
			pkgs = append(pkgs, p)
		}
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		order, via := reach(g, p)
		for _, r := range importRules {
			if !r.scope(p) {
				continue
			}
			for _, dep := range order {
				if dep == p || !r.bad(dep) || (r.except != nil && r.except(p, dep)) {
					continue
				}
				if r.direct && via[dep] != p {
					continue
				}
				msgs = append(msgs, p+" reaches "+dep+" ("+chain(via, p, dep)+"): "+r.rule)
				break
			}
		}
	}
	return msgs
}

// reach walks g breadth-first from p: every package p depends on, nearest
// first, and for each the package that imports it on a shortest chain.
func reach(g importGraph, p string) (order []string, via map[string]string) {
	via = map[string]string{p: ""}
	order = []string{p}
	for i := 0; i < len(order); i++ {
		for _, dep := range g[order[i]] {
			if _, seen := via[dep]; !seen {
				via[dep] = order[i]
				order = append(order, dep)
			}
		}
	}
	return order, via
}

func chain(via map[string]string, from, to string) string {
	path := []string{to}
	for p := to; p != from; {
		p = via[p]
		path = append(path, p)
	}
	slices.Reverse(path)
	return strings.Join(path, " → ")
}

// goList returns the import graph of every package of the module and
// everything it depends on, as built for goos (test files excluded).
func goList(t *testing.T, goos string) importGraph {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	cmd := exec.Command(goCmd, "list", "-e", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Env = append(os.Environ(), "GOOS="+goos)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list (GOOS=%s): %v\n%s", goos, err, stderr.String())
	}
	g := importGraph{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		for i := range f {
			f[i] = shorten(f[i])
		}
		g[f[0]] = f[1:]
	}
	return g
}

func shorten(p string) string {
	if p == module {
		return "yella"
	}
	if rest, ok := strings.CutPrefix(p, module+"/"); ok {
		return "yella/" + rest
	}
	return p
}

// TestImportRules: the real tree obeys every rule, as built for each
// operating system the module supports.
func TestImportRules(t *testing.T) {
	for _, goos := range []string{"linux", "darwin", "windows"} {
		g := goList(t, goos)
		if len(g["yella/store/sqlitestore"]) == 0 || len(g["yella"]) == 0 {
			t.Fatalf("GOOS=%s: go list found no imports of the engine or the SQLite store", goos)
		}
		for _, msg := range checkImports(g) {
			t.Errorf("GOOS=%s: %s", goos, msg)
		}
	}
}

// packageFiles maps each package directory (relative, "." for the root) to
// its parsed non-test files.
func packageFiles(t *testing.T) map[string][]*ast.File {
	t.Helper()
	files := map[string][]*ast.File{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		files[dir] = append(files[dir], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestDocComments: every package and every exported name is documented.
func TestDocComments(t *testing.T) {
	files := packageFiles(t)
	for dir, fs := range files {
		pkgDoc := false
		for _, f := range fs {
			if f.Doc != nil {
				pkgDoc = true
			}
			if f.Name.Name == "main" {
				pkgDoc = true // commands are documented by their usage
			}
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if d.Name.IsExported() && d.Doc == nil && !isTestHelperMethod(d) {
						t.Errorf("%s: func %s has no doc comment", dir, d.Name.Name)
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() && d.Doc == nil && s.Doc == nil {
								t.Errorf("%s: type %s has no doc comment", dir, s.Name.Name)
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() && d.Doc == nil && s.Doc == nil && s.Comment == nil {
									t.Errorf("%s: %s has no doc comment", dir, n.Name)
								}
							}
						}
					}
				}
			}
		}
		if !pkgDoc {
			t.Errorf("package %s has no package comment", dir)
		}
	}
}

// isTestHelperMethod exempts methods that implement well-known interfaces
// (Error, String, Unwrap…), documented by the interface.
func isTestHelperMethod(d *ast.FuncDecl) bool {
	if d.Recv == nil {
		return false
	}
	switch d.Name.Name {
	case "Error", "String", "Unwrap", "Is", "Len", "Less", "Swap", "Push", "Pop", "MarshalJSON", "UnmarshalJSON":
		return true
	}
	return false
}
