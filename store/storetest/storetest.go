// Package storetest is the conformance suite every store.Store passes. A
// store's own test calls Run with a Harness that opens it.
//
// The suite checks a store the way users exercise it: mostly by driving the
// real engine (package yella) over it, plus direct calls for the contract's
// atomic operations. That is why this package, unlike the stores, imports
// the engine; it is imported only by tests.
//
// Each case names the behaviours of the original engine's test suite that
// it covers (the numbers of §12 of the specification,
// ../shared/reference/yella-spec.md), so Coverage lists which behaviours
// are checked and by which case. Cases whose semantics deliberately differ
// from the original (errors instead of silent empty results, 1-based
// attempts, fenced effects…) assert the new behaviour and say so in Note.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store"
)

// Harness describes the store under test.
type Harness struct {
	// Open opens the store kept in dir, a fresh temporary directory per test.
	// Opening the same dir again after Close must see the same data if
	// Durable.
	Open func(t testing.TB, dir string) store.Store
	// Durable: data survives Close and a new Open of the same dir.
	Durable bool
	// Shared: several engines may use one open store at once (an exclusive
	// store such as SQLite refuses a second engine process instead). A
	// durable store that is not shared is exclusive: one process has it
	// open, so a new Open knows that every lease owner of an earlier Open is
	// gone (see store.Store.Abandoned).
	Shared bool
}

// Case is one conformance check.
type Case struct {
	Name string
	// Spec lists the behaviours of spec §12 this case covers.
	Spec []int
	// Note says how the behaviour differs from the original, if it does.
	Note      string
	Durable   bool // needs a durable store
	Shared    bool // needs a shared store
	Exclusive bool // needs a durable store that is not shared (see Harness.Shared)
	Fn        func(h *H)
}

var (
	casesMu sync.Mutex
	cases   []Case
)

func register(cs ...Case) {
	casesMu.Lock()
	defer casesMu.Unlock()
	cases = append(cases, cs...)
}

// Cases returns every case, sorted by name.
func Cases() []Case {
	casesMu.Lock()
	defer casesMu.Unlock()
	out := append([]Case(nil), cases...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Coverage maps each covered §12 behaviour to the cases that check it.
func Coverage() map[int][]string {
	out := map[int][]string{}
	for _, c := range Cases() {
		for _, n := range c.Spec {
			out[n] = append(out[n], c.Name)
		}
	}
	return out
}

// Run runs every case against the store h opens. Cases that need a durable
// or shared store are skipped for stores that are not.
func Run(t *testing.T, h Harness) {
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if c.Durable && !h.Durable {
				t.Skip("store is not durable")
			}
			if c.Shared && !h.Shared {
				t.Skip("store cannot be shared by engines")
			}
			if c.Exclusive && (!h.Durable || h.Shared) {
				t.Skip("store is not opened exclusively by one process")
			}
			hh := &H{T: t, h: h, dir: t.TempDir()}
			hh.St = h.Open(t, hh.dir)
			t.Cleanup(func() { hh.stopAll(); hh.St.Close() })
			// A case that panics fails alone; the rest of the suite runs.
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("case panicked: %v\n%s", p, debug.Stack())
				}
			}()
			c.Fn(hh)
		})
	}
}

// H is the per-case helper: the store, engines on it and their events.
type H struct {
	*testing.T
	h       Harness
	dir     string
	St      store.Store
	Clock   *clock.Fake // set by Fake
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

// Fake switches the engines created afterwards to a fake clock.
func (h *H) Fake() *clock.Fake {
	h.Clock = clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
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
	cfg.Store = h.St
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
	if err := e.Start(h.Ctx()); err != nil {
		h.Fatalf("start: %v", err)
	}
	return e
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
	h.St = h.h.Open(h, h.dir)
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

// WaitStatus waits until run id has status st.
func (h *H) WaitStatus(id string, st store.Status) store.Run {
	h.Helper()
	var r store.Run
	h.WaitFor(fmt.Sprintf("run %s to be %s", id, st), func() bool {
		r = h.Run(id)
		return r.Status == st
	})
	return r
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
