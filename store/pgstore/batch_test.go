package pgstore

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

// TestBatchPlainAdmissionsTogether: the plain admissions of a batch (no
// key, bound or group), inserted by one statement per run of them, are
// stored and answered exactly as the same admissions one at a time; the
// others keep their place in the batch's order. A run that cannot be
// inserted, deep in such a statement, fails the batch naming its own
// admission and leaves nothing admitted.
func TestBatchPlainAdmissionsTogether(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 42)
	const n = 300
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
		if i%13 == 0 {
			as[i].CorrelationID = "corr"
		}
		switch i {
		case 150:
			as[i].IdempotencyKey = "key" // read first: the runs before it are inserted before it
		case 151:
			as[i].IdempotencyKey = "key" // the same key: answered with 150's run
		case 200:
			as[i].Runs[0].Limit = 1000 // bounded: counts the runs before it
		case 260:
			as[i].Runs = append(as[i].Runs, store.NewRun{ID: "r260b", Process: "q"})
		}
	}

	alone, batch := planStore(t, "batch_alone"), planStore(t, "batch_together")
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
		for i := range got {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("admission %d: batch %+v\nalone %+v", i, got[i], want[i])
				break
			}
		}
	}
	for i := range as {
		for _, nr := range as[i].Runs {
			a, errA := alone.Run(ctx, nr.ID)
			b, errB := batch.Run(ctx, nr.ID)
			if !errors.Is(errB, errA) || !reflect.DeepEqual(a, b) {
				t.Errorf("%s stored:\nbatch %+v (%v)\nalone %+v (%v)", nr.ID, b, errB, a, errA)
			}
		}
	}
	ca, _ := alone.Counts(ctx)
	cb, _ := batch.Counts(ctx)
	if !reflect.DeepEqual(ca, cb) {
		t.Errorf("counts: batch %v, alone %v", cb, ca)
	}

	// A second batch: admission 250's run takes admission 40's id, both
	// in one statement's rows; the failure is 250's.
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
