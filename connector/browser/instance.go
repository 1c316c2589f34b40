package browser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"
)

// instance is one browser process of a pool.
type instance struct {
	p  *Pool
	id int

	ready chan struct{} // closed when the start ended; err then tells how
	err   error

	ctx         context.Context // the browser's chromedp context
	cancel      context.CancelFunc
	allocCancel context.CancelFunc
	dir         string   // user data directory: also the marker of its processes
	owner       *os.File // holds dir's lock while the browser lives (ownDir)
	pid         atomic.Int64
	lostConn    <-chan struct{} // the connection's LostConnection, once started

	gone     chan struct{} // closed when the browser died or was killed
	goneOnce sync.Once
	killOnce sync.Once

	// Guarded by p.mu.
	inUse int
	idle  []*tab
}

func newInstance(p *Pool, id int) *instance {
	return &instance{p: p, id: id, ready: make(chan struct{}), gone: make(chan struct{})}
}

func (b *instance) isLost() bool {
	select {
	case <-b.gone:
		return true
	default:
		return false
	}
}

// start launches the browser process and connects to it, within
// StartTimeout; a failed start kills what was started.
func (b *instance) start() {
	defer close(b.ready)
	cfg := b.p.cfg
	dir, err := os.MkdirTemp(cfg.TempDir, "yella-browser-")
	if err != nil {
		b.err = fmt.Errorf("browser: user data directory: %w", err)
		b.markGone()
		return
	}
	b.dir = dir
	if b.owner, err = ownDir(dir); err != nil {
		os.RemoveAll(dir)
		b.dir = ""
		b.err = fmt.Errorf("browser: lock the user data directory: %w", err)
		b.markGone()
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(cfg.ExecPath), chromedp.UserDataDir(dir), chromedp.DisableGPU,
		chromedp.WindowSize(cfg.WindowWidth, cfg.WindowHeight), chromedp.ModifyCmdFunc(setProcAttr))
	for name, v := range cfg.Flags {
		opts = append(opts, chromedp.Flag(name, v))
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	// chromedp logs its protocol errors (such as a write to a browser that
	// was just killed) with the log package unless told otherwise.
	quiet := func(format string, args ...any) {
		if l := cfg.Logger; l != nil {
			l.Debug("chromedp: "+fmt.Sprintf(format, args...), "browser", b.id)
		}
	}
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithErrorf(quiet), chromedp.WithLogf(quiet),
		chromedp.WithBrowserOption(chromedp.WithBrowserErrorf(quiet), chromedp.WithBrowserLogf(quiet)))
	b.ctx, b.cancel, b.allocCancel = bctx, bcancel, acancel
	started := make(chan error, 1)
	go func() {
		_, err := chromedp.Targets(bctx) // starts the browser, bound to bctx
		started <- err
	}()
	timer := time.NewTimer(cfg.StartTimeout)
	defer timer.Stop()
	select {
	case err = <-started:
	case <-timer.C:
		err = fmt.Errorf("browser did not start within %s", cfg.StartTimeout)
	case <-b.p.done:
		err = ErrClosed
	case <-b.gone:
		err = errors.New("the browser was killed while starting")
	}
	if err == nil {
		c := chromedp.FromContext(bctx)
		if c == nil || c.Browser == nil || c.Browser.Process() == nil {
			err = errors.New("browser started without a process")
		} else {
			br := c.Browser
			b.lostConn = br.LostConnection
			b.pid.Store(int64(br.Process().Pid))
			b.p.logf("browser started", "pid", br.Process().Pid, "browser", b.id)
			b.p.cleanup.Add(1)
			go func() {
				defer b.p.cleanup.Done()
				select {
				case <-br.LostConnection:
					b.kill(true, "the connection to it was lost")
				case <-b.gone:
				}
			}()
			return
		}
	}
	b.err = fmt.Errorf("start %s: %w", cfg.ExecPath, err)
	b.kill(false, "")
}

// died reports whether the browser is gone or its connection was lost
// (the watcher may not have seen it yet).
func (b *instance) died() bool {
	if b.isLost() {
		return true
	}
	select {
	case <-b.ready: // lostConn and ctx are set
	default:
		return false
	}
	select {
	case <-b.lostConn:
		return true
	default:
		return b.ctx != nil && b.ctx.Err() != nil
	}
}

// markGone closes gone once.
func (b *instance) markGone() { b.goneOnce.Do(func() { close(b.gone) }) }

// kill ends the browser: it leaves the pool at once, and in the background
// its process group is killed, any process left with its user data
// directory too, and the directory removed. crashed counts it as a crash.
func (b *instance) kill(crashed bool, why string) {
	b.killOnce.Do(func() {
		alreadyGone := b.isLost()
		b.markGone()
		b.p.lost(b)
		if crashed && !alreadyGone {
			b.p.crashes.Add(1)
			if l := b.p.cfg.Logger; l != nil {
				l.Warn("browser crashed: restarting it for the next caller", "pid", b.pid.Load(), "browser", b.id, "why", why)
			}
		}
		b.p.cleanup.Add(1)
		go func() {
			defer b.p.cleanup.Done()
			<-b.ready // a start under way ends soon (it sees gone or the pool's end) and sets what is cleaned up
			if pid := b.pid.Load(); pid > 0 {
				killGroup(int(pid))
			}
			if b.cancel != nil {
				b.cancel()
				b.allocCancel() // waits for the process to be reaped
			}
			if b.dir != "" {
				killMarked(b.dir)
				os.RemoveAll(b.dir)
			}
			if b.owner != nil {
				b.owner.Close() // after the removal: never seen unlocked before
			}
		}()
	})
}

// probe reports whether the browser answers a command within timeout.
func (b *instance) probe(timeout time.Duration) bool {
	c := chromedp.FromContext(b.ctx)
	if c == nil || c.Browser == nil || b.isLost() {
		return false
	}
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	_, err := cdp.Call(ctx, c.Browser, cdpbrowser.GetVersion, cdp.Empty{})
	return err == nil
}

// openTab returns an idle tab of the browser, or opens one, waiting for the
// browser to start; both within timeout.
func (b *instance) openTab(ctx context.Context, timeout time.Duration) (*tab, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-b.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
		return nil, fmt.Errorf("browser did not start within %s", timeout)
	}
	if b.err != nil {
		return nil, b.err
	}
	b.p.mu.Lock()
	if n := len(b.idle); n > 0 {
		t := b.idle[n-1]
		b.idle = b.idle[:n-1]
		b.p.mu.Unlock()
		return t, nil
	}
	b.p.mu.Unlock()
	tctx, tcancel := chromedp.NewContext(b.ctx)
	t := &tab{b: b, ctx: tctx, cancel: tcancel}
	opened := make(chan error, 1)
	go func() { opened <- chromedp.Do(tctx) }() // opens the tab, bound to tctx
	var err error
	select {
	case err = <-opened:
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = fmt.Errorf("no new tab within %s", timeout)
	case <-b.gone:
		err = errors.New("the browser is gone")
	}
	if err != nil {
		b.p.closeTab(t)
		return nil, err
	}
	return t, nil
}
