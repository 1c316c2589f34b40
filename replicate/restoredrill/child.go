package restoredrill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/crashtest"
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
// and every 100 ms a status line with the replicator's view and the size
// of the WAL file.
func child(cfg Config) error {
	p := pathsOf(cfg.Dir)
	if err := os.MkdirAll(p.local, 0o755); err != nil {
		return err
	}
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
	go func() {
		for range time.Tick(100 * time.Millisecond) {
			s := rep.Status()
			var wal int64
			if fi, err := os.Stat(p.db + "-wal"); err == nil {
				wal = fi.Size()
			}
			say("status %d %d %d %d %d", s.Lag.Milliseconds(), s.ConsecutiveErrors, s.LocalTXID, s.ReplicaTXID, wal)
		}
	}()
	say("ready")
	start := time.Now()
	for i := 0; ; i++ {
		if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(cfg.Rate))); d > 0 {
			time.Sleep(d)
		}
		key := fmt.Sprintf("o-%d", i)
		if _, err := eng.Emit(ctx, "order:placed", order{Order: key}, yella.IdempotencyKey(key)); err != nil {
			return err
		}
		if err := crashtest.AppendLine(p.acks, fmt.Sprintf("%s %d", key, time.Now().UnixNano())); err != nil {
			return err
		}
	}
}
