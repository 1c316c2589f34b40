package yella_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/yella-go/yella"
)

// eventConstName is the name an event type's constant must have: the words
// of its value, each capitalised, without the separators ("run:retry-scheduled"
// is RunRetryScheduled).
func eventConstName(value string) string {
	var b strings.Builder
	for _, w := range strings.FieldsFunc(value, func(r rune) bool { return r == ':' || r == '-' }) {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

func TestEventConstName(t *testing.T) {
	for _, c := range []struct{ value, want string }{
		{"run:dropped", "RunDropped"},
		{"run:retry-scheduled", "RunRetryScheduled"},
		{"effect:resolved", "EffectResolved"},
		{"internal:error", "InternalError"},
	} {
		if got := eventConstName(c.value); got != c.want {
			t.Errorf("eventConstName(%q) = %q, want %q", c.value, got, c.want)
		}
	}
}

// declaredEventTypes reads events.go and returns every constant declared
// with type EventType, name and value, in declaration order.
func declaredEventTypes(t *testing.T) (names, values []string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "events.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "EventType" {
				continue
			}
			for i, n := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					t.Fatalf("%s: value is not a string literal", n.Name)
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, n.Name)
				values = append(values, v)
			}
		}
	}
	return names, values
}

// TestEventTypeNamesMatchValues holds every lifecycle event to one
// vocabulary: a constant is named after its value's words, so a reader who
// sees "run:dead-lettered" in a stream finds RunDeadLettered, and
// EventTypes lists every constant declared.
func TestEventTypeNamesMatchValues(t *testing.T) {
	names, values := declaredEventTypes(t)
	if len(names) == 0 {
		t.Fatal("no EventType constants found in events.go")
	}
	for i, n := range names {
		if want := eventConstName(values[i]); n != want {
			t.Errorf("%s = %q: the constant of %q is named %s", n, values[i], values[i], want)
		}
		subject, what, ok := strings.Cut(values[i], ":")
		if !ok || subject == "" || what == "" || strings.ToLower(values[i]) != values[i] {
			t.Errorf("%s = %q: want lower-case \"<subject>:<what happened>\"", n, values[i])
		}
	}
	var listed []string
	for _, et := range yella.EventTypes() {
		listed = append(listed, string(et))
	}
	if !slices.Equal(listed, values) {
		t.Errorf("EventTypes() = %q\nwant the constants of events.go in order: %q", listed, values)
	}
}
