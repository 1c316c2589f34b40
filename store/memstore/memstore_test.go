package memstore_test

import (
	"testing"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open:   func(testing.TB, string) store.Store { return memstore.New() },
		Shared: true,
	})
}

// Every action of the transition table from every status, compared with
// store.Apply.
func TestTransitionTable(t *testing.T) {
	storetest.CheckTransitions(t, memstore.New())
}
