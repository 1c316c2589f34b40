package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store/memstore"
)

// waitsServer serves the API of a started engine on a memory store and a
// fake clock that does not move, whose runs wait: approve waits for the
// signal "approve:<name>" for at most an hour and completes with its
// payload, cool-off sleeps a day. Runs a, b and d of approve wait, and
// nap of cool-off; one run of a process with no wait completed. It
// returns the server's URL, the engine and the runs' ids by name.
func waitsServer(t *testing.T) (string, *yella.Engine, map[string]string) {
	t.Helper()
	ctx := context.Background()
	eng, err := yella.New(yella.Config{Store: memstore.New(), Clock: clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []yella.Process{
		{Name: "approve", On: "approval:requested", Run: func(c *yella.Ctx) yella.Result {
			var in struct{ Name string }
			if err := c.Decode(&in); err != nil {
				return c.Fail(err)
			}
			got, ok, err := yella.WaitFor[json.RawMessage](c, "approval", "approve:"+in.Name, time.Hour)
			if err != nil {
				return c.Error(err)
			}
			if !ok {
				return c.OK("timed out")
			}
			return c.OK(got)
		}},
		{Name: "cool-off", On: "cool:off", Run: func(c *yella.Ctx) yella.Result {
			if err := yella.Sleep(c, "cool", 24*time.Hour); err != nil {
				return c.Error(err)
			}
			return c.OK("rested")
		}},
		{Name: "plain", On: "plain", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }},
	} {
		if err := eng.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(eng, httpapi.Options{})
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		srv.Close()
		api.Close()
		eng.Stop(ctx)
	})
	if _, err := eng.EmitAndWait(ctx, "plain", nil); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, e := range [][2]string{{"approval:requested", "a"}, {"approval:requested", "b"}, {"cool:off", "nap"}, {"approval:requested", "weird key\x1b[2J"}} {
		em, err := eng.Emit(ctx, e[0], map[string]string{"name": e[1]})
		if err != nil {
			t.Fatal(err)
		}
		ids[e[1]] = em.Runs[0]
		waitFor(t, eng, em.Runs[0], yella.StatusWaiting)
	}
	return srv.URL, eng, ids
}

// waitFor waits until run id has status st and returns it.
func waitFor(t *testing.T, eng *yella.Engine, id string, st yella.Status) yella.Run {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second) // a bound for a broken test, not a timing
	for {
		r, err := eng.Run(context.Background(), id)
		if err == nil && r.Status == st {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: %s (%v), want %s", id, r.Status, err, st)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestWaitsCommands: runs list shows what waiting runs wait for (a
// column only when the page has one; an odd key quoted), runs show a
// waiting run's wait, signal sends a signal by key (ending a wait, or
// kept) or to one run (--run), end-wait ends a sleep, cancel cancels a
// waiting run, and every refusal is a clear error (golden transcript).
// The runs each signal woke ran again with the payload as sent.
func TestWaitsCommands(t *testing.T) {
	t.Setenv("YELLA_TOKEN", "")
	t.Setenv("YELLA_SERVER", "")
	s := &session{t: t, db: filepath.Join(t.TempDir(), "cli.db"), ids: map[string]string{}}
	srv, eng, ids := waitsServer(t)
	for _, name := range []string{"a", "b", "nap", "weird key\x1b[2J"} {
		s.ids[ids[name]] = "<" + strings.ToValidUTF8(strings.ReplaceAll(name, "\x1b", "ESC"), "") + ">"
	}
	run := func(steps ...[]string) {
		for _, args := range steps {
			s.run(append(args, "--server", srv)...)
		}
	}
	run([]string{"runs", "list", "--status", "waiting", "--order", "oldest"},
		[]string{"runs", "list", "--status", "completed"},
		[]string{"runs", "show", ids["a"]},
		[]string{"runs", "show", ids["nap"]},
		[]string{"signal", "approve:a", `{"by":"ana"}`},
		[]string{"signal", "approve:later", `"early"`},
		[]string{"signal", "approve:later", "--json"},
		[]string{"signal", "--run", ids["b"], `{"by":"bo"}`},
		[]string{"signal", "--run", ids["nap"]},
		[]string{"signal", "--run", "no-such-run"},
		[]string{"signal", strings.Repeat("k", yella.MaxSignalKeyBytes+1)},
		[]string{"signal", ""},
		[]string{"signal"},
		[]string{"signal", "k", "{bad"},
		[]string{"signal", "k", "1", "2"},
		[]string{"signal", "--run", ids["b"], "1", "2"},
		[]string{"end-wait", ids["nap"]},
		[]string{"end-wait"},
		[]string{"cancel", ids["weird key\x1b[2J"]})
	// The runs each signal or end-wait woke ran again with the payload as
	// sent; a second one is refused.
	for name, want := range map[string]string{"a": `{"by":"ana"}`, "b": `{"by":"bo"}`, "nap": `"rested"`} {
		if r := waitFor(t, eng, ids[name], yella.StatusCompleted); string(r.Output) != want {
			t.Errorf("run %s: output %s, want %s", name, r.Output, want)
		}
	}
	run([]string{"signal", "--run", ids["b"]},
		[]string{"end-wait", ids["nap"]},
		[]string{"runs", "list", "--status", "waiting,cancelled"})
	if strings.Contains(s.out.String(), "\x1b") {
		t.Errorf("a key's control character reached the output")
	}
	golden(t, "waits", strings.NewReplacer(srv, "<server>", strings.Repeat("k", yella.MaxSignalKeyBytes+1), "<513 k>").Replace(s.out.String()))
}
