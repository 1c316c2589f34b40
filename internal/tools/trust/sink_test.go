//go:build trust

package trust

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/sqlitestore"
)

// sink is the external system effects call: it records every call and can
// block a call until the test releases it.
type sink struct {
	mu      sync.Mutex
	calls   map[string][]string // path → idempotency keys of the calls
	block   map[string]chan struct{}
	arrived map[string]chan struct{}
}

func newSink() *sink {
	return &sink{calls: map[string][]string{}, block: map[string]chan struct{}{}, arrived: map[string]chan struct{}{}}
}

// blockNext makes the next call to path wait for release; arrived is
// closed when it comes in.
func (s *sink) blockNext(path string) (arrived <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rel, arr := make(chan struct{}), make(chan struct{})
	s.block[path], s.arrived[path] = rel, arr
	var once sync.Once
	return arr, func() { once.Do(func() { close(rel) }) }
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls[r.URL.Path] = append(s.calls[r.URL.Path], r.Header.Get("Idempotency-Key"))
	rel, arr := s.block[r.URL.Path], s.arrived[r.URL.Path]
	delete(s.block, r.URL.Path)
	delete(s.arrived, r.URL.Path)
	s.mu.Unlock()
	if arr != nil {
		close(arr)
		<-rel
	}
	fmt.Fprintf(w, `"%s-ok"`, strings.TrimPrefix(r.URL.Path, "/"))
}

func (s *sink) count(path string) (calls, applied int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, k := range s.calls[path] {
		if k == "" || !seen[k] {
			applied++
		}
		seen[k] = true
	}
	return len(s.calls[path]), applied
}

func post(ctx context.Context, url string, key string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", url, nil)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func init() {
	// sink-engine: an engine whose "pay" process charges (not idempotent)
	// then notifies (idempotent) through the sink. Args: db, sink, crash
	// (where to kill itself: after-charge-body, after-charge-complete),
	// emit (an order key), resolve (a run id whose charge the operator
	// records as done).
	childModes["sink-engine"] = func(args map[string]string) error {
		st, err := sqlitestore.Open(args["db"], sqlitestore.Options{})
		if err != nil {
			return err
		}
		defer st.Close()
		eng, err := yella.New(yella.Config{Store: st, Retry: &yella.Retry{Max: 5, Backoff: yella.Fixed(10 * time.Millisecond)}})
		if err != nil {
			return err
		}
		die := func() { syscall.Kill(os.Getpid(), syscall.SIGKILL); select {} }
		eng.Register(yella.Process{Name: "pay", On: "order", Run: func(c *yella.Ctx) yella.Result {
			charge, err := yella.Effect(c, "charge", func(ctx context.Context) (string, error) {
				out, err := post(ctx, args["sink"]+"/charge", "")
				if err == nil && args["crash"] == "after-charge-body" {
					die() // the charge happened; its completion is never recorded
				}
				return out, err
			})
			if err != nil {
				return c.Error(err)
			}
			note, err := yella.Effect(c, "notify", func(ctx context.Context) (string, error) {
				return post(ctx, args["sink"]+"/notify", yella.EffectIdempotencyKey(ctx))
			}, yella.Idempotent())
			if err != nil {
				return c.Error(err)
			}
			return c.OK(charge + " " + note)
		}})
		eng.Subscribe(func(ev yella.Event) {
			if ev.Type == yella.EffectCompleted && ev.EffectKey == "str:charge" && args["crash"] == "after-charge-complete" {
				die() // the charge is recorded; the run is not finished
			}
		})
		ctx := context.Background()
		if err := eng.Start(ctx); err != nil {
			return err
		}
		if k := args["emit"]; k != "" {
			em, err := eng.Emit(ctx, "order", nil, yella.IdempotencyKey(k))
			if err != nil {
				return err
			}
			fmt.Println("run", em.Runs[0])
		}
		if id := args["resolve"]; id != "" {
			if _, err := eng.CompleteEffect(ctx, id, "str:charge", "charge-ok (confirmed by an operator)"); err != nil {
				return err
			}
		}
		if err := eng.Drain(ctx); err != nil {
			return err
		}
		return eng.Stop(ctx)
	}
}

func startSinkEngine(t *testing.T, args map[string]string) (*exec.Cmd, *strings.Builder) {
	t.Helper()
	raw, _ := json.Marshal(childSpec{Mode: "sink-engine", Args: args})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

func runSinkEngine(t *testing.T, args map[string]string) string {
	t.Helper()
	cmd, out := startSinkEngine(t, args)
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL {
		return out.String() // killed itself, as asked
	}
	if err != nil {
		t.Fatalf("child %v: %v\n%s", args, err, out)
	}
	return out.String()
}

func runOf(t *testing.T, db, id string) (yella.Run, []yella.EffectRecord) {
	t.Helper()
	st, err := sqlitestore.Open(db, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, _ := yella.New(yella.Config{Store: st})
	r, err := eng.Run(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	effs, _ := eng.Effects(context.Background(), id)
	return r, effs
}

func runID(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if id, ok := strings.CutPrefix(l, "run "); ok {
			return strings.TrimSpace(id)
		}
	}
	return ""
}

// T3: a real external sink shows that a completed effect is replayed (never
// re-run) and a started one is fenced, not re-run, unless it is idempotent,
// in which case it is re-run with the same key; an operator resolves a
// fenced run without a new call.
func TestEffectSink(t *testing.T) {
	r := newResult(t, "effect-sink")
	sk := newSink()
	srv := httptest.NewServer(sk)
	defer srv.Close()
	dir := t.TempDir()

	// (a) The charge is in flight when the engine is killed.
	db := filepath.Join(dir, "a.db")
	arrived, release := sk.blockNext("/charge")
	cmd, out := startSinkEngine(t, map[string]string{"db": db, "sink": srv.URL, "emit": "order-a"})
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatalf("the charge never reached the sink: %s", out)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	release() // the charge goes through at the sink after all
	id := runID(out.String())
	runSinkEngine(t, map[string]string{"db": db, "sink": srv.URL})
	run, _ := runOf(t, db, id)
	calls, _ := sk.count("/charge")
	r.check(t, "(a) charge cut off by a kill is fenced", run.Status == yella.StatusFenced && run.ErrorCode == yella.CodeEffectFenced, "status %s, code %s", run.Status, run.ErrorCode)
	r.check(t, "(a) the sink saw exactly one charge", calls == 1, "%d charge calls", calls)

	// (d) An operator who checked the charge went through records it; the
	// run continues without charging again.
	runSinkEngine(t, map[string]string{"db": db, "sink": srv.URL, "resolve": id})
	run, effs := runOf(t, db, id)
	calls, _ = sk.count("/charge")
	notes, _ := sk.count("/notify")
	r.check(t, "(d) resolved run completes with the operator's result", run.Status == yella.StatusCompleted && strings.Contains(string(run.Output), "confirmed by an operator"), "status %s, output %s", run.Status, run.Output)
	r.check(t, "(d) no new charge after the resolution", calls == 1 && notes == 1, "%d charge, %d notify calls", calls, notes)
	var held []string
	for _, e := range effs {
		held = append(held, fmt.Sprintf("%s=%s %s", e.Key, e.Status, e.Output))
	}
	r.check(t, "(d) the effect holds the operator's output", len(effs) == 2 && strings.Contains(string(effs[0].Output), "operator"), "%s", strings.Join(held, ", "))

	// (b) The charge returned, but the engine died before recording it.
	sk2 := newSink()
	srv2 := httptest.NewServer(sk2)
	defer srv2.Close()
	db = filepath.Join(dir, "b.db")
	out2 := runSinkEngine(t, map[string]string{"db": db, "sink": srv2.URL, "emit": "order-b", "crash": "after-charge-body"})
	id = runID(out2)
	runSinkEngine(t, map[string]string{"db": db, "sink": srv2.URL})
	run, _ = runOf(t, db, id)
	calls, _ = sk2.count("/charge")
	r.check(t, "(b) charge done but unrecorded is fenced", run.Status == yella.StatusFenced, "status %s", run.Status)
	r.check(t, "(b) the sink saw exactly one charge", calls == 1, "%d charge calls", calls)

	// (e) The charge completed and was recorded; a crash before the run
	// finished replays it.
	sk3 := newSink()
	srv3 := httptest.NewServer(sk3)
	defer srv3.Close()
	db = filepath.Join(dir, "e.db")
	id = runID(runSinkEngine(t, map[string]string{"db": db, "sink": srv3.URL, "emit": "order-e", "crash": "after-charge-complete"}))
	runSinkEngine(t, map[string]string{"db": db, "sink": srv3.URL})
	run, _ = runOf(t, db, id)
	calls, _ = sk3.count("/charge")
	r.check(t, "(e) a recorded charge is replayed after the crash", run.Status == yella.StatusCompleted && calls == 1, "status %s, %d charge calls", run.Status, calls)

	// (c) The idempotent notify is in flight when the engine is killed: it
	// is re-run with the same idempotency key, so it applies once.
	sk4 := newSink()
	srv4 := httptest.NewServer(sk4)
	defer srv4.Close()
	db = filepath.Join(dir, "c.db")
	arrived, release = sk4.blockNext("/notify")
	cmd, out = startSinkEngine(t, map[string]string{"db": db, "sink": srv4.URL, "emit": "order-c"})
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatalf("the notify never reached the sink: %s", out)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	release()
	id = runID(out.String())
	runSinkEngine(t, map[string]string{"db": db, "sink": srv4.URL})
	run, _ = runOf(t, db, id)
	calls, applied := sk4.count("/notify")
	sk4.mu.Lock()
	keys := sk4.calls["/notify"]
	sk4.mu.Unlock()
	r.check(t, "(c) idempotent notify re-run after the kill, the run completes", run.Status == yella.StatusCompleted && calls == 2, "status %s, %d notify calls", run.Status, calls)
	r.check(t, "(c) both calls carried one idempotency key, applied once", len(keys) == 2 && keys[0] == keys[1] && keys[0] != "" && applied == 1, "keys %v, applied %d", keys, applied)
	chargeCalls, _ := sk4.count("/charge")
	r.check(t, "(c) the completed charge was not repeated", chargeCalls == 1, "%d charge calls", chargeCalls)
	r.figure("scenarios", 5)
}
