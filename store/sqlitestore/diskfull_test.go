package sqlitestore_test

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/sqlitestore"
)

// TestDiskFull fills a small tmpfs under live load: the failing emit gets a
// clear error, nothing committed is lost, the engine backs off instead of
// spinning, and it resumes once space returns. Needs root (mount).
func TestDiskFull(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "small")
	os.Mkdir(dir, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=384k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v %s", err, out)
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	path := filepath.Join(dir, "full.db")
	st, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st, Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	eng.Register(yella.Process{Name: "p", On: "ev", Run: func(c *yella.Ctx) yella.Result { return c.OK(map[string]string{"out": strings.Repeat("o", 200)}) }})
	var internal atomic.Int64
	eng.Subscribe(func(ev yella.Event) {
		if ev.Type == yella.InternalError {
			internal.Add(1)
		}
	})
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var acked []string
	var fullErr error
	for i := 0; i < 100000 && fullErr == nil; i++ {
		em, err := eng.Emit(ctx, "ev", map[string]string{"pad": strings.Repeat("p", 300)})
		if err != nil {
			fullErr = err
			break
		}
		acked = append(acked, em.Runs...)
	}
	if fullErr == nil {
		t.Fatal("the disk never filled up")
	}
	if !strings.Contains(fullErr.Error(), "disk full") || yella.CodeOf(fullErr) != yella.CodeUnavailable {
		t.Errorf("emit on a full disk: %v (code %s), want a clear disk-full error with CodeUnavailable", fullErr, yella.CodeOf(fullErr))
	}
	// While the disk stays full the engine retries with backoff: it must
	// not spin.
	b0, i0 := st.Stats().Batches, internal.Load()
	time.Sleep(time.Second)
	batches, errs := st.Stats().Batches-b0, internal.Load()-i0
	if batches > 100 || errs > 200 {
		t.Errorf("while the disk was full: %d commits and %d internal errors in 1s: spinning", batches, errs)
	}
	// Space returns: the engine resumes.
	if out, err := exec.Command("mount", "-o", "remount,size=16m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v %s", err, out)
	}
	for range 20 {
		em, err := eng.Emit(ctx, "ev", map[string]string{"pad": "after"})
		if err != nil {
			t.Fatalf("emit after space returned: %v", err)
		}
		acked = append(acked, em.Runs...)
	}
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := eng.Drain(dctx); err != nil {
		t.Fatalf("drain after space returned: %v", err)
	}
	for _, id := range acked {
		r, err := eng.Run(ctx, id)
		if err != nil || r.Status != yella.StatusCompleted {
			t.Fatalf("acknowledged run %s: %v %v", id, r.Status, err)
		}
	}
	eng.Stop(ctx)
	raw, _ := sql.Open("sqlite", "file:"+path+"?mode=ro")
	defer raw.Close()
	var ok string
	raw.QueryRow("PRAGMA integrity_check").Scan(&ok)
	if ok != "ok" {
		t.Errorf("integrity_check: %s", ok)
	}
	t.Logf("disk full after %d runs: %v; %d commits and %d internal errors in the next second; all %d acknowledged runs completed after space returned",
		len(acked)-20, fullErr, batches, errs, len(acked))
}
