package storetest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// Every function of this package that returns a list of cases is in the
// suite: a file of cases left out of the explicit list would never run.
func TestEveryGroupListed(t *testing.T) {
	listed := map[string]bool{}
	for _, group := range suite {
		name := runtime.FuncForPC(reflect.ValueOf(group).Pointer()).Name()
		listed[name[strings.LastIndex(name, ".")+1:]] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Type.Params.NumFields() != 0 || !returnsCases(fn.Type) || fn.Name.Name == "Cases" {
				continue
			}
			found++
			if !listed[fn.Name.Name] {
				t.Errorf("%s: %s returns cases but is not in the suite list (storetest.go)", path, fn.Name.Name)
			}
		}
	}
	if found != len(suite) {
		t.Errorf("found %d functions returning cases, the suite lists %d", found, len(suite))
	}
}

func returnsCases(ft *ast.FuncType) bool {
	if ft.Results == nil || len(ft.Results.List) != 1 {
		return false
	}
	at, ok := ft.Results.List[0].Type.(*ast.ArrayType)
	if !ok || at.Len != nil {
		return false
	}
	id, ok := at.Elt.(*ast.Ident)
	return ok && id.Name == "Case"
}

// Case names are unique and every behaviour number a case lists is in the
// catalogue (1–388), so the coverage table keys on real behaviours; the
// table across both suites is checked by the root package's
// TestCoverageTable.
func TestCaseNamesAndSpecItems(t *testing.T) {
	names := map[string]bool{}
	for _, c := range Cases() {
		if c.Name == "" || names[c.Name] {
			t.Errorf("empty or duplicate case name %q", c.Name)
		}
		names[c.Name] = true
		if c.Fn == nil {
			t.Errorf("case %s has no Fn", c.Name)
		}
		for _, n := range c.Spec {
			if n < 1 || n > 388 {
				t.Errorf("case %s lists behaviour %d; the catalogue numbers 1 to 388", c.Name, n)
			}
		}
	}
}

func TestNewIDIsAUUID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := newID()
		if len(id) != 36 || strings.Count(id, "-") != 4 || id[14] != '4' || seen[id] {
			t.Fatalf("newID() = %q (seen before: %v)", id, seen[id])
		}
		seen[id] = true
	}
}
