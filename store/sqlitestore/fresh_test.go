package sqlitestore

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

// TestClaimsOfKeptRuns claims runs the writer keeps as admitted
// (Store.fresh), alone and merged: each is claimed as the claim that
// returns the whole run would claim it, whatever changed since its
// admission (a debounce that replaced its payload, a cancel), a claim
// that names a run with another kept run's seq claims its own run, not the
// other, and a run whose priority a slot cannot hold is not kept.
func TestClaimsOfKeptRuns(t *testing.T) {
	ctx := context.Background()
	s, path := openAt(t, "kept.db")
	now := time.Now()
	claim := func(owner string, ids []string, seqs []int64) []store.Run {
		t.Helper()
		rs, err := s.Claim(ctx, store.ClaimRequest{IDs: ids, Seqs: seqs, Owner: owner, Now: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	claim("o", []string{"none"}, []int64{1}) // runs are kept once the writer has claimed
	admit := func(id, key, payload string) store.AdmitResult {
		t.Helper()
		nr := store.NewRun{ID: id, Process: "p"}
		if key != "" {
			nr.GroupKey, nr.Group = key, store.GroupDebounce
		}
		res, err := s.Admit(ctx, store.Admission{Event: "e", Payload: json.RawMessage(payload), Runs: []store.NewRun{nr}, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	seq := map[string]int64{}
	for _, id := range []string{"a", "b", "c", "x", "m1", "m2", "m3", "mx"} {
		seq[id] = admit(id, "", `{"id":"`+id+`"}`).Admitted[0].Seq
	}
	for _, id := range []string{"d", "md"} {
		seq[id] = admit(id, id, `1`).Admitted[0].Seq
		// Replaces the run's payload: the run is idle still, and no longer
		// as admitted.
		if res := admit(id+"2", id, `2`); len(res.Grouped) != 1 || res.Grouped[0].ID != id {
			t.Fatalf("the debounce of %s: %+v", id, res)
		}
	}
	for _, id := range []string{"x", "mx"} {
		if _, err := s.Update(ctx, store.Update{RunID: id, Action: store.ActionCancel, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	for id, sq := range seq {
		if s.freshOf(id, sq) == nil {
			t.Fatalf("%s is not kept as admitted", id)
		}
	}
	// A priority a slot cannot hold: the run is not kept, and its claim
	// returns it whole.
	const wide = 1 << 40
	wr, err := s.Admit(ctx, store.Admission{Event: "e", Runs: []store.NewRun{{ID: "wide", Process: "p", Priority: wide}}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if rs := claim("ow", []string{"wide"}, []int64{wr.Admitted[0].Seq}); len(rs) != 1 || rs[0].Priority != wide || rs[0].Status != store.StatusRunning {
		t.Fatalf("the run of priority %d claimed as %+v", wide, rs)
	}
	check := func(r store.Run, id, owner, payload string) {
		t.Helper()
		if r.ID != id || r.Seq != seq[id] || r.Status != store.StatusRunning || r.Epoch != 1 || r.Attempts != 1 ||
			r.LeaseOwner != owner || r.Process != "p" || r.Event != "e" || r.CorrelationID != id ||
			!r.StartedAt.Equal(now) || !r.LeaseExpires.Equal(now.Add(time.Minute)) || string(r.Payload) != payload {
			t.Errorf("%s claimed as %+v", id, r)
		}
		stored, err := s.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Status != store.StatusRunning || stored.Epoch != 1 || stored.LeaseOwner != owner {
			t.Errorf("%s stored as %+v", id, stored)
		}
	}

	// Alone.
	if rs := claim("o1", []string{"a"}, []int64{seq["b"]}); len(rs) != 1 {
		t.Fatalf("a, with b's seq: %v", rs)
	} else {
		check(rs[0], "a", "o1", `{"id":"a"}`)
	}
	if b, err := s.Run(ctx, "b"); err != nil || b.Status != store.StatusIdle {
		t.Fatalf("b, whose seq a's claim named: %+v, %v", b, err)
	}
	if rs := claim("o2", []string{"b", "c"}, []int64{seq["b"], seq["c"]}); len(rs) != 2 {
		t.Fatalf("b, c: %v", rs)
	} else {
		check(rs[0], "b", "o2", `{"id":"b"}`)
		check(rs[1], "c", "o2", `{"id":"c"}`)
	}
	if rs := claim("o3", []string{"d"}, []int64{seq["d"]}); len(rs) != 1 {
		t.Fatalf("d: %v", rs)
	} else {
		check(rs[0], "d", "o3", `2`)
	}
	if rs := claim("o4", []string{"x"}, []int64{seq["x"]}); len(rs) != 0 {
		t.Fatalf("the cancelled x was claimed: %v", rs)
	}

	// Merged: claims queued while the writer is held share a statement.
	got := claimTogether(t, s, path, now, "m", []store.ClaimRequest{
		{IDs: []string{"m1"}, Seqs: []int64{seq["m1"]}},
		{IDs: []string{"m1"}, Seqs: []int64{seq["m1"]}}, // asked twice: one asker gets it
		{IDs: []string{"m2", "md"}, Seqs: []int64{seq["m3"], seq["md"]}},
		{IDs: []string{"mx"}, Seqs: []int64{seq["mx"]}},
		{IDs: []string{"m3"}},
	})
	switch {
	case len(got[0])+len(got[1]) != 1:
		t.Errorf("m1, asked for twice, was claimed %d times", len(got[0])+len(got[1]))
	case len(got[0]) == 1:
		check(got[0][0], "m1", "m0", `{"id":"m1"}`)
	default:
		check(got[1][0], "m1", "m1", `{"id":"m1"}`)
	}
	if len(got[2]) != 2 {
		t.Fatalf("m2 (with m3's seq), md: %v", got[2])
	}
	check(got[2][0], "m2", "m2", `{"id":"m2"}`)
	check(got[2][1], "md", "m2", `2`)
	if len(got[3]) != 0 {
		t.Errorf("the cancelled mx was claimed: %v", got[3])
	}
	if len(got[4]) != 1 {
		t.Fatalf("m3: %v", got[4])
	}
	check(got[4][0], "m3", "m4", `{"id":"m3"}`)

	// The debounced runs' ends: their timelines count the debounce.
	for _, id := range []string{"d", "md"} {
		if _, err := s.Update(ctx, store.Update{RunID: id, Epoch: 1, Action: store.ActionComplete, Now: now.Add(time.Second)}); err != nil {
			t.Fatal(err)
		}
		tl, err := s.Timeline(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := []store.Status{store.StatusIdle, store.StatusIdle, store.StatusRunning, store.StatusCompleted}
		if len(tl) != len(want) {
			t.Fatalf("%s's timeline: %+v", id, tl)
		}
		for i, e := range tl {
			if e.N != i+1 || e.Status != want[i] {
				t.Errorf("%s's timeline entry %d: %+v", id, i, e)
			}
		}
	}
	counts, err := s.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[store.StatusRunning] != 7 || counts[store.StatusIdle] != 1 || counts[store.StatusCompleted] != 2 || counts[store.StatusCancelled] != 2 {
		t.Errorf("counts %v, want 7 running, 1 idle (held), 2 completed, 2 cancelled", counts)
	}
}

// TestKeptRunClaimedAsReturned claims pairs of runs admitted alike, one
// kept as admitted and claimed as such, the other claimed by the
// statement that returns the whole run: the two claimed runs are equal
// but for what tells them apart (ids, seqs, keys), for a root with every
// key and a priority, and for a follow-up with a context.
func TestKeptRunClaimedAsReturned(t *testing.T) {
	ctx := context.Background()
	s, _ := openAt(t, "kept-alike.db")
	now := time.Now()
	claim := func(r store.Run, seqs []int64) store.Run {
		t.Helper()
		rs, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{r.ID}, Seqs: seqs, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil || len(rs) != 1 {
			t.Fatalf("claim of %s: %v, %v", r.ID, rs, err)
		}
		return rs[0]
	}
	admit := func(a store.Admission) store.Run {
		t.Helper()
		a.Now = now
		res, err := s.Admit(ctx, a)
		if err != nil || len(res.Admitted) != 1 {
			t.Fatalf("admit: %+v, %v", res, err)
		}
		return res.Admitted[0]
	}
	if _, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{"none"}, Owner: "o", Now: now, LeaseUntil: now}); err != nil {
		t.Fatal(err)
	}
	root := func(id string) store.Run {
		return admit(store.Admission{Event: "e", Payload: json.RawMessage(`{"x":1}`), IdempotencyKey: "key-" + id,
			Runs: []store.NewRun{{ID: id, Process: "p", Priority: 7, RateKey: "rk", ConcurrencyKey: "ck", GroupKey: "g-" + id, Group: store.GroupSingleton}}})
	}
	ra, rb := root("ra"), root("rb")
	child := func(id string) store.Run {
		return admit(store.Admission{Event: "next", Payload: json.RawMessage(`{"y":2}`), ParentID: ra.ID, CorrelationID: ra.ID, Depth: 1,
			Context: json.RawMessage(`{"k":"v"}`), Runs: []store.NewRun{{ID: id, Process: "q", RateKey: "rk2", ConcurrencyKey: "ck2"}}})
	}
	ca, cb := child("ca"), child("cb")
	for _, pair := range [][2]store.Run{{ra, rb}, {ca, cb}} {
		kept, whole := pair[0], pair[1]
		if s.freshOf(kept.ID, kept.Seq) == nil {
			t.Fatalf("%s is not kept", kept.ID)
		}
		k, w := claim(kept, []int64{kept.Seq}), claim(whole, nil)
		if s.freshOf(kept.ID, kept.Seq) != nil {
			t.Errorf("%s's slot is still taken after its claim", kept.ID)
		}
		if k.ID != kept.ID || k.Seq != kept.Seq {
			t.Errorf("claimed %s (%d) for %s (%d)", k.ID, k.Seq, kept.ID, kept.Seq)
		}
		k.ID, k.Seq = w.ID, w.Seq
		if k.IdempotencyKey != "" {
			k.IdempotencyKey = "key-" + w.ID
		}
		if k.GroupKey != "" {
			k.GroupKey = "g-" + w.ID
		}
		if kept.CorrelationID == kept.ID {
			k.CorrelationID = w.ID
		}
		if !reflect.DeepEqual(k, w) {
			t.Errorf("claimed as kept:\n%+v\nclaimed whole:\n%+v", k, w)
		}
	}
}
