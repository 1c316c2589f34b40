package sqlitestore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/yella-go/yella/internal/tools/crashtest"
)

// TestDiskFull fills a small tmpfs under live load: the failing emit gets a
// clear error, nothing committed is lost, the engine backs off instead of
// spinning, and it resumes once space returns. Needs root (mount); the
// trust suite runs the same drill and records its figures.
func TestDiskFull(t *testing.T) {
	res, err := crashtest.DiskFull(t.TempDir())
	if errors.Is(err, crashtest.ErrNoTmpfs) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if f := res.Failures(); len(f) > 0 {
		t.Fatal(strings.Join(f, "\n"))
	}
	t.Logf("disk full after %d runs: %v; %d commits and %d internal errors in the next second; all %d acknowledged runs completed %v after space returned",
		res.RunsBeforeFull, res.FullErr, res.Commits, res.InternalErrors, res.Acked, res.Drain)
}
