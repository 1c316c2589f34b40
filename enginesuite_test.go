package yella_test

// The engine suite: how the engine behaves on every store. Each case drives
// a real Engine over a store opened by the same storetest.Factory the
// store's own conformance test uses (store/storetest checks the storage
// contract alone). The cases live in enginesuite_*_test.go, one function per
// file, listed in engineSuite below.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/sqlitestore"
	"github.com/yella-go/yella/store/storetest"
	"github.com/yella-go/yella/yellatest"
)

// engineSuite is the engine suite: every file's cases, in the order they
// run. A new file of cases adds its function here; TestEngineSuiteListsEveryGroup
// fails when a function returning []Case is missing from this list.
var engineSuite = []func() []Case{
	engineCases,    // enginesuite_engine_test.go: emission, chains, caps, idempotency
	batchCases,     // enginesuite_batch_test.go: EmitBatch
	guaranteeCases, // enginesuite_guarantees_test.go: the README's guarantees, one break each
	guardCases,     // enginesuite_guards_test.go: configuration and input guards
	keyCases,       // enginesuite_keys_test.go: idempotency keys and retention
	leaseCases,     // enginesuite_lease_test.go: leases, heartbeats, shared stores, restarts
	listingCases,   // enginesuite_listing_test.go: run listings
	obsCases,       // enginesuite_obs_test.go: events, subscribers, observability
	opsCases,       // enginesuite_ops_test.go: resume, cancel, retry, effects
	retryCases,     // enginesuite_retry_test.go: retry policies
	safetyCases,    // enginesuite_safety_test.go: overflow, payload limits
	flowCases,      // enginesuite_flow_test.go: priorities, rate limits, per-key concurrency
	waitCases,      // enginesuite_wait_test.go: delayed and scheduled runs
	cronCases,      // enginesuite_cron_test.go: schedules
	suspendCases,   // enginesuite_suspend_test.go: waits and signals
	childrenCases,  // enginesuite_children_test.go: children and joins
	drainWaitCases, // enginesuite_suspend_test.go: Drain and waiting runs
	groupCases,     // enginesuite_groups_test.go: Singleton, Debounce, paused schedules
	queueCases,     // enginesuite_queue_test.go: a backlog beyond MaxQueued
}

// engineStores are the stores the engine suite runs on.
var engineStores = []struct {
	name string
	f    storetest.Factory
	// slow: skipped with -short (a real file per case; slow under -race).
	slow bool
	// skip, if set, says why the store's cases skip ("" runs them).
	skip func() string
}{
	{name: "memstore", f: storetest.Factory{
		Open:   func(testing.TB, string) store.Store { return memstore.New() },
		Shared: true,
	}},
	{name: "sqlitestore", slow: true, f: storetest.Factory{
		Open: func(t testing.TB, dir string) store.Store {
			s, err := sqlitestore.Open(filepath.Join(dir, "yella.db"), sqlitestore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Durable: true,
	}},
	{name: "pgstore", slow: true, skip: pgSkip, f: pgFactory()},
}

// Case is one engine-suite check.
type Case struct {
	Name string
	// Spec lists the numbered behaviours this case covers, the rows of
	// the coverage table (testdata/coverage.md, TestCoverageTable).
	Spec []int
	// Note says what is new, changed or fixed about the behaviour, if
	// anything; the coverage table lists every note.
	Note      string
	Durable   bool // needs a durable store
	Shared    bool // needs a store several engines may share
	Exclusive bool // needs a durable store one process opens at a time
	Fn        func(h *H)
}

func engineSuiteCases() []Case {
	var out []Case
	for _, group := range engineSuite {
		out = append(out, group()...)
	}
	return out
}

// TestEngineSuite runs every engine case on every store:
// TestEngineSuite/<store>/<case>.
func TestEngineSuite(t *testing.T) {
	for _, s := range engineStores {
		t.Run(s.name, func(t *testing.T) {
			if s.slow && testing.Short() {
				t.Skip("-short: the engine suite on " + s.name + " runs without -short")
			}
			if s.skip != nil && s.skip() != "" {
				t.Skip(s.skip())
			}
			for _, c := range engineSuiteCases() {
				t.Run(c.Name, func(t *testing.T) { runCase(t, s.f, c) })
			}
		})
	}
}

func runCase(t *testing.T, f storetest.Factory, c Case) {
	switch {
	case c.Durable && !f.Durable:
		t.Skip("store is not durable")
	case c.Shared && !f.Shared:
		t.Skip("store cannot be shared by engines")
	case c.Exclusive && !f.Exclusive():
		t.Skip("store is not opened exclusively by one process")
	}
	h := &H{T: t, f: f, dir: t.TempDir()}
	h.St = f.Open(t, h.dir)
	t.Cleanup(func() { h.stopAll(); h.St.Close() })
	// A case that panics fails alone; the rest of the suite runs.
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("case panicked: %v\n%s", p, debug.Stack())
		}
	}()
	c.Fn(h)
}

// H is the per-case helper: the store, engines on it and their events.
type H struct {
	*testing.T
	f       storetest.Factory
	dir     string
	St      store.Store
	Clock   *yellatest.Clock // set by Fake
	engines []*yella.Engine

	mu     sync.Mutex
	events []yella.Event
}

// Ctx returns a context bounded by a generous deadline, so a hung case
// fails instead of blocking the suite.
func (h *H) Ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	h.Cleanup(cancel)
	return ctx
}

// Fake switches the engines created afterwards to a fake clock (the public
// one users test with).
func (h *H) Fake() *yellatest.Clock {
	h.Clock = yellatest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	return h.Clock
}

// Now is the time on the engines' clock.
func (h *H) Now() time.Time {
	if h.Clock != nil {
		return h.Clock.Now()
	}
	return time.Now()
}

// Engine creates an engine on the case's store, registers procs and records
// its events. It is stopped at the end of the case.
func (h *H) Engine(cfg yella.Config, procs ...yella.Process) *yella.Engine {
	h.Helper()
	if cfg.Store == nil {
		cfg.Store = h.St
	}
	if h.Clock != nil && cfg.Clock == nil {
		cfg.Clock = h.Clock
	}
	e, err := yella.New(cfg)
	if err != nil {
		h.Fatalf("new engine: %v", err)
	}
	for _, p := range procs {
		if err := e.Register(p); err != nil {
			h.Fatalf("register %s: %v", p.Name, err)
		}
	}
	e.Subscribe(func(ev yella.Event) {
		h.mu.Lock()
		h.events = append(h.events, ev)
		h.mu.Unlock()
	})
	h.engines = append(h.engines, e)
	return e
}

// Started is Engine followed by Start.
func (h *H) Started(cfg yella.Config, procs ...yella.Process) *yella.Engine {
	h.Helper()
	e := h.Engine(cfg, procs...)
	h.Start(e)
	return e
}

// Start starts e and fails the case on error.
func (h *H) Start(e *yella.Engine) {
	h.Helper()
	if err := e.Start(h.Ctx()); err != nil {
		h.Fatalf("start: %v", err)
	}
}

func (h *H) stopAll() {
	for _, e := range h.engines {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		e.Stop(ctx)
		cancel()
	}
	h.engines = nil
}

// Reopen stops every engine, closes the store and opens it again (durable
// stores only).
func (h *H) Reopen() {
	h.Helper()
	h.stopAll()
	if err := h.St.Close(); err != nil {
		h.Fatalf("close: %v", err)
	}
	h.St = h.f.Open(h, h.dir)
}

// Events returns the recorded events of the given types (all if none).
func (h *H) Events(types ...yella.EventType) []yella.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []yella.Event
	for _, ev := range h.events {
		if len(types) == 0 || containsType(types, ev.Type) {
			out = append(out, ev)
		}
	}
	return out
}

func containsType(ts []yella.EventType, t yella.EventType) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// Emit emits and fails the case on error.
func (h *H) Emit(e *yella.Engine, event string, payload any, opts ...yella.EmitOption) yella.Emission {
	h.Helper()
	em, err := e.Emit(h.Ctx(), event, payload, opts...)
	if err != nil {
		h.Fatalf("emit %s: %v", event, err)
	}
	return em
}

// One emits and returns the single admitted run id.
func (h *H) One(e *yella.Engine, event string, payload any, opts ...yella.EmitOption) string {
	h.Helper()
	em := h.Emit(e, event, payload, opts...)
	if len(em.Runs) != 1 {
		h.Fatalf("emit %s admitted %d runs, want 1 (%+v)", event, len(em.Runs), em)
	}
	return em.Runs[0]
}

// Drain drains and fails the case on error.
func (h *H) Drain(e *yella.Engine) {
	h.Helper()
	if err := e.Drain(h.Ctx()); err != nil {
		h.Fatalf("drain: %v", err)
	}
}

// Run reads a run from the store.
func (h *H) Run(id string) store.Run {
	h.Helper()
	r, err := h.St.Run(h.Ctx(), id)
	if err != nil {
		h.Fatalf("run %s: %v", id, err)
	}
	return r
}

// WaitFor polls cond (real time) until it holds or 5s pass.
func (h *H) WaitFor(what string, cond func() bool) {
	h.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// WaitStatus waits until run id has status st. A run that reaches another
// final status fails the case at once: nothing but an operator moves a
// final run, so waiting out the deadline would only delay the failure.
func (h *H) WaitStatus(id string, st store.Status) store.Run {
	h.Helper()
	var r store.Run
	h.WaitFor(fmt.Sprintf("run %s to be %s", id, st), func() bool {
		h.Helper()
		r = h.Run(id)
		if r.Status != st && r.Status.Final() {
			h.Fatalf("run %s is %s (error %q), want %s", id, r.Status, r.Error, st)
		}
		return r.Status == st
	})
	return r
}

// WaitEvent waits until an event of type t about run id was published.
func (h *H) WaitEvent(t yella.EventType, id string) yella.Event {
	h.Helper()
	var found yella.Event
	h.WaitFor(fmt.Sprintf("%s of run %s", t, id), func() bool {
		for _, ev := range h.Events(t) {
			if ev.RunID == id {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

// Admit admits one root run of process on event directly in the store.
func (h *H) Admit(process, event string, payload any) store.Run {
	h.Helper()
	var raw json.RawMessage
	if payload != nil {
		raw, _ = json.Marshal(payload)
	}
	res, err := h.St.Admit(h.Ctx(), store.Admission{Event: event, Payload: raw, Runs: []store.NewRun{{ID: ID(), Process: process}}, Now: h.Now()})
	if err != nil || len(res.Admitted) != 1 {
		h.Fatalf("admit: %v (%+v)", err, res)
	}
	return res.Admitted[0]
}

// Claim claims run id for owner with a lease of d, directly in the store.
func (h *H) Claim(id, owner string, d time.Duration) store.Run {
	h.Helper()
	now := h.Now()
	rs, err := h.St.Claim(h.Ctx(), store.ClaimRequest{IDs: []string{id}, Owner: owner, Now: now, LeaseUntil: now.Add(d)})
	if err != nil || len(rs) != 1 {
		h.Fatalf("claim %s: %v (%d runs)", id, err, len(rs))
	}
	return rs[0]
}

// Expect fails the case unless got equals want.
func Expect[T comparable](h *H, what string, got, want T) {
	h.Helper()
	if got != want {
		h.Errorf("%s = %v, want %v", what, got, want)
	}
}

// ExpectCode fails the case unless err carries code.
func ExpectCode(h *H, what string, err error, code yella.Code) {
	h.Helper()
	if yella.CodeOf(err) != code {
		h.Errorf("%s: error %v (code %q), want code %q", what, err, yella.CodeOf(err), code)
	}
}

// ExpectContains fails the case unless s contains sub.
func ExpectContains(h *H, what, s, sub string) {
	h.Helper()
	if !strings.Contains(s, sub) {
		h.Errorf("%s = %q, want it to contain %q", what, s, sub)
	}
}

// Noop is a handler that completes with no output.
func Noop(c *yella.Ctx) yella.Result { return c.OK(nil) }

// Proc is a process shorthand.
func Proc(name, on string, run func(*yella.Ctx) yella.Result) yella.Process {
	return yella.Process{Name: name, On: on, Run: run}
}

// ID returns a fresh run id for direct store calls.
func ID() string { return uuid.Must(uuid.NewV7()).String() }

func join(ss []string) string { return strings.Join(ss, ",") }

// Every function of the engine suite's files that returns a list of cases
// is in engineSuite: a file of cases left out would never run.
func TestEngineSuiteListsEveryGroup(t *testing.T) {
	listed := map[string]bool{}
	for _, group := range engineSuite {
		name := runtime.FuncForPC(reflect.ValueOf(group).Pointer()).Name()
		listed[name[strings.LastIndex(name, ".")+1:]] = true
	}
	files, err := filepath.Glob("enginesuite_*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(src), "\n") {
			name, ok := strings.CutPrefix(line, "func ")
			if !ok || !strings.HasSuffix(line, "() []Case {") {
				continue
			}
			name = strings.TrimSuffix(name, "() []Case {")
			found++
			if !listed[name] {
				t.Errorf("%s: %s returns cases but is not in engineSuite (enginesuite_test.go)", path, name)
			}
		}
	}
	if found != len(engineSuite) {
		t.Errorf("found %d functions returning cases, engineSuite lists %d", found, len(engineSuite))
	}
}

// suiteCase is one case of either suite, for the coverage table.
type suiteCase struct {
	name, note string
	items      []int // the numbered behaviours it covers
	store      bool  // a case of the store-only suite (store/storetest)
}

func allSuiteCases() []suiteCase {
	var out []suiteCase
	for _, c := range storetest.Cases() {
		out = append(out, suiteCase{name: c.Name, note: c.Note, items: c.Spec, store: true})
	}
	for _, c := range engineSuiteCases() {
		out = append(out, suiteCase{name: c.Name, note: c.Note, items: c.Spec})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// The two suites together cover at least 150 of the 388 numbered
// behaviours of the coverage table, and no case name is used twice across
// them.
func TestCoverage(t *testing.T) {
	cov := map[int]bool{}
	names := map[string]bool{}
	cases := allSuiteCases()
	for _, c := range cases {
		if names[c.name] {
			t.Errorf("duplicate case name %s", c.name)
		}
		names[c.name] = true
		for _, n := range c.items {
			if n < 1 || n > 388 {
				t.Errorf("case %s names behaviour %d, which does not exist (1-388)", c.name, n)
			}
			cov[n] = true
		}
	}
	if len(cov) < 150 {
		t.Errorf("the suites cover %d numbered behaviours, want at least 150", len(cov))
	}
	t.Logf("%d cases cover %d numbered behaviours", len(cases), len(cov))
}

// TestCoverageTable keeps testdata/coverage.md, the human-readable table of
// which case of which suite checks which behaviour, in step with the cases.
// Regenerate it with UPDATE_GOLDEN=1.
func TestCoverageTable(t *testing.T) {
	cases := allSuiteCases()
	cov := map[int][]string{}
	nStore := 0
	for _, c := range cases {
		label := c.name
		if c.store {
			label += " (store)"
			nStore++
		}
		for _, n := range c.items {
			cov[n] = append(cov[n], label)
		}
	}
	nums := make([]int, 0, len(cov))
	for n := range cov {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	var b strings.Builder
	fmt.Fprintf(&b, "# Conformance coverage of spec §12\n\n")
	fmt.Fprintf(&b, "Generated from the cases of the store suite (store/storetest, marked \"(store)\") and the engine suite (enginesuite_*_test.go):\n")
	fmt.Fprintf(&b, "`UPDATE_GOLDEN=1 go test -run '^TestCoverageTable$' .`\n")
	fmt.Fprintf(&b, "%d behaviours are covered by %d cases (%d store cases, %d engine cases); every store runs all of them.\n\n", len(nums), len(cases), nStore, len(cases)-nStore)
	fmt.Fprintf(&b, "| § 12 item | cases |\n|---|---|\n")
	for _, n := range nums {
		fmt.Fprintf(&b, "| %d | %s |\n", n, strings.Join(cov[n], ", "))
	}
	fmt.Fprintf(&b, "\n## Cases whose semantics differ from the original\n\n")
	for _, c := range cases {
		if c.note != "" {
			fmt.Fprintf(&b, "- **%s**: %s\n", c.name, c.note)
		}
	}
	got := b.String()
	const path = "testdata/coverage.md"
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_GOLDEN=1)", err)
	}
	if string(want) != got {
		t.Errorf("%s is stale; run UPDATE_GOLDEN=1 go test -run '^TestCoverageTable$' .", path)
	}
}
