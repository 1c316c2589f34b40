package yella_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
	"github.com/yella-go/yella/store/storetest"
)

// The engine suite on the PostgreSQL store: each case on a schema of its
// own in the database named by YELLA_PG_URL (start a throwaway server with
// eval "$(.ci/postgres)"); without it the store's cases skip.

func pgSkip() string {
	if os.Getenv("YELLA_PG_URL") == "" {
		return `YELLA_PG_URL is not set: the engine suite skips the PostgreSQL store (start a throwaway server with eval "$(.ci/postgres)")`
	}
	return ""
}

// pgFactory opens a pgstore on the schema of dir, dropped when the case
// ends. A durable reopen (the same dir) finds the same schema.
func pgFactory() storetest.Factory {
	return storetest.Factory{
		Open: func(t testing.TB, dir string) store.Store {
			url := os.Getenv("YELLA_PG_URL")
			h := fnv.New64a()
			h.Write([]byte(dir))
			opts := pgstore.Options{Schema: fmt.Sprintf("e%x", h.Sum64())}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := pgstore.Open(ctx, url, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				s.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := pgstore.DropSchema(ctx, url, opts); err != nil {
					t.Errorf("drop schema %s: %v", opts.Schema, err)
				}
			})
			return s
		},
		Durable: true,
		Shared:  true,
	}
}
