package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE = regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?`)
	hexRE  = regexp.MustCompile(`\b(apr|ten|cus|acct|inv|doc)_[0-9a-f]+\b`)
)

// session runs CLI commands against one database and normalises their
// output (ids by order of appearance, times) for golden files.
type session struct {
	t   *testing.T
	db  string
	ids map[string]string
	out strings.Builder
}

func (s *session) run(args ...string) (string, error) {
	s.t.Helper()
	var stdout, stderr bytes.Buffer
	full := append(append([]string{}, args...), "--db", s.db)
	if args[0] == "help" || args[0] == "version" || args[0] == "nope" {
		full = args
	}
	err := Run(context.Background(), full, &stdout, &stderr)
	text := stdout.String()
	if err != nil {
		text += "error: " + err.Error() + "\n"
	}
	norm := func(text string) string {
		text = uuidRE.ReplaceAllStringFunc(text, func(id string) string {
			if n, ok := s.ids[id]; ok {
				return n
			}
			s.ids[id] = fmt.Sprintf("<run-%d>", len(s.ids)+1)
			return s.ids[id]
		})
		text = timeRE.ReplaceAllString(text, "<time>")
		return hexRE.ReplaceAllString(text, "${1}_<hex>")
	}
	text = strings.ReplaceAll(text, s.db, "<db>")
	fmt.Fprintf(&s.out, "$ yella %s\n%s\n", norm(strings.Join(args, " ")), norm(text))
	return text, err
}

// id returns the real id of a normalised name.
func (s *session) id(name string) string {
	for id, n := range s.ids {
		if n == name {
			return id
		}
	}
	s.t.Fatalf("no run %s", name)
	return ""
}

// TestCLI drives the operator commands directly on a database file (no
// server running) and compares the transcript with a golden file.
func TestCLI(t *testing.T) {
	s := &session{t: t, db: filepath.Join(t.TempDir(), "cli.db"), ids: map[string]string{}}
	// A database must exist: commands do not create one by accident.
	if _, err := s.run("runs", "list"); err == nil || !strings.Contains(err.Error(), "no database") {
		t.Fatalf("runs list on a missing database: %v", err)
	}
	// "yella serve" creates it; here the store does, through an emit.
	os.WriteFile(s.db, nil, 0o644)
	steps := [][]string{
		{"emit", "approval:needed", `{"approvalId":"apr_1","actor":"ops"}`, "--key", "apr-1"},
		{"emit", "approval:needed", `{"approvalId":"apr_1","actor":"ops"}`, "--key", "apr-1"},
		{"emit", "webhook:received", `{"tenantId":"ten_1","customerId":"cus_1","eventType":"invoice.paid"}`},
		{"emit", "no:listener", `{}`},
		{"emit", "webhook:received", `{not json`},
		{"runs", "list"},
		{"runs", "list", "--order", "oldest", "--limit", "1"},
		{"runs", "list", "--status", "bogus"},
		{"runs", "list", "--process", "approval-stage", "--json"},
	}
	for _, a := range steps {
		s.run(a...)
	}
	first := s.id("<run-1>")
	for _, a := range [][]string{
		{"runs", "show", first},
		{"cancel", first},
		{"cancel", first},
		{"retry", first},
		{"requeue", first},
		{"requeue", "--all"},
		{"resume", first},
		{"runs", "show", "no-such-run"},
		{"retry"},
		{"nope"},
	} {
		s.run(a...)
	}
	golden(t, "cli", s.out.String())
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(path, []byte(got), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (UPDATE_GOLDEN=1 creates it)", err)
	}
	if string(want) != got {
		t.Errorf("output differs from %s (UPDATE_GOLDEN=1 rewrites it):\n%s", path, got)
	}
}

func TestHelpAndVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if err := Run(context.Background(), []string{"help"}, &out, &errb); err != nil || !strings.Contains(out.String(), "serve") {
		t.Fatalf("help: %v %q", err, out.String())
	}
	out.Reset()
	if err := Run(context.Background(), []string{"version"}, &out, &errb); err != nil || !strings.HasPrefix(out.String(), "yella ") {
		t.Fatalf("version: %v %q", err, out.String())
	}
	if err := Run(context.Background(), nil, &out, &errb); err == nil {
		t.Fatal("no command accepted")
	}
	if err := Run(context.Background(), []string{"serve", "--addr", "0.0.0.0:0"}, &out, &errb); err == nil || !strings.Contains(err.Error(), "requires a token") {
		t.Fatalf("serve beyond loopback without a token: %v", err)
	}
}
