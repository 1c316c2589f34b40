package replicate_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/replicate"
	"github.com/yella-go/yella/store/sqlitestore"
)

// node is an engine on a SQLite file, optionally replicated.
type node struct {
	path string
	st   *sqlitestore.Store
	eng  *yella.Engine
	rep  *replicate.Replicator
}

// openNode opens a store at path, starts replicating it to target (unless
// target is nil) and starts an engine with one no-op process "job".
func openNode(t *testing.T, path string, target *replicate.Target, opts replicate.Options) *node {
	t.Helper()
	st, err := sqlitestore.Open(path, sqlitestore.Options{AutoCheckpoint: replicate.AutoCheckpoint})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{path: path, st: st}
	if target != nil {
		if n.rep, err = replicate.Start(t.Context(), path, *target, opts); err != nil {
			st.Close()
			t.Fatal(err)
		}
	}
	n.eng, err = yella.New(yella.Config{Store: st, Concurrency: 50})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.eng.Register(yella.Process{Name: "job", On: "job", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }}); err != nil {
		t.Fatal(err)
	}
	if err := n.eng.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.close(t) })
	return n
}

// close stops the engine, closes the store, then the replicator: the order
// replicate.Replicator.Close requires. It returns the replicator's error.
func (n *node) close(t *testing.T) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return n.closeCtx(t, ctx)
}

func (n *node) closeCtx(t *testing.T, ctx context.Context) error {
	t.Helper()
	if n.eng == nil {
		return nil
	}
	if err := n.eng.Stop(ctx); err != nil {
		t.Errorf("engine stop: %v", err)
	}
	if err := n.st.Close(); err != nil {
		t.Errorf("store close: %v", err)
	}
	n.eng = nil
	if n.rep != nil {
		return n.rep.Close(ctx)
	}
	return nil
}

// emit admits keys prefix-from … prefix-(to-1) from 8 goroutines and
// returns each key's acknowledgement time.
func (n *node) emit(t *testing.T, prefix string, from, to int) map[string]time.Time {
	t.Helper()
	acks := make(map[string]time.Time, to-from)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := from + w; i < to; i += 8 {
				k := fmt.Sprintf("%s-%d", prefix, i)
				if _, err := n.eng.Emit(t.Context(), "job", map[string]int{"i": i}, yella.IdempotencyKey(k)); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				acks[k] = time.Now()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("emit: %v", err)
	}
	return acks
}

// dbRuns reads a database's runs: idempotency key → status; and runs
// integrity_check.
func dbRuns(t *testing.T, path string) (map[string]string, string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var integrity string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&integrity); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query("SELECT coalesce(idem_key, id), status FROM runs")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, s string
		if err := rows.Scan(&k, &s); err != nil {
			t.Fatal(err)
		}
		out[k] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out, integrity
}

func fileTarget(t *testing.T, dir string) replicate.Target {
	t.Helper()
	tg, err := replicate.ParseURL("file://" + filepath.Join(dir, "replica"))
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// logBuffer collects slog output for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// waitFor polls cond every 20 ms until it holds or timeout passes; it is
// never a timing assertion, only a bound on how long to wait.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
