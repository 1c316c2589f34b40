package browser

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
)

// Extract says what a page read returns.
type Extract string

// What a page read can extract.
const (
	// Text is the rendered text of the selected element (default: body).
	Text Extract = "text"
	// HTML is the outer HTML of the selected element (default: html).
	HTML Extract = "html"
	// Screenshot is a PNG of the selected element, or of the viewport when
	// no selector is given (at most Config.WindowWidth × WindowHeight).
	Screenshot Extract = "screenshot"
)

// DefaultMaxBytes bounds what a page read returns when Request.MaxBytes is
// 0: text and HTML are cut there (Result.Truncated), a larger screenshot
// is an error.
const DefaultMaxBytes = 1 << 20

// Request is one page read.
type Request struct {
	// URL is the page, http or https.
	URL string `json:"url"`
	// WaitFor, if set, is a CSS selector the read waits for (present in
	// the DOM) after the page loaded, within the page timeout.
	WaitFor string `json:"waitFor,omitempty"`
	// Extract is what to return; default Text.
	Extract Extract `json:"extract,omitempty"`
	// Selector picks the element to extract (CSS); default body for text,
	// html for HTML, the viewport for a screenshot.
	Selector string `json:"selector,omitempty"`
	// MaxBytes bounds the result; default DefaultMaxBytes.
	MaxBytes int `json:"maxBytes,omitempty"`
}

// Result is what a page read found. It is stored as the effect's result,
// so it holds only what the request asked for.
type Result struct {
	URL       string `json:"url"`                 // the final URL, after redirects
	Status    int    `json:"status"`              // the HTTP status of the main document
	Title     string `json:"title,omitempty"`     // the document's title
	Text      string `json:"text,omitempty"`      // Extract Text
	HTML      string `json:"html,omitempty"`      // Extract HTML
	PNG       []byte `json:"png,omitempty"`       // Extract Screenshot
	Truncated bool   `json:"truncated,omitempty"` // Text or HTML was cut at MaxBytes
}

// ScrapeOption configures Scrape.
type ScrapeOption func(*scrapeOpts)

type scrapeOpts struct{ atMostOnce bool }

// AtMostOnce makes a read whose outcome is unknown after a crash fence the
// run (for an operator to resolve) instead of reading the page again: for
// pages whose loading has side effects. By default a page read is
// idempotent and simply runs again.
func AtMostOnce() ScrapeOption { return func(o *scrapeOpts) { o.atMostOnce = true } }

// Scrape reads a page in a tab of the pool as one durable effect of the
// run: the Result is stored, so a retry or a restart after a crash replays
// it instead of loading the page again. A read cut off by a crash runs again
// (it is idempotent) unless AtMostOnce is given. The error is a
// *connector.Error; pass it to connector.Outcome to retry what can succeed
// later and fail the run on what cannot.
func Scrape[K yella.EffectKey](c *yella.Ctx, p *Pool, key K, req Request, opts ...ScrapeOption) (Result, error) {
	var o scrapeOpts
	for _, opt := range opts {
		opt(&o)
	}
	var eopts []yella.EffectOption
	if !o.atMostOnce {
		eopts = append(eopts, yella.Idempotent())
	}
	return yella.Effect(c, key, func(ctx context.Context) (Result, error) {
		return p.Fetch(ctx, req)
	}, eopts...)
}

// Fetch reads a page in a tab of the pool (see Do), without recording
// anything: navigate, wait for req.WaitFor, extract. A main document
// answered with a 4xx status fails permanently (408, 425 and 429 excepted),
// 5xx and 429 retryably, with the Retry-After the site sent.
func (p *Pool) Fetch(ctx context.Context, req Request) (Result, error) {
	op := "browser GET " + req.URL
	if err := req.check(); err != nil {
		return Result{}, &connector.Error{Op: op, Err: err}
	}
	var res Result
	err := p.Do(ctx, op, func(ctx context.Context) error {
		resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(req.URL))
		if err != nil {
			return navError(op, err)
		}
		if resp != nil {
			res.Status = int(resp.Status)
			if err := p.statusError(op, resp); err != nil {
				return err
			}
		}
		if req.WaitFor != "" {
			if err := chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS(req.WaitFor))); err != nil {
				return selectorError(op, err)
			}
		}
		if res.URL, err = chromedp.Run(ctx, chromedp.Location()); err != nil {
			return err
		}
		if res.Title, err = chromedp.Run(ctx, chromedp.Title()); err != nil {
			return err
		}
		return selectorError(op, req.extract(ctx, op, &res))
	})
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

func (req Request) check() error {
	u, err := url.Parse(req.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("browser: URL %q is not an absolute http or https URL", req.URL)
	}
	switch req.Extract {
	case "", Text, HTML, Screenshot:
	default:
		return fmt.Errorf("browser: unknown Extract %q (text, html or screenshot)", req.Extract)
	}
	if req.MaxBytes < 0 {
		return errors.New("browser: MaxBytes must not be negative")
	}
	return nil
}

// extract fills res with what req asks for, bounded by its MaxBytes. The
// element must already be there (the page loaded): a missing one fails at
// once instead of waiting out the page timeout.
func (req Request) extract(ctx context.Context, op string, res *Result) error {
	limit := req.MaxBytes
	if limit == 0 {
		limit = DefaultMaxBytes
	}
	sel := req.Selector
	kind := req.Extract
	if kind == "" {
		kind = Text
	}
	if sel == "" {
		sel = map[Extract]string{Text: "body", HTML: "html"}[kind]
	}
	if sel != "" {
		n, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSS(sel), chromedp.AtLeast(0)))
		if err != nil {
			return err
		}
		if len(n) == 0 {
			return &connector.Error{Op: op, Status: res.Status, Code: "selector-not-found", Err: fmt.Errorf("no element matches %q", sel)}
		}
	}
	cut := func(s string) string {
		if len(s) > limit {
			res.Truncated = true
			s = strings.ToValidUTF8(s[:limit], "")
		}
		return s
	}
	var err error
	switch kind {
	case Text:
		var s string
		s, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		res.Text = cut(s)
	case HTML:
		var s string
		s, err = chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS(sel)))
		res.HTML = cut(s)
	case Screenshot:
		if sel == "" {
			res.PNG, err = chromedp.Run(ctx, chromedp.CaptureScreenshot())
		} else {
			res.PNG, err = chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(sel)))
		}
		if err == nil && len(res.PNG) > limit {
			n := len(res.PNG)
			res.PNG = nil
			return &connector.Error{Op: op, Status: res.Status, Code: "too-large", Err: fmt.Errorf("screenshot of %d bytes exceeds the limit of %d", n, limit)}
		}
	}
	return err
}

// statusError classifies the main document's HTTP status: nil below 400;
// retryable for 5xx, 408, 425 and 429 (with the Retry-After the site sent,
// also told to the Limiter); permanent for the other 4xx.
func (p *Pool) statusError(op string, resp *network.Response) error {
	status := int(resp.Status)
	if status < 400 {
		return nil
	}
	e := &connector.Error{Op: op, Status: status, Retryable: retryableStatus(status)}
	if ra, ok := connector.ParseRetryAfter(header(resp.Headers, "Retry-After"), time.Now()); ok && e.Retryable {
		e.RetryAfter = ra
		if p.cfg.Limiter != nil && (status == 429 || status == 503) {
			if u, err := url.Parse(resp.URL); err == nil {
				p.cfg.Limiter.HoldUntil(u.Host, time.Now().Add(ra))
			}
		}
	}
	return e
}

func retryableStatus(status int) bool {
	return status >= 500 || status == 408 || status == 425 || status == 429
}

// header reads a response header whatever its case (Chromium reports them
// as the server sent them, HTTP/2 in lower case).
func header(h network.Headers, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			if s, ok := v.(string); ok {
				return s
			}
		}
	}
	return ""
}

// permanentNetErrors are Chromium's network errors that a retry cannot
// cure: a malformed or blocked URL, a name that does not resolve, a
// certificate the browser rejects.
var permanentNetErrors = []string{
	"net::ERR_INVALID_URL", "net::ERR_NAME_NOT_RESOLVED", "net::ERR_UNSAFE_PORT", "net::ERR_DISALLOWED_URL_SCHEME",
	"net::ERR_BLOCKED_BY_CLIENT", "net::ERR_BLOCKED_BY_ADMINISTRATOR", "net::ERR_BLOCKED_BY_RESPONSE", "net::ERR_UNKNOWN_URL_SCHEME",
	"net::ERR_TOO_MANY_REDIRECTS", "net::ERR_INVALID_REDIRECT", "net::ERR_UNSAFE_REDIRECT", "net::ERR_CERT_", "net::ERR_SSL_",
	"net::ERR_BAD_SSL_CLIENT_AUTH_CERT",
}

// navError classifies a failed navigation: Chromium's network errors
// (connection refused or reset, timeouts) are retryable unless listed in
// permanentNetErrors; anything else (a cancelled context, a lost browser)
// is returned as it is, for Do to classify.
func navError(op string, err error) error {
	var le *chromedp.LoadError
	if !errors.As(err, &le) {
		return err
	}
	return &connector.Error{Op: op, Code: le.ErrorText, Retryable: retryableNetError(le.ErrorText), Err: err}
}

// selectorError makes the browser's answer to a malformed selector a
// permanent failure: the same selector fails the same way again.
func selectorError(op string, err error) error {
	var ce *cdproto.Error
	if errors.As(err, &ce) && ce.Message == "DOM Error while querying" {
		return &connector.Error{Op: op, Code: "bad-selector", Err: err}
	}
	return err
}

func retryableNetError(text string) bool {
	for _, p := range permanentNetErrors {
		if strings.HasPrefix(text, p) {
			return false
		}
	}
	return true
}
