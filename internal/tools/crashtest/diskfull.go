package crashtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/sqlitestore"
)

// ErrNoTmpfs means the disk-full drill could not mount its small tmpfs
// (it needs root); callers skip rather than fail.
var ErrNoTmpfs = errors.New("crashtest: cannot mount a small tmpfs (needs root)")

// DiskFullResult is what the disk-full drill saw.
type DiskFullResult struct {
	RunsBeforeFull int           // runs acknowledged before the first failing emit
	FullErr        error         // the failing emit's error
	FullCode       yella.Code    // its code
	Commits        int64         // store commits in the second after the disk filled
	InternalErrors int64         // engine internal errors in that second
	Acked          int           // acknowledged runs in all
	NotCompleted   []string      // acknowledged runs not completed after space returned
	Integrity      string        // PRAGMA integrity_check afterwards
	Drain          time.Duration // time to drain once space returned
}

// Failures lists what the drill proved wrong: an unclear error, spinning
// while full, a lost or stuck run, a slow resumption, or a damaged file.
func (r DiskFullResult) Failures() []string {
	var out []string
	if r.FullErr == nil || !strings.Contains(r.FullErr.Error(), "disk full") || r.FullCode != yella.CodeUnavailable {
		out = append(out, fmt.Sprintf("emit on a full disk: %v (code %s), want a clear disk-full error with code %s", r.FullErr, r.FullCode, yella.CodeUnavailable))
	}
	if r.Commits > 100 || r.InternalErrors > 200 {
		out = append(out, fmt.Sprintf("while the disk was full: %d commits and %d internal errors in 1s: spinning", r.Commits, r.InternalErrors))
	}
	if len(r.NotCompleted) > 0 {
		out = append(out, fmt.Sprintf("%d acknowledged runs not completed after space returned: %v", len(r.NotCompleted), first(r.NotCompleted, 5)))
	}
	if r.Drain > 15*time.Second {
		out = append(out, fmt.Sprintf("drained %v after space returned: the engine stayed backed off long after the cause passed", r.Drain))
	}
	if r.Integrity != "ok" {
		out = append(out, "integrity_check: "+r.Integrity)
	}
	return out
}

// DiskFull fills a 384 KiB tmpfs mounted under dir with a live engine on
// the SQLite store: emits run until one fails, the engine is watched for a
// second while the disk stays full, then the tmpfs grows to 16 MiB and the
// drill checks that the engine resumes and that every acknowledged run
// completes. It returns ErrNoTmpfs when it cannot mount.
func DiskFull(dir string) (DiskFullResult, error) {
	var res DiskFullResult
	mnt := filepath.Join(dir, "small")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return res, err
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=384k", "tmpfs", mnt).CombinedOutput(); err != nil {
		return res, fmt.Errorf("%w: %v %s", ErrNoTmpfs, err, out)
	}
	defer syscall.Unmount(mnt, syscall.MNT_DETACH)
	path := filepath.Join(mnt, "full.db")
	st, err := sqlitestore.Open(path, sqlitestore.Options{})
	if err != nil {
		return res, err
	}
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st, Concurrency: 8})
	if err != nil {
		return res, err
	}
	out := map[string]string{"out": strings.Repeat("o", 200)}
	if err := eng.Register(yella.Process{Name: "p", On: "ev", Run: func(c *yella.Ctx) yella.Result { return c.OK(out) }}); err != nil {
		return res, err
	}
	var internal atomic.Int64
	eng.Subscribe(func(ev yella.Event) {
		if ev.Type == yella.InternalError {
			internal.Add(1)
		}
	})
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		return res, err
	}
	defer eng.Stop(ctx)
	var acked []string
	pad := map[string]string{"pad": strings.Repeat("p", 300)}
	for i := 0; i < 100000; i++ {
		em, err := eng.Emit(ctx, "ev", pad)
		if err != nil {
			res.FullErr, res.FullCode = err, yella.CodeOf(err)
			break
		}
		acked = append(acked, em.Runs...)
	}
	if res.FullErr == nil {
		return res, errors.New("crashtest: the disk never filled up")
	}
	res.RunsBeforeFull = len(acked)
	// While the disk stays full the engine retries with backoff: it must
	// not spin.
	b0, i0 := st.Stats().Batches, internal.Load()
	time.Sleep(time.Second)
	res.Commits, res.InternalErrors = st.Stats().Batches-b0, internal.Load()-i0
	// Space returns: the engine resumes.
	if out, err := exec.Command("mount", "-o", "remount,size=16m", "tmpfs", mnt).CombinedOutput(); err != nil {
		return res, fmt.Errorf("remount: %v %s", err, out)
	}
	for range 20 {
		em, err := eng.Emit(ctx, "ev", map[string]string{"pad": "after"})
		if err != nil {
			return res, fmt.Errorf("emit after space returned: %w", err)
		}
		acked = append(acked, em.Runs...)
	}
	res.Acked = len(acked)
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := eng.Drain(dctx); err != nil {
		return res, fmt.Errorf("drain after space returned: %w", err)
	}
	res.Drain = time.Since(start)
	for _, id := range acked {
		r, err := eng.Run(ctx, id)
		if err != nil || r.Status != yella.StatusCompleted {
			res.NotCompleted = append(res.NotCompleted, id)
		}
	}
	if err := eng.Stop(ctx); err != nil {
		return res, err
	}
	raw, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return res, err
	}
	defer raw.Close()
	if err := raw.QueryRow("PRAGMA integrity_check").Scan(&res.Integrity); err != nil {
		return res, err
	}
	return res, nil
}
