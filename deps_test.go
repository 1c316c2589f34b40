package yella_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/yella-go/yella"

// packages maps each package directory (relative, "." for the root) to the
// imports of its non-test files, and returns the parsed files too.
func packages(t *testing.T) (map[string]map[string]bool, map[string][]*ast.File) {
	t.Helper()
	imports := map[string]map[string]bool{}
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
		if imports[dir] == nil {
			imports[dir] = map[string]bool{}
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			imports[dir][p] = true
		}
		files[dir] = append(files[dir], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return imports, files
}

// TestImportRules guards the architecture: data flows one way. Stores never
// import the engine; the engine never imports a concrete store; internal
// packages never import the engine.
func TestImportRules(t *testing.T) {
	imports, _ := packages(t)
	concrete := []string{module + "/store/memstore", module + "/store/sqlitestore", module + "/store/pgstore"}
	for dir, ims := range imports {
		isStore := dir == "store" || (strings.HasPrefix(dir, "store/") && dir != "store/storetest")
		for im := range ims {
			switch {
			case dir == "." && contains(concrete, im):
				t.Errorf("the root package imports the concrete store %s", im)
			case isStore && im == module:
				t.Errorf("store package %s imports the engine", dir)
			case isStore && strings.HasPrefix(im, module+"/store/storetest"):
				t.Errorf("store package %s imports the conformance suite outside tests", dir)
			case strings.HasPrefix(dir, "internal") && dir != "internal/crashtest" && im == module:
				// crashtest, like store/storetest, is a harness that drives
				// the real engine (see the next two rules).
				t.Errorf("internal package %s imports the engine", dir)
			case im == module+"/internal/crashtest" && dir != "internal/benchcmd" && dir != "replicate/restoredrill":
				// Only tests, the benchmark command (which verifies its
				// recovery drills with crashtest.Check) and the restore drill
				// (a harness itself, for its witness files) use the crash
				// harness.
				t.Errorf("package %s imports the crash-test harness outside tests", dir)
			case im == module+"/replicate/restoredrill":
				// The restore drill is a harness, like storetest: tests only.
				t.Errorf("package %s imports the restore drill outside tests", dir)
			case (dir == "." || isStore) && strings.HasPrefix(im, module+"/replicate"):
				t.Errorf("package %s imports replication: only the command wires it", dir)
			case im == module+"/store/storetest" && dir != "store/storetest":
				t.Errorf("package %s imports the store conformance suite outside tests", dir)
			case dir != "." && !strings.HasPrefix(dir, "cmd") && !strings.HasPrefix(dir, "examples") && dir != "internal/benchcmd" && im == "flag":
				// benchcmd is the benchmark command, shared by cmd/yella
				// and examples/benchmarks.
				t.Errorf("library package %s parses flags; only cmd may", dir)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestDocComments: every package and every exported name is documented.
func TestDocComments(t *testing.T) {
	_, files := packages(t)
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
