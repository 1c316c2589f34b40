// Package storetest is the conformance suite of the storage contract: every
// store.Store passes it. A store's own test calls Run with a Factory that
// opens it:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Factory{
//			Open:   func(testing.TB, string) store.Store { return memstore.New() },
//			Shared: true,
//		})
//	}
//
// The suite checks the contract alone, through direct calls of store.Store:
// it imports the store package and the standard library, never the engine
// (package yella), so a store is proven without it. How the engine behaves
// on each store is checked by the engine suite, in the root package's tests
// (enginesuite_test.go), which runs on every store through the same
// Factory.
//
// The suite is an explicit list (suite, below): one function per file of
// cases, each returning that file's cases. Nothing registers itself.
//
// Each case lists, in Spec, the numbers of the behaviours it covers in a
// catalogue of 388 numbered behaviours (those the TypeScript engine's test
// suite checks). The numbers are data: they key the coverage table,
// generated across both suites into testdata/coverage.md at the module
// root, which lists which behaviours are checked and by which case. A case
// whose semantics deliberately differ from the catalogued behaviour says
// how, and why, in Note.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

// suite is the conformance suite: every group of cases, in the order they
// run (a file may hold several groups). A new group adds its function
// here; TestEveryGroupListed fails when a function returning []Case is
// missing from this list.
var suite = []func() []Case{
	// cases_store.go: the contract's atomic operations.
	storeEffectCases,
	storeEffectGuardCases,
	storeAdmitCases,
	storeRunCases,
	storeLeaseCases,
	storeFenceCases,
	storeListCases,
	storeChainCases,
	storeKeyCases,
	storeRollupCases,
	listingCases,    // cases_listing.go: listings filtered on several statuses
	keyCases,        // cases_keys.go: idempotency keys kept after pruning
	transitionCases, // cases_transitions.go: every status × every operation
	flowCases,       // cases_flow.go: flow control and delayed runs
	guaranteeCases,  // cases_guarantees.go: store-level reliability guarantees
	batchCases,      // cases_batch.go: several admissions in one transaction
	waitCases,       // cases_waits.go: waits, signals and their deadlines
	groupCases,      // cases_groups.go: singleton and debounce admissions, paused schedules
	// The run lifecycle's transition-table cases go here.
}

// Factory opens the store under test and says what it can do.
type Factory struct {
	// Open opens the store kept in dir, a fresh temporary directory per
	// case. A case that reopens a Durable store calls it again with the
	// same dir after closing the store.
	Open func(t testing.TB, dir string) store.Store
	// Durable: data survives Close and a new Open of the same dir.
	Durable bool
	// Shared: several engines may use one open store at once (an exclusive
	// store such as SQLite refuses a second engine process instead).
	Shared bool
}

// Exclusive reports whether the store is durable and opened by one process
// at a time: a new Open then knows that every lease owner of an earlier
// Open is gone (see store.Store.Abandoned).
func (f Factory) Exclusive() bool { return f.Durable && !f.Shared }

// Case is one conformance check.
type Case struct {
	Name string
	// Spec lists the numbers (1–388) of the catalogued behaviours this
	// case covers.
	Spec []int
	// Note says how the behaviour differs from the catalogued one, and
	// why, if it does.
	Note    string
	Durable bool // needs a durable store
	Fn      func(h *H)
}

// Cases returns the suite's cases in the order Run runs them. The engine
// suite reads their names, Spec and Note for the coverage table.
func Cases() []Case {
	var out []Case
	for _, group := range suite {
		out = append(out, group()...)
	}
	return out
}

// Run runs every case of the suite against the stores f opens, each case
// on a fresh store. A case that needs a durable store is skipped for a
// store that is not.
func Run(t *testing.T, f Factory) {
	if f.Open == nil {
		t.Fatal("storetest: Factory.Open is nil")
	}
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if c.Durable && !f.Durable {
				t.Skip("store is not durable")
			}
			h := &H{T: t, f: f, dir: t.TempDir()}
			h.St = f.Open(t, h.dir)
			t.Cleanup(func() { h.St.Close() })
			// A case that panics fails alone; the rest of the suite runs.
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("case panicked: %v\n%s", p, debug.Stack())
				}
			}()
			c.Fn(h)
		})
	}
	// Every action of the transition table from every status, through the
	// store, compared with store.Apply.
	t.Run("TransitionTable", func(t *testing.T) {
		st := f.Open(t, t.TempDir())
		defer st.Close()
		CheckTransitions(t, st)
	})
}

// H is the per-case helper: the store under test and shorthands for the
// contract's calls that fail the case on error.
type H struct {
	*testing.T
	// St is the store under test (a new one after Reopen).
	St  store.Store
	f   Factory
	dir string
}

// Ctx returns a context bounded by a generous deadline, so a hung case
// fails instead of blocking the suite.
func (h *H) Ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	h.Cleanup(cancel)
	return ctx
}

// Now is the time the case passes to the store: the wall clock (the store
// takes every time from its caller, so no fake clock is needed).
func (h *H) Now() time.Time { return time.Now() }

// Reopen closes the store and opens it again (durable stores only).
func (h *H) Reopen() {
	h.Helper()
	if err := h.St.Close(); err != nil {
		h.Fatalf("close: %v", err)
	}
	h.St = h.f.Open(h, h.dir)
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

// Admit admits one root run of process on event directly in the store.
func (h *H) Admit(process, event string, payload any) store.Run {
	h.Helper()
	var raw json.RawMessage
	if payload != nil {
		raw, _ = json.Marshal(payload)
	}
	res, err := h.St.Admit(h.Ctx(), store.Admission{Event: event, Payload: raw, Runs: []store.NewRun{{ID: newID(), Process: process}}, Now: h.Now()})
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

// expect fails the case unless got equals want.
func expect[T comparable](h *H, what string, got, want T) {
	h.Helper()
	if got != want {
		h.Errorf("%s = %v, want %v", what, got, want)
	}
}

// newID returns a fresh random run id in UUID form, for direct store calls.
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
