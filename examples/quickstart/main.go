// Quickstart: a durable order pipeline on a local SQLite file.
//
//	go run ./examples/quickstart
//
// Five orders flow through reserve-stock → charge-card → (send-receipt,
// ship-order). Each step takes a moment, so you can interrupt the program
// with Ctrl-C (a graceful stop) or kill it (kill -9), then run it again:
// it picks up where it left off. Completed effects are never run twice;
// an effect that was cut off mid-flight is either re-run with the same
// idempotency key (charge-card declares itself Idempotent) or stops its
// run in the fenced status for you to decide (reserve-stock).
//
// Flags: -db PATH (default quickstart.db in the user's cache directory,
// yella/ in it, so a run from a checkout leaves the repository alone),
// -orders N, -reset, -retry-fenced (re-run the effects of fenced runs).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/sqlitestore"
)

type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	out = &syncWriter{w: out} // the event subscriber writes from the engine's goroutines
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	dbPath := fs.String("db", defaultDB(), "SQLite database file")
	orders := fs.Int("orders", 5, "orders to place")
	reset := fs.Bool("reset", false, "delete the database first")
	retryFenced := fs.Bool("retry-fenced", false, "re-run the effects of fenced runs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*dbPath), 0o755); err != nil {
		return err
	}
	fmt.Fprintf(out, "database: %s (-db PATH to choose another)\n", *dbPath)
	if *reset {
		for _, suffix := range []string{"", "-wal", "-shm", ".lock"} {
			os.Remove(*dbPath + suffix)
		}
	}

	st, err := sqlitestore.Open(*dbPath, sqlitestore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st, Concurrency: 4})
	if err != nil {
		return err
	}
	register(eng)
	start := time.Now()
	eng.Subscribe(func(ev yella.Event) {
		switch ev.Type {
		case yella.RunStarted, yella.RunCompleted, yella.RunFailed, yella.RunRetryScheduled, yella.LeaseReclaimed, yella.EffectReplayed, yella.RunFenced:
			detail := ev.Error
			if ev.EffectKey != "" {
				detail = ev.EffectKey
			}
			fmt.Fprintf(out, "%6.2fs  %-15s %-13s %s %s\n", time.Since(start).Seconds(), ev.Type, ev.Process, short(ev.RunID), detail)
		}
	})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := eng.Start(ctx); err != nil {
		return err
	}
	if *retryFenced {
		page, err := eng.Runs(ctx, yella.RunQuery{Status: []yella.Status{yella.StatusFenced}, Limit: yella.MaxPageSize})
		if err != nil {
			return err
		}
		for _, r := range page.Runs {
			fmt.Fprintln(out, "retrying fenced run", short(r.ID), "("+r.Error+")")
			if _, err := eng.Retry(ctx, r.ID); err != nil {
				return err
			}
		}
	}
	// Emitting with idempotency keys makes a rerun safe: orders admitted by
	// an earlier run of this program are reported, not admitted again.
	for i := 1; i <= *orders; i++ {
		o := order{ID: fmt.Sprintf("order-%d", i), Amount: 10 * i}
		em, err := eng.Emit(ctx, "order:placed", o, yella.IdempotencyKey(o.ID))
		if err != nil {
			return err
		}
		if len(em.Runs) > 0 {
			fmt.Fprintf(out, "placed %s\n", o.ID)
		} else {
			fmt.Fprintf(out, "%s was placed by an earlier run; continuing it\n", o.ID)
		}
	}

	drainErr := eng.Drain(ctx)
	stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := eng.Stop(stopCtx); err != nil {
		fmt.Fprintln(out, "stopped hard:", err)
	}
	if drainErr != nil {
		fmt.Fprintln(out, "\ninterrupted; run again to resume")
		return nil
	}
	return summary(eng, out)
}

// defaultDB is quickstart.db under the user's cache directory (the
// temporary directory if there is none): the database outlives the program,
// so a second run resumes the first, without landing in the working
// directory.
func defaultDB() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "yella", "quickstart.db")
}

func register(eng *yella.Engine) {
	retry := &yella.Retry{Max: 3, Backoff: yella.Exponential(200 * time.Millisecond)}
	work := func(ctx context.Context) error {
		select {
		case <-time.After(time.Duration(300+rand.IntN(500)) * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	steps := []struct {
		name, on, then string
		opts           []yella.EffectOption
	}{
		{"reserve-stock", "order:placed", "stock:reserved", nil},
		{"charge-card", "stock:reserved", "order:charged", []yella.EffectOption{yella.Idempotent()}},
		{"send-receipt", "order:charged", "", nil},
		{"ship-order", "order:charged", "", nil},
	}
	for _, s := range steps {
		var emits []string
		if s.then != "" {
			emits = []string{s.then}
		}
		eng.Register(yella.Process{
			Name: s.name, On: s.on, Emits: emits, Retry: retry,
			Run: yella.Handle(func(c *yella.Ctx, o order) yella.Result {
				ref, err := yella.Effect(c, yella.MakeKey(s.name, o.ID), func(ctx context.Context) (string, error) {
					if err := work(ctx); err != nil {
						return "", err
					}
					key := yella.EffectIdempotencyKey(ctx) // stable across re-runs, for the payment API
					if key == "" {
						key = "-"
					}
					return fmt.Sprintf("%s:%s:%s", s.name, o.ID, key[:min(len(key), 12)]), nil
				}, s.opts...)
				if err != nil {
					return c.Error(err) // retried; a completed effect is replayed
				}
				c.SetContext(s.name, ref)
				if s.then == "" {
					return c.OK(ref)
				}
				return c.OK(o, yella.Then(s.then))
			}),
		})
	}
}

func summary(eng *yella.Engine, out io.Writer) error {
	ctx := context.Background()
	page, err := eng.Runs(ctx, yella.RunQuery{RootOnly: true, Order: yella.OldestFirst, Limit: yella.MaxPageSize})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "\norder chains:")
	for _, root := range page.Runs {
		chain, err := eng.Chain(ctx, root.ID)
		if err != nil {
			return err
		}
		var o order
		_ = json.Unmarshal(root.Payload, &o)
		line := fmt.Sprintf("  %-8s", o.ID)
		for _, r := range chain {
			line += fmt.Sprintf("  %s=%s", r.Process, r.Status)
		}
		fmt.Fprintln(out, line)
	}
	m, err := eng.Metrics(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nthis process: %d attempts, %d effects executed, %d replayed, %d runs reclaimed after a crash\n",
		m.Totals.Started, m.Totals.EffectsCompleted, m.Totals.EffectsReplayed, m.Totals.LeaseReclaims)
	fmt.Fprintf(out, "store: %d completed, %d fenced, %d dead\n", m.Queue[yella.StatusCompleted], m.Queue[yella.StatusFenced], m.Queue[yella.StatusDead])
	if m.Queue[yella.StatusFenced] > 0 {
		fmt.Fprintln(out, "fenced runs had an effect cut off mid-flight; rerun with -retry-fenced to run it again")
	}
	return nil
}

func short(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	return id
}

// syncWriter serialises writes: lifecycle events arrive on the engine's
// goroutines while the program prints from its own.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write implements io.Writer.
func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
