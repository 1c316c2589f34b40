package llm_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/connector/llm"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/sqlitestore"
)

// crashChildEnv turns the test binary into a crash-test child; its value
// is the JSON childConfig.
const crashChildEnv = "YELLA_LLM_CRASH_CHILD"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(crashChildEnv); cfg != "" {
		os.Exit(crashChild(cfg))
	}
	goleak.VerifyTestMain(m)
}

// childConfig tells a child what to do.
type childConfig struct {
	DB      string
	BaseURL string
	// DieAfterEffect: the handler kills its own process (SIGKILL) once
	// Chat's result is recorded, before the run completes.
	DieAfterEffect bool
}

// childReport is the last line a child that finished prints.
type childReport struct {
	Status  yella.Status
	Output  string
	Effects []yella.EffectRecord
}

// crashChild runs an engine on the SQLite file with one agent process that
// asks the model once, admits the question (once: an idempotency key), and
// waits for its run. It prints "admitted <run id>", then the report.
func crashChild(arg string) int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(arg), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "child:", err); return 1 }
	st, err := sqlitestore.Open(cfg.DB, sqlitestore.Options{})
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	client, err := llm.New(llm.Config{BaseURL: cfg.BaseURL})
	if err != nil {
		return fail(err)
	}
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		return fail(err)
	}
	recorded := make(chan struct{}, 1) // the effect's result is written (effect:completed)
	eng.Subscribe(func(ev yella.Event) {
		if ev.Type == yella.EffectCompleted {
			select {
			case recorded <- struct{}{}:
			default:
			}
		}
	})
	err = eng.Register(yella.Process{Name: "agent", On: "ask", Retry: &yella.Retry{Max: 3, Backoff: yella.Fixed(0)},
		Run: func(c *yella.Ctx) yella.Result {
			comp, err := client.Chat(c, "answer", hello)
			if err != nil {
				return connector.Outcome(c, err)
			}
			if cfg.DieAfterEffect {
				// The handler goes on while the effect's result is
				// written; the kill comes once it is.
				<-recorded
				fmt.Println("effect completed")
				os.Stdout.Sync()
				if self, err := os.FindProcess(os.Getpid()); err == nil {
					self.Kill() // SIGKILL
				}
				time.Sleep(time.Minute) // never reached
			}
			return c.OK(comp.Message.Content)
		}})
	if err != nil {
		return fail(err)
	}
	em, err := eng.Emit(ctx, "ask", nil, yella.IdempotencyKey("question-1"))
	if err != nil {
		return fail(err)
	}
	fmt.Println("admitted", append(em.Runs, em.Existing...)[0])
	if err := eng.Start(ctx); err != nil {
		return fail(err)
	}
	defer eng.Stop(context.Background())
	runs, err := eng.EmitAndWait(ctx, "ask", nil, yella.IdempotencyKey("question-1"))
	if err != nil {
		return fail(err)
	}
	effs, err := eng.Effects(ctx, runs[0].ID)
	if err != nil {
		return fail(err)
	}
	var out string
	json.Unmarshal(runs[0].Output, &out)
	b, _ := json.Marshal(childReport{Status: runs[0].Status, Output: out, Effects: effs})
	fmt.Println(string(b))
	return 0
}

// child is a running crash-test child.
type child struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr bytes.Buffer
}

func startChild(t *testing.T, cfg childConfig) *child {
	t.Helper()
	b, _ := json.Marshal(cfg)
	c := &child{cmd: exec.Command(os.Args[0], "-test.run=^$"), lines: make(chan string, 16)}
	c.cmd.Env = append(os.Environ(), crashChildEnv+"="+string(b))
	c.cmd.Stderr = &c.stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	return c
}

// line returns the child's next line of output; it fails the test if the
// child ends first or stays silent for a minute (an upper bound only).
func (c *child) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.cmd.Wait()
			t.Fatalf("the child ended (%v) without the expected output; stderr:\n%s", c.cmd.ProcessState, c.stderr.String())
		}
		return l
	case <-time.After(time.Minute):
		c.cmd.Process.Kill()
		c.cmd.Wait()
		t.Fatalf("the child said nothing for a minute; stderr:\n%s", c.stderr.String())
	}
	return ""
}

// effects reads the run's effect records from the file, without the engine.
func effects(t *testing.T, db, runID string) []store.Effect {
	t.Helper()
	ro, err := sqlitestore.OpenReadOnly(db, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	effs, err := ro.Effects(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	return effs
}

// A process killed with SIGKILL while the model's reply streams leaves the
// effect started; the restarted process asks again (the same request with
// the same Idempotency-Key) and stores the whole reply, once. A process
// killed after the effect completed is restarted and replays it: the API
// is not asked a third time, and the run completes with exactly one
// recorded completion holding the whole text.
func TestCrashMidStream(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("SIGKILL")
	}
	db := filepath.Join(t.TempDir(), "agent.db")
	halfway := make(chan struct{}, 1)
	release := make(chan struct{})
	fake := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			stream(w, `{"choices":[{"index":0,"delta":{"role":"assistant"}}]}`, text("The answer "), text("is "))
			halfway <- struct{}{}
			select { // hold the stream open half-way
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		reply("The answer ", "is ", "forty-two.")(n, w, r)
	})
	t.Cleanup(func() { close(release) }) // runs before the fake closes
	cfg := childConfig{DB: db, BaseURL: fake.URL}

	// 1. Killed mid-stream.
	first := startChild(t, cfg)
	runID, ok := strings.CutPrefix(first.line(t), "admitted ")
	if !ok {
		t.Fatalf("child said %q", runID)
	}
	select {
	case <-halfway:
	case <-time.After(time.Minute):
		first.cmd.Process.Kill()
		first.cmd.Wait()
		t.Fatalf("the child never called the API; stderr:\n%s", first.stderr.String())
	}
	if err := first.cmd.Process.Signal(os.Kill); err != nil { // SIGKILL
		t.Fatal(err)
	}
	first.cmd.Wait()
	if effs := effects(t, db, runID); len(effs) != 1 || effs[0].Status != store.EffectStarted {
		t.Fatalf("after the kill mid-stream, effects %+v; want one started", effs)
	}

	// 2. Restarted: the effect is run again; the process dies right after
	// it completed.
	cfg.DieAfterEffect = true
	second := startChild(t, cfg)
	if l := second.line(t); l != "admitted "+runID {
		t.Fatalf("restarted child said %q", l)
	}
	if l := second.line(t); l != "effect completed" {
		t.Fatalf("restarted child said %q", l)
	}
	err := second.cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the second child ended with %v, want killed by SIGKILL", err)
	}
	reqs := fake.requests()
	if len(reqs) != 2 {
		t.Fatalf("the API saw %d requests after the restart, want 2", len(reqs))
	}
	key := reqs[0].Header.Get("Idempotency-Key")
	if key == "" || reqs[1].Header.Get("Idempotency-Key") != key || !bytes.Equal(reqs[0].Raw, reqs[1].Raw) {
		t.Errorf("the re-run differs: keys %q and %q, bodies\n%s\n%s", key, reqs[1].Header.Get("Idempotency-Key"), reqs[0].Raw, reqs[1].Raw)
	}
	effs := effects(t, db, runID)
	if len(effs) != 1 || effs[0].Status != store.EffectCompleted {
		t.Fatalf("after the re-run, effects %+v; want one completed", effs)
	}

	// 3. Restarted again: the completed effect is replayed, not asked for.
	cfg.DieAfterEffect = false
	third := startChild(t, cfg)
	if l := third.line(t); l != "admitted "+runID {
		t.Fatalf("second restart said %q", l)
	}
	var rep childReport
	if l := third.line(t); json.Unmarshal([]byte(l), &rep) != nil {
		t.Fatalf("second restart said %q", l)
	}
	if err := third.cmd.Wait(); err != nil {
		t.Fatalf("second restart: %v\n%s", err, third.stderr.String())
	}
	if n := len(fake.requests()); n != 2 {
		t.Errorf("the API saw %d requests in all, want 2: the completed effect was sent again", n)
	}
	if rep.Status != yella.StatusCompleted || rep.Output != "The answer is forty-two." {
		t.Errorf("run %s with output %q", rep.Status, rep.Output)
	}
	if len(rep.Effects) != 1 || rep.Effects[0].Status != yella.EffectStatusCompleted {
		t.Fatalf("effects %+v; want exactly one, completed", rep.Effects)
	}
	var comp llm.Completion
	if err := json.Unmarshal(rep.Effects[0].Output, &comp); err != nil {
		t.Fatal(err)
	}
	if comp.Message.Content != "The answer is forty-two." || comp.FinishReason != "stop" || comp.Usage.TotalTokens != 13 {
		t.Errorf("recorded completion %s; want the whole text", rep.Effects[0].Output)
	}
}
