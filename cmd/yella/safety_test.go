package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

// The application of the safety test: a program with its own processes on
// its own database (run as this test binary with appEnv set). "fill" leaves
// runs in every state and waits to be killed; "hold" only holds the
// database's engine lock, as a running application does.
const appEnv = "YELLA_TEST_APP"

func appMain(mode, db string) {
	st, err := sqlitestore.Open(db, sqlitestore.Options{})
	if err != nil {
		fmt.Println("app:", err)
		os.Exit(3)
	}
	if mode == "hold" {
		fmt.Println("holding")
		for {
			time.Sleep(time.Hour)
		}
	}
	eng, err := yella.New(yella.Config{Store: st, Concurrency: 8, HandlerTimeout: -1})
	if err != nil {
		fmt.Println("app:", err)
		os.Exit(3)
	}
	procs := []yella.Process{
		{Name: "order-charge", On: "order:placed", Concurrency: 2, Overflow: yella.Queue(10), Run: func(c *yella.Ctx) yella.Result {
			_, err := yella.Effect(c, "charge", func(ctx context.Context) (int, error) {
				<-ctx.Done() // in flight when the program is killed
				return 0, ctx.Err()
			})
			return c.Error(err)
		}},
		{Name: "order-approve", On: "order:approval", Run: func(c *yella.Ctx) yella.Result {
			return c.Defer("order:approved", map[string]string{"by": "nobody yet"})
		}},
		{Name: "order-ship", On: "order:approved", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }},
		{Name: "order-export", On: "order:export", Retry: &yella.Retry{Max: 0}, Run: func(c *yella.Ctx) yella.Result {
			return c.Error(errors.New("export server down"))
		}},
		{Name: "order-receipt", On: "order:paid", Run: func(c *yella.Ctx) yella.Result {
			n, err := yella.Effect(c, "mail", func(context.Context) (int, error) { return 1, nil })
			if err != nil {
				return c.Error(err)
			}
			return c.OK(map[string]int{"mails": n})
		}},
	}
	for _, p := range procs {
		if err := eng.Register(p); err != nil {
			fmt.Println("app:", err)
			os.Exit(3)
		}
	}
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		fmt.Println("app:", err)
		os.Exit(3)
	}
	for i := range 4 {
		eng.Emit(ctx, "order:placed", map[string]int{"order": i}, yella.IdempotencyKey(fmt.Sprint("order-", i)))
	}
	for i := range 2 {
		eng.Emit(ctx, "order:approval", map[string]int{"order": i})
		eng.Emit(ctx, "order:export", map[string]int{"order": i})
		eng.Emit(ctx, "order:paid", map[string]int{"order": i})
	}
	want := map[string][2]any{
		"order-charge":  {[]store.Status{store.StatusRunning}, 2},
		"order-charge ": {[]store.Status{store.StatusIdle}, 2},
		"order-approve": {[]store.Status{store.StatusDeferred}, 2},
		"order-export":  {[]store.Status{store.StatusDead}, 2},
		"order-receipt": {[]store.Status{store.StatusCompleted}, 2},
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ok := true
		for p, w := range want {
			n, err := st.CountRuns(ctx, store.RunFilter{Process: strings.TrimSpace(p), Statuses: w[0].([]store.Status)})
			ok = ok && err == nil && n == int64(w[1].(int))
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			fmt.Println("app: the runs did not reach their states")
			os.Exit(3)
		}
	}
	fmt.Println("ready")
	for {
		time.Sleep(time.Hour)
	}
}

// snapshot is every row of the runs, timeline and effects tables, all
// columns, read without changing anything.
func snapshot(t *testing.T, db string) []string {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var out []string
	for _, table := range []string{"runs", "timeline", "effects"} {
		rows, err := conn.Query("SELECT * FROM " + table + " ORDER BY 1, 2")
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			b.WriteString(table)
			for i, v := range vals {
				if bs, ok := v.([]byte); ok {
					v = string(bs)
				}
				fmt.Fprintf(&b, " %s=%v", cols[i], v)
			}
			out = append(out, b.String())
		}
		rows.Close()
	}
	return out
}

func sameRows(t *testing.T, when string, want, got []string) {
	t.Helper()
	if strings.Join(want, "\n") == strings.Join(got, "\n") {
		return
	}
	have := map[string]bool{}
	for _, r := range got {
		have[r] = true
	}
	var diff []string
	for _, r := range want {
		if !have[r] {
			diff = append(diff, "- "+r)
		}
	}
	before := map[string]bool{}
	for _, r := range want {
		before[r] = true
	}
	for _, r := range got {
		if !before[r] {
			diff = append(diff, "+ "+r)
		}
	}
	t.Errorf("%s: the application's data changed (%d rows before, %d after):\n%s", when, len(want), len(got), strings.Join(diff, "\n"))
}

// lines collects a child's output, line by line.
type lines struct {
	mu  sync.Mutex
	all []string
	ch  chan string
}

func (l *lines) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l.mu.Lock()
		l.all = append(l.all, sc.Text())
		l.mu.Unlock()
		select {
		case l.ch <- sc.Text():
		default:
		}
	}
	close(l.ch)
}

func (l *lines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// wait returns the first submatch of re in the output, or "" when the
// output ends or 60 s pass.
func (l *lines) wait(re *regexp.Regexp) string {
	timeout := time.After(60 * time.Second)
	for {
		l.mu.Lock()
		for _, s := range l.all {
			if m := re.FindStringSubmatch(s); m != nil {
				l.mu.Unlock()
				return m[len(m)-1]
			}
		}
		l.mu.Unlock()
		select {
		case _, ok := <-l.ch:
			if !ok {
				return ""
			}
		case <-timeout:
			return ""
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// child is a running process of the test.
type child struct {
	cmd  *exec.Cmd
	out  *lines
	done chan error
}

// start starts cmd with its stdout and stderr collected; the process is
// killed when the test ends if it still runs.
func start(t *testing.T, cmd *exec.Cmd) *child {
	t.Helper()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	c := &child{cmd: cmd, out: &lines{ch: make(chan string, 1)}, done: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go c.out.read(pr)
	go func() { err := cmd.Wait(); pw.Close(); c.done <- err }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-c.out.ch // drained: the pipe is closed
	})
	return c
}

// stop sends sig and waits for the exit.
func (c *child) stop(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	c.cmd.Process.Signal(sig)
	select {
	case err := <-c.done:
		c.done <- err
		return err
	case <-time.After(60 * time.Second):
		c.cmd.Process.Kill()
		t.Errorf("%v did not stop within 60 s of %v", c.cmd.Args, sig)
		return errors.New("timeout")
	}
}

// yellaCmd is the yella command with args: the binary in YELLA_TEST_BIN
// (to run this test against another build, such as main's), or this test
// binary acting as yella (see TestMain).
func yellaCmd(env []string, args ...string) *exec.Cmd {
	return yellaCmdContext(context.Background(), env, args...)
}

func yellaCmdContext(ctx context.Context, env []string, args ...string) *exec.Cmd {
	var cmd *exec.Cmd
	if bin := os.Getenv("YELLA_TEST_BIN"); bin != "" {
		cmd = exec.CommandContext(ctx, bin, args...)
		cmd.Env = os.Environ()
	} else {
		a, _ := json.Marshal(args)
		cmd = exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "YELLA_CLI_CHILD="+string(a))
	}
	cmd.Env = append(cmd.Env, "YELLA_TOKEN=", "YELLA_DB=", "YELLA_SERVER=", "YELLA_ADDR=", "YELLA_REPLICATE=")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// cli runs one yella command to its end.
func cli(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := yellaCmdContext(ctx, env, args...).CombinedOutput()
	return string(out), err
}

var baseRE = regexp.MustCompile(`on (https?://\S+) `)

// serveProc starts "yella serve" with args and returns it with its base
// URL ("" if it did not start).
func serveProc(t *testing.T, env []string, args ...string) (*child, string) {
	t.Helper()
	c := start(t, yellaCmd(env, append([]string{"serve", "--log-level", "warn"}, args...)...))
	return c, c.out.wait(baseRE)
}

// squatter listens on addr and records every request it gets.
type squatter struct {
	mu   sync.Mutex
	reqs []string
	srv  *http.Server
}

func squat(t *testing.T, addr string) *squatter {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Logf("cannot listen on %s (%v): the squatter part is skipped", addr, err)
		return nil
	}
	s := &squatter{}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, fmt.Sprintf("%s %s Authorization=%q", r.Method, r.URL, r.Header.Get("Authorization")))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"runs":[],"total":0,"requeued":0}`)
	})}
	go s.srv.Serve(ln)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

func (s *squatter) got() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs...)
}

// TestOperatorToolsLeaveAnApplicationsDataAlone is the acceptance test of
// the operator tools on a database that belongs to another program. The
// program leaves runs in every state (idle, running and killed with
// SIGKILL mid-effect, deferred, dead, completed); then "yella serve" in its
// default mode, "yella serve --read-only" while the program holds the
// database, and the CLI (direct mode, read-only, and while a second server
// holds another database, with a listener squatting on 127.0.0.1:3400)
// are pointed at it. Every row of the program's runs, timeline and effects
// must be exactly as it was; the squatter must receive nothing, and the
// other server's database must not be acted on.
func TestOperatorToolsLeaveAnApplicationsDataAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")
	before := fillApplication(t, db)
	sq := squat(t, defaultAddr)
	const token = "a-token-of-the-operator-0123456789"
	env := []string{"YELLA_TOKEN=" + token}

	// 1. serve in its default mode on the application's database: no demo,
	// no retention; the application's runs stay as they are.
	srv, base := serveProc(t, env, "--db", db, "--addr", "127.0.0.1:0")
	if base == "" {
		t.Errorf("serve did not start: %s", srv.out.text())
	} else {
		checkServeOnApplication(t, srv, base, token)
	}
	if _, err := os.Stat(recordPath(db)); err == nil {
		t.Errorf("serve left its record %s after a clean stop", recordPath(db))
	}
	sameRows(t, "after yella serve", before, snapshot(t, db))

	// A server killed with SIGKILL leaves a stale record; another listener
	// then takes its port.
	var stale *squatter
	if killed, kbase := serveProc(t, env, "--db", db, "--addr", "127.0.0.1:0"); kbase != "" {
		killed.stop(t, syscall.SIGKILL)
		stale = squat(t, strings.TrimPrefix(kbase, "http://"))
	}

	// 2. The CLI on the file (no process holds it): it reads, ignoring the
	// stale record, and refuses to invent processes.
	if out, err := cli(t, env, "runs", "list", "--db", db, "--limit", "100"); err != nil || !strings.Contains(out, "10 runs of 10") {
		t.Errorf("runs list in direct mode: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"emit", "webhook:received", `{}`, "--db", db},
		{"emit", "order:placed", `{"order":9}`, "--db", db},
		{"resume", deferredRun(t, db), "--db", db},
	} {
		if out, err := cli(t, env, args...); err == nil || !strings.Contains(out, "--process") {
			t.Errorf("yella %s in direct mode: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	sameRows(t, "after the CLI in direct mode", before, snapshot(t, db))

	// 3. The application runs (holds the lock); a second server holds
	// another database (the same application's data) on another port.
	other := filepath.Join(dir, "other.db")
	otherBefore := fillApplication(t, other)
	osrv, obase := serveProc(t, env, "--db", other, "--addr", "127.0.0.1:0")
	if obase == "" {
		t.Errorf("the second server did not start: %s", osrv.out.text())
	}
	hold := start(t, appCmd("hold", db))
	if hold.out.wait(regexp.MustCompile(`^(holding)$`)) == "" {
		t.Fatalf("the application did not start: %s", hold.out.text())
	}
	checkCLIWhileHeld(t, env, db, hold.cmd.Process.Pid, stale != nil)
	ro, robase := serveProc(t, env, "--db", db, "--addr", "127.0.0.1:0", "--read-only")
	if robase == "" {
		t.Errorf("serve --read-only did not start while the application holds the database: %s", ro.out.text())
	} else {
		checkServeReadOnly(t, ro, robase, token, db)
	}
	if obase != "" {
		// The CLI finds the second server through its record, checks it, and
		// only then sends the token.
		if out, err := cli(t, env, "runs", "list", "--db", other); err != nil || !strings.Contains(out, "10 runs of 10") {
			t.Errorf("runs list --db other.db through its server: %v\n%s", err, out)
		}
		osrv.stop(t, syscall.SIGTERM)
		sameRows(t, "the second server's database", otherBefore, snapshot(t, other))
	}
	hold.stop(t, syscall.SIGKILL)
	sameRows(t, "after the CLI and serve --read-only while the application ran", before, snapshot(t, db))
	if got := sq.got(); len(got) > 0 {
		t.Errorf("the listener on %s received requests:\n%s", defaultAddr, strings.Join(got, "\n"))
	}
	if got := stale.got(); len(got) > 0 {
		t.Errorf("the listener on the killed server's port received requests:\n%s", strings.Join(got, "\n"))
	}
}

// appRuns is how many runs the application's fill mode leaves.
const appRuns = 10

// fillApplication runs the application on db until it has left its runs
// in every state, kills it with SIGKILL mid-effect, and returns the
// database's rows.
func fillApplication(t *testing.T, db string) []string {
	t.Helper()
	app := start(t, appCmd("fill", db))
	if app.out.wait(regexp.MustCompile(`^(ready)$`)) == "" {
		t.Fatalf("the application did not get ready: %s", app.out.text())
	}
	app.stop(t, syscall.SIGKILL)
	before := snapshot(t, db)
	n := 0
	for _, r := range before {
		if strings.HasPrefix(r, "runs ") {
			n++
		}
	}
	if n != appRuns {
		t.Fatalf("the application left %d runs, want %d", n, appRuns)
	}
	return before
}

// checkServeOnApplication: serve at base, on the application's database,
// registers none of its processes, lists its runs, and says in its first
// lines that it runs no engine, no demo and no retention.
func checkServeOnApplication(t *testing.T, srv *child, base, token string) {
	t.Helper()
	var procs struct {
		Processes []struct {
			Name       string
			Registered bool
		} `json:"processes"`
	}
	err := getJSON(base+"/api/processes", token, &procs)
	if err != nil {
		t.Errorf("processes: %v", err)
	}
	for _, p := range procs.Processes { // the application's are listed as not registered here
		if p.Registered {
			t.Errorf("serve registered process %s on the application's database", p.Name)
		}
	}
	var page struct {
		Runs []struct{ Process string } `json:"runs"`
	}
	if err := getJSON(base+"/api/runs?limit=100", token, &page); err != nil || len(page.Runs) != appRuns {
		t.Errorf("serve lists %d runs (%v), want the application's %d", len(page.Runs), err, appRuns)
	}
	time.Sleep(time.Second) // the engine's first background passes, a demo's first events
	if err := srv.stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("serve exited with %v: %s", err, srv.out.text())
	}
	out := srv.out.text()
	for _, want := range []string{"(existing, 10 runs)", "engine       not started", "demo         off: the database holds 10 runs of processes the demo does not have",
		"retention    off: the database holds other processes' runs", "tls          off", "replication  off"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve's first lines lack %q:\n%s", want, out)
		}
	}
}

// checkCLIWhileHeld: while the application (process pid) holds db, the
// CLI refuses to act on it, naming the process and --server (and calling
// a dead server's record stale), reads it with --read-only and refuses a
// change even then.
func checkCLIWhileHeld(t *testing.T, env []string, db string, pid int, staleRecord bool) {
	t.Helper()
	for _, args := range [][]string{
		{"runs", "list", "--db", db},
		{"requeue", "--all", "--db", db},
		{"emit", "webhook:received", `{}`, "--db", db},
		{"retry", deferredRun(t, db), "--db", db},
	} {
		out, err := cli(t, env, args...)
		if err == nil || !strings.Contains(out, fmt.Sprint("process ", pid)) || !strings.Contains(out, "--server") {
			t.Errorf("yella %s while the application holds the database: %v\n%s", strings.Join(args, " "), err, out)
		}
		if staleRecord && !strings.Contains(out, "stale") {
			t.Errorf("yella %s does not call the record of the killed server stale:\n%s", strings.Join(args, " "), out)
		}
	}
	if out, err := cli(t, env, "runs", "list", "--db", db, "--read-only", "--limit", "100"); err != nil || !strings.Contains(out, "10 runs of 10") {
		t.Errorf("runs list --read-only while the application holds the database: %v\n%s", err, out)
	}
	if out, err := cli(t, env, "cancel", deferredRun(t, db), "--db", db, "--read-only"); err == nil || !strings.Contains(out, "READ_ONLY") {
		t.Errorf("cancel --read-only: %v\n%s", err, out)
	}
}

// checkServeReadOnly: serve --read-only at base, while the application
// holds db, lists its runs, refuses every change and says it runs no
// engine.
func checkServeReadOnly(t *testing.T, ro *child, base, token, db string) {
	t.Helper()
	var page struct {
		Runs []json.RawMessage `json:"runs"`
	}
	if err := getJSON(base+"/api/runs?limit=100", token, &page); err != nil || len(page.Runs) != appRuns {
		t.Errorf("serve --read-only lists %d runs (%v)", len(page.Runs), err)
	}
	for _, path := range []string{"/api/emit", "/api/dead-letters/requeue", "/api/runs/" + deferredRun(t, db) + "/resume"} {
		code, body := post(base+path, token, `{"event":"order:placed"}`)
		if code != http.StatusForbidden || !strings.Contains(body, "READ_ONLY") {
			t.Errorf("POST %s on serve --read-only: %d %s", path, code, body)
		}
	}
	if err := ro.stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("serve --read-only exited with %v: %s", err, ro.out.text())
	}
	if out := ro.out.text(); !strings.Contains(out, "none (--read-only)") {
		t.Errorf("serve --read-only does not say so:\n%s", out)
	}
}

func appCmd(mode, db string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), appEnv+"="+mode+":"+db)
	return cmd
}

// deferredRun is the id of a deferred run of the application.
func deferredRun(t *testing.T, db string) string {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var id string
	if err := conn.QueryRow("SELECT id FROM runs WHERE status = 'deferred' ORDER BY seq LIMIT 1").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func getJSON(url, token string, out any) error {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

func post(url, token, body string) (int, string) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
