// Package browser drives headless Chromium from Yella handlers: a pool of
// browser tabs (chromedp over a pipe), with a bound on browser processes and
// on tabs per browser, a per-page timeout, crash detection and restart, and
// memory accounting of each browser's process tree; and Scrape, a page read
// (navigate, wait for a selector, extract text, HTML or a screenshot) run
// as one durable yella.Effect.
//
// Failures come back as *connector.Error: a browser that died or stopped
// answering, a page that timed out, a network error and a 5xx or 429 answer
// of the main document are retryable; a 4xx answer, a malformed URL or a
// selector that is not on the page are not.
//
// Every browser process is started in its own process group with the
// parent-death signal set to SIGKILL (Linux), so a killed engine takes its
// browsers with it, and Close kills each browser's whole group.
package browser

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yella-go/yella/connector"
)

// Config configures a Pool. The zero value of each field means its default.
type Config struct {
	// ExecPath is the Chromium executable. Default: the first of chromium,
	// chromium-browser, google-chrome and google-chrome-stable found on
	// PATH.
	ExecPath string
	// MaxBrowsers bounds the browser processes the pool runs at once.
	// Default 1.
	MaxBrowsers int
	// TabsPerBrowser bounds the tabs open at once in each browser. Callers
	// beyond MaxBrowsers × TabsPerBrowser wait for a tab, as long as their
	// context allows. Default 4.
	TabsPerBrowser int
	// PageTimeout bounds one use of a tab (a page read). Default 30 s.
	PageTimeout time.Duration
	// StartTimeout bounds the start of a browser and the opening of a tab.
	// Default 30 s.
	StartTimeout time.Duration
	// ProbeTimeout is how long a browser may take to answer a health probe
	// after a page timed out; a browser that does not answer is killed and
	// restarted for the next caller. Default 5 s.
	ProbeTimeout time.Duration
	// TempDir holds each browser's user data directory (removed when the
	// browser ends). Default: os.TempDir(). On Linux, New also removes
	// the directories there that a process which died without removing
	// them left (a SIGKILL, a crash): each directory holds a lock file
	// locked while its process lives.
	TempDir string
	// WindowWidth and WindowHeight are the viewport, which also bounds a
	// screenshot's size. Default 1280 × 800.
	WindowWidth, WindowHeight int
	// Flags are extra Chromium command-line flags (name without dashes; a
	// bool switches a flag on or off, a string gives its value).
	Flags map[string]any
	// Limiter, if set, is told when a site answered 429 or 503 with a
	// Retry-After (key: the URL's host).
	Limiter connector.Limiter
	// Logger receives browser starts, crashes and restarts. Default: none.
	Logger *slog.Logger
}

// Errors wrapped by the *connector.Error of a failed page read.
var (
	// ErrBrowserCrashed: the browser process died, or stopped answering and
	// was killed. Retryable: the next caller gets a new browser.
	ErrBrowserCrashed = errors.New("browser crashed")
	// ErrPageTimeout: the page did not finish within Config.PageTimeout.
	// Retryable.
	ErrPageTimeout = errors.New("page timed out")
	// ErrClosed: the pool is closed. Not retryable on this pool.
	ErrClosed = errors.New("browser pool closed")
)

// Pool is a pool of Chromium tabs. It is safe for concurrent use. Browsers
// start on first use; Close stops them all.
type Pool struct {
	cfg   Config
	slots chan struct{} // one token per tab that may be in use
	done  chan struct{} // closed by Close

	mu       sync.Mutex
	browsers []*instance // live or starting, at most MaxBrowsers
	closed   bool
	nextID   int

	cleanup sync.WaitGroup // background kills and tab closes

	starts, crashes atomic.Int64
}

// New checks cfg and returns a pool; it starts no browser yet (it sweeps
// TempDir in the background: see Config.TempDir).
func New(cfg Config) (*Pool, error) {
	if cfg.MaxBrowsers < 0 || cfg.TabsPerBrowser < 0 || cfg.PageTimeout < 0 || cfg.StartTimeout < 0 || cfg.ProbeTimeout < 0 || cfg.WindowWidth < 0 || cfg.WindowHeight < 0 {
		return nil, errors.New("browser: MaxBrowsers, TabsPerBrowser, the timeouts and the window size must not be negative")
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&cfg.MaxBrowsers, 1)
	def(&cfg.TabsPerBrowser, 4)
	def(&cfg.WindowWidth, 1280)
	def(&cfg.WindowHeight, 800)
	defDur(&cfg.PageTimeout, 30*time.Second)
	defDur(&cfg.StartTimeout, 30*time.Second)
	defDur(&cfg.ProbeTimeout, 5*time.Second)
	if cfg.TempDir == "" {
		cfg.TempDir = os.TempDir()
	}
	if cfg.ExecPath == "" {
		p, err := FindChromium()
		if err != nil {
			return nil, err
		}
		cfg.ExecPath = p
	}
	p := &Pool{cfg: cfg, slots: make(chan struct{}, cfg.MaxBrowsers*cfg.TabsPerBrowser), done: make(chan struct{})}
	p.cleanup.Add(1)
	go func() { // in the background: New starts nothing the caller waits for
		defer p.cleanup.Done()
		for _, d := range sweepStale(cfg.TempDir) {
			p.logf("removed the user data directory of a browser whose process is gone", "dir", d)
		}
	}()
	return p, nil
}

// FindChromium returns the path of the first of chromium, chromium-browser,
// google-chrome and google-chrome-stable found on PATH.
func FindChromium() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("browser: no Chromium on PATH (chromium, chromium-browser, google-chrome); install it (Debian: apt-get install chromium) or set Config.ExecPath")
}

// Stats are a pool's counts.
type Stats struct {
	Browsers int   // browser processes running or starting
	TabsBusy int   // tabs in use
	Starts   int64 // browsers started since New
	Crashes  int64 // browsers that died or were killed for not answering
}

// Stats returns the pool's counts now.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Browsers: len(p.browsers), Starts: p.starts.Load(), Crashes: p.crashes.Load()}
	for _, b := range p.browsers {
		s.TabsBusy += b.inUse
	}
	return s
}

// Memory is the resident memory of a pool's browsers.
type Memory struct {
	// RSSBytes is the sum of BrowserMemory.RSSBytes over the browsers.
	RSSBytes int64
	// PSSBytes is the sum of BrowserMemory.PSSBytes over the browsers.
	PSSBytes int64
	// Browsers lists each running browser.
	Browsers []BrowserMemory
}

// BrowserMemory is one browser process and its descendants (renderers, GPU
// and utility processes).
type BrowserMemory struct {
	PID       int // the browser's main process
	Processes int // processes in its tree, the main one included
	// RSSBytes is the sum of their resident set sizes (VmRSS). Pages the
	// processes share (the Chromium binary, shared memory) count once per
	// process, so it overstates what the tree holds, often twofold.
	RSSBytes int64
	// PSSBytes is the sum of their proportional set sizes (Pss), where a
	// shared page counts as its share in each process: what the tree adds
	// to the machine's memory use.
	PSSBytes int64
}

// Memory reads the memory of each running browser's process tree from
// /proc (Linux; elsewhere the sizes are 0).
func (p *Pool) Memory() Memory {
	p.mu.Lock()
	var pids []int
	for _, b := range p.browsers {
		if pid := b.pid.Load(); pid > 0 && !b.isLost() {
			pids = append(pids, int(pid))
		}
	}
	p.mu.Unlock()
	var m Memory
	for _, pid := range pids {
		n, rss, pss := treeMemory(pid)
		m.Browsers = append(m.Browsers, BrowserMemory{PID: pid, Processes: n, RSSBytes: rss, PSSBytes: pss})
		m.RSSBytes += rss
		m.PSSBytes += pss
	}
	return m
}

// Close kills every browser (its whole process group) and removes its user
// data directory. Tabs in use fail with ErrClosed or ErrBrowserCrashed.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	bs := p.browsers
	p.browsers = nil
	p.mu.Unlock()
	for _, b := range bs {
		b.kill(false, "")
	}
	p.cleanup.Wait()
	return nil
}

// tab is one open tab of a browser.
type tab struct {
	b      *instance
	ctx    context.Context // the chromedp context of the tab
	cancel context.CancelFunc
}

// Do runs fn in a tab of the pool: it waits for a free tab (as long as ctx
// allows), starting a browser if fewer than MaxBrowsers run, and gives fn
// the tab's chromedp context, bounded by PageTimeout and by ctx. A browser
// that dies meanwhile, or that stops answering after the page timed out, is
// killed and replaced for the next caller; fn's error then becomes a
// retryable *connector.Error wrapping ErrBrowserCrashed (or ErrPageTimeout).
// Other errors of fn are returned as they are. op names the call in the
// errors Do makes, as connector.Error.Op.
func (p *Pool) Do(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	t, err := p.acquire(ctx, op)
	if err != nil {
		return err
	}
	octx, cancel := context.WithTimeout(t.ctx, p.cfg.PageTimeout)
	stop := context.AfterFunc(ctx, cancel)
	ferr := fn(octx)
	stop()
	timedOut := errors.Is(octx.Err(), context.DeadlineExceeded)
	cancel()
	if ferr == nil {
		p.release(t, true)
		return nil
	}
	p.release(t, false)
	switch {
	case p.isClosed():
		return &connector.Error{Op: op, Err: fmt.Errorf("%w: %v", ErrClosed, ferr)}
	case t.b.died():
		t.b.kill(true, "the connection to it was lost")
		return &connector.Error{Op: op, Retryable: true, Err: fmt.Errorf("%w: %v", ErrBrowserCrashed, ferr)}
	case ctx.Err() != nil:
		return ctx.Err()
	case timedOut:
		if !t.b.probe(p.cfg.ProbeTimeout) {
			t.b.kill(true, "it stopped answering")
			return &connector.Error{Op: op, Retryable: true, Err: fmt.Errorf("%w: it stopped answering (page timed out after %s)", ErrBrowserCrashed, p.cfg.PageTimeout)}
		}
		return &connector.Error{Op: op, Retryable: true, Err: fmt.Errorf("%w after %s", ErrPageTimeout, p.cfg.PageTimeout)}
	}
	return ferr
}

// acquire takes a tab slot, then a tab of a live browser.
func (p *Pool) acquire(ctx context.Context, op string) (*tab, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.done:
		return nil, &connector.Error{Op: op, Err: ErrClosed}
	}
	for attempt := 0; ; attempt++ {
		b, err := p.pick()
		if err != nil {
			<-p.slots
			return nil, &connector.Error{Op: op, Err: err}
		}
		t, err := b.openTab(ctx, p.cfg.StartTimeout)
		if err == nil {
			return t, nil
		}
		p.mu.Lock()
		b.inUse--
		p.mu.Unlock()
		if ctx.Err() != nil {
			<-p.slots
			return nil, ctx.Err()
		}
		// A browser that died while starting or opening the tab is
		// replaced once; a second failure goes back to the caller.
		if b.died() {
			b.kill(true, "the connection to it was lost")
			if attempt == 0 {
				continue
			}
		}
		<-p.slots
		return nil, &connector.Error{Op: op, Retryable: true, Err: fmt.Errorf("%w: %v", ErrBrowserCrashed, err)}
	}
}

// pick reserves a tab in a live browser with room, preferring the least
// busy one, or starts a browser when none has room.
func (p *Pool) pick() (*instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	var best *instance
	for _, b := range p.browsers {
		if b.inUse < p.cfg.TabsPerBrowser && (best == nil || b.inUse < best.inUse) {
			best = b
		}
	}
	if best == nil {
		// The slots bound the tabs in use, and a dead browser leaves the
		// list at once, so a full list of full browsers cannot happen here;
		// start one.
		if len(p.browsers) >= p.cfg.MaxBrowsers {
			return nil, errors.New("browser: no browser has room (a bug: the tab slots should prevent this)")
		}
		p.nextID++
		best = newInstance(p, p.nextID)
		p.browsers = append(p.browsers, best)
		p.starts.Add(1)
		p.cleanup.Add(1)
		go func() {
			defer p.cleanup.Done()
			best.start()
		}()
	}
	best.inUse++
	return best, nil
}

// release gives a tab back: kept open for the next caller after a
// success, closed after a failure.
func (p *Pool) release(t *tab, ok bool) {
	p.mu.Lock()
	t.b.inUse--
	keep := ok && !p.closed && !t.b.isLost()
	if keep {
		t.b.idle = append(t.b.idle, t)
	}
	p.mu.Unlock()
	if !keep {
		p.closeTab(t)
	}
	<-p.slots
}

// closeTab closes a tab in the background (closing waits for the browser).
func (p *Pool) closeTab(t *tab) {
	p.cleanup.Add(1)
	go func() {
		defer p.cleanup.Done()
		t.cancel()
	}()
}

// lost takes a dead browser out of the list, so the next caller starts a
// new one.
func (p *Pool) lost(b *instance) {
	p.mu.Lock()
	for i, x := range p.browsers {
		if x == b {
			p.browsers = append(p.browsers[:i:i], p.browsers[i+1:]...)
			break
		}
	}
	idle := b.idle
	b.idle = nil
	p.mu.Unlock()
	for _, t := range idle {
		p.closeTab(t)
	}
}

func (p *Pool) isClosed() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *Pool) logf(msg string, args ...any) {
	if p.cfg.Logger != nil {
		p.cfg.Logger.Info(msg, args...)
	}
}
