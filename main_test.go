package yella_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the engine starts must be gone when the tests end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
