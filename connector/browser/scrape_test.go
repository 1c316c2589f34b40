//go:build linux

package browser

import (
	"context"
	"errors"
	"testing"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/store/memstore"
)

// Scrape is a durable effect: an attempt that fails after the read replays
// the stored Result on the retry, without loading the page again; a 404
// fails the run at once (connector.Outcome), a 503 is retried by the
// process's policy.
func TestScrapeInARun(t *testing.T) {
	s := newSite(t)
	p := newTestPool(t, Config{})
	eng, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	err = eng.Register(yella.Process{Name: "read", On: "page:requested", Retry: &yella.Retry{Max: 2, Backoff: yella.Exponential(0)},
		Run: yella.Handle(func(c *yella.Ctx, in struct{ Path string }) yella.Result {
			r, err := Scrape(c, p, "read", Request{URL: s.URL + in.Path, Selector: "h1"})
			if err != nil {
				return connector.Outcome(c, err)
			}
			if c.Attempt() == 1 {
				return c.Error(errors.New("a failure after the read"))
			}
			return c.OK(r.Text)
		})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(ctx)
	for _, tc := range []struct {
		path     string
		status   yella.Status
		attempts int
		hits     int
	}{
		{"/hello", yella.StatusCompleted, 2, 1}, // the retry replays the read
		{"/status/404", yella.StatusErrored, 1, 1},
		{"/status/503", yella.StatusDead, 3, 3},
	} {
		runs, err := eng.EmitAndWait(ctx, "page:requested", map[string]string{"Path": tc.path})
		if err != nil {
			t.Fatal(err)
		}
		r := runs[0]
		if r.Status != tc.status || r.Attempts != tc.attempts || s.hitsOf(tc.path) != tc.hits {
			t.Errorf("%s: %s after %d attempts, %d page loads (%s); want %s, %d, %d", tc.path, r.Status, r.Attempts, s.hitsOf(tc.path), r.Error, tc.status, tc.attempts, tc.hits)
		}
	}
}
