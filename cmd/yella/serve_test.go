package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/yella-go/yella/store/sqlitestore"
)

// The test binary doubles as the yella command: with YELLA_CLI_CHILD set
// it runs the arguments in it (JSON) and exits.
func TestMain(m *testing.M) {
	if app := os.Getenv(appEnv); app != "" {
		mode, db, _ := strings.Cut(app, ":")
		appMain(mode, db)
		return
	}
	if raw := os.Getenv("YELLA_CLI_CHILD"); raw != "" {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			os.Exit(3)
		}
		if err := Run(context.Background(), args, os.Stdout, os.Stderr); err != nil {
			os.Stderr.WriteString("yella: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var servingRE = regexp.MustCompile(`on (https?://\S+) `)

// TestServeProcess starts "yella serve" as a real process, uses the API,
// the dashboard and /metrics, and stops it with SIGTERM: it must exit 0,
// release the database and leave it intact.
func TestServeProcess(t *testing.T) {
	db := filepath.Join(t.TempDir(), "serve.db")
	args, _ := json.Marshal([]string{"serve", "--db", db, "--addr", "127.0.0.1:0", "--demo-rate", "20", "--log-level", "warn"})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "YELLA_CLI_CHILD="+string(args))
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	var base string
	for lines.Scan() {
		if m := servingRE.FindStringSubmatch(lines.Text()); m != nil {
			base = m[1]
			break
		}
	}
	if base == "" {
		t.Fatalf("serve did not start: %s", stderr.String())
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var health struct{ Status string }
	if code, body := get("/api/health"); code != 200 || json.Unmarshal([]byte(body), &health) != nil || health.Status != "ok" {
		t.Fatalf("health: %d %s", code, body)
	}
	resp, err := http.Post(base+"/api/emit", "application/json", strings.NewReader(`{"event":"approval:needed","payload":{"approvalId":"apr_x","actor":"ops"}}`))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("emit: %v %v", resp, err)
	}
	resp.Body.Close()
	if code, body := get("/"); code != 200 || !strings.Contains(body, "<html") {
		t.Fatalf("dashboard: %d", code)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "yella_queue_runs") {
		t.Fatalf("metrics: %d %s", code, body)
	}
	// Let the demo put handlers in flight, then stop.
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	var rest strings.Builder
	go func() {
		for lines.Scan() {
			rest.WriteString(lines.Text() + "\n")
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exited with %v: %s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop within 60s of SIGTERM")
	}
	if !strings.Contains(rest.String(), "yella stopped") {
		t.Errorf("no clean stop: %q %s", rest.String(), stderr.String())
	}
	st, err := sqlitestore.Open(db, sqlitestore.Options{})
	if err != nil {
		t.Fatalf("database after the stop: %v", err)
	}
	st.Close()
}

// TestServeReplicateRestore: "yella serve --replicate" ships the database
// to a file replica; after a SIGTERM, "yella restore" rebuilds it in a new
// file holding the admitted runs, and refuses to overwrite without --force.
func TestServeReplicateRestore(t *testing.T) {
	dir := t.TempDir()
	replica := "file://" + filepath.Join(dir, "replica")
	base := startServe(t, "--replicate", replica, "--replicate-interval", "100ms", "--demo-rate", "0.001")
	for i := range 3 {
		resp, err := http.Post(base+"/api/emit", "application/json", strings.NewReader(`{"event":"export:requested","idempotencyKey":"k`+string(rune('0'+i))+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("emit: %d", resp.StatusCode)
		}
	}
	time.Sleep(400 * time.Millisecond) // a few sync intervals
	restored := filepath.Join(dir, "restored.db")
	var out, errb strings.Builder
	if err := Run(context.Background(), []string{"restore", "--from", replica, "--to", restored}, &out, &errb); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if !strings.Contains(out.String(), "integrity_check ok") {
		t.Errorf("restore said %q", out.String())
	}
	if err := Run(context.Background(), []string{"restore", "--from", replica, "--to", restored}, &out, &errb); err == nil {
		t.Fatal("restore over an existing database without --force succeeded")
	}
	out.Reset()
	if err := Run(context.Background(), []string{"runs", "list", "--db", restored, "--json"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), `"event": "export:requested"`); n != 3 {
		t.Fatalf("the restored database has %d of the 3 admitted runs:\n%s", n, out.String())
	}
	if err := Run(context.Background(), []string{"restore", "--from", "ftp://x/y", "--to", filepath.Join(dir, "x.db")}, &out, &errb); err == nil {
		t.Fatal("a malformed replica URL was accepted")
	}
}

// TestCLIAgainstServer: the operator commands work against a running
// server's API (--server), including its errors.
func TestCLIAgainstServer(t *testing.T) {
	base := startServe(t, "--demo-rate", "0.001")
	run := func(args ...string) (string, error) {
		var out, errb strings.Builder
		err := Run(context.Background(), append(args, "--server", base), &out, &errb)
		return out.String(), err
	}
	out, err := run("emit", "export:requested", `{"report":"cli"}`, "--key", "cli-1")
	if err != nil || !strings.Contains(out, "admitted 1 run\n") {
		t.Fatalf("emit: %v %q", err, out)
	}
	id := uuidRE.FindString(out)
	if out, err := run("emit", "export:requested", "--key", "cli-1"); err != nil || !strings.Contains(out, "already admitted") {
		t.Fatalf("emit again: %v %q", err, out)
	}
	if out, err := run("runs", "show", id); err != nil || !strings.Contains(out, "legacy-export") {
		t.Fatalf("runs show: %v %q", err, out)
	}
	if out, err := run("runs", "list", "--process", "legacy-export"); err != nil || !strings.Contains(out, id) {
		t.Fatalf("runs list: %v %q", err, out)
	}
	if _, err := run("resume", id); err == nil || !strings.Contains(err.Error(), "INVALID_RUN_STATE") {
		t.Fatalf("resume of a run that is not deferred: %v", err)
	}
	if err := Run(context.Background(), []string{"runs", "list", "--server", "http://127.0.0.1:1"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("an unreachable server: %v", err)
	}
}
