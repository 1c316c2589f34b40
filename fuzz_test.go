package yella_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/memstore"
)

// fuzzEngine is a started engine on a memory store with a typed handler
// on "ev" and a second process on "other", stopped when the test ends.
func fuzzEngine(f *testing.F) *yella.Engine {
	f.Helper()
	eng, err := yella.New(yella.Config{Store: memstore.New(), Concurrency: 4})
	if err != nil {
		f.Fatal(err)
	}
	type order struct {
		ID    string            `json:"id"`
		Qty   int               `json:"qty"`
		Items []string          `json:"items"`
		Meta  map[string]string `json:"meta"`
	}
	eng.Register(yella.Process{Name: "typed", On: "ev", Run: yella.Handle(func(c *yella.Ctx, in order) yella.Result { return c.OK(in) })})
	eng.Register(yella.Process{Name: "other", On: "other", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
	if err := eng.Start(context.Background()); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { eng.Stop(context.Background()) })
	return eng
}

// FuzzEmitPayload: any bytes offered as a raw JSON payload are either
// refused with CodeInvalidPayload and admit nothing (not JSON, not valid
// UTF-8, or nested deeper than the default limit), or admitted and stored
// as the same JSON value; the typed handler then completes or fails
// the run with CodeSchemaValidationFailed. Nothing panics or hangs.
func FuzzEmitPayload(f *testing.F) {
	for _, s := range []string{`{"id":"a","qty":2,"items":["x"]}`, `{"qty":"two"}`, `null`, `[]`, `"s"`, `{"id":`, "\xff", `{"qty":1e400}`,
		`{"qty":9223372036854775808}`, `{"a":{"b":{"c":[1,2,{"d":null}]}}}`, ` {"id" : "\u00e9"} `, ``,
		"{\"id\":\"\xff\xfe\"}", strings.Repeat("[", 101) + strings.Repeat("]", 101)} {
		f.Add([]byte(s))
	}
	eng := fuzzEngine(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, data []byte) {
		runs, err := eng.EmitAndWait(ctx, "ev", json.RawMessage(data))
		if !json.Valid(data) || !utf8.Valid(data) || jsonDepth(data) > yella.DefaultMaxPayloadDepth {
			if yella.CodeOf(err) != yella.CodeInvalidPayload {
				t.Fatalf("invalid payload %q: %v, want %s", data, err, yella.CodeInvalidPayload)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid JSON %q refused: %v", data, err)
		}
		if len(runs) != 1 {
			t.Fatalf("%d runs, want 1", len(runs))
		}
		r := runs[0]
		if !sameJSON(r.Payload, data) {
			t.Fatalf("payload stored as %q, emitted %q", r.Payload, data)
		}
		switch {
		case r.Status == yella.StatusCompleted:
		case r.Status == yella.StatusErrored && r.ErrorCode == yella.CodeSchemaValidationFailed:
		default:
			t.Fatalf("run ended %s (%s: %s), want completed or a schema validation failure", r.Status, r.ErrorCode, r.Error)
		}
	})
}

// jsonDepth is the deepest nesting of arrays and objects in a valid JSON text.
func jsonDepth(b []byte) int {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	depth, deepest := 0, 0
	for {
		tok, err := d.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

// sameJSON compares two JSON texts as values, numbers by their text (so
// numbers beyond float64, valid JSON, compare too).
func sameJSON(a, b []byte) bool {
	decode := func(p []byte) (any, bool) {
		d := json.NewDecoder(bytes.NewReader(p))
		d.UseNumber()
		var v any
		return v, d.Decode(&v) == nil
	}
	x, okx := decode(a)
	y, oky := decode(b)
	if !okx || !oky {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// FuzzRunQuery: any run query either fails with CodeInvalidQuery or
// returns runs that match every filter, in order, within the page size.
func FuzzRunQuery(f *testing.F) {
	f.Add("typed", "ev", "completed", "", "", 10, false, 0)
	f.Add("", "", "dead-letter", "errored", "s5", 0, true, 1)
	f.Add("x' OR 1=1 --", "%", "running", "bogus", "s-1", -1, false, 7)
	f.Add("", "", "", "", "s99999999999999999999", 5000, false, 1)
	eng := fuzzEngine(f)
	ctx := context.Background()
	for i := range 30 {
		ev := "ev"
		if i%3 == 0 {
			ev = "other"
		}
		payload := json.RawMessage(`{"qty":1}`)
		if i%4 == 0 {
			payload = json.RawMessage(`{"qty":"bad"}`)
		}
		if _, err := eng.EmitAndWait(ctx, ev, payload); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, process, event, status, state, cursor string, limit int, rootOnly bool, order int) {
		q := yella.RunQuery{Process: process, Event: event, State: yella.State(state), RootOnly: rootOnly,
			Order: yella.Order(order), Limit: limit, Cursor: cursor}
		if status != "" {
			q.Status = []yella.Status{yella.Status(status)}
		}
		page, err := eng.Runs(ctx, q)
		if err != nil {
			if yella.CodeOf(err) != yella.CodeInvalidQuery || !errors.Is(err, yella.ErrInvalidQuery) {
				t.Fatalf("query %+v: %v, want an invalid-query error", q, err)
			}
			return
		}
		want := limit
		if want == 0 {
			want = yella.DefaultPageSize
		}
		if len(page.Runs) > min(want, yella.MaxPageSize) {
			t.Fatalf("%d runs for limit %d", len(page.Runs), limit)
		}
		for i, r := range page.Runs {
			if process != "" && r.Process != process || event != "" && r.Event != event || rootOnly && r.ParentID != "" {
				t.Fatalf("run %s (%s/%s) does not match %+v", r.ID, r.Process, r.Event, q)
			}
			if status != "" && state == "" && r.Status != yella.Status(status) {
				t.Fatalf("run %s is %s, query asked for %s", r.ID, r.Status, status)
			}
			if i > 0 {
				prev := page.Runs[i-1].Seq
				if q.Order == yella.NewestFirst && r.Seq >= prev || q.Order == yella.OldestFirst && r.Seq <= prev {
					t.Fatalf("runs out of order: seq %d after %d", r.Seq, prev)
				}
			}
		}
	})
}

// FuzzBackoff: the built-in backoffs never return a negative delay,
// Exponential never one above its one-hour cap, never decrease with n, and return at once for any n.
func FuzzBackoff(f *testing.F) {
	f.Add(int64(time.Second), 1)
	f.Add(int64(-1), 1<<40)
	f.Add(int64(1<<62), 3)
	f.Add(int64(1), 1<<62)
	f.Add(int64(0), -5)
	f.Fuzz(func(t *testing.T, base int64, n int) {
		b := time.Duration(base)
		exp := yella.ExponentialExact(b)
		d, next := exp(n), exp(n+1)
		if d < 0 || d > time.Hour {
			t.Fatalf("ExponentialExact(%v)(%d) = %v", b, n, d)
		}
		if n > 0 && n < 1<<62 && next < d {
			t.Fatalf("ExponentialExact(%v) decreases: %v at %d, %v at %d", b, d, n, next, n+1)
		}
		// Equal jitter: within the upper half of the exact step.
		if j := yella.Exponential(b)(n); j > d || j < d/2 {
			t.Fatalf("Exponential(%v)(%d) = %v, outside [%v, %v]", b, n, j, d/2, d)
		}
		if fixed := yella.Fixed(b)(n); fixed != b {
			t.Fatalf("Fixed(%v)(%d) = %v", b, n, fixed)
		}
	})
}
