//go:build trust

package trust

import (
	"errors"
	"testing"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/tools/crashtest"
)

// TestDiskFull (T7) fills a small tmpfs under live load (the drill is
// shared with the SQLite store's tests): the failing emit gets a clear
// error, nothing committed is lost, the engine does not spin while the
// disk is full, it resumes when space returns, and integrity_check is ok.
// The drill has one form: it takes about two seconds.
func TestDiskFull(t *testing.T) {
	r := newResult(t, "disk-full")
	res, err := crashtest.DiskFull(t.TempDir())
	if errors.Is(err, crashtest.ErrNoTmpfs) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	r.Notes = append(r.Notes, "the failing emit's error: "+res.FullErr.Error())
	r.figure("runs_before_full", float64(res.RunsBeforeFull))
	r.figure("commits_in_1s_while_full", float64(res.Commits))
	r.figure("internal_errors_in_1s_while_full", float64(res.InternalErrors))
	r.figure("acked_runs", float64(res.Acked))
	r.figure("drain_after_space_s", res.Drain.Seconds())
	r.check(t, "clear error", res.FullErr != nil && res.FullCode == yella.CodeUnavailable, "code %s: %v", res.FullCode, res.FullErr)
	r.check(t, "no spinning", res.Commits <= 100 && res.InternalErrors <= 200, "%d commits, %d internal errors in 1s while full", res.Commits, res.InternalErrors)
	r.check(t, "nothing lost", len(res.NotCompleted) == 0, "%d of %d acknowledged runs not completed after space returned", len(res.NotCompleted), res.Acked)
	r.check(t, "integrity", res.Integrity == "ok", "integrity_check: %s", res.Integrity)
}
