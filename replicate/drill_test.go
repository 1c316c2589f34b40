package replicate_test

import (
	"testing"
	"time"

	"github.com/yella-go/yella/internal/tools/restoredrill"
)

// The restore drill under live load (reliability T10): a child engine
// replicating to a file replica is SIGKILLed mid-load, its disk deleted,
// the database restored and drained by a new engine. Only admissions
// acknowledged within 2 × SyncInterval + 1 s of the kill may be lost;
// effects whose start was replicated are fenced; no effect whose completion
// was replicated runs again; integrity_check is ok; the WAL stays under
// 64 MB while the child replicates under load. The trust suite runs
// the same drill (internal/tools/trust/restore_test.go).
func TestRestoreDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child engine for several seconds")
	}
	cfg := restoredrill.Config{Dir: t.TempDir(), Load: 5 * time.Second}
	if raceEnabled {
		// The race detector slows modernc SQLite several times, and other
		// packages' tests share the machine.
		cfg.Rate, cfg.Slack = 40, 3*time.Second
	}
	res, err := restoredrill.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", res)
	t.Logf("child effect executions %d, after restore %d; replication lag at the kill %v (loss window it implied %v), replica errors %d; peak WAL %.1f MB",
		res.ChildExecutions, res.ParentExecutions, res.LagAtKill, res.StatusWindow.Round(time.Millisecond), res.ReplicaErrorsAtKill, float64(res.PeakWAL)/1e6)
	for _, f := range res.Failures() {
		t.Error(f)
	}
}
