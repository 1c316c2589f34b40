package browser_test

import (
	"context"
	"log"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/connector/browser"
	"github.com/yella-go/yella/store/memstore"
)

// A process that reads a page in Chromium as one durable effect: a retry or
// a restart replays the stored read, a 5xx or a crashed browser is retried,
// a 404 fails the run. (Not run as a test: it needs Chromium; the runnable
// program is examples/scrape.)
func ExampleScrape() {
	pool, err := browser.New(browser.Config{MaxBrowsers: 1, TabsPerBrowser: 4})
	if err != nil {
		log.Fatal(err) // no Chromium on PATH
	}
	defer pool.Close()
	eng, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		log.Fatal(err)
	}
	err = eng.Register(yella.Process{Name: "read-page", On: "page:requested",
		Retry: &yella.Retry{Max: 3},
		Run: yella.Handle(func(c *yella.Ctx, in struct{ URL string }) yella.Result {
			res, err := browser.Scrape(c, pool, yella.MakeKey("read", in.URL), browser.Request{
				URL: in.URL, WaitFor: "main", Selector: "main", Extract: browser.Text,
			})
			if err != nil {
				return connector.Outcome(c, err)
			}
			return c.OK(map[string]string{"title": res.Title, "text": res.Text})
		})})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer eng.Stop(ctx)
	if _, err := eng.EmitAndWait(ctx, "page:requested", map[string]string{"URL": "https://example.com/"}); err != nil {
		log.Fatal(err)
	}
}
