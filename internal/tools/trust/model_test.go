//go:build trust

package trust

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/sqlitestore"
)

// The retry, backoff and dead-letter state machine, model-based (T15).
// rapid draws sequences of actions (admit a run with a planned sequence of
// outcomes, advance the fake clock, cancel, retry, requeue a dead letter,
// crash and reopen) and after each one the engine's runs must equal a
// plain Go model of the documented rules, and every transition in a run's
// timeline must be an edge of the allowed graph. rapid shrinks a failure
// to the shortest sequence and prints it with its seed (-rapid.seed).

// outcome is what one execution of a handler returns.
type outcome int

const (
	succeed   outcome = iota // Ctx.OK
	retryable                // Ctx.Error: retried by the policy, then dead-lettered
	permanent                // Ctx.Fail: errored at once, never retried
)

func (o outcome) String() string { return [...]string{"ok", "error", "fail"}[o] }

const modelBase = time.Second // ExponentialExact(1s): 1s, 2s, 4s …

// modelRun is the model's view of one run.
type modelRun struct {
	key      string
	plan     []outcome // outcome of execution i; succeed after the plan
	execs    int
	status   yella.Status
	attempts int
	retryAt  time.Time // when idle and waiting for a retry
	code     yella.Code
}

type model struct {
	maxRetries int
	now        time.Time
	runs       map[string]*modelRun // by run id
	order      []string
}

// execute applies the next planned outcome to an idle run due now.
func (m *model) execute(r *modelRun) {
	o := succeed
	if r.execs < len(r.plan) {
		o = r.plan[r.execs]
	}
	r.execs++
	r.attempts++
	r.retryAt, r.code = time.Time{}, ""
	switch o {
	case succeed:
		r.status = yella.StatusCompleted
	case permanent:
		r.status = yella.StatusErrored
	case retryable:
		if r.attempts <= m.maxRetries {
			r.status, r.retryAt = yella.StatusIdle, m.now.Add(yella.ExponentialExact(modelBase)(r.attempts))
		} else {
			r.status = yella.StatusDead
		}
	}
}

// due runs every idle run whose retry time has come, once: each backoff is
// at least a second, so a run cannot come due twice within one action.
func (m *model) due() {
	for _, id := range m.order {
		if r := m.runs[id]; r.status == yella.StatusIdle && !r.retryAt.After(m.now) {
			m.execute(r)
		}
	}
}

// allowed is the graph of status transitions a timeline may show.
var allowed = map[yella.Status][]yella.Status{
	"":                    {yella.StatusIdle},
	yella.StatusIdle:      {yella.StatusRunning, yella.StatusCancelled},
	yella.StatusRunning:   {yella.StatusCompleted, yella.StatusErrored, yella.StatusIdle, yella.StatusDead},
	yella.StatusErrored:   {yella.StatusIdle},
	yella.StatusDead:      {yella.StatusIdle},
	yella.StatusCancelled: {yella.StatusIdle},
	yella.StatusCompleted: {},
}

// harness is the real engine the model is compared with.
type harness struct {
	kind  string
	dir   string
	clk   *clock.Fake
	st    store.Store
	eng   *yella.Engine
	mu    sync.Mutex
	plans map[string][]outcome // by idempotency key
	execs map[string]int       // handler executions by idempotency key
}

func (h *harness) open(t *rapid.T, maxRetries int) {
	if h.st == nil {
		switch h.kind {
		case "memory":
			h.st = memstore.New()
		default:
			st, err := sqlitestore.Open(filepath.Join(h.dir, "model.db"), sqlitestore.Options{})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			h.st = st
		}
	}
	eng, err := yella.New(yella.Config{Store: h.st, Clock: h.clk, Concurrency: 4})
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	err = eng.Register(yella.Process{Name: "p", On: "ev", Retry: &yella.Retry{Max: maxRetries, Backoff: yella.ExponentialExact(modelBase)},
		Run: func(c *yella.Ctx) yella.Result {
			var in struct{ Key string }
			if err := c.Decode(&in); err != nil {
				return c.Fail(err)
			}
			h.mu.Lock()
			n := h.execs[in.Key]
			h.execs[in.Key]++
			o := succeed
			if n < len(h.plans[in.Key]) {
				o = h.plans[in.Key][n]
			}
			h.mu.Unlock()
			switch o {
			case retryable:
				return c.Error(errors.New("planned retryable error"))
			case permanent:
				return c.Fail(errors.New("planned permanent failure"))
			}
			return c.OK(nil)
		}})
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	h.eng = eng
}

// crash drops the engine without a graceful stop and, for SQLite, closes
// and reopens the file: only what the store holds survives.
func (h *harness) crash(t *rapid.T, maxRetries int) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.eng.Stop(ctx)
	if h.kind != "memory" {
		h.st.Close()
		h.st = nil
	}
	h.open(t, maxRetries)
}

func (h *harness) close() {
	if h.eng != nil {
		h.eng.Stop(context.Background())
	}
	if h.st != nil {
		h.st.Close()
	}
	os.RemoveAll(h.dir)
}

// settle waits until the engine has nothing to do at the fake clock's
// time: no run running and every idle run waiting for a later retry.
func (h *harness) settle(t *rapid.T) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		page, err := h.eng.Runs(context.Background(), yella.RunQuery{Status: []yella.Status{yella.StatusIdle, yella.StatusRunning}, Limit: 1000})
		if err != nil {
			t.Fatalf("runs: %v", err)
		}
		busy := false
		for _, r := range page.Runs {
			if r.Status == yella.StatusRunning || !r.RetryAt.After(h.clk.Now()) {
				busy = true
				break
			}
		}
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the engine did not settle: %d idle or running runs", len(page.Runs))
		}
		time.Sleep(200 * time.Microsecond)
	}
}

var errStateCode = yella.CodeInvalidRunState

func modelMachine(kind string, steps *int) func(*rapid.T) {
	return func(t *rapid.T) {
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		dir, err := os.MkdirTemp("", "yella-model-")
		if err != nil {
			t.Fatal(err)
		}
		h := &harness{kind: kind, dir: dir, clk: clock.NewFake(start), plans: map[string][]outcome{}, execs: map[string]int{}}
		defer h.close()
		m := &model{maxRetries: rapid.IntRange(0, 3).Draw(t, "maxRetries"), now: start, runs: map[string]*modelRun{}}
		h.open(t, m.maxRetries)
		s := &modelSteps{h: h, m: m, ctx: context.Background(), steps: steps}
		t.Repeat(map[string]func(*rapid.T){
			"Admit":        s.admit,
			"AdmitAgain":   s.admitAgain,
			"AdvanceClock": s.advanceClock,
			"Cancel":       s.cancel,
			"Retry":        s.retry,
			"RequeueDead":  s.requeueDead,
			"Crash":        s.crash,
			"":             s.check,
		})
	}
}

// modelSteps are the state machine's actions: each acts on the engine
// (through the harness) and on the model alike; check compares them.
type modelSteps struct {
	h     *harness
	m     *model
	ctx   context.Context
	steps *int // checks made, for the figures
}

// pick draws a run of the model that want accepts (nil: any), skipping
// the step when there is none.
func (s *modelSteps) pick(t *rapid.T, want func(*modelRun) bool) (string, *modelRun) {
	var ids []string
	for _, id := range s.m.order {
		if want == nil || want(s.m.runs[id]) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		t.Skip("no run to act on")
	}
	id := rapid.SampledFrom(ids).Draw(t, "run")
	return id, s.m.runs[id]
}

// expectState checks an operator call refused on a run in the wrong
// state.
func (s *modelSteps) expectState(t *rapid.T, op string, err error) {
	if yella.CodeOf(err) != errStateCode {
		t.Fatalf("%s on a run in the wrong state: %v, want %s", op, err, errStateCode)
	}
}

// admit admits a run with a drawn plan of attempt outcomes.
func (s *modelSteps) admit(t *rapid.T) {
	plan := rapid.SliceOfN(rapid.SampledFrom([]outcome{succeed, retryable, permanent}), 0, 6).Draw(t, "plan")
	key := "r-" + strconv.Itoa(len(s.m.order))
	s.h.mu.Lock()
	s.h.plans[key] = plan
	s.h.mu.Unlock()
	em, err := s.h.eng.Emit(s.ctx, "ev", map[string]string{"key": key}, yella.IdempotencyKey(key))
	if err != nil || len(em.Runs) != 1 {
		t.Fatalf("emit: %v %v", em, err)
	}
	r := &modelRun{key: key, plan: plan, status: yella.StatusIdle}
	s.m.runs[em.Runs[0]] = r
	s.m.order = append(s.m.order, em.Runs[0])
	s.m.execute(r)
}

// admitAgain emits a run's idempotency key again: nothing new is admitted.
func (s *modelSteps) admitAgain(t *rapid.T) {
	// The same idempotency key admits nothing new.
	_, r := s.pick(t, nil)
	em, err := s.h.eng.Emit(s.ctx, "ev", map[string]string{"key": r.key}, yella.IdempotencyKey(r.key))
	if err != nil || len(em.Runs) != 0 || len(em.Existing) != 1 {
		t.Fatalf("re-emit of %s: %+v %v, want one existing run", r.key, em, err)
	}
}

// advanceClock moves the clock up to 10 s on.
func (s *modelSteps) advanceClock(t *rapid.T) {
	// Time moves in steps from one due retry to the next, each
	// settled, as the wall clock would: a retry due at t runs
	// at t, not at the end of the jump.
	target := s.m.now.Add(time.Duration(rapid.IntRange(0, 10).Draw(t, "seconds")) * time.Second)
	for {
		next := target
		for _, r := range s.m.runs {
			if r.status == yella.StatusIdle && r.retryAt.Before(next) {
				next = r.retryAt
			}
		}
		s.m.now = next
		s.h.clk.Set(next)
		s.m.due()
		if next.Equal(target) {
			return
		}
		s.h.settle(t)
	}
}

// cancel cancels a run: an idle one only.
func (s *modelSteps) cancel(t *rapid.T) {
	id, r := s.pick(t, nil)
	_, err := s.h.eng.Cancel(s.ctx, id)
	if r.status != yella.StatusIdle {
		s.expectState(t, "cancel", err)
		return
	}
	if err != nil {
		t.Fatalf("cancel an idle run: %v", err)
	}
	// Cancel beats the pending retry.
	r.status, r.retryAt, r.code = yella.StatusCancelled, time.Time{}, yella.CodeCancelled
}

// retry retries a run: an errored, dead or cancelled one only.
func (s *modelSteps) retry(t *rapid.T) {
	id, r := s.pick(t, nil)
	_, err := s.h.eng.Retry(s.ctx, id)
	if r.status != yella.StatusErrored && r.status != yella.StatusDead && r.status != yella.StatusCancelled {
		s.expectState(t, "retry", err)
		return
	}
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	r.status, r.code = yella.StatusIdle, ""
	s.m.execute(r) // due at once; attempts are kept
}

// requeueDead requeues a run: a dead one only.
func (s *modelSteps) requeueDead(t *rapid.T) {
	id, r := s.pick(t, nil)
	_, err := s.h.eng.RequeueDead(s.ctx, id)
	if r.status != yella.StatusDead {
		s.expectState(t, "requeue", err)
		return
	}
	if err != nil {
		t.Fatalf("requeue: %v", err)
	}
	r.status, r.attempts, r.code = yella.StatusIdle, 0, ""
	s.m.execute(r)
}

// crash crashes the engine and opens it again on the same store.
func (s *modelSteps) crash(t *rapid.T) {
	s.h.crash(t, s.m.maxRetries)
}

// check settles the engine and holds every run against the model: status,
// attempts, handler executions, retry time, error code, and a timeline of
// allowed transitions only.
func (s *modelSteps) check(t *rapid.T) {
	*s.steps++
	s.h.settle(t)
	for _, id := range s.m.order {
		want := s.m.runs[id]
		got, err := s.h.eng.Run(s.ctx, id)
		if err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
		s.h.mu.Lock()
		execs := s.h.execs[want.key]
		s.h.mu.Unlock()
		if got.Status != want.status || got.Attempts != want.attempts || execs != want.execs {
			t.Fatalf("run %s (%s, plan %v): engine %s attempts %d executions %d; model %s attempts %d executions %d",
				id, want.key, want.plan, got.Status, got.Attempts, execs, want.status, want.attempts, want.execs)
		}
		if want.status == yella.StatusIdle && !got.RetryAt.Equal(want.retryAt) {
			t.Fatalf("run %s: retry at %v, model %v (backoff after attempt %d)", id, got.RetryAt, want.retryAt, want.attempts)
		}
		if want.code != "" && got.ErrorCode != want.code {
			t.Fatalf("run %s: code %q, model %q", id, got.ErrorCode, want.code)
		}
		tl, err := s.h.eng.Timeline(s.ctx, id)
		if err != nil {
			t.Fatalf("timeline %s: %v", id, err)
		}
		prev := yella.Status("")
		for _, e := range tl {
			if !slices.Contains(allowed[prev], e.Status) {
				t.Fatalf("run %s: transition %q → %q (%s) is not allowed", id, prev, e.Status, e.Note)
			}
			prev = e.Status
		}
	}
}

// TestRetryModel (T15) runs the state machine against the in-memory and
// the SQLite store.
func TestRetryModel(t *testing.T) {
	r := newResult(t, "retry-model")
	if *long {
		flag.Set("rapid.checks", "1000")
		flag.Set("rapid.steps", "100")
	}
	for _, kind := range []string{"memory", "sqlite"} {
		var steps int
		ok := t.Run(kind, func(t *testing.T) { rapid.Check(t, modelMachine(kind, &steps)) })
		r.figure(kind+"_checked_states", float64(steps))
		r.check(t, kind+": engine equals the model", ok, "%d states checked against the model", steps)
	}
	r.Notes = append(r.Notes, fmt.Sprintf("rapid.checks=%s rapid.steps=%s", flag.Lookup("rapid.checks").Value, flag.Lookup("rapid.steps").Value))
}
