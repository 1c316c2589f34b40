package httpx

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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

	"go.uber.org/goleak"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/store/sqlitestore"
)

// The crash tests run an engine in a child process (this test binary, run
// again with crashChildEnv set) and SIGKILL it.
const crashChildEnv = "YELLA_HTTPX_CRASH_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		if err := crashChild(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// crashChild runs an engine on the SQLite file YELLA_HTTPX_DB whose process
// "call" POSTs to YELLA_HTTPX_URL through Do (Idempotent when
// YELLA_HTTPX_IDEMPOTENT is set; SIGKILLing itself once the call's result
// is recorded when YELLA_HTTPX_DIE_AFTER_CALL is set). With YELLA_HTTPX_RUN
// empty it emits a run and prints its id; then it waits for that run to
// end and prints "status <status>".
func crashChild() error {
	st, err := sqlitestore.Open(os.Getenv("YELLA_HTTPX_DB"), sqlitestore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st, Retry: &yella.Retry{Max: 3, Backoff: yella.Fixed(10 * time.Millisecond)}})
	if err != nil {
		return err
	}
	var opts []Option
	if os.Getenv("YELLA_HTTPX_IDEMPOTENT") != "" {
		opts = append(opts, Idempotent())
	}
	dieAfterCall := os.Getenv("YELLA_HTTPX_DIE_AFTER_CALL") != ""
	recorded := make(chan struct{}, 1) // the call's result is written (effect:completed)
	eng.Subscribe(func(ev yella.Event) {
		if ev.Type == yella.EffectCompleted {
			select {
			case recorded <- struct{}{}:
			default:
			}
		}
	})
	eng.Register(yella.Process{Name: "call", On: "go", Run: func(c *yella.Ctx) yella.Result {
		resp, err := Do(c, "charge", Request{URL: os.Getenv("YELLA_HTTPX_URL"), Body: []byte("amount=100")}, opts...)
		if err != nil {
			return connector.Outcome(c, err)
		}
		if dieAfterCall {
			// The handler goes on while the call's result is written; once
			// it is, the run's own result is not yet.
			<-recorded
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return c.OK(string(resp.Body))
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := eng.Start(ctx); err != nil {
		return err
	}
	defer eng.Stop(context.Background())
	id := os.Getenv("YELLA_HTTPX_RUN")
	if id == "" {
		em, err := eng.Emit(ctx, "go", nil)
		if err != nil {
			return err
		}
		id = em.Runs[0]
		fmt.Println(id)
	}
	for {
		r, err := eng.Run(ctx, id)
		if err != nil {
			return err
		}
		switch r.Status {
		case yella.StatusCompleted, yella.StatusErrored, yella.StatusDead, yella.StatusFenced:
			fmt.Println(strings.TrimSpace(fmt.Sprintf("status %s %s", r.Status, r.Output)))
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("run %s still %s", id, r.Status)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// holdingSink is the downstream of the crash tests: it counts calls and
// their idempotency keys, and holds the first call until the test ends
// (or the caller goes away), telling the test when it arrived.
type holdingSink struct {
	hold    bool
	arrived chan struct{}
	release chan struct{}
	mu      sync.Mutex
	keys    []string
}

func (s *holdingSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	n := len(s.keys)
	s.mu.Unlock()
	if n == 1 && s.hold {
		close(s.arrived)
		select {
		case <-s.release:
		case <-r.Context().Done():
		}
		return
	}
	fmt.Fprintf(w, "charged-%d", n)
}

func (s *holdingSink) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

type child struct {
	cmd *exec.Cmd
	out *bufio.Scanner
}

func startChild(t *testing.T, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{crashChildEnv + "=1"}, env...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return &child{cmd: cmd, out: bufio.NewScanner(out)}
}

func (c *child) line(t *testing.T) string {
	t.Helper()
	if !c.out.Scan() {
		t.Fatalf("the child ended without a line: %v", c.out.Err())
	}
	return c.out.Text()
}

// A call whose process is SIGKILLed while the downstream holds the request
// has an unknown outcome: after a restart the run is fenced (not sent
// again) by default, and sent again with the same idempotency key when the
// call is Idempotent. A call whose result was recorded before the kill is
// replayed, never sent again.
func TestCrashMidCall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes")
	}
	for _, tc := range []struct {
		name       string
		hold       bool     // the downstream holds the first call; the test kills the child
		env        []string // of the first child
		wantStatus string
		wantCalls  int
	}{
		{"fenced", true, nil, "status fenced", 1},
		{"idempotent", true, []string{"YELLA_HTTPX_IDEMPOTENT=1"}, "status completed \"charged-2\"", 2},
		{"completed", false, []string{"YELLA_HTTPX_DIE_AFTER_CALL=1"}, "status completed \"charged-1\"", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &holdingSink{hold: tc.hold, arrived: make(chan struct{}), release: make(chan struct{})}
			srv := httptest.NewServer(sink)
			defer srv.Close()
			defer close(sink.release)
			env := []string{"YELLA_HTTPX_DB=" + filepath.Join(t.TempDir(), "y.db"), "YELLA_HTTPX_URL=" + srv.URL}

			first := startChild(t, append(env, tc.env...)...)
			id := first.line(t)
			if tc.hold {
				select {
				case <-sink.arrived:
				case <-time.After(30 * time.Second):
					t.Fatal("the call never arrived")
				}
				if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
			err := first.cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("first child: %v, want killed by SIGKILL", err)
			}

			// The restart keeps the idempotent variant (its policy is the
			// process's) but never dies on purpose.
			var keep []string
			for _, e := range tc.env {
				if strings.HasPrefix(e, "YELLA_HTTPX_IDEMPOTENT=") {
					keep = append(keep, e)
				}
			}
			second := startChild(t, append(append(env, "YELLA_HTTPX_RUN="+id), keep...)...)
			if got := second.line(t); got != tc.wantStatus {
				t.Errorf("after the restart: %q, want %q", got, tc.wantStatus)
			}
			second.cmd.Wait()
			keys := sink.calls()
			if len(keys) != tc.wantCalls {
				t.Errorf("the downstream saw %d calls, want %d", len(keys), tc.wantCalls)
			}
			for _, k := range keys {
				if k == "" || k != keys[0] || !strings.Contains(k, id) {
					t.Errorf("idempotency keys %q: want one key for the call, naming run %s", keys, id)
					break
				}
			}
		})
	}
}
