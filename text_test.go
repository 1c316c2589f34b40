package yella_test

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/sqlitestore"
)

// TestNamesMustBeText: a process's name, event and version, a limit's
// name and a schedule's name are kept by the store with every run (and
// indexed with it): each must be UTF-8 without NUL, at most 256 bytes, or
// registration is refused with CodeInvalidConfig naming the field. A
// version with a NUL byte used to be accepted, and every end of the
// process's runs was then refused by PostgreSQL: the runs stayed running.
func TestNamesMustBeText(t *testing.T) {
	long := strings.Repeat("n", 257)
	run := func(c *yella.Ctx) yella.Result { return c.OK(nil) }
	key := func(yella.KeyOf) string { return "" }
	for _, tc := range []struct {
		field string
		p     yella.Process
	}{
		{"Process.Name", yella.Process{Name: "p\x00", On: "ev", Run: run}},
		{"Process.Name", yella.Process{Name: "p\xff", On: "ev", Run: run}},
		{"Process.Name", yella.Process{Name: long, On: "ev", Run: run}},
		{"Process.On", yella.Process{Name: "p", On: "ev\x00", Run: run}},
		{"Process.On", yella.Process{Name: "p", On: long, Run: run}},
		{"Process.Version", yella.Process{Name: "p", On: "ev", Version: "v1\x00", Run: run}},
		{"Process.Version", yella.Process{Name: "p", On: "ev", Version: "v1\xc3", Run: run}},
		{"Process.RateLimit.Name", yella.Process{Name: "p", On: "ev", Run: run, RateLimit: &yella.RateLimit{Name: "r\x00", Limit: 1, Per: time.Second}}},
		{"Process.KeyConcurrency.Name", yella.Process{Name: "p", On: "ev", Run: run, KeyConcurrency: &yella.KeyConcurrency{Name: long, Max: 1, Key: key}}},
	} {
		e, err := yella.New(yella.Config{Store: memstore.New()})
		if err != nil {
			t.Fatal(err)
		}
		err = e.Register(tc.p)
		if yella.CodeOf(err) != yella.CodeInvalidConfig || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s %q: %v, want %s refused", tc.field, tc.p.Name, err, tc.field)
		}
	}
	e, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	ok := yella.Process{Name: strings.Repeat("p", 256), On: "ev", Version: "v1 ü", Run: run}
	if err := e.Register(ok); err != nil {
		t.Errorf("a 256-byte name: %v", err)
	}
	for _, name := range []string{"s\x00", long} {
		if err := e.AddSchedule(yella.Schedule{Name: name, Cron: "@every 1h", Event: "ev"}); yella.CodeOf(err) != yella.CodeInvalidConfig {
			t.Errorf("schedule %q: %v, want refused", name, err)
		}
	}
}

// TestTextKeptOnEveryStore: on every store, an idempotency key must be
// UTF-8 without NUL, at most MaxIdempotencyKeyBytes (refused with
// CodeInvalidConfig, before anything is admitted, where PostgreSQL refused
// it as the store being unavailable and SQLite kept it), and one of that
// size dedupes; a rate or concurrency key read from a payload may hold
// any string: a chain whose next stage's keys hold a NUL byte completes,
// and the engine stops. Before, on PostgreSQL, such a key failed the end
// that admitted the stage at every retry: the run stayed running and Stop
// did not return.
func TestTextKeptOnEveryStore(t *testing.T) {
	stores := map[string]func(t *testing.T) store.Store{
		"mem": func(*testing.T) store.Store { return memstore.New() },
		"sqlite": func(t *testing.T) store.Store {
			s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "y.db"), sqlitestore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"pg": func(t *testing.T) store.Store {
			if why := pgSkip(); why != "" {
				t.Skip(why)
			}
			return pgFactory().Open(t, t.TempDir())
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := open(t)
			e, err := yella.New(yella.Config{Store: st})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			tenant := yella.KeyFromPayload("tenant")
			for _, p := range []yella.Process{
				{Name: "first", On: "order", Run: func(c *yella.Ctx) yella.Result {
					return c.OK(map[string]string{"tenant": "acme\x00\xff"}, yella.Then("order:next"))
				}},
				{Name: "rated", On: "order:next", RateLimit: &yella.RateLimit{Limit: 1000, Per: time.Second, Key: tenant},
					Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }},
				{Name: "keyed", On: "order:next", KeyConcurrency: &yella.KeyConcurrency{Max: 1, Key: tenant},
					Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }},
			} {
				if err := e.Register(p); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.Start(ctx); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"k\x00", "k\xff", strings.Repeat("k", yella.MaxIdempotencyKeyBytes+1)} {
				if _, err := e.Emit(ctx, "order", 1, yella.IdempotencyKey(k)); yella.CodeOf(err) != yella.CodeInvalidConfig {
					t.Errorf("key %.8q (%d bytes): %v, want CodeInvalidConfig", k, len(k), err)
				}
			}
			b := make([]byte, yella.MaxIdempotencyKeyBytes)
			crand.Read(b)
			k := base64.StdEncoding.EncodeToString(b)[:yella.MaxIdempotencyKeyBytes] // incompressible
			em, err := e.Emit(ctx, "order", 1, yella.IdempotencyKey(k))
			if err != nil || len(em.Runs) != 1 {
				t.Fatalf("a key of %d bytes: %v, %v", len(k), em, err)
			}
			if again, err := e.Emit(ctx, "order", 1, yella.IdempotencyKey(k)); err != nil || again.Reason != yella.ReasonDuplicate {
				t.Errorf("the key again: %+v, %v; want a duplicate", again, err)
			}
			direct, err := e.Emit(ctx, "order:next", map[string]string{"tenant": "\x00"})
			if err != nil {
				t.Fatalf("an emission whose keys hold a NUL byte: %v", err)
			}
			ids := append(em.Runs, direct.Runs...)
			deadline := time.Now().Add(15 * time.Second)
			for _, id := range ids {
				for {
					r, err := e.Run(ctx, id)
					if err == nil && r.Status == yella.StatusCompleted {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("run %s: %s, %v; want completed", id, r.Status, err)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			chain, err := e.Runs(ctx, yella.RunQuery{Process: "keyed"})
			if err != nil {
				t.Fatal(err)
			}
			deadline = time.Now().Add(15 * time.Second)
			for len(chain.Runs) < 2 || chain.Runs[0].Status != yella.StatusCompleted || chain.Runs[1].Status != yella.StatusCompleted {
				if time.Now().After(deadline) {
					t.Fatalf("the stages keyed by a NUL byte: %+v, want 2 completed", chain.Runs)
				}
				time.Sleep(20 * time.Millisecond)
				if chain, err = e.Runs(ctx, yella.RunQuery{Process: "keyed"}); err != nil {
					t.Fatal(err)
				}
			}
			sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			if err := e.Stop(sctx); err != nil {
				t.Errorf("stop: %v", err)
			}
		})
	}
}
