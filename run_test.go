package yella

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

// allSet fails t unless every field of the struct v is non-zero: the
// fixtures of the conversion tests must set every field, so a field added
// to a stored record (or to a public type) and not converted fails here.
func allSet(t *testing.T, what string, v any) {
	t.Helper()
	rv := reflect.ValueOf(v)
	for i := range rv.NumField() {
		if rv.Field(i).IsZero() {
			t.Errorf("%s.%s is zero: set it in the fixture and in the conversion", what, rv.Type().Field(i).Name)
		}
	}
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestRunOf(t *testing.T) {
	in := store.Run{
		ID: "r1", Seq: 7, Process: "p", Event: "e", CorrelationID: "root", ParentID: "parent", Depth: 2,
		Status: store.StatusRunning, Payload: json.RawMessage(`{"a":1}`), Context: json.RawMessage(`{"c":2}`),
		Output: json.RawMessage(`3`), Error: "boom", ErrorCode: "HANDLER_TIMEOUT", Then: "next",
		IdempotencyKey: "k", Attempts: 3, Epoch: 4, RetryAt: t0.Add(1), LeaseOwner: "engine-a",
		LeaseExpires: t0.Add(2), CreatedAt: t0.Add(3), StartedAt: t0.Add(4), CompletedAt: t0.Add(5), Version: "v2",
		Priority: 5, RateKey: "openai\x1ftenant-1", ConcurrencyKey: "crawl\x1fexample.com", WaitKey: "order:1",
		GroupKey: "user-1",
	}
	allSet(t, "store.Run", in)
	want := Run{
		ID: "r1", Seq: 7, Process: "p", Event: "e", CorrelationID: "root", ParentID: "parent", Depth: 2,
		Status: StatusRunning, Payload: json.RawMessage(`{"a":1}`), Context: json.RawMessage(`{"c":2}`),
		Output: json.RawMessage(`3`), Error: "boom", ErrorCode: CodeHandlerTimeout, Then: "next",
		IdempotencyKey: "k", Attempts: 3, Epoch: 4, RetryAt: t0.Add(1), Owner: "engine-a",
		LeaseExpires: t0.Add(2), CreatedAt: t0.Add(3), StartedAt: t0.Add(4), CompletedAt: t0.Add(5), Version: "v2",
		Priority: 5, RateLimit: "openai", RateKey: "tenant-1", ConcurrencyLimit: "crawl", ConcurrencyKey: "example.com",
		Signal: "order:1", Group: "user-1",
	}
	got := runOf(in)
	// Waiting comes from the engine's queue or the wait's record, not the
	// stored run (Engine.Run sets it: Flow/WaitingReason,
	// Waits/SleepOnceAtItsTime).
	got.Waiting, got.WaitingUntil, got.WaitingSince, got.WaitKey = "rate limit", t0.Add(6), t0.Add(7), "str:w"
	want.Waiting, want.WaitingUntil, want.WaitingSince, want.WaitKey = "rate limit", t0.Add(6), t0.Add(7), "str:w"
	allSet(t, "Run", got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("runOf:\n got %+v\nwant %+v", got, want)
	}
	if runsOf(nil) != nil {
		t.Error("runsOf(nil) is not nil")
	}
	want.Waiting, want.WaitingUntil, want.WaitingSince, want.WaitKey = "", time.Time{}, time.Time{}, "" // listings leave them empty
	if rs := runsOf([]store.Run{in, {ID: "r2"}}); len(rs) != 2 || !reflect.DeepEqual(rs[0], want) || rs[1].ID != "r2" {
		t.Errorf("runsOf = %+v", rs)
	}
}

func TestTimelineEntryOf(t *testing.T) {
	in := store.TimelineEntry{N: 2, At: t0, Status: store.StatusIdle, Attempt: 1, Error: "boom", Code: "HANDLER_PANIC", Note: "retry scheduled"}
	allSet(t, "store.TimelineEntry", in)
	want := TimelineEntry{N: 2, At: t0, Status: StatusIdle, Attempt: 1, Error: "boom", Code: CodePanic, Note: "retry scheduled"}
	got := timelineEntryOf(in)
	allSet(t, "TimelineEntry", got)
	if got != want {
		t.Errorf("timelineEntryOf:\n got %+v\nwant %+v", got, want)
	}
}

func TestEffectRecordOf(t *testing.T) {
	in := store.Effect{RunID: "r1", Key: "str:charge", Status: store.EffectCompleted, Epoch: 3, Output: json.RawMessage(`"ch_1"`),
		Error: "earlier failure", StartedAt: t0, CompletedAt: t0.Add(time.Second)}
	allSet(t, "store.Effect", in)
	want := EffectRecord{RunID: "r1", Key: "str:charge", Status: EffectStatusCompleted, Epoch: 3, Output: json.RawMessage(`"ch_1"`),
		Error: "earlier failure", StartedAt: t0, CompletedAt: t0.Add(time.Second)}
	got := effectRecordOf(in)
	allSet(t, "EffectRecord", got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("effectRecordOf:\n got %+v\nwant %+v", got, want)
	}
}

func TestErrorRecordOf(t *testing.T) {
	in := store.ErrorRecord{ID: 9, At: t0, Kind: "effect", Process: "p", RunID: "r1", EffectKey: "str:charge", Context: "finish", Message: "boom"}
	allSet(t, "store.ErrorRecord", in)
	// The store's row id is not part of the public record: a record not yet
	// flushed has none, and nothing reads it.
	want := ErrorRecord{At: t0, Kind: "effect", Process: "p", RunID: "r1", EffectKey: "str:charge", Context: "finish", Message: "boom"}
	got := errorRecordOf(in)
	allSet(t, "ErrorRecord", got)
	if got != want {
		t.Errorf("errorRecordOf:\n got %+v\nwant %+v", got, want)
	}
}

// TestStatusesMatchTheStore: statuses, states, orders and effect statuses
// cross the boundary by conversion of their values, so each public value
// must be the store's, and there must be as many.
func TestStatusesMatchTheStore(t *testing.T) {
	if len(statuses) != len(store.Statuses) {
		t.Fatalf("%d public statuses, the store has %d", len(statuses), len(store.Statuses))
	}
	for i, s := range store.Statuses {
		p := statuses[i]
		if string(p) != string(s) {
			t.Errorf("status %d: %q, the store's is %q", i, p, s)
		}
		if !p.Valid() || string(p.State()) != string(s.State()) || p.Active() != s.Active() || p.Final() != s.Final() {
			t.Errorf("status %q: Valid %v, State %q, Active %v, Final %v; the store's State %q, Active %v, Final %v",
				p, p.Valid(), p.State(), p.Active(), p.Final(), s.State(), s.Active(), s.Final())
		}
	}
	if Status("dead").Valid() {
		t.Error(`Status("dead") is valid`)
	}
	for _, st := range []State{StateIdle, StateRunning, StateCompleted, StateErrored} {
		if store.StatusesOf(store.State(st)) == nil {
			t.Errorf("state %q is not a store state", st)
		}
	}
	if store.Order(NewestFirst) != store.NewestFirst || store.Order(OldestFirst) != store.OldestFirst {
		t.Error("orders differ from the store's")
	}
	for _, c := range []struct {
		p EffectStatus
		s store.EffectStatus
	}{{EffectStatusStarted, store.EffectStarted}, {EffectStatusCompleted, store.EffectCompleted}, {EffectStatusFailed, store.EffectFailed}} {
		if string(c.p) != string(c.s) {
			t.Errorf("effect status %q, the store's is %q", c.p, c.s)
		}
	}
}

func TestQueueOf(t *testing.T) {
	got := queueOf(map[store.Status]int64{store.StatusIdle: 2, store.StatusDead: 1})
	want := map[Status]int64{StatusIdle: 2, StatusDead: 1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("queueOf = %v, want %v", got, want)
	}
}
