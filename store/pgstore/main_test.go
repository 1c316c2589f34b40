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
// watchFor returns a channel that receives once s's watchers are told
// of a change of kind (and holds one such signal at most), watched until
// the test ends.
func watchFor(t testing.TB, s *pgstore.Store, kind store.Change) <-chan struct{} {
	ch := make(chan struct{}, 1)
	stop := s.Watch(func(c store.Change) {
		if c&kind != 0 {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	})
	t.Cleanup(stop)
	return ch
}

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

// indexKeys lists the indexes of one of s's tables, each as its key
// columns joined by commas ("(expression)" for a key that is not a
// column), keyed by the index's name; it fails the test if it finds none
// (the table is not there). It reads the catalogs by the table's
// oid and never renders an index's definition: rendering one
// (pg_get_indexdef, which the pg_indexes view calls for every index it
// reads) fails with "cache lookup failed" when another test drops its
// schema's tables at the same moment.
func indexKeys(t *testing.T, s *pgstore.Store, table string) map[string]string {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `SELECT c.relname, string_agg(coalesce(a.attname::text, '(expression)'), ',' ORDER BY k.ord)
		FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid
		CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
		LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum AND k.attnum > 0
		WHERE i.indrelid = to_regclass($1)
		GROUP BY c.relname`, s.Schema()+"."+table)
	if err != nil {
		t.Fatalf("indexes of %s: %v", table, err)
	}
	defer rows.Close()
	keys := map[string]string{}
	for rows.Next() {
		var name, cols string
		if err := rows.Scan(&name, &cols); err != nil {
			t.Fatalf("indexes of %s: %v", table, err)
		}
		keys[name] = cols
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("indexes of %s: %v", table, err)
	}
	if len(keys) == 0 { // every table here has a primary key: the table was not found
		t.Fatalf("no indexes of %s.%s found", s.Schema(), table)
	}
	return keys
}
