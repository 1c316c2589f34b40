package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
	"github.com/yella-go/yella/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Factory{
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
