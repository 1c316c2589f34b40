package pgstore_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// TestMain turns the test binary into a node process when asked to (the
// multi-process tests re-execute it), and otherwise checks that no
// goroutine outlives the tests.
func TestMain(m *testing.M) {
	if nodeMain() {
		return
	}
	goleak.VerifyTestMain(m)
}

// pgURL returns the database the PostgreSQL tests use, or skips the test:
// they need a server (start a throwaway one with eval "$(.ci/postgres)").
func pgURL(t testing.TB) string {
	u := os.Getenv("YELLA_PG_URL")
	if u == "" {
		t.Skip(`YELLA_PG_URL is not set: the PostgreSQL tests skip (start a throwaway server with eval "$(.ci/postgres)")`)
	}
	return u
}

// schemaFor names the schema of the store kept in dir: one per test case,
// so cases run in parallel and reopen their own data.
func schemaFor(dir string) string {
	h := fnv.New64a()
	h.Write([]byte(dir))
	return fmt.Sprintf("t%x", h.Sum64())
}

// openIn opens a store on dir's schema, dropped when the test ends.
func openIn(t testing.TB, dir string, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	url := pgURL(t)
	if opts.Schema == "" {
		opts.Schema = schemaFor(dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := pgstore.Open(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s.Close()
		if err := pgstore.DropSchema(ctx, url, opts); err != nil {
			t.Errorf("drop schema %s: %v", opts.Schema, err)
		}
	})
	return s
}

// factory opens stores for the conformance suite.
func factory(opts pgstore.Options) func(t testing.TB, dir string) store.Store {
	return func(t testing.TB, dir string) store.Store { return openIn(t, dir, opts) }
}

// execAll runs the statements qs on s's pool in order, failing the test at
// the first error (a test's setup, such as taking a schema back to an
// older version).
func execAll(t *testing.T, s *pgstore.Store, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := s.Pool().Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
