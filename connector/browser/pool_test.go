//go:build linux

package browser

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/yella-go/yella/connector"
)

// newTestPool returns a pool whose browsers keep their user data under a
// directory of the test, and checks when the test ends that Close left no
// process of them behind.
func newTestPool(t *testing.T, cfg Config) *Pool {
	t.Helper()
	exe, err := FindChromium()
	if err != nil {
		t.Skip("no Chromium (apt-get install chromium): ", err)
	}
	cfg.ExecPath = exe
	cfg.TempDir = t.TempDir()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Close()
		if left := processesUnder(cfg.TempDir); len(left) > 0 {
			t.Errorf("browser processes left after Close: %v", left)
		}
	})
	return p
}

// processesUnder lists the processes started with a user data directory
// under dir.
func processesUnder(dir string) []int {
	want := []byte("--user-data-dir=" + dir + string(os.PathSeparator))
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(cmdline, want) {
			out = append(out, pid)
		}
	}
	return out
}

// waitFor polls cond until it holds, failing the test after limit (an upper
// bound: the condition is expected well before).
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type fakeLimiter struct {
	mu    sync.Mutex
	holds map[string]time.Time
}

func (l *fakeLimiter) HoldUntil(key string, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holds == nil {
		l.holds = map[string]time.Time{}
	}
	l.holds[key] = until
}

// Page reads against the local site: what each kind of page gives, and how
// each failure is classified.
func TestFetch(t *testing.T) {
	s := newSite(t)
	lim := &fakeLimiter{}
	p := newTestPool(t, Config{TabsPerBrowser: 2, PageTimeout: 20 * time.Second, Limiter: lim})
	host := strings.TrimPrefix(s.URL, "http://")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/x"
	ln.Close()
	for _, tc := range []struct {
		name      string
		req       Request
		check     func(t *testing.T, r Result)
		status    int    // of a failure
		code      string // of a failure
		retryable bool
		after     time.Duration
	}{
		{name: "text of the body", req: Request{URL: s.URL + "/hello"}, check: func(t *testing.T, r Result) {
			if r.Status != 200 || r.Title != "Hello" || !strings.Contains(r.Text, "Hello, browser") || !strings.Contains(r.Text, "second") {
				t.Errorf("%+v", r)
			}
		}},
		{name: "text of an element", req: Request{URL: s.URL + "/hello", Selector: ".note"}, check: func(t *testing.T, r Result) {
			if r.Text != "second" {
				t.Errorf("text %q", r.Text)
			}
		}},
		{name: "outer HTML", req: Request{URL: s.URL + "/hello", Extract: HTML, Selector: "h1"}, check: func(t *testing.T, r Result) {
			if r.HTML != `<h1 id="greeting">Hello, browser</h1>` {
				t.Errorf("html %q", r.HTML)
			}
		}},
		{name: "waits for a late element", req: Request{URL: s.URL + "/late", WaitFor: "#late", Selector: "#late"}, check: func(t *testing.T, r Result) {
			if r.Text != "arrived" {
				t.Errorf("text %q", r.Text)
			}
		}},
		{name: "follows a redirect", req: Request{URL: s.URL + "/redirect", Selector: "h1"}, check: func(t *testing.T, r Result) {
			if r.URL != s.URL+"/hello" || r.Text != "Hello, browser" {
				t.Errorf("%+v", r)
			}
		}},
		{name: "screenshot", req: Request{URL: s.URL + "/hello", Extract: Screenshot}, check: func(t *testing.T, r Result) {
			img, err := png.Decode(bytes.NewReader(r.PNG))
			if err != nil {
				t.Fatalf("not a PNG: %v", err)
			}
			if b := img.Bounds(); b.Dx() != 1280 || b.Dy() > 800 || b.Dy() < 400 {
				t.Errorf("screenshot %v, want the viewport of the 1280×800 window", b)
			}
		}},
		{name: "text cut at MaxBytes", req: Request{URL: s.URL + "/big?kb=64", Selector: "#data", MaxBytes: 1000}, check: func(t *testing.T, r Result) {
			if len(r.Text) != 1000 || !r.Truncated {
				t.Errorf("%d bytes, truncated %v", len(r.Text), r.Truncated)
			}
		}},
		{name: "screenshot over MaxBytes", req: Request{URL: s.URL + "/hello", Extract: Screenshot, MaxBytes: 100}, status: 200, code: "too-large"},
		{name: "404 is final", req: Request{URL: s.URL + "/status/404"}, status: 404},
		{name: "410 is final", req: Request{URL: s.URL + "/status/410"}, status: 410},
		{name: "500 is retried", req: Request{URL: s.URL + "/status/500"}, status: 500, retryable: true},
		{name: "503 with Retry-After", req: Request{URL: s.URL + "/status/503?retry-after=7"}, status: 503, retryable: true, after: 7 * time.Second},
		{name: "429 with Retry-After", req: Request{URL: s.URL + "/status/429?retry-after=3"}, status: 429, retryable: true, after: 3 * time.Second},
		{name: "missing element is final", req: Request{URL: s.URL + "/hello", Selector: "#nope"}, status: 200, code: "selector-not-found"},
		{name: "malformed selector is final", req: Request{URL: s.URL + "/hello", WaitFor: "#3"}, code: "bad-selector"},
		{name: "not an http URL", req: Request{URL: "file:///etc/passwd"}},
		{name: "unknown extract", req: Request{URL: s.URL + "/hello", Extract: "pdf"}},
		{name: "connection refused is retried", req: Request{URL: refused}, code: "net::ERR_CONNECTION_REFUSED", retryable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := p.Fetch(context.Background(), tc.req)
			if tc.check != nil {
				if err != nil {
					t.Fatal(err)
				}
				tc.check(t, r)
				return
			}
			var ce *connector.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T), want a *connector.Error", err, err)
			}
			if ce.Status != tc.status || ce.Code != tc.code || ce.Retryable != tc.retryable || ce.RetryAfter != tc.after {
				t.Errorf("got status %d code %q retryable %v after %v (%v); want %d %q %v %v", ce.Status, ce.Code, ce.Retryable, ce.RetryAfter, err, tc.status, tc.code, tc.retryable, tc.after)
			}
		})
	}
	lim.mu.Lock()
	defer lim.mu.Unlock()
	if len(lim.holds) != 1 || lim.holds[host].IsZero() {
		t.Errorf("limiter holds %v, want one for %s (429 and 503 with Retry-After)", lim.holds, host)
	}
}

// A page slower than the page timeout fails retryably with ErrPageTimeout,
// and the tab's browser, which still answers, is kept.
func TestPageTimeout(t *testing.T) {
	s := newSite(t)
	// Long enough for the quick pages on a loaded machine; the held page
	// never answers, so it always times out.
	p := newTestPool(t, Config{PageTimeout: 5 * time.Second})
	if _, err := p.Fetch(context.Background(), Request{URL: s.URL + "/hello"}); err != nil {
		t.Fatal(err)
	}
	pid := p.Memory().Browsers[0].PID
	_, err := p.Fetch(context.Background(), Request{URL: s.URL + "/held"})
	if !errors.Is(err, ErrPageTimeout) || !connector.Retryable(err) || !strings.Contains(err.Error(), "after 5s") {
		t.Fatalf("error %v, want a retryable ErrPageTimeout after 5s", err)
	}
	s.releaseAll()
	if _, err := p.Fetch(context.Background(), Request{URL: s.URL + "/hello"}); err != nil {
		t.Fatal(err)
	}
	if got := p.Memory().Browsers[0].PID; got != pid || p.Stats().Crashes != 0 {
		t.Errorf("browser %d after a page timeout (crashes %d), want the same %d", got, p.Stats().Crashes, pid)
	}
}

// At most MaxBrowsers × TabsPerBrowser pages load at once; a caller beyond
// that waits for a tab, as long as its context allows.
func TestPoolBounds(t *testing.T) {
	s := newSite(t)
	p := newTestPool(t, Config{MaxBrowsers: 2, TabsPerBrowser: 2})
	const callers = 7
	errs := make(chan error, callers)
	for i := range callers {
		go func() {
			_, err := p.Fetch(context.Background(), Request{URL: s.URL + "/held?n=" + strconv.Itoa(i)})
			errs <- err
		}()
	}
	for range 4 {
		select {
		case <-s.arrived:
		case <-time.After(60 * time.Second):
			t.Fatal("four held pages did not arrive")
		}
	}
	// Every tab is held: a caller with a short deadline gives up waiting.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := p.Fetch(ctx, Request{URL: s.URL + "/hello"})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting caller: %v, want its deadline", err)
	}
	if st := p.Stats(); st.Browsers != 2 || st.TabsBusy != 4 {
		t.Errorf("stats %+v, want 2 browsers with 4 tabs busy", st)
	}
	s.releaseAll()
	for range callers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if m := s.maxInFlight(); m != 4 {
		t.Errorf("%d pages loaded at once, want 4", m)
	}
	mem := p.Memory()
	if len(mem.Browsers) != 2 || mem.RSSBytes <= 0 || mem.PSSBytes <= 0 {
		t.Fatalf("memory %+v", mem)
	}
	for _, b := range mem.Browsers {
		main, _ := statusKB(b.PID, "status", "VmRSS:")
		if b.Processes < 2 || b.RSSBytes <= main || b.PSSBytes <= 0 || b.PSSBytes > b.RSSBytes {
			t.Errorf("browser %+v (main process %d bytes): want its process tree (main, renderers, helpers), PSS within RSS", b, main)
		}
	}
}

// A browser SIGKILLed while a page loads: the caller gets a retryable
// ErrBrowserCrashed, the dead browser's processes are gone, and the next
// caller gets a new browser.
func TestBrowserKilledMidPage(t *testing.T) {
	s := newSite(t)
	p := newTestPool(t, Config{})
	if _, err := p.Fetch(context.Background(), Request{URL: s.URL + "/hello"}); err != nil {
		t.Fatal(err)
	}
	old := p.Memory().Browsers[0].PID
	errc := make(chan error, 1)
	go func() {
		_, err := p.Fetch(context.Background(), Request{URL: s.URL + "/held"})
		errc <- err
	}()
	<-s.arrived
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-errc:
	case <-time.After(60 * time.Second):
		t.Fatal("the page read did not end after its browser was killed")
	}
	if !errors.Is(err, ErrBrowserCrashed) || !connector.Retryable(err) {
		t.Fatalf("error %v, want a retryable ErrBrowserCrashed", err)
	}
	r, err := p.Fetch(context.Background(), Request{URL: s.URL + "/hello", Selector: "h1"})
	if err != nil || r.Text != "Hello, browser" {
		t.Fatalf("after the crash: %+v, %v", r, err)
	}
	st := p.Stats()
	if now := p.Memory().Browsers[0].PID; now == old || st.Crashes != 1 || st.Starts != 2 {
		t.Errorf("browser %d (was %d), stats %+v: want a new browser, one crash, two starts", now, old, st)
	}
}

// A browser that stops answering (SIGSTOP) is noticed when a page times
// out and the probe gets no answer: it is killed, the caller gets a
// retryable ErrBrowserCrashed, and the next caller a new browser.
func TestBrowserStopsAnswering(t *testing.T) {
	s := newSite(t)
	p := newTestPool(t, Config{PageTimeout: 5 * time.Second, ProbeTimeout: time.Second})
	if _, err := p.Fetch(context.Background(), Request{URL: s.URL + "/hello"}); err != nil {
		t.Fatal(err)
	}
	old := p.Memory().Browsers[0].PID
	if err := syscall.Kill(old, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	_, err := p.Fetch(context.Background(), Request{URL: s.URL + "/hello"})
	if !errors.Is(err, ErrBrowserCrashed) || !connector.Retryable(err) || !strings.Contains(err.Error(), "stopped answering") {
		t.Fatalf("error %v, want a retryable ErrBrowserCrashed (stopped answering)", err)
	}
	if _, err := p.Fetch(context.Background(), Request{URL: s.URL + "/hello"}); err != nil {
		t.Fatal(err)
	}
	if now := p.Memory().Browsers[0].PID; now == old || p.Stats().Crashes != 1 {
		t.Errorf("browser %d (was %d), %d crashes", now, old, p.Stats().Crashes)
	}
	waitFor(t, 30*time.Second, "the stopped browser's processes are gone", func() bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(old))
		return err != nil
	})
}

// Close kills every browser, even with a page loading, and the caller of
// that page gets an error.
func TestCloseMidPage(t *testing.T) {
	s := newSite(t)
	exe, err := FindChromium()
	if err != nil {
		t.Skip("no Chromium")
	}
	dir := t.TempDir()
	p, err := New(Config{ExecPath: exe, TempDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := p.Fetch(context.Background(), Request{URL: s.URL + "/held"})
		errc <- err
	}()
	<-s.arrived
	if len(processesUnder(dir)) < 2 {
		t.Fatalf("browser processes %v", processesUnder(dir))
	}
	p.Close()
	if err := <-errc; err == nil {
		t.Error("the page read went on after Close")
	}
	if left := processesUnder(dir); len(left) > 0 {
		t.Errorf("processes left after Close: %v", left)
	}
	if _, err := p.Fetch(context.Background(), Request{URL: s.URL + "/hello"}); !errors.Is(err, ErrClosed) || connector.Retryable(err) {
		t.Errorf("after Close: %v, want ErrClosed, not retryable", err)
	}
}

// Close while browsers start: every caller gets an error, and nothing is
// left running (run with -race: the start and the kill share the browser's
// fields).
func TestCloseWhileStarting(t *testing.T) {
	exe, err := FindChromium()
	if err != nil {
		t.Skip("no Chromium")
	}
	dir := t.TempDir()
	p, err := New(Config{ExecPath: exe, TempDir: dir, MaxBrowsers: 3, TabsPerBrowser: 1})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := p.Fetch(context.Background(), Request{URL: "http://127.0.0.1:1/"})
			errs <- err
		}()
	}
	waitFor(t, 30*time.Second, "browsers starting", func() bool { return p.Stats().Browsers == 3 })
	p.Close()
	for range 3 {
		if err := <-errs; err == nil {
			t.Error("a read succeeded after Close")
		}
	}
	if left := processesUnder(dir); len(left) > 0 {
		t.Errorf("processes left after Close: %v", left)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{{MaxBrowsers: -1}, {TabsPerBrowser: -2}, {PageTimeout: -time.Second}} {
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "must not be negative") {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	if _, err := New(Config{ExecPath: "/nonexistent/chromium", StartTimeout: 5 * time.Second}); err != nil {
		t.Fatal(err) // the browser starts on first use
	}
}

// A browser that cannot start gives a retryable error naming the
// executable, and nothing is left running.
func TestStartFailure(t *testing.T) {
	p, err := New(Config{ExecPath: "/nonexistent/chromium", TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.Fetch(context.Background(), Request{URL: "http://127.0.0.1:1/"})
	if !errors.Is(err, ErrBrowserCrashed) || !strings.Contains(err.Error(), "/nonexistent/chromium") {
		t.Fatalf("error %v", err)
	}
	if st := p.Stats(); st.Browsers != 0 || st.TabsBusy != 0 {
		t.Errorf("stats after a failed start %+v", st)
	}
}

// Classification of statuses and Chromium's network errors.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   bool
	}{{400, false}, {401, false}, {403, false}, {404, false}, {408, true}, {410, false}, {422, false}, {425, true}, {429, true}, {500, true}, {502, true}, {503, true}, {504, true}} {
		if got := retryableStatus(tc.status); got != tc.want {
			t.Errorf("status %d: retryable %v, want %v", tc.status, got, tc.want)
		}
	}
	for _, tc := range []struct {
		text string
		want bool
	}{
		{"net::ERR_CONNECTION_REFUSED", true}, {"net::ERR_CONNECTION_RESET", true}, {"net::ERR_TIMED_OUT", true},
		{"net::ERR_EMPTY_RESPONSE", true}, {"net::ERR_INTERNET_DISCONNECTED", true}, {"net::ERR_ABORTED", true},
		{"net::ERR_NAME_NOT_RESOLVED", false}, {"net::ERR_CERT_AUTHORITY_INVALID", false}, {"net::ERR_SSL_PROTOCOL_ERROR", false},
		{"net::ERR_TOO_MANY_REDIRECTS", false}, {"net::ERR_INVALID_URL", false}, {"net::ERR_UNSAFE_PORT", false},
	} {
		if got := retryableNetError(tc.text); got != tc.want {
			t.Errorf("%s: retryable %v, want %v", tc.text, got, tc.want)
		}
	}
}
