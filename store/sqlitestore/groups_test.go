package sqlitestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/sqlitestore"
)

// groupStores are the stores a group test runs on: SQLite, and the
// in-memory reference it must agree with.
func groupStores(t *testing.T) map[string]store.Store {
	t.Helper()
	s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "groups.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return map[string]store.Store{"sqlite": s, "memory": memstore.New()}
}

// notes are the notes of a run's timeline entries, in order.
func notes(t *testing.T, s store.Store, id string) string {
	t.Helper()
	tl, err := s.Timeline(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var ns []string
	for _, e := range tl {
		ns = append(ns, string(e.Status)+":"+e.Note)
	}
	return strings.Join(ns, ",")
}

// TestGroupedRunAsItIs: the run that stands in for an admission is
// returned as it is after it, every field but its payload and context,
// even when they are large: a running singleton with its lease, epoch and
// group key; a debounced run with its new start. Update results and run
// reads carry the group key too.
func TestGroupedRunAsItIs(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	big := json.RawMessage(`"` + strings.Repeat("x", 10000) + `"`)
	for name, s := range groupStores(t) {
		t.Run(name, func(t *testing.T) {
			admit := func(p string, g store.GroupPolicy, payload json.RawMessage, notBefore time.Time) store.AdmitResult {
				t.Helper()
				res, err := s.Admit(ctx, store.Admission{Event: "e", Payload: payload, Context: payload, Now: now, NotBefore: notBefore,
					Runs: []store.NewRun{{ID: newID(), Process: p, GroupKey: "k", Group: g}}})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			id := admit("p", store.GroupSingleton, big, time.Time{}).Admitted[0].ID
			rs, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{id}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
			if err != nil || len(rs) != 1 || string(rs[0].Payload) != string(big) {
				t.Fatalf("claim: %d runs, %v", len(rs), err)
			}
			res := admit("p", store.GroupSingleton, json.RawMessage(`1`), time.Time{})
			if len(res.Admitted) != 0 || len(res.Grouped) != 1 {
				t.Fatalf("singleton while running: %+v", res)
			}
			g := res.Grouped[0]
			if g.ID != id || g.Status != store.StatusRunning || g.LeaseOwner != "o" || !g.LeaseExpires.Equal(now.Add(time.Minute)) ||
				g.Epoch != 1 || g.Attempts != 1 || g.GroupKey != "k" || g.Payload != nil || g.Context != nil {
				t.Fatalf("the running run that stood in: %+v", g)
			}
			up, err := s.Update(ctx, store.Update{RunID: id, Epoch: 1, Now: now, Action: store.ActionComplete})
			if err != nil || up.Run.GroupKey != "k" {
				t.Fatalf("update: %+v, %v", up.Run, err)
			}

			id = admit("q", store.GroupDebounce, json.RawMessage(`1`), time.Time{}).Admitted[0].ID
			res = admit("q", store.GroupDebounce, big, now.Add(time.Minute))
			if len(res.Admitted) != 0 || len(res.Grouped) != 1 {
				t.Fatalf("debounce: %+v", res)
			}
			g = res.Grouped[0]
			if g.ID != id || g.Status != store.StatusIdle || !g.RetryAt.Equal(now.Add(time.Minute)) || g.GroupKey != "k" ||
				g.Payload != nil || g.Context != nil {
				t.Fatalf("the debounced run: %+v", g)
			}
			r, err := s.Run(ctx, id)
			if err != nil || string(r.Payload) != string(big) || string(r.Context) != string(big) || r.GroupKey != "k" {
				t.Fatalf("the debounced run read back: %v", err)
			}
			if got := notes(t, s, id); got != "idle:admitted,idle:debounced" {
				t.Fatalf("timeline: %s", got)
			}
			// Debounced at once: no start time left.
			res = admit("q", store.GroupDebounce, big, time.Time{})
			if len(res.Grouped) != 1 || !res.Grouped[0].RetryAt.IsZero() {
				t.Fatalf("debounced at once: %+v", res.Grouped)
			}
			rs, err = s.Claim(ctx, store.ClaimRequest{IDs: []string{id}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
			if err != nil || len(rs) != 1 || string(rs[0].Payload) != string(big) || string(rs[0].Context) != string(big) {
				t.Fatalf("claim of the debounced run: %d runs, %v", len(rs), err)
			}
		})
	}
}

// TestGroupWithinOneAdmission: two runs of one process and group key in
// one admission: the first is admitted and stands in for the second, as
// in the reference store.
func TestGroupWithinOneAdmission(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for name, s := range groupStores(t) {
		t.Run(name, func(t *testing.T) {
			for _, g := range []store.GroupPolicy{store.GroupSingleton, store.GroupDebounce} {
				first := store.NewRun{ID: newID(), Process: "p", GroupKey: "k", Group: g}
				second := store.NewRun{ID: newID(), Process: "p", GroupKey: "k", Group: g}
				other := store.NewRun{ID: newID(), Process: "q", GroupKey: "k", Group: g}
				res, err := s.Admit(ctx, store.Admission{Event: "e", Payload: json.RawMessage(`7`), Now: now, NotBefore: now.Add(time.Second),
					Runs: []store.NewRun{first, second, other}})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Admitted) != 2 || res.Admitted[0].ID != first.ID || res.Admitted[1].ID != other.ID {
					t.Fatalf("policy %d: admitted %+v", g, res.Admitted)
				}
				if len(res.Grouped) != 1 || res.Grouped[0].ID != first.ID || res.Grouped[0].Status != store.StatusIdle ||
					res.Grouped[0].GroupKey != "k" || !res.Grouped[0].RetryAt.Equal(now.Add(time.Second)) || res.Grouped[0].Payload != nil {
					t.Fatalf("policy %d: grouped %+v", g, res.Grouped)
				}
				want := "idle:admitted"
				if g == store.GroupDebounce {
					want += ",idle:debounced"
				}
				if got := notes(t, s, first.ID); got != want {
					t.Fatalf("policy %d: timeline %s, want %s", g, got, want)
				}
				// Ended, so that the next policy starts from an empty group.
				for _, id := range []string{first.ID, other.ID} {
					if _, err := s.Update(ctx, store.Update{RunID: id, Now: now, From: []store.Status{store.StatusIdle}, To: store.StatusCancelled}); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// TestDebouncedFollowUpOfRefusedUpdate: an update whose follow-up runs are
// all debounced into an earlier run admits nothing; when it requires them
// it is refused, and the debounce is not written either: the earlier run
// keeps its payload, start time and timeline.
func TestDebouncedFollowUpOfRefusedUpdate(t *testing.T) {
	s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "refused.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	waiting, err := s.Admit(ctx, store.Admission{Event: "next", Payload: json.RawMessage(`1`), Now: now, NotBefore: now.Add(time.Hour),
		Runs: []store.NewRun{{ID: newID(), Process: "q", GroupKey: "k", Group: store.GroupDebounce}}})
	if err != nil {
		t.Fatal(err)
	}
	qid := waiting.Admitted[0].ID
	parent := admitOne(t, s, "p")
	rs, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{parent.ID}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(rs) != 1 {
		t.Fatalf("claim: %v", err)
	}
	_, err = s.Update(ctx, store.Update{RunID: parent.ID, Epoch: rs[0].Epoch, Now: now, Action: store.ActionComplete, RequireChildren: true,
		Children: &store.Admission{Event: "next", Payload: json.RawMessage(`2`), Now: now, ParentID: parent.ID, CorrelationID: parent.ID, Depth: 1,
			Runs: []store.NewRun{{ID: newID(), Process: "q", GroupKey: "k", Group: store.GroupDebounce}}}})
	if !errors.Is(err, store.ErrNotAdmitted) {
		t.Fatalf("update with debounced follow-ups only: %v, want ErrNotAdmitted", err)
	}
	r, err := s.Run(ctx, qid)
	if err != nil || string(r.Payload) != "1" || !r.RetryAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("the debounced run after a refused update: %+v, %v", r, err)
	}
	if got := notes(t, s, qid); got != "idle:admitted" {
		t.Fatalf("timeline after a refused update: %s", got)
	}
	if p, err := s.Run(ctx, parent.ID); err != nil || p.Status != store.StatusRunning {
		t.Fatalf("the parent after a refused update: %+v, %v", p, err)
	}
	// With another follow-up admitted, the update applies, and the
	// debounce with it.
	res, err := s.Update(ctx, store.Update{RunID: parent.ID, Epoch: rs[0].Epoch, Now: now, Action: store.ActionComplete, RequireChildren: true,
		Children: &store.Admission{Event: "next", Payload: json.RawMessage(`2`), Now: now, ParentID: parent.ID, CorrelationID: parent.ID, Depth: 1,
			Runs: []store.NewRun{{ID: newID(), Process: "q", GroupKey: "k", Group: store.GroupDebounce}, {ID: newID(), Process: "r"}}}})
	if err != nil || len(res.Children.Grouped) != 1 || res.Children.Grouped[0].ID != qid || len(res.Children.Admitted) != 1 ||
		res.Run.Status != store.StatusCompleted {
		t.Fatalf("update with a debounced follow-up: %+v, %v", res, err)
	}
	if r, err := s.Run(ctx, qid); err != nil || string(r.Payload) != "2" || !r.RetryAt.IsZero() {
		t.Fatalf("the debounced run after the update: %+v, %v", r, err)
	}
}
