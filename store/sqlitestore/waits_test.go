package sqlitestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/sqlitestore"
)

// TestWaitingRunsOutsideCap: a process's cap counts its idle and running
// runs, not its waiting ones, in the count the store keeps in memory: a
// wait frees a place, and a claim at the wait's deadline or a signal takes
// one again.
func TestWaitingRunsOutsideCap(t *testing.T) {
	s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "caps.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	admit := func(want int) store.Run {
		t.Helper()
		res, err := s.Admit(ctx, store.Admission{Event: "e", Runs: []store.NewRun{{ID: newID(), Process: "p", Limit: 1}}, Now: now})
		if err != nil || len(res.Admitted) != want {
			t.Fatalf("admit: %d admitted (%v), want %d", len(res.Admitted), err, want)
		}
		if want == 0 {
			return store.Run{}
		}
		return res.Admitted[0]
	}
	claim := func(id string, at time.Time) store.Run {
		t.Helper()
		rs, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{id}, Owner: "o", Now: at, LeaseUntil: at.Add(time.Minute)})
		if err != nil || len(rs) != 1 {
			t.Fatalf("claim %s: %d runs, %v", id, len(rs), err)
		}
		return rs[0]
	}
	update := func(u store.Update) {
		t.Helper()
		if _, err := s.Update(ctx, u); err != nil {
			t.Fatalf("%s %s: %v", u.Action, u.RunID, err)
		}
	}
	a := claim(admit(1).ID, now)
	update(store.Update{RunID: a.ID, Epoch: a.Epoch, Now: now, Action: store.ActionWait, RetryAt: now.Add(time.Hour), Wait: &store.Wait{Key: "nap"}})
	b := claim(admit(1).ID, now) // a waits: its place is free
	admit(0)                     // b holds it
	update(store.Update{RunID: b.ID, Epoch: b.Epoch, Now: now, Action: store.ActionComplete})
	a = claim(a.ID, now.Add(time.Hour)) // the deadline: a runs again
	admit(0)
	update(store.Update{RunID: a.ID, Epoch: a.Epoch, Now: now, Action: store.ActionWait, Wait: &store.Wait{Key: "w", Signal: "go"}})
	c := claim(admit(1).ID, now)
	update(store.Update{RunID: c.ID, Epoch: c.Epoch, Now: now, Action: store.ActionComplete})
	if res, err := s.Signal(ctx, store.SignalRequest{Key: "go", Now: now}); err != nil || res.Woken == nil {
		t.Fatalf("signal: %+v, %v", res, err)
	}
	admit(0) // a is idle again
}

// TestWaitTimeline: the attempt that ends at a wait keeps its number in
// the timeline, while the run's count is refunded, as in the reference
// store; the attempt at the deadline is counted again.
func TestWaitTimeline(t *testing.T) {
	sq, err := sqlitestore.Open(filepath.Join(t.TempDir(), "tl.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var got []string
	for _, s := range []store.Store{memstore.New(), sq} {
		id := newID()
		if _, err := s.Admit(ctx, store.Admission{Event: "e", Runs: []store.NewRun{{ID: id, Process: "p"}}, Now: now}); err != nil {
			t.Fatal(err)
		}
		rs, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{id}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil || len(rs) != 1 {
			t.Fatalf("claim: %v", err)
		}
		if _, err := s.Update(ctx, store.Update{RunID: id, Epoch: rs[0].Epoch, Now: now.Add(time.Second), Action: store.ActionWait,
			RetryAt: now.Add(time.Hour), Wait: &store.Wait{Key: "nap"}}); err != nil {
			t.Fatal(err)
		}
		at := now.Add(time.Hour)
		if rs, err = s.Claim(ctx, store.ClaimRequest{IDs: []string{id}, Owner: "o", Now: at, LeaseUntil: at.Add(time.Minute)}); err != nil || len(rs) != 1 {
			t.Fatalf("claim at the deadline: %v", err)
		}
		if _, err := s.Update(ctx, store.Update{RunID: id, Epoch: rs[0].Epoch, Now: at, Action: store.ActionComplete, Output: json.RawMessage(`1`)}); err != nil {
			t.Fatal(err)
		}
		tl, err := s.Timeline(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprint(timelineSummary(tl)))
	}
	want := "[idle/0/admitted running/1/claimed waiting/0/waiting running/1/claimed completed/1/completed]"
	if got[0] != want {
		t.Fatalf("reference timeline %s, want %s", got[0], want)
	}
	if got[1] != got[0] {
		t.Errorf("timeline %s, the reference store's %s", got[1], got[0])
	}
}

func timelineSummary(tl []store.TimelineEntry) []string {
	var out []string
	for _, e := range tl {
		out = append(out, fmt.Sprintf("%s/%d/%s", e.Status, e.Attempt, e.Note))
	}
	return out
}
