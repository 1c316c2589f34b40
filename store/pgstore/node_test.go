package pgstore_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/tools/crashtest"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// The multi-process tests re-execute the test binary as engine processes
// (nodes) on one schema: nodeEnv carries a node's JSON nodeConfig.
const nodeEnv = "YELLA_PGSTORE_NODE"

type nodeConfig struct {
	URL, Schema string
	Name        string
	Witness     string // effect bodies, one line each (crashtest.WitnessLine)
	Acks        string // acknowledged admissions' keys
	Log         string // the node's epoch-carrying writes and their results
	Emit        int    // runs this process emits, one every EmitEvery
	EmitEvery   time.Duration
	EffectDelay time.Duration // how long each effect body takes
	Effects     int           // effects per run (1 or 2)
	// Chain: each run, once its effects are done, is followed by a
	// second stage with one effect of its own, which the node that ends
	// the first stage starts itself (Engine: chains stay on their node).
	Chain       bool
	Concurrency int
	Heartbeat   time.Duration // pgstore.Options.NodeHeartbeat
	Timeout     time.Duration // pgstore.Options.NodeTimeout
}

// nodeMain runs the test binary as a node process when the environment
// asks for it; it reports whether it did.
func nodeMain() bool {
	raw := os.Getenv(nodeEnv)
	if raw == "" {
		return false
	}
	var cfg nodeConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "node: bad config:", err)
		os.Exit(2)
	}
	if err := runNode(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

// writeLog wraps a node's store and logs every write made for an attempt
// (it carries the attempt's epoch) with its result: "<unix ns> <method>
// <run> <epoch> <ok|fenced|error>". Lines are written unbuffered, so they
// survive a SIGKILL of the process.
type writeLog struct {
	*pgstore.Store
	mu sync.Mutex
	f  *os.File
}

func (w *writeLog) log(method, run string, epoch int64, err error) {
	res := "ok"
	switch {
	case errors.Is(err, store.ErrFenced):
		res = "fenced"
	case err != nil:
		res = "error"
	}
	w.mu.Lock()
	fmt.Fprintf(w.f, "%d %s %s %d %s\n", time.Now().UnixNano(), method, run, epoch, res)
	w.mu.Unlock()
}

func (w *writeLog) Update(ctx context.Context, u store.Update) (store.UpdateResult, error) {
	res, err := w.Store.Update(ctx, u)
	if u.Epoch != 0 {
		w.log("update", u.RunID, u.Epoch, err)
	}
	return res, err
}

func (w *writeLog) StartEffect(ctx context.Context, runID string, epoch int64, key string, now time.Time) error {
	err := w.Store.StartEffect(ctx, runID, epoch, key, now)
	w.log("start-effect", runID, epoch, err)
	return err
}

func (w *writeLog) FinishEffect(ctx context.Context, runID string, epoch int64, key string, st store.EffectStatus, out json.RawMessage, msg string, now time.Time) error {
	err := w.Store.FinishEffect(ctx, runID, epoch, key, st, out, msg, now)
	w.log("finish-effect", runID, epoch, err)
	return err
}

// QueueFinishEffect logs the queued write once its result is known (the
// engine waits for it on a goroutine of its own).
func (w *writeLog) QueueFinishEffect(ctx context.Context, runID string, epoch int64, key string, st store.EffectStatus, out json.RawMessage, msg string, now time.Time) func() error {
	wait := w.Store.QueueFinishEffect(ctx, runID, epoch, key, st, out, msg, now)
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			err = wait()
			w.log("finish-effect", runID, epoch, err)
		})
		return err
	}
}

func runNode(cfg nodeConfig) error {
	ctx := context.Background()
	st, err := pgstore.Open(ctx, cfg.URL, pgstore.Options{Schema: cfg.Schema, NodeHeartbeat: cfg.Heartbeat, NodeTimeout: cfg.Timeout})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(cfg.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	ws := &writeLog{Store: st, f: f}
	eng, err := yella.New(yella.Config{Store: ws, Concurrency: cfg.Concurrency, Retry: &yella.Retry{Max: 30, Backoff: yella.Fixed(10 * time.Millisecond)}})
	if err != nil {
		return err
	}
	effect := func(c *yella.Ctx, key string) error {
		_, err := yella.Effect(c, key, func(context.Context) (string, error) {
			line, _ := json.Marshal(crashtest.WitnessLine{Run: c.RunID(), Key: yella.MakeKey(key).String(), Attempt: c.Attempt(), PID: os.Getpid()})
			if err := crashtest.AppendLine(cfg.Witness, string(line)); err != nil {
				return "", err
			}
			time.Sleep(cfg.EffectDelay) // ignores the context, as a stalled call would
			return "receipt-" + c.RunID(), nil
		})
		return err
	}
	err = eng.Register(yella.Process{Name: "job", On: "job", Run: func(c *yella.Ctx) yella.Result {
		for i := range max(cfg.Effects, 1) {
			if err := effect(c, "charge"+strconv.Itoa(i)); err != nil {
				return c.Error(err)
			}
		}
		if cfg.Chain {
			return c.OK(nil, yella.Then("job:done"))
		}
		return c.OK(nil)
	}})
	if err != nil {
		return err
	}
	if cfg.Chain {
		err = eng.Register(yella.Process{Name: "ship", On: "job:done", Run: func(c *yella.Ctx) yella.Result {
			if err := effect(c, "ship"); err != nil {
				return c.Error(err)
			}
			return c.OK(nil)
		}})
		if err != nil {
			return err
		}
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	if err := eng.Start(ctx); err != nil {
		return err
	}
	fmt.Printf("owner %s\n", eng.Owner())
	emitted := make(chan error, 1)
	go func() {
		for i := range cfg.Emit {
			key := fmt.Sprintf("k-%s-%d-%d", cfg.Name, os.Getpid(), i)
			if _, err := eng.Emit(ctx, "job", map[string]int{"i": i}, yella.IdempotencyKey(key)); err != nil {
				emitted <- err
				return
			}
			if err := crashtest.AppendLine(cfg.Acks, key); err != nil {
				emitted <- err
				return
			}
			time.Sleep(cfg.EmitEvery)
		}
		emitted <- nil
	}()
	for {
		select {
		case err := <-emitted:
			if err != nil {
				return err
			}
			fmt.Println("emitted")
			emitted = nil
		case <-stop:
			sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			if err := eng.Stop(sctx); err != nil {
				return err
			}
			return st.Close()
		}
	}
}

// nodeProc is a running node process.
type nodeProc struct {
	cmd     *exec.Cmd
	owner   string
	emitted chan struct{}
	exited  chan struct{}
}

// startNode starts a node process and waits until its engine started.
func startNode(t *testing.T, cfg nodeConfig) *nodeProc {
	t.Helper()
	raw, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), nodeEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &nodeProc{cmd: cmd, emitted: make(chan struct{}), exited: make(chan struct{})}
	owner := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			switch l := sc.Text(); {
			case strings.HasPrefix(l, "owner "):
				owner <- strings.TrimPrefix(l, "owner ")
			case l == "emitted":
				close(p.emitted)
			}
		}
		cmd.Wait()
		close(p.exited)
	}()
	select {
	case p.owner = <-owner:
	case <-p.exited:
		t.Fatalf("node %s exited before starting", cfg.Name)
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("node %s did not start", cfg.Name)
	}
	t.Cleanup(func() { // never leave a node behind
		cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// kill sends SIGKILL and waits for the process to end.
func (p *nodeProc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop asks the node to stop gracefully and waits for it.
func (p *nodeProc) stop(t *testing.T) {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Errorf("node %s did not stop", p.owner)
		p.kill()
	}
}

// sqlDB opens the schema for the checks through database/sql.
func sqlDB(t *testing.T, url, schema string) *sql.DB {
	t.Helper()
	cc, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cc.RuntimeParams["search_path"] = schema
	db := stdlib.OpenDB(*cc)
	t.Cleanup(func() { db.Close() })
	return db
}

// held returns the running runs an owner holds, with their epochs.
func held(t *testing.T, db *sql.DB, owner string) map[string]int64 {
	t.Helper()
	rows, err := db.Query("SELECT r.id, r.epoch FROM runs r JOIN owners o ON o.num = r.lease_node WHERE r.status = 'running' AND o.owner = $1", owner)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var ep int64
		if err := rows.Scan(&id, &ep); err != nil {
			t.Fatal(err)
		}
		out[id] = ep
	}
	return out
}

// waitTerminal waits until no run is idle or running.
func waitTerminal(t *testing.T, db *sql.DB, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM runs WHERE status IN ('idle', 'running')").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runs still idle or running after %s", n, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkInvariants runs the crash invariants on the schema.
func checkInvariants(t *testing.T, db *sql.DB, dir string) crashtest.Report {
	t.Helper()
	rep, err := crashtest.CheckDB(db, dir+"/witness.jsonl", dir+"/acks.txt", "k-")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Failures() {
		t.Error(f)
	}
	return rep
}
