// Package restoredrill is the restore drill under live load (reliability
// T10), shared by the replicate package's tests and the trust suite. It is
// a test harness, not an API for applications.
//
// The drill re-executes the test binary as a child engine process on SQLite,
// replicating to a file replica while it admits orders at a steady rate (a
// small api-mixed workload with effects whose bodies append to a witness
// file, and every acknowledged admission appended to an acks file, both
// fsynced). The parent SIGKILLs the child mid-load, deletes the child's
// local disk (database, WAL, shared memory, lock and Litestream's staging
// directory), restores the database from the replica, starts an engine on
// it and drains it. Run reports, and Result.Failures judges:
//
//   - admissions lost: only those acknowledged within the bound
//     (2 × SyncInterval + 1 s) before the kill may be missing, and only
//     those within the window the child's replicator Status implied (its
//     lag plus one interval and the slack): the lag metric tells the truth;
//   - effects fenced: runs stopped in status fenced, because the start of
//     an effect was replicated but not its result; each must have one;
//   - no effect whose completion was replicated runs its body again, after
//     the restore or before it; effects whose completion was not replicated
//     may run again after the restore: they are counted as
//     re_executed_after_restore, the documented RPO risk, not failures;
//   - every run is terminal after the drain, none completed twice, and
//     PRAGMA integrity_check is ok on the restored file and after the drain;
//   - the WAL file stayed under MaxWAL (64 MB) while the child replicated.
//
// StartChild runs the same child on its own, for tests that do something
// else to a live replicated engine (the replicate package's test with an
// external sqlite3 shell); Child.Stop stops it gracefully.
//
// Call ChildMain first in the TestMain of any test binary that runs the
// drill or StartChild.
package restoredrill

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/yella-go/yella/replicate"
	"github.com/yella-go/yella/store/sqlitestore"
)

// Config sets up a drill. The zero value of each field but Dir means the
// default stated on it.
type Config struct {
	// Dir is an empty working directory. Required.
	Dir string
	// Load is how long the child runs under load before it is killed,
	// plus a random part of a SyncInterval. Defaults to 6 s.
	Load time.Duration
	// Rate is the admissions per second (each admits two runs and leads to
	// a third). Defaults to 100.
	Rate int
	// SyncInterval is the replicator's. Defaults to 1 s, the product default.
	SyncInterval time.Duration
	// EffectDelay is the longest an effect body takes (uniformly random),
	// so that the kill lands inside some. Defaults to 30 ms.
	EffectDelay time.Duration
	// Concurrency is the child engine's fleet concurrency. Defaults to 50.
	Concurrency int
	// DrainTimeout bounds the restored engine's drain. Defaults to 2 min.
	DrainTimeout time.Duration
	// Slack is added to two sync intervals to make the loss bound (see
	// Bound). Defaults to 1 s; raise it where the machine is slowed (the
	// race detector).
	Slack time.Duration
}

func (c Config) withDefaults() Config {
	if c.Load <= 0 {
		c.Load = 6 * time.Second
	}
	if c.Rate <= 0 {
		c.Rate = 100
	}
	if c.SyncInterval <= 0 {
		c.SyncInterval = replicate.DefaultSyncInterval
	}
	if c.EffectDelay <= 0 {
		c.EffectDelay = 30 * time.Millisecond
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 50
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 2 * time.Minute
	}
	if c.Slack <= 0 {
		c.Slack = time.Second
	}
	return c
}

// Bound is the loss bound the drill asserts: an admission acknowledged
// longer than this before the kill must survive the restore. Two sync
// intervals (WAL to staging, staging to replica) plus Slack (1 s) for a
// sync in progress and scheduling on a loaded machine.
func (c Config) Bound() time.Duration {
	c = c.withDefaults()
	return 2*c.SyncInterval + c.Slack
}

// MaxWAL bounds the child's WAL file under the drill's load: Litestream
// checkpoints it after each sync (replicate.AutoCheckpoint makes the
// store's own checkpoints a backstop).
const MaxWAL = 64 << 20

// Result is what a drill saw.
type Result struct {
	Bound time.Duration // the loss bound asserted (Config.Bound)

	Acked         int           // admissions acknowledged by the child
	Lost          []string      // acknowledged admissions missing after the restore
	LostTooOld    []string      // of those, acknowledged before the bound: failures
	OldestLostAge time.Duration // kill time minus the oldest lost acknowledgement (0 if none)

	// The child's replicator, as last printed before the kill.
	LagAtKill           time.Duration
	ReplicaErrorsAtKill int
	// StatusWindow is the loss window the child's Status implied at the
	// kill: its Lag (time since the last successful sync), plus a
	// SyncInterval (the WAL is staged every interval) and Slack. Admissions
	// lost from before it (LostBeyondStatus) mean Status understated the
	// risk: failures.
	StatusWindow     time.Duration
	LostBeyondStatus []string
	// PeakWAL is the largest WAL file the child saw (sampled every 100 ms)
	// while replicating under the drill's load; over MaxWAL is a failure.
	PeakWAL int64

	RestoreTime  time.Duration // Restore, integrity_check included
	RestoredRuns int           // runs in the restored database
	DrainTime    time.Duration // engine start on the restored file to drained

	ChildExecutions  int // effect bodies run by the child
	ParentExecutions int // effect bodies run after the restore

	ReplicatedCompleted    int      // effects whose completion was replicated
	Fenced                 int      // runs fenced after the restore
	ReExecutedAfterRestore int      // effects run by the child and again after the restore (completion not replicated)
	ExecutedThenLost       int      // effects run by the child whose run or chain step the replica lost: not re-run
	Reruns                 []string // effects with a replicated completion or start that ran again: failures
	BadFences              []string // fenced runs without a replicated started effect, or the reverse
	NotTerminal            []string // runs neither completed, fenced, errored nor dead after the drain
	CompletedTwice         []string // runs whose timeline holds two completions

	IntegrityRestored string // integrity_check of the restored file
	IntegrityAfter    string // after the engine drained it
}

// Failures lists the broken invariants; empty means the drill passed.
func (r Result) Failures() []string {
	var out []string
	add := func(what string, ids []string) {
		if len(ids) > 0 {
			out = append(out, fmt.Sprintf("%s: %d (%s)", what, len(ids), strings.Join(firstN(ids, 5), ", ")))
		}
	}
	add(fmt.Sprintf("admissions acknowledged more than %v before the kill lost", r.Bound), r.LostTooOld)
	add(fmt.Sprintf("admissions lost from before the window the replicator's Status implied (%v)", r.StatusWindow), r.LostBeyondStatus)
	add("effects with a replicated completion or start that ran again", r.Reruns)
	add("fencing inconsistent", r.BadFences)
	add("runs not terminal after the drain", r.NotTerminal)
	add("runs completed twice", r.CompletedTwice)
	if r.PeakWAL > MaxWAL {
		out = append(out, fmt.Sprintf("the WAL grew to %.1f MB while replicating, over %d MB", float64(r.PeakWAL)/1e6, MaxWAL>>20))
	}
	if r.IntegrityRestored != "ok" {
		out = append(out, "integrity_check of the restored file: "+r.IntegrityRestored)
	}
	if r.IntegrityAfter != "ok" {
		out = append(out, "integrity_check after the drain: "+r.IntegrityAfter)
	}
	if r.Acked == 0 {
		out = append(out, "the child acknowledged no admission: the drill tested nothing")
	}
	return out
}

func (r Result) String() string {
	return fmt.Sprintf("%d acked, %d lost (oldest %v before the kill; bound %v), restore %v, %d runs restored, "+
		"%d effects completed and replicated, %d fenced, %d re-executed after restore, %d executed then lost with the tail, drain %v, integrity %s/%s",
		r.Acked, len(r.Lost), r.OldestLostAge.Round(time.Millisecond), r.Bound, r.RestoreTime.Round(time.Millisecond), r.RestoredRuns,
		r.ReplicatedCompleted, r.Fenced, r.ReExecutedAfterRestore, r.ExecutedThenLost, r.DrainTime.Round(time.Millisecond),
		r.IntegrityRestored, r.IntegrityAfter)
}

func firstN(ids []string, n int) []string {
	if len(ids) > n {
		return append(ids[:n:n], "…")
	}
	return ids
}

// Run runs the drill in cfg.Dir. An error means the drill could not be
// carried out; broken invariants are in Result.Failures.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	res := Result{Bound: cfg.Bound()}
	if cfg.Dir == "" {
		return res, errors.New("restoredrill: Config.Dir is required")
	}
	p := pathsOf(cfg.Dir)

	killAt, err := runChild(cfg, &res)
	if err != nil {
		return res, err
	}
	// The machine is lost: its disk goes, the replica and the outside
	// world (witness, acks) stay.
	if err := os.RemoveAll(p.local); err != nil {
		return res, err
	}
	if err := os.MkdirAll(p.local, 0o755); err != nil {
		return res, err
	}
	target, err := replicate.ParseURL("file://" + p.replica)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	if err := replicate.Restore(ctx, target, p.db, replicate.RestoreOptions{}); err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	res.RestoreTime = time.Since(t0)

	snap, err := readDB(p.db)
	if err != nil {
		return res, fmt.Errorf("read the restored database: %w", err)
	}
	res.IntegrityRestored = snap.integrity
	res.RestoredRuns = len(snap.runs)

	t1 := time.Now()
	if err := drain(ctx, cfg, p); err != nil {
		return res, err
	}
	res.DrainTime = time.Since(t1)
	after, err := readDB(p.db)
	if err != nil {
		return res, fmt.Errorf("read the drained database: %w", err)
	}
	res.IntegrityAfter = after.integrity

	if err := judge(&res, p, killAt, snap, after); err != nil {
		return res, err
	}
	return res, nil
}

// runChild starts the child, lets it work for cfg.Load and SIGKILLs it.
// It returns the time of the kill.
func runChild(cfg Config, res *Result) (time.Time, error) {
	c, err := StartChild(cfg)
	if err != nil {
		return time.Time{}, err
	}
	var statusAt time.Time
	// A random phase against the sync ticks, so that drills sample kills
	// right after a sync as well as right before one.
	deadline := time.After(cfg.Load + rand.N(cfg.SyncInterval))
	for {
		select {
		case l, ok := <-c.Lines():
			if !ok {
				c.Kill()
				return time.Time{}, errors.New("restoredrill: the child exited under load (see its stderr)")
			}
			if s, ok := ParseStatus(l); ok {
				res.LagAtKill, res.ReplicaErrorsAtKill = s.Lag, s.Errors
				res.PeakWAL = max(res.PeakWAL, s.WAL)
				statusAt = time.Now()
			}
			continue
		case <-deadline:
		}
		break
	}
	killAt := time.Now()
	if err := c.Kill(); err != nil {
		return killAt, err
	}
	if !statusAt.IsZero() {
		res.StatusWindow = killAt.Sub(statusAt) + res.LagAtKill + cfg.SyncInterval + cfg.Slack
	}
	return killAt, nil
}

// Child is a running drill child engine: SQLite replicated to a file
// replica under the drill's load (see StartChild).
type Child struct {
	cmd   *exec.Cmd
	lines chan string
}

// StartChild starts the drill's child engine on cfg.Dir (the test binary,
// re-executed; its TestMain must call ChildMain) and returns once it
// serves. Its database is DBPath(cfg.Dir), its replica ReplicaURL(cfg.Dir),
// its acknowledged admissions are in AcksPath(cfg.Dir). End it with Kill
// or Stop.
func StartChild(cfg Config) (*Child, error) {
	cfg = cfg.withDefaults()
	if cfg.Dir == "" {
		return nil, errors.New("restoredrill: Config.Dir is required")
	}
	raw, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), ChildEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &Child{cmd: cmd, lines: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	ready := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				cmd.Wait()
				return nil, errors.New("restoredrill: the child exited before it was ready")
			}
			if l == "ready" {
				return c, nil
			}
		case <-ready:
			c.Kill()
			return nil, errors.New("restoredrill: the child was not ready within 60s")
		}
	}
}

// Lines are the child's output lines after "ready": "status {json}" every
// 100 ms (ParseStatus), and on a graceful stop "final {json}" and
// "stopped". The channel is closed when the child's output ends. Read it
// steadily: the child blocks when it is full.
func (c *Child) Lines() <-chan string { return c.lines }

// Kill SIGKILLs the child and waits for it, discarding its remaining
// output. It fails if the child had already ended otherwise.
func (c *Child) Kill() error {
	c.cmd.Process.Signal(syscall.SIGKILL)
	for range c.lines {
	}
	c.cmd.Wait()
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return fmt.Errorf("restoredrill: the child ended with %v, not by SIGKILL", c.cmd.ProcessState)
	}
	return nil
}

// Stop asks the child to stop gracefully (SIGTERM: it stops admitting,
// stops its engine, closes the store, then the replicator, whose final
// sync copies every commit to the replica) and waits for it, up to
// timeout; then it kills it. It returns the lines printed meanwhile and an
// error unless the child exited 0.
func (c *Child) Stop(timeout time.Duration) ([]string, error) {
	c.cmd.Process.Signal(syscall.SIGTERM)
	var rest []string
	deadline := time.After(timeout)
	for done := false; !done; {
		select {
		case l, ok := <-c.lines:
			if !ok {
				done = true
				break
			}
			rest = append(rest, l)
		case <-deadline:
			c.cmd.Process.Signal(syscall.SIGKILL)
			for range c.lines {
			}
			c.cmd.Wait()
			return rest, fmt.Errorf("restoredrill: the child did not stop within %v of SIGTERM", timeout)
		}
	}
	if err := c.cmd.Wait(); err != nil {
		return rest, fmt.Errorf("restoredrill: the child's graceful stop: %w (see its stderr)", err)
	}
	return rest, nil
}

// DBPath is the child's database in a drill directory.
func DBPath(dir string) string { return pathsOf(dir).db }

// ReplicaURL is the child's replica in a drill directory.
func ReplicaURL(dir string) string { return "file://" + pathsOf(dir).replica }

// AcksPath is the file of the child's acknowledged admissions in a drill
// directory: one line per admission, "key unix-nanos", written once Emit
// returned (fsynced).
func AcksPath(dir string) string { return pathsOf(dir).acks }

// drain starts an engine on the restored database and waits until it has
// nothing left to do.
func drain(ctx context.Context, cfg Config, p paths) error {
	st, err := sqlitestore.Open(p.db, sqlitestore.Options{})
	if err != nil {
		return fmt.Errorf("open the restored database: %w", err)
	}
	defer st.Close()
	eng, err := startEngine(ctx, st, cfg, p.witness)
	if err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, cfg.DrainTimeout)
	defer cancel()
	derr := eng.Drain(dctx)
	if err := eng.Stop(ctx); err != nil && derr == nil {
		derr = err
	}
	if derr != nil {
		return fmt.Errorf("drain the restored database: %w", derr)
	}
	return nil
}
