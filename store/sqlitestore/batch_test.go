package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
)

// TestBatchRunsInsertedTogether: the runs of a batch admission, inserted
// many per statement after the batch is decided, are stored exactly as
// the same admissions one at a time store them. (A failure deep in a
// statement of many: Store/AdmitBatch/AllOrNothing of the conformance
// suite.)
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
}
