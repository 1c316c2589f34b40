package restoredrill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/tools/crashtest"
	"github.com/yella-go/yella/replicate"
	"github.com/yella-go/yella/store/sqlitestore"
)

// ChildEnv is the environment variable that turns a test binary into the
// drill's child engine; its value is the JSON Config.
const ChildEnv = "YELLA_RESTOREDRILL_CHILD"

// ChildMain runs the drill's child if the environment asks for it and
// reports whether it did; call it first in TestMain and return if it
// reports true. The child runs until it is killed.
func ChildMain() bool {
	raw := os.Getenv(ChildEnv)
	if raw == "" {
		return false
	}
	var cfg Config
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "restore-drill child: bad config:", err)
		os.Exit(2)
	}
	err := child(cfg.withDefaults()) // runs until killed; a return is a failure
	fmt.Fprintln(os.Stderr, "restore-drill child:", err)
	os.Exit(1)
	os.Exit(0)
	return true
}

// paths are the drill's files inside Config.Dir.
type paths struct {
	local   string // the "machine's disk": the database and Litestream's staging
	db      string
	replica string // the off-box replica (a file replica)
	witness string // one line per effect body execution (the outside world)
	acks    string // one line per acknowledged admission
}

func pathsOf(dir string) paths {
	local := filepath.Join(dir, "local")
	return paths{local: local, db: filepath.Join(local, "app.db"), replica: filepath.Join(dir, "replica"),
		witness: filepath.Join(dir, "witness.jsonl"), acks: filepath.Join(dir, "acks.txt")}
}

// witnessLine is one execution of an effect body.
type witnessLine struct {
	Order  string `json:"order"`  // the business key: the admission's idempotency key
	Effect string `json:"effect"` // charge or notify
	Run    string `json:"run"`
	PID    int    `json:"pid"`
}

type order struct {
	Order string `json:"order"`
}

var errTransient = errors.New("HTTP 503: downstream unavailable")

// register adds the drill's workload to eng, a small api-mixed: each
// order:placed admits two runs atomically, "charge" (some work, an effect,
// then a follow-up order:charged; one first attempt in ten fails after its effect
// and is retried, replaying the effect) and "audit" (no effect); each
// order:charged runs "notify" (an effect). Effect bodies append to the
// witness file before they return.
func register(eng *yella.Engine, witness string, delay time.Duration) error {
	body := func(c *yella.Ctx, o order, name string) func(context.Context) (order, error) {
		return func(ctx context.Context) (order, error) {
			line, _ := json.Marshal(witnessLine{Order: o.Order, Effect: name, Run: c.RunID(), PID: os.Getpid()})
			if err := crashtest.AppendLine(witness, string(line)); err != nil {
				return order{}, err
			}
			if err := pause(ctx, delay); err != nil {
				return order{}, err
			}
			return o, nil
		}
	}
	procs := []yella.Process{
		{Name: "charge", On: "order:placed", Emits: []string{"order:charged"}, Run: yella.Handle(func(c *yella.Ctx, in order) yella.Result {
			if err := pause(c, delay); err != nil { // work before the effect, as api-mixed's handlers do
				return c.Error(err)
			}
			out, err := yella.Effect(c, "charge", body(c, in, "charge"))
			if err != nil {
				return c.Error(err)
			}
			if c.Attempt() == 1 && rand.IntN(10) == 0 {
				return c.Error(errTransient)
			}
			return c.OK(out, yella.Then("order:charged"))
		})},
		{Name: "audit", On: "order:placed", Run: yella.Handle(func(c *yella.Ctx, in order) yella.Result {
			return c.OK(nil)
		})},
		{Name: "notify", On: "order:charged", Run: yella.Handle(func(c *yella.Ctx, in order) yella.Result {
			if _, err := yella.Effect(c, "notify", body(c, in, "notify")); err != nil {
				return c.Error(err)
			}
			return c.OK(nil)
		})},
	}
	for _, p := range procs {
		p.Retry = &yella.Retry{Max: 5, Backoff: yella.Fixed(20 * time.Millisecond)}
		if err := eng.Register(p); err != nil {
			return err
		}
	}
	return nil
}

// startEngine starts an engine with the drill's workload on st: the child
// before the kill and the drain after the restore run the same processes.
func startEngine(ctx context.Context, st *sqlitestore.Store, cfg Config, witness string) (*yella.Engine, error) {
	eng, err := yella.New(yella.Config{Store: st, Concurrency: cfg.Concurrency})
	if err != nil {
		return nil, err
	}
	if err := register(eng, witness, cfg.EffectDelay); err != nil {
		return nil, err
	}
	if err := eng.Start(ctx); err != nil {
		return nil, err
	}
	return eng, nil
}

// pause waits a random time up to max, or until ctx ends.
func pause(ctx context.Context, max time.Duration) error {
	if max <= 0 {
		return nil
	}
	t := time.NewTimer(rand.N(max))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// child is the engine process: SQLite, replicated to the file replica,
// under paced load until it is killed. It prints "ready" once it serves,
// and every 100 ms a status line (see Status). On SIGTERM it stops
// gracefully: it stops admitting, stops the engine, prints its final view
// ("final" and a Status), closes the store, then the replicator (whose
// final sync copies every commit), prints "stopped" and exits 0.
func child(cfg Config) error {
	p := pathsOf(cfg.Dir)
	if err := os.MkdirAll(p.local, 0o755); err != nil {
		return err
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	st, err := sqlitestore.Open(p.db, sqlitestore.Options{AutoCheckpoint: replicate.AutoCheckpoint})
	if err != nil {
		return err
	}
	target, err := replicate.ParseURL("file://" + p.replica)
	if err != nil {
		return err
	}
	ctx := context.Background()
	rep, err := replicate.Start(ctx, p.db, target, replicate.Options{SyncInterval: cfg.SyncInterval})
	if err != nil {
		return err
	}
	eng, err := startEngine(ctx, st, cfg, p.witness)
	if err != nil {
		return err
	}
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		fmt.Printf(format+"\n", args...)
		out.Unlock()
	}
	var acked atomic.Int64
	status := func() string {
		s := childStatus(ctx, eng, rep, p.db)
		s.Acked = int(acked.Load())
		b, _ := json.Marshal(s)
		return string(b)
	}
	stopStatus := make(chan struct{})
	statusDone := make(chan struct{})
	go func() {
		defer close(statusDone)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopStatus:
				return
			case <-tick.C:
				say("status %s", status())
			}
		}
	}()
	say("ready")
	start := time.Now()
	for i := 0; ; i++ {
		select {
		case <-term:
			close(stopStatus)
			<-statusDone
			return stopGracefully(ctx, eng, st, rep, say, status)
		case <-time.After(max(time.Until(start.Add(time.Duration(i)*time.Second/time.Duration(cfg.Rate))), 0)):
		}
		key := fmt.Sprintf("o-%d", i)
		if _, err := eng.Emit(ctx, "order:placed", order{Order: key}, yella.IdempotencyKey(key)); err != nil {
			return err
		}
		if err := crashtest.AppendLine(p.acks, fmt.Sprintf("%s %d", key, time.Now().UnixNano())); err != nil {
			return err
		}
		acked.Add(1)
	}
}

// stopGracefully is the child's SIGTERM path; it exits the process.
func stopGracefully(ctx context.Context, eng *yella.Engine, st *sqlitestore.Store, rep *replicate.Replicator, say func(string, ...any), status func() string) error {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := eng.Stop(sctx); err != nil {
		return fmt.Errorf("graceful stop: engine: %w", err)
	}
	say("final %s", status())
	if err := st.Close(); err != nil {
		return fmt.Errorf("graceful stop: store: %w", err)
	}
	if err := rep.Close(sctx); err != nil {
		return fmt.Errorf("graceful stop: %w", err)
	}
	say("stopped")
	os.Exit(0)
	return nil
}

// Status is what the child prints every 100 ms (a line "status {json}"),
// and once more, after its engine stopped, on a graceful stop ("final
// {json}").
type Status struct {
	// The child's replicator: replicate.Status's Lag, ConsecutiveErrors,
	// LocalTXID, ReplicaTXID and Stalled.
	Lag                    time.Duration
	Errors                 int
	LocalTXID, ReplicaTXID uint64
	Stalled                string
	// WAL is the size of the database's -wal file on disk, WALInode its
	// inode (both 0 while it is missing).
	WAL      int64
	WALInode uint64
	// WALHeld are the inodes of the -wal files the child has open (its
	// SQLite connections' and Litestream's), read from /proc/self/fd; nil
	// where that is not available. WALHeldDeleted: one of them is unlinked.
	// While the database is healthy every one is WALInode.
	WALHeld        []uint64
	WALHeldDeleted bool
	// Runs is the number of runs the child's engine counts (the sum of
	// Metrics().Queue): its view of the database. -1 if it failed.
	Runs int64
	// Acked is the number of admissions acknowledged so far.
	Acked int
}

// ParseStatus parses a "status" or "final" line of the child.
func ParseStatus(line string) (Status, bool) {
	var s Status
	_, raw, ok := strings.Cut(line, " ")
	if !ok || (!strings.HasPrefix(line, "status ") && !strings.HasPrefix(line, "final ")) {
		return s, false
	}
	return s, json.Unmarshal([]byte(raw), &s) == nil
}

func childStatus(ctx context.Context, eng *yella.Engine, rep *replicate.Replicator, db string) Status {
	r := rep.Status()
	s := Status{Lag: r.Lag, Errors: r.ConsecutiveErrors, LocalTXID: r.LocalTXID, ReplicaTXID: r.ReplicaTXID, Stalled: r.Stalled, Runs: -1}
	if fi, err := os.Stat(db + "-wal"); err == nil {
		s.WAL = fi.Size()
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			s.WALInode = uint64(sys.Ino)
		}
	}
	s.WALHeld, s.WALHeldDeleted = heldFiles(db + "-wal")
	if m, err := eng.Metrics(ctx); err == nil {
		s.Runs = 0
		for _, n := range m.Queue {
			s.Runs += n
		}
	}
	return s
}

// heldFiles returns the inodes of the files at path this process has open
// (several descriptors of one file give one inode each time), and whether
// one of them has been unlinked. It reads /proc/self/fd: nil elsewhere.
func heldFiles(path string) (inodes []uint64, deleted bool) {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, false
	}
	for _, fd := range fds {
		link := filepath.Join("/proc/self/fd", fd.Name())
		target, err := os.Readlink(link)
		if err != nil {
			continue
		}
		gone := false
		if t, ok := strings.CutSuffix(target, " (deleted)"); ok {
			target, gone = t, true
		}
		if target != path {
			continue
		}
		fi, err := os.Stat(link)
		if err != nil {
			continue
		}
		// The descriptor may have been closed and its number reused for
		// another file between the two calls (the replicator opens and
		// closes the WAL to read it): count it only if it still names path.
		if again, err := os.Readlink(link); err != nil || strings.TrimSuffix(again, " (deleted)") != path {
			continue
		}
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			inodes = append(inodes, uint64(sys.Ino))
			deleted = deleted || gone
		}
	}
	return inodes, deleted
}
