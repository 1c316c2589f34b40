package yella_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/pgstore"
)

// TestFailureMessageWithAnyBytesOnPostgres: a handler's error may quote
// any bytes (a response body, say), a NUL byte and invalid UTF-8 among
// them, which PostgreSQL's text refuses. The run still ends, errored,
// with its message stored with each such byte replaced by U+FFFD, and the
// engine stops: the end is not refused and retried for ever, holding the
// run running and the engine's stop.
func TestFailureMessageWithAnyBytesOnPostgres(t *testing.T) {
	if why := pgSkip(); why != "" {
		t.Skip(why)
	}
	ctx := context.Background()
	ps := pgFactory().Open(t, t.TempDir()).(*pgstore.Store)
	e, err := yella.New(yella.Config{Store: ps})
	if err != nil {
		t.Fatal(err)
	}
	e.Register(yella.Process{Name: "p", On: "ev", Run: func(c *yella.Ctx) yella.Result {
		return c.Fail(errors.New("upstream said \x00 and \xff"))
	}})
	// A refused store write is published as an internal error at once;
	// the wait and the stop end there instead of waiting out the retries.
	refused := make(chan string, 1)
	e.Subscribe(func(ev yella.Event) {
		if ev.Type == yella.InternalError {
			select {
			case refused <- ev.Context + ": " + ev.Error:
			default:
			}
		}
	})
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	em, err := e.Emit(ctx, "ev", 1)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var r yella.Run
	stopWithin := 10 * time.Second
	for {
		if r, err = e.Run(ctx, em.Runs[0]); err == nil && r.Status == yella.StatusErrored || time.Now().After(deadline) {
			break
		}
		select {
		case why := <-refused:
			t.Errorf("a store write was refused: %s", why)
			stopWithin = time.Second // it is retried until the stop gives up
			deadline = time.Now()
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err != nil || r.Status != yella.StatusErrored || r.Error != "upstream said \uFFFD and \uFFFD" {
		t.Errorf("run: %v, %s, error %q; want errored, error %q", err, r.Status, r.Error, "upstream said \uFFFD and \uFFFD")
	}
	stopCtx, cancel := context.WithTimeout(ctx, stopWithin)
	defer cancel()
	if err := e.Stop(stopCtx); err != nil {
		t.Errorf("stop: %v", err)
	}
}
