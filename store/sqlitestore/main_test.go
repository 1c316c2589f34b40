package sqlitestore_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/yella-go/yella/internal/tools/crashtest"
)

// TestMain turns the test binary into a crash-test child when asked to
// (see internal/tools/crashtest); otherwise it runs the tests and checks that no
// goroutine outlives them: handlers released, writers stopped, timers
// cancelled.
func TestMain(m *testing.M) {
	if crashtest.ChildMain() {
		return
	}
	goleak.VerifyTestMain(m)
}
