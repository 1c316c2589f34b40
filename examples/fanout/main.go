// Fan-out: fetch 50 URLs in child runs and join their results, on a local
// SQLite file.
//
//	go run ./examples/fanout
//
// The program serves a small local site (50 pages, a few of which answer
// 500 on the first request, and one 404), then emits crawl:requested. The
// "crawl" process starts one "fetch" child run per URL (yella.Children,
// in its chain) and waits for all of them (yella.Join) without holding a
// slot. Each fetch is one durable HTTP call (connector/httpx) with its own
// retry policy: a 500 is retried, a 404 fails the child for good and
// reaches the join as an error the crawl reports. Kill it and run it
// again with the same -db: the pages fetched before are not fetched again,
// and the crawl resumes its join.
//
// Flags: -db PATH (default fanout.db in the user's cache directory, yella/
// in it), -pages N, -reset.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/connector/httpx"
	"github.com/yella-go/yella/store/sqlitestore"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		os.Exit(1)
	}
}

// Page is what a fetch child returns.
type Page struct {
	URL   string `json:"url"`
	Bytes int    `json:"bytes"`
}

// Report is the crawl's output.
type Report struct {
	Pages  int      `json:"pages"`
	Bytes  int      `json:"bytes"`
	Failed []string `json:"failed,omitempty"`
}

// site serves /page/N: page 7 is missing (404); every tenth page answers
// 500 to its first request.
func site() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/page/"))
		if err != nil || n == 7 {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		first := !seen[r.URL.Path]
		seen[r.URL.Path] = true
		mu.Unlock()
		if first && n%10 == 3 {
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "<h1>page %d</h1>%s", n, strings.Repeat(".", n))
	})}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("fanout", flag.ContinueOnError)
	db := fs.String("db", defaultDB(), "the SQLite file")
	pages := fs.Int("pages", 50, "how many URLs to fetch")
	reset := fs.Bool("reset", false, "delete the database first")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pages < 1 || *pages > yella.MaxChildren {
		return fmt.Errorf("-pages must be between 1 and %d", yella.MaxChildren)
	}
	if *reset {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(*db + suffix)
		}
	}
	if err := os.MkdirAll(filepath.Dir(*db), 0o755); err != nil {
		return err
	}
	base, stop, err := site()
	if err != nil {
		return err
	}
	defer stop()
	st, err := sqlitestore.Open(*db, sqlitestore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st, Concurrency: 8})
	if err != nil {
		return err
	}
	err = eng.Register(yella.Process{Name: "crawl", On: "crawl:requested", Run: yella.Handle(func(c *yella.Ctx, urls []string) yella.Result {
		payloads := make([]any, len(urls))
		for i, u := range urls {
			payloads[i] = u
		}
		ids, err := yella.Children(c, "fetch-all", "page:requested", payloads)
		if err != nil {
			return c.Error(err)
		}
		results, err := yella.Join(c, "fetch-all", ids, 0)
		if err != nil {
			return c.Error(err)
		}
		var rep Report
		for _, r := range results {
			var p Page
			if err := r.Decode(&p); err != nil || !r.OK() {
				rep.Failed = append(rep.Failed, r.Error)
				continue
			}
			rep.Pages++
			rep.Bytes += p.Bytes
		}
		return c.OK(rep)
	})})
	if err != nil {
		return err
	}
	err = eng.Register(yella.Process{Name: "fetch", On: "page:requested",
		Retry: &yella.Retry{Max: 3, Backoff: yella.Exponential(50 * time.Millisecond)},
		Run: yella.Handle(func(c *yella.Ctx, url string) yella.Result {
			resp, err := httpx.Do(c, "get", httpx.Request{URL: url})
			if err != nil {
				return connector.Outcome(c, err)
			}
			return c.OK(Page{URL: url, Bytes: len(resp.Body)})
		})})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		return err
	}
	defer eng.Stop(ctx)
	urls := make([]string, *pages)
	for i := range urls {
		urls[i] = fmt.Sprintf("%s/page/%d", base, i)
	}
	// The crawl's key: running the program again resumes the same crawl.
	// The site's port changes between runs, but the pages fetched before
	// are not fetched again: their children completed.
	runs, err := eng.EmitAndWait(ctx, "crawl:requested", urls, yella.IdempotencyKey(fmt.Sprint("crawl-", *pages)))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "crawl %s: %s %s\n", runs[0].ID, runs[0].Status, runs[0].Output)
	return nil
}

func defaultDB() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "yella", "fanout.db")
}
