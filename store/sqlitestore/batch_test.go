package sqlitestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

// TestBatchRunsInsertedTogether: the runs of a batch admission, inserted
// many per statement after the batch is decided, are stored exactly as
// the same admissions one at a time store them; and a run that cannot be
// inserted, deep in a statement of many, fails the batch naming its own
// admission and leaves nothing admitted.
func TestBatchRunsInsertedTogether(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 42)
	open := func(name string) *Store {
		t.Helper()
		s, _ := openAt(t, name)
		return s
	}
	const n = 300 // more than one statement's rows, and not a power of two
	as := make([]store.Admission, n)
	for i := range as {
		nr := store.NewRun{ID: fmt.Sprintf("r%03d", i), Process: "p", Priority: i % 3}
		if i%7 == 0 {
			nr.RateKey, nr.ConcurrencyKey = fmt.Sprint("rate", i), "conc"
		}
		as[i] = store.Admission{Event: "e", Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Runs: []store.NewRun{nr}, Now: now}
		if i%5 == 0 {
			as[i].Context = json.RawMessage(`{"c":1}`)
		}
		if i%11 == 0 {
			as[i].NotBefore = now.Add(time.Hour)
		}
		if i == 150 {
			as[i].IdempotencyKey = "key" // its plan reads: the runs before it are inserted first
		}
	}

	alone, batch := open("alone.db"), open("batch.db")
	var want []store.AdmitResult
	for _, a := range as {
		res, err := alone.Admit(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, res)
	}
	got, err := batch.AdmitBatch(ctx, as)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("batch results differ from one at a time")
	}
	for i := range as {
		id := as[i].Runs[0].ID
		a, err := alone.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		b, err := batch.Run(ctx, id)
		if err != nil {
			t.Fatalf("run %s of the batch: %v", id, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s stored:\nbatch %+v\nalone %+v", id, b, a)
		}
	}

	// A second batch: admission 250's run takes admission 40's id. The
	// runs are inserted after the last admission is decided, 128 at a
	// time; the failure is 250's.
	bad := make([]store.Admission, n)
	for i := range bad {
		bad[i] = store.Admission{Event: "e", Payload: json.RawMessage(`{}`), Runs: []store.NewRun{{ID: fmt.Sprintf("s%03d", i), Process: "p"}}, Now: now}
	}
	bad[250].Runs[0].ID = bad[40].Runs[0].ID
	before, err := batch.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = batch.AdmitBatch(ctx, bad)
	var be *store.BatchError
	if !errors.As(err, &be) || be.Index != 250 {
		t.Fatalf("err = %v, want a *store.BatchError for admission 250", err)
	}
	after, err := batch.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("a failed batch admitted runs: counts %v, were %v", after, before)
	}
	if _, err := batch.Run(ctx, "s000"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the failed batch's first run: %v, want ErrNotFound", err)
	}
}
