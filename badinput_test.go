package yella_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
)

// snapshot is everything a bad call must leave unchanged.
func snapshot(t *testing.T, st store.Store) string {
	t.Helper()
	ctx := context.Background()
	runs, err := st.Runs(ctx, store.RunFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range runs {
		tl, _ := st.Timeline(ctx, r.ID)
		b.WriteString(r.ID + " " + string(r.Status) + " " + r.Error + " " + string(r.Output))
		for _, e := range tl {
			b.WriteString(" " + string(e.Status) + ":" + e.Note)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	eng, err := yella.New(yella.Config{Store: st, MaxPayloadBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	noop := func(c *yella.Ctx) yella.Result { return c.OK(nil) }
	if err := eng.Register(yella.Process{Name: "p", On: "ev", Run: noop}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(ctx)
	em, err := eng.Emit(ctx, "ev", nil)
	if err != nil {
		t.Fatal(err)
	}
	finished := em.Runs[0]
	if err := eng.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		call func() error
		want *yella.Error
		msg  string
	}{
		{"unknown event", func() error { _, err := eng.Emit(ctx, "nobody:listens", 1); return err }, yella.ErrUnknownEvent, `no process listens to "nobody:listens"`},
		{"oversize payload", func() error { _, err := eng.Emit(ctx, "ev", strings.Repeat("x", 100)); return err }, yella.ErrPayloadTooLarge, "payload exceeds max size: 102 bytes > 64"},
		{"not JSON-encodable", func() error { _, err := eng.Emit(ctx, "ev", func() {}); return err }, yella.ErrInvalidPayload, "payload is not JSON-encodable"},
		{"duplicate process", func() error { return eng.Register(yella.Process{Name: "p", On: "other", Run: noop}) }, yella.ErrDuplicateProcess, "process already registered: p"},
		{"invalid config field", func() error { _, err := yella.New(yella.Config{Store: st, Concurrency: -5}); return err }, &yella.Error{Code: yella.CodeInvalidConfig, Field: "Concurrency"}, "Concurrency: must not be negative, got -5"},
		{"resume non-deferred", func() error { _, err := eng.Resume(ctx, finished, nil); return err }, yella.ErrInvalidRunState, "is completed, not deferred"},
		{"requeue non-dead", func() error { _, err := eng.RequeueDead(ctx, finished); return err }, yella.ErrInvalidRunState, "is completed"},
		{"cancel finished", func() error { _, err := eng.Cancel(ctx, finished); return err }, yella.ErrInvalidRunState, "is completed"},
		{"retry unknown run", func() error { _, err := eng.Retry(ctx, "no-such-run"); return err }, yella.ErrRunNotFound, "run not found: no-such-run"},
		{"malformed cursor", func() error { _, err := eng.Runs(ctx, yella.RunQuery{Cursor: "s-1"}); return err }, yella.ErrInvalidQuery, "malformed cursor"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := snapshot(t, st)
			err := c.call()
			if !errors.Is(err, c.want) {
				t.Fatalf("error %v, want %s", err, c.want.Code)
			}
			var ye *yella.Error
			if !errors.As(err, &ye) {
				t.Fatalf("error %T is not a *yella.Error", err)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("message %q does not say %q", err.Error(), c.msg)
			}
			if after := snapshot(t, st); after != before {
				t.Errorf("state changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}
