package sqlitestore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the engine or the store starts must be gone when the
// tests end: handlers released, writers stopped, timers cancelled.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
