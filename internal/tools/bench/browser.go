package bench

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/connector/browser"
)

// BrowserPool sizes the Chromium pool of a real-browser scraper scenario:
// the scrape step then loads each page in headless Chromium
// (connector/browser) from a local site the benchmark serves, instead of
// holding memory for a simulated time.
type BrowserPool struct {
	MaxBrowsers    int `json:"maxBrowsers"`
	TabsPerBrowser int `json:"tabsPerBrowser"`
}

// browserPageTimeout bounds one page read in the real-browser scenarios;
// the site's hung pages outlast it.
const browserPageTimeout = 5 * time.Second

// browserReadKey is the first part of the key of the page-read effect: the
// tally recognises page reads by it.
const browserReadKey = "browser-read"

// scrapeSite is the local site the real-browser scraper reads. A page's
// shape follows from a hash of its id, so a retry reads the same page: most
// are small (2–20 KB of text), a quarter 50–200 KB, 1 in 20 a megabyte;
// 1 in 10 is slow (1–3 s), 1 in 100 hangs past the page timeout, 1 in 50 is
// missing (404, final). Besides, 3% of requests fail with a 503 (retried).
// Every answer also waits 20–150 ms.
type scrapeSite struct {
	srv *http.Server
	url string
}

func startScrapeSite() (*scrapeSite, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/page/{id}", servePage)
	mux.HandleFunc("/favicon.ico", http.NotFound)
	s := &scrapeSite{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, url: "http://" + ln.Addr().String()}
	go s.srv.Serve(ln)
	return s, nil
}

func (s *scrapeSite) close() { s.srv.Close() }

// pageShape is what the site does for a page id.
type pageShape struct {
	kb      int
	delay   time.Duration
	missing bool
}

func shapeOf(id string) pageShape {
	h := fnv.New64a()
	h.Write([]byte(id))
	v := h.Sum64()
	r := rand.New(rand.NewPCG(v, v>>7))
	var p pageShape
	switch n := r.IntN(100); {
	case n < 5:
		p.kb = 1024
	case n < 30:
		p.kb = 50 + r.IntN(151)
	default:
		p.kb = 2 + r.IntN(19)
	}
	switch n := r.IntN(100); {
	case n < 1:
		p.delay = browserPageTimeout + 3*time.Second
	case n < 11:
		p.delay = time.Duration(1000+r.IntN(2000)) * time.Millisecond
	}
	p.missing = r.IntN(50) == 0
	return p
}

func servePage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p := shapeOf(id)
	t := time.NewTimer(p.delay + time.Duration(20+rand.IntN(131))*time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return
	}
	switch {
	case p.missing:
		http.Error(w, "no such page", http.StatusNotFound)
		return
	case rand.IntN(100) < 3:
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!doctype html><html><head><title>Page %s</title></head><body><main>", id)
	line := "<p>" + strings.Repeat("lorem ipsum dolor sit amet ", 36) + "</p>\n" // 1 KB
	for range p.kb {
		fmt.Fprint(w, line)
	}
	fmt.Fprint(w, "</main></body></html>")
}

// startBrowser serves the scrape site and opens the Chromium pool of a
// real-browser scenario; it does nothing for the others.
func (w *Workload) startBrowser() error {
	b := w.scn.Browser
	if b == nil {
		return nil
	}
	site, err := startScrapeSite()
	if err != nil {
		return err
	}
	pool, err := browser.New(browser.Config{MaxBrowsers: b.MaxBrowsers, TabsPerBrowser: b.TabsPerBrowser, PageTimeout: browserPageTimeout})
	if err != nil {
		site.close()
		return err
	}
	w.site, w.pool = site, pool
	return nil
}

// closeBrowser closes the pool (its browsers) and the site.
func (w *Workload) closeBrowser() {
	if w.pool != nil {
		w.pool.Close()
		w.site.close()
	}
}

// browserMemory is the memory of the pool's browsers' process trees (sums
// of RSS and PSS), and the pool's starts and crashes so far.
func (w *Workload) browserMemory() (rss, pss, starts, crashes int64) {
	if w.pool == nil {
		return 0, 0, 0, 0
	}
	st, m := w.pool.Stats(), w.pool.Memory()
	return m.RSSBytes, m.PSSBytes, st.Starts, st.Crashes
}

// browserScrape is the real-browser scrape step: it reads the seed's page
// from the local site in a tab of the pool (one idempotent effect), and
// ends the attempt as connector.Outcome says for a failure.
func (w *Workload) browserScrape(c *yella.Ctx, in payload) yella.Result {
	id := path.Base(str(in, "url"))
	r, err := browser.Scrape(c, w.pool, yella.MakeKey(browserReadKey, id), browser.Request{URL: w.site.url + "/page/" + id, Selector: "main", MaxBytes: 2048})
	if err != nil {
		var ce *connector.Error
		if errors.As(err, &ce) || errors.Is(err, context.Canceled) {
			return connector.Outcome(c, err)
		}
		return c.Error(err)
	}
	return c.OK(payload{"title": r.Title, "status": r.Status, "bytes": len(r.Text)}, yella.Then("page:scraped"))
}

// Unavailable says why s cannot run on this machine, or nil: a
// real-browser scenario needs Chromium on PATH.
func (s Scenario) Unavailable() error {
	if s.Browser == nil {
		return nil
	}
	if _, err := browser.FindChromium(); err != nil {
		return fmt.Errorf("%s needs Chromium: %w", s.ID, err)
	}
	return nil
}

// isPageRead reports whether an effect key is a real-browser page read.
func isPageRead(key string) bool {
	parts := yella.DecodeKey(key)
	return len(parts) > 0 && parts[0] == browserReadKey
}
