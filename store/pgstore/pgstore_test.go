package pgstore_test

import (
	"testing"

	"github.com/yella-go/yella/store/pgstore"
	"github.com/yella-go/yella/store/storetest"
)

func TestConformance(t *testing.T) {
	pgURL(t)
	storetest.Run(t, storetest.Factory{Open: factory(pgstore.Options{}), Durable: true, Shared: true})
}
