package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/sqlitestore"
)

var (
	uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	// Times printed as text have at most milliseconds: a longer fraction
	// is left in the transcript. JSON keeps the API's nanoseconds.
	timeRE     = regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d{3})?(Z|[+-]\d\d:\d\d)?`)
	jsonTimeRE = regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"`)
	hexRE      = regexp.MustCompile(`\b(apr|ten|cus|acct|inv|doc)_[0-9a-f]+\b`)
	tmpRE      = regexp.MustCompile(`/tmp/\S+/`)
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
	if args[0] == "help" || args[0] == "version" || args[0] == "nope" || len(args) == 1 || slices.Contains(args, "--server") {
		full = args
	}
	err := Run(context.Background(), full, &stdout, &stderr)
	text := stdout.String() + stderr.String()
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
		text = jsonTimeRE.ReplaceAllString(text, `"<time>"`)
		text = timeRE.ReplaceAllString(text, "<time>")
		text = tmpRE.ReplaceAllString(text, "<tmp>/")
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

// deferredDB makes a database as an application would: an approval
// process deferred one run (its follow-up waits for resume), and an
// export process left a dead letter.
func deferredDB(t *testing.T, path string) {
	t.Helper()
	st, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	eng.Register(yella.Process{Name: "approval-stage", On: "approval:needed", Run: func(c *yella.Ctx) yella.Result {
		return c.Defer("approval:completed", json.RawMessage(c.Payload()))
	}})
	eng.Register(yella.Process{Name: "export", On: "export:requested", Retry: &yella.Retry{Max: 0}, Run: func(c *yella.Ctx) yella.Result {
		return c.Error(errors.New("FTP server unreachable"))
	}})
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(ctx)
	if _, err := eng.EmitAndWait(ctx, "approval:needed", map[string]string{"approvalId": "apr_9f0e1d"}, yella.IdempotencyKey("apr-9")); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.EmitAndWait(ctx, "export:requested", map[string]string{"report": "monthly"}); err != nil {
		t.Fatal(err)
	}
}

// TestCLI drives the operator commands directly on a database file (no
// process holds it) and compares the transcript with a golden file: direct
// mode reads and acts on runs, and admits runs only for processes named
// with --process, since it has none of its own.
func TestCLI(t *testing.T) {
	t.Setenv("YELLA_TOKEN", "")
	s := &session{t: t, db: filepath.Join(t.TempDir(), "cli.db"), ids: map[string]string{}}
	// A database must exist: commands do not create one by accident.
	if _, err := s.run("runs", "list"); err == nil || !strings.Contains(err.Error(), "no database") {
		t.Fatalf("runs list on a missing database: %v", err)
	}
	deferredDB(t, s.db)
	steps := [][]string{
		{"runs", "list"},
		{"emit", "approval:needed", `{"approvalId":"apr_1","actor":"ops"}`, "--key", "apr-1"},
		{"emit", "approval:needed", `{"approvalId":"apr_1","actor":"ops"}`, "--key", "apr-1", "--process", "approval-stage"},
		{"emit", "approval:needed", `{"approvalId":"apr_1","actor":"ops"}`, "--key", "apr-1", "--process", "approval-stage"},
		{"emit", "webhook:received", `{"tenantId":"ten_1"}`, "--process", "webhook-validate,webhook-audit"},
		{"emit", "webhook:received", `{not json`},
		{"runs", "list", "--order", "oldest", "--limit", "1"},
		{"runs", "list", "--status", "bogus"},
		{"runs", "list", "--status", "dead-letter", "--json"},
	}
	for _, a := range steps {
		s.run(a...)
	}
	dead, deferred, fresh := s.id("<run-1>"), s.id("<run-2>"), s.id("<run-3>")
	for _, a := range [][]string{
		{"runs", "show", deferred},
		{"resume", deferred},
		{"resume", deferred, `{"by":"ana"}`, "--process", "approval-finish"},
		{"resume", deferred},
		{"cancel", fresh},
		{"cancel", fresh},
		{"retry", fresh},
		{"requeue", fresh},
		{"end-wait", fresh},
		{"signal", "--run", fresh, `{"by":"ana"}`},
		{"requeue", "--all"},
		{"requeue", "--all"},
		{"fenced"},
		{"fenced", "--retry", "--complete", "1"},
		{"fenced", "--complete", "{bad"},
		{"fenced", "--retry"},
		{"fenced", "--complete", `"sent"`, "--process", "webhook-audit", "--apply"},
		{"runs", "show", dead},
		{"runs", "show", "no-such-run"},
		{"runs", "list", "--read-only", "--limit", "2"},
		{"cancel", fresh, "--read-only"},
		{"emit", "x", "--read-only"},
		{"signal", "approval:apr_1", "--read-only"},
		{"end-wait", fresh, "--read-only"},
		{"runs", "list", "--token", "s3cret-value-not-to-echo"},
		{"runs", "list", "--token=s3cret-value-not-to-echo"},
		{"runs", "list", "--server", "http://10.1.2.3:3400", "--token-file", tokenFile(t)},
		{"runs", "list", "--server", "ftp://x"},
		{"runs", "list", "--read-only", "--server", "http://127.0.0.1:1"},
		{"runs", "list", "--bogus"},
		{"runs"},
		{"retry"},
		{"nope"},
	} {
		s.run(a...)
	}
	golden(t, "cli", s.out.String())
	if err := Run(context.Background(), []string{"emit", "x", "--token", "s3cret"}, io.Discard, io.Discard); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("--token: %v", err)
	}
}

// tokenFile writes a token to a file of the test.
func tokenFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "token")
	os.WriteFile(p, []byte("a-token-of-the-operator-0123456789\n"), 0o600)
	return p
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

// TestWording: errors name flags, not Go fields; counts agree with their
// nouns; no doubled words; times are RFC 3339 with milliseconds.
func TestWording(t *testing.T) {
	existing := filepath.Join(t.TempDir(), "there.db")
	os.WriteFile(existing, []byte("x"), 0o644)
	err := Run(context.Background(), []string{"restore", "--from", "file://" + t.TempDir(), "--to", existing}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "restore --force replaces it") || strings.Contains(err.Error(), "Force") {
		t.Errorf("restore over a database: %v", err)
	}
	for in, want := range map[int]string{0: "0 runs", 1: "1 run", 2: "2 runs"} {
		if got := plural(in, "run", "runs"); got != want {
			t.Errorf("plural(%d) = %q", in, got)
		}
	}
	for in, want := range map[string]string{
		"run: run not found: x":             "run not found: x",
		"cancel: run x is errored":          "cancel: run x is errored",
		"emit: no process listens to \"e\"": "emit: no process listens to \"e\"",
	} {
		if got := tidy(in); got != want {
			t.Errorf("tidy(%q) = %q", in, got)
		}
	}
	stampRE := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d)$`)
	if s := stamp(time.Date(2026, 11, 30, 5, 0, 0, 123456789, time.UTC)); !stampRE.MatchString(s) {
		t.Errorf("stamp: %q", s)
	}
}
