package yella_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
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

// TestEmitTx: runs admitted inside a caller's transaction exist if and
// only if it commits, with the caller's own write: a rolled-back
// transaction admits nothing (and nothing runs); a committed one admits
// exactly its runs, which the engine runs, and its idempotency key holds
// for later transactions.
func TestEmitTx(t *testing.T) {
	if why := pgSkip(); why != "" {
		t.Skip(why)
	}
	ctx := context.Background()
	ps := pgFactory().Open(t, t.TempDir()).(*pgstore.Store)
	orders := ps.Schema() + ".orders"
	if _, err := ps.Pool().Exec(ctx, "CREATE TABLE "+orders+" (id text PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int32
	eng, err := yella.New(yella.Config{Store: ps})
	if err != nil {
		t.Fatal(err)
	}
	eng.Register(yella.Process{Name: "ship", On: "order:placed", Run: func(c *yella.Ctx) yella.Result { ran.Add(1); return c.OK(nil) }})
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(ctx)
	place := func(id string, commit bool) yella.Emission {
		t.Helper()
		tx, err := ps.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "INSERT INTO "+orders+" (id) VALUES ($1) ON CONFLICT DO NOTHING", id); err != nil {
			t.Fatal(err)
		}
		em, err := eng.EmitTx(ctx, ps.Tx(tx), "order:placed", map[string]string{"id": id}, yella.IdempotencyKey(id))
		if err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return em
	}
	count := func(q string) int {
		var n int
		if err := ps.Pool().QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	gone := place("o1", false)
	if len(gone.Runs) != 1 {
		t.Fatalf("inside the transaction: %+v, want one run", gone)
	}
	if _, err := ps.Run(ctx, gone.Runs[0]); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("run of a rolled-back transaction: %v, want not found", err)
	}
	if n := count("SELECT count(*) FROM " + orders); n != 0 {
		t.Errorf("%d orders after the rollback", n)
	}
	kept := place("o2", true)
	if len(kept.Runs) != 1 {
		t.Fatalf("committed: %+v, want one run", kept)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := ps.Run(ctx, kept.Runs[0])
		if err == nil && r.Status == store.StatusCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the committed run was not executed: %s, %v", r.Status, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	again := place("o2", true)
	if len(again.Runs) != 0 || len(again.Existing) != 1 || again.Existing[0] != kept.Runs[0] {
		t.Errorf("the key in a later transaction: %+v, want the existing run", again)
	}
	if err := eng.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count("SELECT count(*) FROM " + ps.Schema() + ".runs"); n != 1 || ran.Load() != 1 {
		t.Errorf("%d runs stored, %d executed; want exactly the committed one", n, ran.Load())
	}
	mem, _ := yella.New(yella.Config{Store: memstore.New()})
	mem.Register(yella.Process{Name: "ship", On: "order:placed", Run: Noop})
	if _, err := mem.EmitTx(ctx, ps.Tx(nil), "order:placed", nil); yella.CodeOf(err) != yella.CodeInvalidConfig {
		t.Errorf("EmitTx on an engine whose store is not shared: %v", err)
	}
}
