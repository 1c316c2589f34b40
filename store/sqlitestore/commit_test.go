package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/commithook"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

// commitEngine opens a store and an engine that is not started, so the
// only writes are the test's admissions, and returns the store's absolute
// path (what the commit hook is called with).
func commitEngine(t *testing.T) (*sqlitestore.Store, *yella.Engine, string, *atomic.Int32) {
	t.Helper()
	path, err := filepath.Abs(filepath.Join(t.TempDir(), "commit.db"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(yella.Process{Name: "p", On: "ev", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }}); err != nil {
		t.Fatal(err)
	}
	var admitted atomic.Int32
	eng.Subscribe(func(ev yella.Event) {
		if ev.Type == yella.RunAdmitted {
			admitted.Add(1)
		}
	})
	return st, eng, path, &admitted
}

func countRuns(t *testing.T, st *sqlitestore.Store) int64 {
	t.Helper()
	n, err := st.CountRuns(context.Background(), store.RunFilter{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

type emitResult struct {
	em  yella.Emission
	err error
}

// TestEmitAnsweredAfterCommit holds the writer right before COMMIT: Emit
// must not return while the admission's transaction is uncommitted, and
// readers must not see the run; once the commit goes through, Emit returns
// the run, visible to everyone.
func TestEmitAnsweredAfterCommit(t *testing.T) {
	st, eng, path, admitted := commitEngine(t)
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	restore := commithook.Set(func(db string) error {
		if db != path {
			return nil
		}
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		return nil
	})
	defer restore()
	var once atomic.Bool
	open := func() {
		if once.CompareAndSwap(false, true) {
			close(release)
		}
	}
	defer open()
	done := make(chan emitResult, 1)
	go func() {
		em, err := eng.Emit(context.Background(), "ev", map[string]int{"n": 1}, yella.IdempotencyKey("k"))
		done <- emitResult{em, err}
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the admission never reached its commit")
	}
	// The writer is inside the transaction, right before COMMIT. Give an
	// early answer time to arrive: none may.
	select {
	case r := <-done:
		t.Fatalf("Emit returned (%v runs, err %v) while its commit was held", len(r.em.Runs), r.err)
	case <-time.After(200 * time.Millisecond):
	}
	if n := countRuns(t, st); n != 0 {
		t.Errorf("%d runs visible before the commit, want 0", n)
	}
	if n := admitted.Load(); n != 0 {
		t.Errorf("%d run:admitted events before the commit, want 0", n)
	}
	open()
	var r emitResult
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Emit did not return after the commit")
	}
	if r.err != nil || len(r.em.Runs) != 1 {
		t.Fatalf("Emit after the commit: %v, %d runs, want 1", r.err, len(r.em.Runs))
	}
	if _, err := st.Run(context.Background(), r.em.Runs[0]); err != nil {
		t.Errorf("the acknowledged run: %v", err)
	}
}

// TestEmitFailsWhenCommitFails fails the admission's COMMIT: Emit returns
// the error, nothing is visible (no run, no count, no event, the key not
// consumed), and the same emission succeeds once commits work again.
func TestEmitFailsWhenCommitFails(t *testing.T) {
	st, eng, path, admitted := commitEngine(t)
	injected := errors.New("injected commit failure")
	restore := commithook.Set(func(db string) error {
		if db == path {
			return injected
		}
		return nil
	})
	em, err := eng.Emit(context.Background(), "ev", map[string]int{"n": 1}, yella.IdempotencyKey("k"))
	restore()
	if err == nil {
		t.Fatalf("Emit succeeded (%d runs) though its commit failed", len(em.Runs))
	}
	if !strings.Contains(err.Error(), injected.Error()) || yella.CodeOf(err) != yella.CodeUnavailable {
		t.Errorf("Emit error %v (code %s), want the commit failure with code %s", err, yella.CodeOf(err), yella.CodeUnavailable)
	}
	if n := countRuns(t, st); n != 0 {
		t.Errorf("%d runs after the failed commit, want 0", n)
	}
	m, err := eng.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if m.Queue[yella.StatusIdle] != 0 {
		t.Errorf("queue counts %d idle after the failed commit, want 0", m.Queue[yella.StatusIdle])
	}
	if n := admitted.Load(); n != 0 {
		t.Errorf("%d run:admitted events for a failed admission, want 0", n)
	}
	em, err = eng.Emit(context.Background(), "ev", map[string]int{"n": 1}, yella.IdempotencyKey("k"))
	if err != nil || len(em.Runs) != 1 || len(em.Existing) != 0 {
		t.Fatalf("the same emission after commits work again: %v, %d new, %d existing; want 1 new (the key was not consumed)", err, len(em.Runs), len(em.Existing))
	}
	if n := countRuns(t, st); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}
