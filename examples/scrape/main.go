// Scrape: read web pages in headless Chromium from a durable process.
//
//	go run ./examples/scrape
//
// The program serves a small local site, then emits one page:requested
// event per page; the process read-page loads each page in a tab of a
// Chromium pool (connector/browser) and stores what it read as one durable
// effect. A missing page (404) fails its run at once; a server error would
// be retried. Run it again with the same -db: the pages read before are
// not loaded again (their runs are reported as already done).
//
// It needs Chromium (Debian: apt-get install chromium). Flags: -db PATH
// (default scrape.db in the user's cache directory, yella/ in it),
// -reset, -tabs N.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/connector/browser"
	"github.com/yella-go/yella/store/sqlitestore"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scrape:", err)
		os.Exit(1)
	}
}

// page is the payload of page:requested.
type page struct {
	Path string `json:"path"`
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("scrape", flag.ContinueOnError)
	dbPath := fs.String("db", defaultDB(), "SQLite database file")
	reset := fs.Bool("reset", false, "delete the database first")
	tabs := fs.Int("tabs", 2, "Chromium tabs open at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tabs < 1 {
		return errors.New("-tabs must be at least 1")
	}
	if err := os.MkdirAll(filepath.Dir(*dbPath), 0o755); err != nil {
		return err
	}
	if *reset {
		for _, suffix := range []string{"", "-wal", "-shm", ".lock"} {
			os.Remove(*dbPath + suffix)
		}
	}
	site, err := serveSite()
	if err != nil {
		return err
	}
	defer site.Close()

	st, err := sqlitestore.Open(*dbPath, sqlitestore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	pool, err := browser.New(browser.Config{TabsPerBrowser: *tabs})
	if err != nil {
		return err
	}
	defer pool.Close()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		return err
	}
	base := "http://" + site.Addr
	err = eng.Register(yella.Process{
		Name: "read-page", On: "page:requested",
		Retry: &yella.Retry{Max: 2, Backoff: yella.Exponential(500 * time.Millisecond)},
		Run: yella.Handle(func(c *yella.Ctx, p page) yella.Result {
			res, err := browser.Scrape(c, pool, yella.MakeKey("read", p.Path), browser.Request{
				URL: base + p.Path, WaitFor: "#price", Selector: "main",
			})
			if err != nil {
				return connector.Outcome(c, err) // 5xx and crashes retried, 4xx final
			}
			return c.OK(map[string]any{"title": res.Title, "text": res.Text})
		}),
	})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		return err
	}
	defer eng.Stop(ctx)
	fmt.Fprintf(out, "database: %s (-db PATH to choose another)\n", *dbPath)
	for _, path := range []string{"/tea", "/coffee", "/cocoa"} {
		runs, err := eng.EmitAndWait(ctx, "page:requested", page{Path: path}, yella.IdempotencyKey("page"+path))
		if err != nil {
			return err
		}
		r := runs[0]
		switch r.Status {
		case yella.StatusCompleted:
			fmt.Fprintf(out, "%-8s %s: %s\n", path, r.Status, strings.Join(strings.Fields(string(r.Output)), " "))
		default:
			fmt.Fprintf(out, "%-8s %s: %s\n", path, r.Status, r.Error)
		}
	}
	return nil
}

// serveSite serves the local site: two product pages whose price appears
// after the page loaded (a script sets it), and nothing else (404).
func serveSite() (*http.Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	prices := map[string]string{"/tea": "4.20", "/coffee": "3.10"}
	srv := &http.Server{Addr: ln.Addr().String(), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		price, ok := prices[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/")
		fmt.Fprintf(w, `<!doctype html><html><head><title>%s</title></head><body><main><h1>%s</h1>
<script>setTimeout(function(){ var p=document.createElement("p"); p.id="price"; p.textContent="Price: %s"; document.querySelector("main").appendChild(p); }, 100);</script>
</main></body></html>`, name, name, price)
	})}
	go srv.Serve(ln)
	return srv, nil
}

func defaultDB() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "yella", "scrape.db")
}
