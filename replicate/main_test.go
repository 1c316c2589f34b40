package replicate_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/yella-go/yella/internal/tools/restoredrill"
)

// TestMain turns the test binary into the restore drill's child engine when
// asked to (see restoredrill); otherwise it runs the tests and checks that
// no goroutine outlives them: Litestream's monitors stopped by Close, the
// engines and stores closed.
func TestMain(m *testing.M) {
	if restoredrill.ChildMain() {
		return
	}
	goleak.VerifyTestMain(m)
}
