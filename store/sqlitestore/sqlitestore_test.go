package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
	"github.com/yella-go/yella/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t testing.TB, dir string) store.Store {
			s, err := sqlitestore.Open(filepath.Join(dir, "yella.db"), sqlitestore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Durable: true,
	})
}

// Every action of the transition table from every status, through the
// SQL (one statement for an attempt's end, a read and a write for the
// rest), compared with store.Apply.
func TestTransitionTable(t *testing.T) {
	s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "yella.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckTransitions(t, s)
}
