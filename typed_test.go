package yella_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/memstore"
)

type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

func (o order) Validate() error {
	if o.ID == "" {
		return errors.New("id is required")
	}
	if o.Amount <= 0 {
		return fmt.Errorf("amount must be positive, got %d", o.Amount)
	}
	return nil
}

// pointerChecked validates through a pointer receiver.
type pointerChecked struct{ N int }

func (p *pointerChecked) Validate() error {
	if p.N > 10 {
		return errors.New("n over 10")
	}
	return nil
}

func TestDecodes(t *testing.T) {
	for _, tc := range []struct {
		name, payload string
		check         func(json.RawMessage) error
		want          string // "" for accepted, else a part of the error
	}{
		{"valid", `{"id":"o1","amount":5}`, yella.Decodes[order](), ""},
		{"wrong type", `{"id":"o1","amount":"five"}`, yella.Decodes[order](), "does not decode into yella_test.order"},
		{"not an object", `[1,2]`, yella.Decodes[order](), "does not decode"},
		{"validate refuses", `{"id":"","amount":5}`, yella.Decodes[order](), "id is required"},
		{"null is the zero value, which validate refuses", `null`, yella.Decodes[order](), "id is required"},
		{"empty is null", ``, yella.Decodes[order](), "id is required"},
		{"unknown field ignored", `{"id":"o1","amount":5,"note":"x"}`, yella.Decodes[order](), ""},
		{"unknown field refused when strict", `{"id":"o1","amount":5,"note":"x"}`, yella.Decodes[order](yella.Strict()), `unknown field "note"`},
		{"strict accepts known fields", `{"id":"o1","amount":5}`, yella.Decodes[order](yella.Strict()), ""},
		{"two values", `{"id":"o1","amount":5} {}`, yella.Decodes[order](), "more than one JSON value"},
		{"pointer receiver validate", `{"N":11}`, yella.Decodes[pointerChecked](), "n over 10"},
		{"pointer receiver passes", `{"N":1}`, yella.Decodes[pointerChecked](), ""},
		{"no validate method", `{"x":1}`, yella.Decodes[map[string]int](), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check(json.RawMessage(tc.payload))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func startMem(t *testing.T, procs ...yella.Process) *yella.Engine {
	t.Helper()
	ctx := context.Background()
	eng, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if err := eng.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Stop(ctx) })
	return eng
}

func admittedCount(t *testing.T, eng *yella.Engine) int {
	t.Helper()
	page, err := eng.Runs(context.Background(), yella.RunQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return len(page.Runs)
}

func okRun(c *yella.Ctx) yella.Result { return c.OK(nil) }

// TestValidatedAtEmit: a payload one listener's Validate refuses is refused
// at Emit, EmitBatch and for follow-ups, with SCHEMA_VALIDATION_FAILED, and
// nothing is admitted for any listener.
func TestValidatedAtEmit(t *testing.T) {
	ctx := context.Background()
	eng := startMem(t,
		yella.Process{Name: "log", On: "order", Run: okRun}, // no Validate: takes anything
		yella.Process{Name: "bill", On: "order", Run: okRun, Validate: yella.Decodes[order]()},
	)
	_, err := eng.Emit(ctx, "order", map[string]any{"id": "o1", "amount": -3})
	if yella.CodeOf(err) != yella.CodeSchemaValidationFailed || !strings.Contains(err.Error(), "bill") || !strings.Contains(err.Error(), "amount must be positive") {
		t.Fatalf("Emit of an invalid order: %v, want SCHEMA_VALIDATION_FAILED naming bill and the reason", err)
	}
	if n := admittedCount(t, eng); n != 0 {
		t.Fatalf("%d runs admitted by a refused emission, want 0", n)
	}
	_, err = eng.EmitBatch(ctx, []yella.BatchEvent{
		{Event: "order", Payload: order{ID: "o1", Amount: 1}},
		{Event: "order", Payload: map[string]any{"id": "o2"}},
	})
	if yella.CodeOf(err) != yella.CodeSchemaValidationFailed || !strings.Contains(err.Error(), "event 1") {
		t.Fatalf("EmitBatch with an invalid second event: %v, want SCHEMA_VALIDATION_FAILED naming event 1", err)
	}
	if n := admittedCount(t, eng); n != 0 {
		t.Fatalf("%d runs admitted by a refused batch, want 0", n)
	}
	em, err := eng.Emit(ctx, "order", order{ID: "o3", Amount: 7})
	if err != nil || len(em.Runs) != 2 {
		t.Fatalf("Emit of a valid order: %v, %d runs, want 2", err, len(em.Runs))
	}
}

// TestFollowUpValidated: a follow-up payload a listener refuses fails the
// parent run (SCHEMA_VALIDATION_FAILED, no child), and a Resume whose
// merged payload is refused leaves the run deferred.
func TestFollowUpValidated(t *testing.T) {
	ctx := context.Background()
	eng := startMem(t,
		yella.Process{Name: "make", On: "start", Run: func(c *yella.Ctx) yella.Result {
			return c.OK(map[string]any{"id": "o1", "amount": 0}, yella.Then("order"))
		}},
		yella.Process{Name: "park", On: "park", Run: func(c *yella.Ctx) yella.Result {
			return c.Defer("order", map[string]any{"id": "o2"})
		}},
		yella.Process{Name: "bill", On: "order", Run: okRun, Validate: yella.Decodes[order]()},
	)
	runs, err := eng.EmitAndWait(ctx, "start", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := runs[0]; r.Status != yella.StatusErrored || r.ErrorCode != yella.CodeSchemaValidationFailed {
		t.Fatalf("parent of an invalid follow-up ended %s (%s: %s), want errored with SCHEMA_VALIDATION_FAILED", r.Status, r.ErrorCode, r.Error)
	}
	chain, err := eng.Chain(ctx, runs[0].ID)
	if err != nil || len(chain) != 1 {
		t.Fatalf("chain of the refused follow-up: %v, %d runs, want the parent alone", err, len(chain))
	}

	parked, err := eng.EmitAndWait(ctx, "park", nil)
	if err != nil || parked[0].Status != yella.StatusDeferred {
		t.Fatalf("park: %v %v", err, parked)
	}
	if _, err := eng.Resume(ctx, parked[0].ID, map[string]any{"amount": -1}); yella.CodeOf(err) != yella.CodeSchemaValidationFailed {
		t.Fatalf("Resume with a refused merged payload: %v, want SCHEMA_VALIDATION_FAILED", err)
	}
	if r, _ := eng.Run(ctx, parked[0].ID); r.Status != yella.StatusDeferred {
		t.Fatalf("run after a refused Resume is %s, want deferred", r.Status)
	}
	next, err := eng.Resume(ctx, parked[0].ID, map[string]any{"amount": 4})
	if err != nil || len(next) != 1 {
		t.Fatalf("Resume with a valid merged payload: %v, %v", err, next)
	}
}

// TestTopic: a typed event's process gets the decoded payload; its Emit,
// Event (batch), Then and Defer use the topic's name; strict topics refuse
// unknown fields at Emit.
func TestTopic(t *testing.T) {
	ctx := context.Background()
	placed := yella.NewTopic[order]("order:placed")
	billed := yella.NewTopic[order]("order:billed", yella.Strict())
	got := make(chan order, 4)
	bill := placed.Process("bill", func(c *yella.Ctx, o order) yella.Result {
		o.Amount *= 2
		return billed.Then(c, o)
	})
	bill.Timeout = time.Minute // the returned Process takes the other fields
	eng := startMem(t, bill, billed.Process("ship", func(c *yella.Ctx, o order) yella.Result {
		got <- o
		return c.OK(o.ID)
	}))
	if placed.Name() != "order:placed" || bill.On != "order:placed" || bill.Name != "bill" {
		t.Fatalf("topic process: name %q on %q", bill.Name, bill.On)
	}
	if _, err := placed.Emit(ctx, eng, order{ID: "o1", Amount: 5}); err != nil {
		t.Fatal(err)
	}
	if o := <-got; o != (order{ID: "o1", Amount: 10}) {
		t.Fatalf("follow-up payload %+v, want o1 with amount 10", o)
	}
	if _, err := placed.Emit(ctx, eng, order{ID: "", Amount: 5}); yella.CodeOf(err) != yella.CodeSchemaValidationFailed {
		t.Fatalf("Emit of an order its Validate refuses: %v", err)
	}
	if _, err := eng.Emit(ctx, "order:billed", map[string]any{"id": "o2", "amount": 1, "extra": true}); yella.CodeOf(err) != yella.CodeSchemaValidationFailed {
		t.Fatalf("string Emit with an unknown field to a strict topic: %v", err)
	}
	ems, err := eng.EmitBatch(ctx, []yella.BatchEvent{placed.Event(order{ID: "o3", Amount: 1}, "k3")})
	if err != nil || len(ems) != 1 || len(ems[0].Runs) != 1 {
		t.Fatalf("batch of a topic event: %v %v", err, ems)
	}
	if o := <-got; o.ID != "o3" {
		t.Fatalf("batch follow-up %+v", o)
	}
	eng.Drain(ctx)
}

// TestTopicHandlerRefusesBadStoredPayload: a run whose payload was stored
// without validation (admitted by an operator, or before the process had a
// Validate) fails with SCHEMA_VALIDATION_FAILED before the handler runs.
func TestTopicHandlerRefusesBadStoredPayload(t *testing.T) {
	ctx := context.Background()
	placed := yella.NewTopic[order]("order:placed")
	called := false
	p := placed.Process("bill", func(c *yella.Ctx, o order) yella.Result { called = true; return c.OK(nil) })
	p.Validate = nil // as a process without validation at emit would be
	eng := startMem(t, p)
	runs, err := eng.EmitAndWait(ctx, "order:placed", map[string]any{"id": 1})
	if err != nil {
		t.Fatal(err)
	}
	if r := runs[0]; r.Status != yella.StatusErrored || r.ErrorCode != yella.CodeSchemaValidationFailed || called {
		t.Fatalf("run of an undecodable payload: %s %s, handler called %v", r.Status, r.ErrorCode, called)
	}
}

func TestExponentialJitterSpreads(t *testing.T) {
	b := yella.Exponential(time.Second)
	seen := map[time.Duration]bool{}
	for range 200 {
		d := b(3) // step 4 s: between 2 s and 4 s
		if d < 2*time.Second || d > 4*time.Second {
			t.Fatalf("Exponential(1s)(3) = %v, outside [2s, 4s]", d)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Fatalf("200 draws gave %d distinct delays: not jittered", len(seen))
	}
	if d := yella.ExponentialExact(time.Second)(3); d != 4*time.Second {
		t.Fatalf("ExponentialExact(1s)(3) = %v, want 4s", d)
	}
}

// A typed event: the payload type is checked when the code compiles, and
// the payload's own rules (its Validate method) at Emit, before anything
// is admitted.
func ExampleTopic() {
	ctx := context.Background()
	type Signup struct {
		Email string `json:"email"`
	}
	signedUp := yella.NewTopic[Signup]("user:signed-up", yella.Strict())
	eng, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		log.Fatal(err)
	}
	eng.Register(signedUp.Process("welcome", func(c *yella.Ctx, s Signup) yella.Result {
		return c.OK("welcome " + s.Email)
	}))
	eng.Start(ctx)
	defer eng.Stop(ctx)

	em, _ := signedUp.Emit(ctx, eng, Signup{Email: "ada@example.com"})
	eng.Drain(ctx)
	r, _ := eng.Run(ctx, em.Runs[0])
	fmt.Println(r.Status, string(r.Output))

	_, err = eng.Emit(ctx, "user:signed-up", map[string]string{"mail": "typo@example.com"})
	fmt.Println(yella.CodeOf(err))
	// Output:
	// completed "welcome ada@example.com"
	// SCHEMA_VALIDATION_FAILED
}
