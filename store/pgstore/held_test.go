package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

// TestAttemptEndsFromClaims: an attempt end of a run this store holds
// from its claim (heldRuns) names the run by seq and reads back only what
// the claim did not return; its answer, stored run and timeline equal
// those of the same end made by a store that holds no claim (it reads the
// whole run back), whether alone or in a batch with ends of both kinds.
// The runs carry every field an admission sets, one is in its second
// attempt with its first attempt's version, and the ends cover every
// field an end writes or keeps.
func TestAttemptEndsFromClaims(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 123456789)
	const runs = 18
	open := func(name string) *Store {
		t.Helper()
		s := planStore(t, name)
		claim := func(id string) {
			t.Helper()
			got, err := s.Claim(ctx, store.ClaimRequest{IDs: []string{id}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
			if err != nil || len(got) != 1 {
				t.Fatalf("claim %s: %v %v", id, got, err)
			}
		}
		for i := range runs {
			id := fmt.Sprintf("r%d", i)
			a := store.Admission{Event: "e", Payload: json.RawMessage(`{}`), Runs: []store.NewRun{{ID: id, Process: "p"}}, Now: now}
			if i%4 == 1 || i%4 == 2 {
				a.IdempotencyKey, a.CorrelationID, a.Context = "k"+id, "corr", json.RawMessage(`{"c":1}`)
				a.Runs[0].Priority, a.Runs[0].RateKey, a.Runs[0].ConcurrencyKey, a.Runs[0].GroupKey = 3, "rate", "conc", "group"
			}
			if _, err := s.Admit(ctx, a); err != nil {
				t.Fatal(err)
			}
			claim(id)
			if i == 16 { // its first attempt retried, with a version the second keeps
				if _, err := s.Update(ctx, store.Update{RunID: id, Now: now, Action: store.ActionRetryLater, Epoch: 1, Error: "once", RetryAt: now, Version: "v1"}); err != nil {
					t.Fatal(err)
				}
				claim(id)
			}
		}
		return s
	}
	at := now.Add(time.Second)
	end := func(id string, a store.Action, f func(u *store.Update)) store.Update {
		u := store.Update{RunID: id, Now: at, Action: a, Epoch: 1}
		if f != nil {
			f(&u)
		}
		return u
	}
	ends := []store.Update{
		end("r0", store.ActionComplete, func(u *store.Update) { u.Output = json.RawMessage("{\"a\":  1,\n \"b\": \"<&>\"}") }),
		end("r1", store.ActionComplete, nil),
		end("r2", store.ActionComplete, func(u *store.Update) { u.Output = json.RawMessage{} }),
		end("r3", store.ActionComplete, func(u *store.Update) { u.Output, u.Version, u.Then = json.RawMessage(`7`), "v2", "next" }),
		end("r4", store.ActionRetryLater, func(u *store.Update) { u.Error, u.ErrorCode, u.RetryAt = "boom ✓", "E1", at.Add(time.Minute) }),
		end("r5", store.ActionDeadLetter, func(u *store.Update) { u.Error = "gave up" }),
		end("r6", store.ActionFail, func(u *store.Update) { u.Error = "bad bytes" }),
		end("r7", store.ActionFail, func(u *store.Update) { u.Error, u.ErrorCode = "coded", "E2" }),
		end("r8", store.ActionComplete, func(u *store.Update) { u.Epoch = 5 }), // fenced
		end("missing", store.ActionComplete, nil),
		end("r9", store.ActionComplete, func(u *store.Update) { u.Output = json.RawMessage(`1`) }),
		end("r9", store.ActionComplete, func(u *store.Update) { u.Output = json.RawMessage(`2`) }), // the run's second end
		end("r10", store.ActionDefer, func(u *store.Update) { u.Then = "later" }),
		end("r11", store.ActionFence, func(u *store.Update) { u.Error = "unknown outcome" }),
		end("r12", store.ActionHandBack, nil),
		end("r13", store.ActionComplete, func(u *store.Update) { u.Note = "a note of its own" }),
		end("r14", store.ActionComplete, func(u *store.Update) { u.Now = at.Add(time.Millisecond) }),
		end("r15", store.ActionRetryLater, func(u *store.Update) { u.Error, u.RetryAt, u.Version = "again", at.Add(time.Hour), "v3" }),
		end("r16", store.ActionComplete, func(u *store.Update) { u.Epoch, u.Output = 2, json.RawMessage(`"second"`) }),
		end("r17", store.ActionWait, func(u *store.Update) { // not an end of the batch statement: it writes a wait record
			u.Wait, u.RetryAt = &store.Wait{Key: "w", Signal: "sig"}, at.Add(time.Hour)
		}),
	}
	type answer struct {
		res store.UpdateResult
		err string
	}
	// state is what the store holds of the runs afterwards: each run and
	// its timeline.
	state := func(s *Store) []any {
		t.Helper()
		var out []any
		for i := range runs {
			id := fmt.Sprintf("r%d", i)
			r, err := s.Run(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			tl, err := s.Timeline(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r, tl)
		}
		return out
	}

	// One at a time, by a store that holds no claim: each end reads its
	// whole run back.
	wide := open("heldwide")
	wide.held.m = nil
	before := wide.Stats().HeldEnds
	want := make([]answer, len(ends))
	for i, u := range ends {
		res, err := wide.Update(ctx, u)
		want[i] = answer{res, fmt.Sprint(err)}
	}
	if n := wide.Stats().HeldEnds - before; n != 0 {
		t.Fatalf("%d ends answered from claims the store forgot", n)
	}
	wantState := state(wide)

	// One at a time, each run held from its claim: the same answers.
	held := open("heldone")
	before = held.Stats().HeldEnds
	for i, u := range ends {
		res, err := held.Update(ctx, u)
		if got := (answer{res, fmt.Sprint(err)}); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("end %d (%s of %s), its claim held:\ngot  %+v\nwant %+v", i, u.Action, u.RunID, got, want[i])
		}
	}
	// All but r8's (fenced), the unknown run's, r9's second (its first
	// spent the claim) and r17's wait.
	if n, w := held.Stats().HeldEnds-before, int64(len(ends)-4); n != w {
		t.Errorf("%d ends answered from their claims, want %d", n, w)
	}
	if got := state(held); !reflect.DeepEqual(got, wantState) {
		t.Errorf("stored runs and timelines differ from the wide ends':\ngot  %+v\nwant %+v", got, wantState)
	}
	if n := len(held.held.m); n != 0 {
		t.Errorf("%d claims still held after every run's end", n)
	}

	// Together, half of the claims forgotten: ends of both kinds in
	// batches (r9's second end after its first).
	mixed := open("heldmixed")
	for i := 1; i < runs; i += 2 {
		mixed.held.forget(fmt.Sprintf("r%d", i))
	}
	got := make([]answer, len(ends))
	var wg sync.WaitGroup
	for i, u := range ends {
		if u.RunID == "r9" && ends[i-1].RunID == "r9" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := mixed.Update(ctx, u)
			got[i] = answer{res, fmt.Sprint(err)}
		}()
	}
	wg.Wait()
	for i, u := range ends {
		if u.RunID == "r9" && ends[i-1].RunID == "r9" {
			res, err := mixed.Update(ctx, u)
			got[i] = answer{res, fmt.Sprint(err)}
		}
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("end %d (%s of %s) in a batch:\ngot  %+v\nwant %+v", i, u.Action, u.RunID, got[i], want[i])
		}
	}
	if got := state(mixed); !reflect.DeepEqual(got, wantState) {
		t.Errorf("stored runs and timelines after batches differ from the wide ends':\ngot  %+v\nwant %+v", got, wantState)
	}
}
