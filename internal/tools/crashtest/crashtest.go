// Package crashtest proves crash safety with real processes: a test binary
// re-executes itself as a child engine process on a SQLite file, the child
// is killed with SIGKILL (by itself at a chosen commit boundary, or by the
// parent at a random moment), and a new child resumes on the same file.
// Effect bodies append to a witness file (O_APPEND, fsync), and Check
// verifies the invariants against the database and the witness:
//
//   - every run acknowledged to the admitter exists (right after the kill,
//     and after the restart) and is terminal;
//   - no run completed twice (its timeline holds one completion);
//   - every completed run that names a follow-up has its follow-up run,
//     once (the two are committed together);
//   - no effect body that completed ran twice; one left started is fenced
//     (its run in status fenced, with EFFECT_FENCED) and counted;
//   - the database passes PRAGMA integrity_check.
//
// The runs the killed child held (left running) must be claimed again
// within a second of the restarted process's start: a fresh process knows
// their owner is dead and does not wait for their leases (Reclaims).
//
// The SQLite store's tests and the trust suite both use it.
package crashtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/commithook"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

// Crash points: commit boundaries at which a child kills itself.
const (
	// BeforeCommit: the writer is about to COMMIT an admission (the child
	// emits every run before starting its engine, so the k-th commit is the
	// k-th admission). The child waits AckGrace first, so that a caller
	// answered before the commit would have recorded its acknowledgement.
	BeforeCommit        = "before-commit"
	AfterAdmission      = "after-admission"       // Emit returned and the caller recorded the acknowledgement
	AfterClaim          = "after-claim"           // a claim committed, before the handler runs
	InEffect            = "in-effect"             // inside an effect body, after its witness line
	AfterEffectComplete = "after-effect-complete" // an effect's completion committed
	BeforeCompletion    = "before-completion"     // the handler returned, its completion not yet committed
	AfterCompletion     = "after-completion"      // a run's completion committed (run:complete published)
	// AfterChainedCompletion: the store call that completed a run naming a
	// follow-up returned, before the engine does anything else.
	AfterChainedCompletion = "after-chained-completion"
)

// Points lists every crash point.
var Points = []string{BeforeCommit, AfterAdmission, AfterClaim, InEffect, AfterEffectComplete, BeforeCompletion, AfterCompletion, AfterChainedCompletion}

// Held lists the crash points at which the killed child is holding a run
// (one run in flight): the restarted process must claim it again at once.
var Held = []string{AfterClaim, InEffect, AfterEffectComplete, BeforeCompletion}

// AckGrace is how long a child killing itself before a commit waits first.
// A correct store answers no caller before its commit, so nothing is
// acknowledged meanwhile; a store that answered early would have its
// callers record acknowledgements of admissions the kill then loses.
var AckGrace = 100 * time.Millisecond

// ChildEnv is the environment variable that turns a test binary into a
// crash-test child; its value is the JSON Config.
const ChildEnv = "YELLA_CRASHTEST_CHILD"

// Config tells a child what to do.
type Config struct {
	DB      string // database file
	Witness string // effect witness file
	Acks    string // file of acknowledged admissions (idempotency keys), one per line
	Runs    int    // runs to emit, keys k-0 … k-(Runs-1); 0 emits nothing
	// CrashAt "point:k" kills the child at the k-th time it reaches point.
	CrashAt string
	// EffectDelay makes each effect body take this long, so kills land
	// inside them.
	EffectDelay time.Duration
	// Exit makes the child stop once everything is drained; otherwise it
	// waits to be killed.
	Exit bool
	// Concurrency is the engine's fleet concurrency. Defaults to 50; 1
	// makes a crash point hit exactly one run in flight.
	Concurrency int
	// Chain makes every job name a follow-up event ("job:done") that a
	// second process ("follow") executes.
	Chain bool
	// EmitFirst emits every run before the engine starts (the emissions are
	// then the only writes).
	EmitFirst bool
	// Reconciled, when set, gives the job's effect a Reconcile function
	// that reads the witness: a body that wrote its line happened
	// (EffectDone), one that did not never ran (EffectNotDone). Each
	// verdict is appended to this file as "done RUN" or "not-done RUN".
	Reconciled string
}

// ChildMain runs the child if the environment asks for it and reports
// whether it did; call it first in TestMain and return if it reports true.
func ChildMain() bool {
	raw := os.Getenv(ChildEnv)
	if raw == "" {
		return false
	}
	var cfg Config
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "crashtest child: bad config:", err)
		os.Exit(2)
	}
	if err := child(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "crashtest child:", err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

// killer kills the process at the k-th hit of one point.
type killer struct {
	point string
	k     int
	mu    sync.Mutex
	n     int
}

func newKiller(spec string) *killer {
	point, ks, ok := strings.Cut(spec, ":")
	if !ok {
		return &killer{}
	}
	k, _ := strconv.Atoi(ks)
	return &killer{point: point, k: k}
}

// hit kills the process if this is the k-th time point is reached.
func (kl *killer) hit(point string) {
	if kl.point != point {
		return
	}
	kl.mu.Lock()
	kl.n++
	n := kl.n
	kl.mu.Unlock()
	if n == kl.k {
		if point == BeforeCommit {
			time.Sleep(AckGrace)
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}

func mkdir(dir string) error { return os.MkdirAll(dir, 0o755) }

// AppendLine appends one line to path and fsyncs it, so the line survives
// a SIGKILL (and the machine): the witness and acknowledgement files.
func AppendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		return err
	}
	return f.Sync()
}

// WitnessLine is one effect body execution.
type WitnessLine struct {
	Run     string `json:"run"`
	Key     string `json:"key"` // the stored (encoded) effect key
	Attempt int    `json:"attempt"`
	PID     int    `json:"pid"`
}

// killingStore kills the child right after the store committed the
// completion of a run that names a follow-up.
type killingStore struct {
	*sqlitestore.Store
	kl *killer
}

// Update passes the update on and kills the child at the
// after-chained-completion point once it committed.
func (s killingStore) Update(ctx context.Context, u store.Update) (store.UpdateResult, error) {
	res, err := s.Store.Update(ctx, u)
	if err == nil && u.Epoch != 0 && u.Then != "" && res.Run.Status == store.StatusCompleted {
		s.kl.hit(AfterChainedCompletion)
	}
	return res, err
}

// child is the child process: an engine on the SQLite store at cfg.DB
// that admits cfg.Runs jobs and runs them, killing itself at cfg.CrashAt;
// with cfg.Exit it drains and exits instead of waiting to be killed.
func child(cfg Config) error {
	start := time.Now()
	kl := newKiller(cfg.CrashAt)
	commithook.Set(func(string) error {
		kl.hit(BeforeCommit)
		return nil
	})
	st, err := sqlitestore.Open(cfg.DB, sqlitestore.Options{})
	if err != nil {
		return err
	}
	eng, err := childEngine(cfg, killingStore{st, kl}, kl, start)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if cfg.EmitFirst {
		if err := emitJobs(ctx, eng, cfg, kl); err != nil {
			return err
		}
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}
	if !cfg.EmitFirst {
		if err := emitJobs(ctx, eng, cfg, kl); err != nil {
			return err
		}
	}
	if !cfg.Exit {
		select {} // until killed
	}
	if err := eng.Drain(ctx); err != nil {
		return err
	}
	m, err := eng.Metrics(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("fenced %d\n", m.Totals.Fenced)
	fmt.Println("drained")
	if err := eng.Stop(ctx); err != nil {
		return err
	}
	return st.Close()
}

// childEngine is the child's engine on st: the job process (and with
// cfg.Chain its follow-up), with the kill points that events mark.
func childEngine(cfg Config, st store.Store, kl *killer, start time.Time) (*yella.Engine, error) {
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 50
	}
	eng, err := yella.New(yella.Config{Store: st, Concurrency: cfg.Concurrency, Retry: &yella.Retry{Max: 30, Backoff: yella.Fixed(10 * time.Millisecond)}})
	if err != nil {
		return nil, err
	}
	acks := &effectAcks{ch: map[string]chan struct{}{}}
	job := jobProcess(cfg, kl, start, acks)
	if cfg.Chain {
		job.Emits = []string{"job:done"}
		err = eng.Register(yella.Process{Name: "follow", On: "job:done", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
		if err != nil {
			return nil, err
		}
	}
	if err := eng.Register(job); err != nil {
		return nil, err
	}
	eng.Subscribe(func(ev yella.Event) {
		switch ev.Type {
		case yella.RunStarted:
			kl.hit(AfterClaim)
		case yella.EffectCompleted:
			kl.hit(AfterEffectComplete)
			acks.done(ev.RunID)
		case yella.EffectReplayed, yella.EffectResolved:
			acks.done(ev.RunID)
		case yella.RunCompleted:
			kl.hit(AfterCompletion)
		}
	})
	return eng, nil
}

// effectAcks tells the job when its effect's end is written: the engine
// publishes effect:completed (effect:replayed, effect:resolved) once it
// is, while the handler may have gone on.
type effectAcks struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

func (a *effectAcks) of(run string) chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.ch[run]
	if !ok {
		c = make(chan struct{})
		a.ch[run] = c
	}
	return c
}

func (a *effectAcks) done(run string) {
	c := a.of(run)
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-c:
	default:
		close(c)
	}
}

// jobProcess is the job: one effect that records each execution of its
// body in the witness before anything can kill it, then a completion
// (naming job:done with cfg.Chain). The first call prints when it came,
// for the parent to time the restart. Before it returns, the job waits
// until its effect's end is written (acks), so that BeforeCompletion is
// the state its name says: the effect recorded, the run not yet ended.
func jobProcess(cfg Config, kl *killer, start time.Time, acks *effectAcks) yella.Process {
	var first sync.Once
	return yella.Process{Name: "job", On: "job", Run: func(c *yella.Ctx) yella.Result {
		first.Do(func() { fmt.Printf("first %d\n", time.Since(start).Microseconds()) }) // the parent times its arrival
		var opts []yella.EffectOption
		if cfg.Reconciled != "" {
			opts = append(opts, yella.Reconcile(func(ctx context.Context, key string) yella.Reconciliation {
				ran, err := witnessed(cfg.Witness, c.RunID())
				if err != nil {
					return yella.EffectUnknown()
				}
				verdict, v := "not-done", yella.EffectNotDone()
				if ran {
					verdict, v = "done", yella.EffectDone("receipt-"+c.RunID())
				}
				if err := AppendLine(cfg.Reconciled, verdict+" "+c.RunID()); err != nil {
					return yella.EffectUnknown()
				}
				return v
			}))
		}
		out, err := yella.Effect(c, "charge", func(ctx context.Context) (string, error) {
			line, _ := json.Marshal(WitnessLine{Run: c.RunID(), Key: yella.MakeKey("charge").String(), Attempt: c.Attempt(), PID: os.Getpid()})
			if err := AppendLine(cfg.Witness, string(line)); err != nil {
				return "", err
			}
			kl.hit(InEffect)
			if cfg.EffectDelay > 0 {
				time.Sleep(cfg.EffectDelay)
			}
			return "receipt-" + c.RunID(), nil
		}, opts...)
		if err != nil {
			return c.Error(err)
		}
		select {
		case <-acks.of(c.RunID()):
		case <-time.After(10 * time.Second): // the write failed: the attempt's end tells
		}
		kl.hit(BeforeCompletion)
		if cfg.Chain {
			return c.OK(out, yella.Then("job:done"))
		}
		return c.OK(out)
	}}
}

// witnessed reports whether the witness holds a body execution of run.
func witnessed(path, run string) (bool, error) {
	lines, err := ReadLines(path)
	if err != nil && !os.IsNotExist(err) {
		return false, err
	}
	for _, l := range lines {
		var w WitnessLine
		if json.Unmarshal([]byte(l), &w) == nil && w.Run == run {
			return true, nil
		}
	}
	return false, nil
}

// emitJobs admits cfg.Runs jobs with the keys k-0, k-1, …, appending each
// key to the acknowledgements once Emit returns.
func emitJobs(ctx context.Context, eng *yella.Engine, cfg Config, kl *killer) error {
	for i := 0; i < cfg.Runs; i++ {
		key := fmt.Sprintf("k-%d", i)
		if _, err := eng.Emit(ctx, "job", map[string]int{"i": i}, yella.IdempotencyKey(key)); err != nil {
			return err
		}
		// Acknowledged: recorded as soon as Emit returns.
		if err := AppendLine(cfg.Acks, key); err != nil {
			return err
		}
		kl.hit(AfterAdmission)
	}
	return nil
}

// Child is a running child process.
type Child struct {
	Cmd     *exec.Cmd
	Started time.Time
	lines   chan line
	running chan struct{} // closed at the child's first handler call
}

type line struct {
	text string
	at   time.Time
}

// Spawn starts the test binary as a child with cfg.
func Spawn(cfg Config) (*Child, error) {
	raw, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), ChildEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &Child{Cmd: cmd, lines: make(chan line, 16), running: make(chan struct{})}
	c.Started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		first := true
		for sc.Scan() {
			l := line{sc.Text(), time.Now()}
			if first && strings.HasPrefix(l.text, "first ") {
				first = false
				close(c.running)
			}
			c.lines <- l
		}
		close(c.lines)
	}()
	return c, nil
}

// Outcome is what a child printed and how it ended.
type Outcome struct {
	// FirstRun is the time from starting the child process to its first
	// handler call, of any run, measured by the parent (process start
	// included); 0 if the child ran no handler. It is not the recovery time
	// of the runs a killed child held: Reclaims measures that.
	FirstRun time.Duration
	Fenced   int64 // fenced runs counted by the child's metrics
	Drained  bool
	Killed   bool // ended by SIGKILL
	Err      error
}

// Wait collects the child's output until it exits.
func (c *Child) Wait() Outcome {
	var o Outcome
	for l := range c.lines {
		switch {
		case strings.HasPrefix(l.text, "first "):
			o.FirstRun = l.at.Sub(c.Started)
		case strings.HasPrefix(l.text, "fenced "):
			o.Fenced, _ = strconv.ParseInt(strings.TrimPrefix(l.text, "fenced "), 10, 64)
		case l.text == "drained":
			o.Drained = true
		}
	}
	err := c.Cmd.Wait()
	if ws, ok := c.Cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		o.Killed = true
		return o
	}
	o.Err = err
	return o
}

// Running is closed once the child calls its first handler: from then on a
// kill lands while it holds runs (unless it has finished them all).
func (c *Child) Running() <-chan struct{} { return c.running }

// Kill sends SIGKILL to the child.
func (c *Child) Kill() error { return c.Cmd.Process.Signal(syscall.SIGKILL) }
