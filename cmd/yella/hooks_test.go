package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/yella-go/yella/connector/webhook"
)

// Every bad --hook is a startup error that names the flag and the source,
// and never echoes a secret.
func TestHookFlagErrors(t *testing.T) {
	env := map[string]string{"GOOD": "whsec_sekrit"}
	getenv := func(k string) string { return env[k] }
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte("\n\n"), 0o600)
	for _, tc := range []struct{ value, want string }{
		{"stripe", "--hook stripe: want NAME=KIND:EVENT"},
		{"=stripe:e,secret-env=GOOD", `want NAME=KIND:EVENT`},
		{"a/b=stripe:e,secret-env=GOOD", "--hook a/b: the name is a path element"},
		{"s=paypal:e,secret-env=GOOD", "--hook s: KIND must be one of stripe, github, slack, hmac"},
		{"s=stripe,secret-env=GOOD", "--hook s: the EVENT to emit is missing"},
		{"s=stripe:e", "--hook s: a secret is required: secret-env=VAR or secret-file=FILE"},
		{"s=stripe:e,secret=whsec_sekrit", "--hook s: secrets never go on the command line"},
		{"s=stripe:e,secret-env=MISSING", "--hook s: secret-env=MISSING: the environment variable is unset or empty"},
		{"s=stripe:e,secret-file=" + empty, "the file holds no secret"},
		{"s=stripe:e,secret-file=/nonexistent/secret", "--hook s: secret-file=/nonexistent/secret:"},
		{"s=stripe:e,secret-env=GOOD,tolerance=soon", "--hook s: tolerance=soon: want a positive duration"},
		{"s=github:e,secret-env=GOOD,tolerance=1m", "--hook s: option tolerance is not for github"},
		{"s=stripe:e,secret-env=GOOD,header=X-Sig", "--hook s: option header is for KIND hmac, not stripe"},
		{"s=hmac:e,secret-env=GOOD", "--hook s: KIND hmac needs header=NAME"},
		{"s=stripe:e,secret-env=GOOD,colour=blue", `--hook s: unknown option "colour"`},
		{"s=stripe:e,secret-env=GOOD,process=", `--hook s: option "process" needs a value`},
	} {
		_, err := parseHooks([]string{tc.value}, "", getenv)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "sekrit") {
			t.Errorf("--hook %s: %v, want …%s…", tc.value, err, tc.want)
		}
	}
	if _, err := parseHooks([]string{"s=stripe:e,secret-env=GOOD", "s=github:f,secret-env=GOOD"}, "", getenv); err == nil || !strings.Contains(err.Error(), "--hook s: the name is given twice") {
		t.Errorf("duplicate name: %v", err)
	}
	specs, err := parseHooks([]string{"gh=github:github:{type},secret-env=GOOD,secret-file=" + writeFile(t, "old\nnew\n"),
		"x=hmac:thing:made,secret-env=GOOD,header=X-Sig,prefix=sha256=,timestamp-header=X-Ts,id-header=X-Id,tolerance=2m"}, "", getenv)
	if err != nil {
		t.Fatal(err)
	}
	if g := specs[0].source.Verifier.(webhook.GitHub); strings.Join(g.Secrets, " ") != "whsec_sekrit old new" || specs[0].event != "github:{type}" {
		t.Errorf("github spec %+v", specs[0])
	}
	want := webhook.HMAC{Secrets: []string{"whsec_sekrit"}, Header: "X-Sig", Prefix: "sha256=", TimestampHeader: "X-Ts", IDHeader: "X-Id", Tolerance: 2 * time.Minute}
	if got := specs[1].source.Verifier.(webhook.HMAC); got.Header != want.Header || got.Prefix != want.Prefix || got.TimestampHeader != want.TimestampHeader ||
		got.IDHeader != want.IDHeader || got.Tolerance != want.Tolerance || specs[1].event != "thing:made" {
		t.Errorf("hmac spec %+v", got)
	}

	// A --hook-file adds its lines to the --hook values; its errors name
	// the file and the line.
	file := writeFile(t, "# sources\n\nsl=slack:slack:command,secret-env=GOOD\n  gl=github:github:push,secret-env=GOOD  \n")
	if specs, err := parseHooks([]string{"s=stripe:e,secret-env=GOOD"}, file, getenv); err != nil || len(specs) != 3 || specs[1].name != "sl" || specs[2].name != "gl" {
		t.Errorf("--hook-file: %v %+v", err, specs)
	}
	bad := writeFile(t, "ok=stripe:e,secret-env=GOOD\n\nbad=stripe:e,secret-env=NOPE\n")
	if _, err := parseHooks(nil, bad, getenv); err == nil || !strings.Contains(err.Error(), "--hook-file "+bad+" line 3: --hook bad: secret-env=NOPE") {
		t.Errorf("--hook-file error: %v", err)
	}
	if _, err := parseHooks(nil, "/nonexistent/hooks", getenv); err == nil || !strings.Contains(err.Error(), "--hook-file: open /nonexistent/hooks") {
		t.Errorf("--hook-file missing: %v", err)
	}
	if _, err := parseHooks([]string{"s=stripe:e,secret-env=GOOD"}, writeFile(t, "s=github:e,secret-env=GOOD\n"), getenv); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("a name in both: %v", err)
	}

	// The checks that need the engine: a fixed event must have a
	// listener, and placeholders only where no engine runs.
	t.Setenv("TEST_HOOK_SECRET", "whsec_sekrit")
	db := filepath.Join(t.TempDir(), "hooks.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--demo=false", "--hook", "s=stripe:payment:received,secret-env=TEST_HOOK_SECRET"}, `--hook s: no process listens to "payment:received" on this server: name the processes`},
		{[]string{"--demo", "--hook", "s=stripe:payment:received,secret-env=TEST_HOOK_SECRET,process=billing"}, "--hook s: process= names processes that run elsewhere"},
		{[]string{"--demo=false", "--hook", "s=stripe:stripe:{type},secret-env=TEST_HOOK_SECRET,process=billing"}, "--hook s: process= needs a fixed EVENT"},
		{[]string{"--demo=false", "--hook", "s=stripe:stripe:{type},secret-env=TEST_HOOK_SECRET"}, `--hook s: no process on this server listens to an event of the form "stripe:{type}"`},
		{[]string{"--read-only", "--hook", "s=stripe:e,secret-env=TEST_HOOK_SECRET"}, "--hook changes the database"},
	} {
		args := append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0"}, tc.args...)
		err := Run(context.Background(), args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "sekrit") {
			t.Errorf("serve %s: %v, want …%s…", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServeWebhooks starts "yella serve" as a real process with a token
// and a Stripe source, and posts a signed event twice and a tampered one
// without the token: exactly one run is admitted, each request is counted
// on /metrics, and the rest of the server still needs the token. Then the
// server is killed with SIGKILL and started again on the database: the
// provider's next retry of the event still admits nothing.
func TestServeWebhooks(t *testing.T) {
	const token, secret = "test-token-0123456789", "whsec_serve_test"
	db := filepath.Join(t.TempDir(), "hooks.db")
	launch := func() (*child, string) {
		srv, base := serveProc(t, []string{"YELLA_TOKEN=" + token, "TEST_STRIPE_SECRET=" + secret},
			"--db", db, "--addr", "127.0.0.1:0", "--demo=false",
			"--hook", "stripe=stripe:payment:received,secret-env=TEST_STRIPE_SECRET,process=billing")
		if base == "" {
			t.Fatalf("serve did not start:\n%s", srv.out.text())
		}
		return srv, base
	}
	srv, base := launch()
	if !strings.Contains(srv.out.text(), "/hooks/stripe (stripe → payment:received)") {
		t.Errorf("the summary does not list the hook:\n%s", srv.out.text())
	}
	deliver := func(signed, sent string) int {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(ts + "." + signed))
		req, _ := http.NewRequest("POST", base+"/hooks/stripe", strings.NewReader(sent))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(m.Sum(nil)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	body := `{"id":"evt_serve_1","type":"payment_intent.succeeded","amount":4200}`
	if code := deliver(body, body); code != http.StatusAccepted {
		t.Fatalf("first delivery: %d\n%s", code, srv.out.text())
	}
	if code := deliver(body, body); code != http.StatusOK {
		t.Fatalf("retry: %d", code)
	}
	if code := deliver(body, strings.Replace(body, "4200", "1", 1)); code != http.StatusUnauthorized {
		t.Fatalf("tampered: %d", code)
	}
	get := func(path string, auth bool) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	oneRun := func(when string) {
		t.Helper()
		code, out := get("/api/runs?event=payment:received", true)
		var page struct {
			Runs []struct {
				Process, Status, IdempotencyKey string
				Payload                         json.RawMessage
			}
		}
		if code != 200 || json.Unmarshal([]byte(out), &page) != nil {
			t.Fatalf("%s: runs: %d %s", when, code, out)
		}
		if len(page.Runs) != 1 || page.Runs[0].Process != "billing" || page.Runs[0].IdempotencyKey != "stripe:evt_serve_1" {
			t.Fatalf("%s: want one run of billing under stripe:evt_serve_1, got %s", when, out)
		}
	}
	if code, _ := get("/api/runs?event=payment:received", false); code != http.StatusUnauthorized {
		t.Errorf("the API without the token: %d", code)
	}
	oneRun("after three deliveries")
	_, metrics := get("/metrics", true)
	for _, want := range []string{
		`yella_webhook_requests_total{outcome="admitted",source="stripe"} 1`,
		`yella_webhook_requests_total{outcome="duplicate",source="stripe"} 1`,
		`yella_webhook_requests_total{outcome="bad-signature",source="stripe"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	srv.stop(t, syscall.SIGKILL)
	srv, base = launch()
	if code := deliver(body, body); code != http.StatusOK {
		t.Fatalf("retry after SIGKILL and restart: %d\n%s", code, srv.out.text())
	}
	oneRun("after the restart")
	if err := srv.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("serve exited with %v:\n%s", err, srv.out.text())
	}
}

func TestAnyOfForm(t *testing.T) {
	events := map[string]bool{"stripe:invoice.paid": true, "github:push:main": true}
	for form, want := range map[string]bool{
		"stripe:{type}":             true,
		"github:{type}:main":        true,
		"{type}":                    true,
		"slack:{type}":              false,
		"stripe:invoice.paid{type}": false, // {type} is never empty
		"github:{type}:dev":         false,
	} {
		if got := anyOfForm(events, form); got != want {
			t.Errorf("%s: %v, want %v", form, got, want)
		}
	}
}
