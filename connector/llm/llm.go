// Package llm calls an OpenAI-compatible chat completions API (OpenAI, most
// hosted providers, and local servers such as llama.cpp, vLLM and Ollama's
// /v1) from a Yella handler, as one durable effect.
//
// Client.Chat streams the reply (stream: true, with the usage in the last
// chunk), assembles it (text, tool calls whose argument fragments are
// joined by index, finish reason, usage, cost) and returns it only once the
// stream ended with [DONE]. The whole call is one yella.Effect marked
// yella.Idempotent: the completion is stored once the stream is whole and
// replayed afterwards, never asked for again; a crash while it streams
// leaves the effect started, and the next attempt asks again from the
// start. A half reply is never returned nor stored.
//
// Failures are *connector.Error values: a dropped stream, a 408, 409, 429
// or 5xx is retryable, with RetryAfter taken from Retry-After,
// retry-after-ms or x-ratelimit-reset-* and passed to the Limiter; other
// statuses (400, 401, 403, 404...) are final and carry the provider's
// error message and code. connector.Outcome turns them into the handler's
// Result.
package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
)

// Config configures a Client. BaseURL is required; the zero value of every
// other field means its default.
type Config struct {
	// BaseURL is the API's base, to which "/chat/completions" is appended:
	// "https://api.openai.com/v1", "http://127.0.0.1:8080/v1" (llama.cpp),
	// "http://127.0.0.1:11434/v1" (Ollama).
	BaseURL string
	// APIKey, if set, is sent as "Authorization: Bearer <APIKey>".
	APIKey string
	// Header holds more headers for every request (an organization, a
	// project, a provider's own key header).
	Header http.Header
	// HTTPClient sends the requests. Defaults to a client without an
	// overall timeout (a long reply streams for minutes): bound a call with
	// the handler's context (Process.Timeout).
	HTTPClient *http.Client
	// Prices maps a model name to its price, to compute Completion.CostUSD
	// and the cost metric. The model the provider reports is looked up
	// first, then Request.Model. A model without a price costs 0.
	Prices map[string]Price
	// Limiter, if set, is told to hold back calls to this API when it asks
	// callers to wait (a 429 or 5xx with a delay, or a success that used up
	// the rate limit).
	Limiter connector.Limiter
	// LimiterKey is the key given to Limiter. Defaults to BaseURL's host
	// (with its port).
	LimiterKey string
	// Metrics, if set, counts the calls, tokens and cost (NewMetrics).
	Metrics *Metrics
	// MaxResponseBytes bounds the size of one response (the whole stream).
	// Defaults to 16 MiB.
	MaxResponseBytes int64
	// IdleTimeout, if positive, bounds the wait for the response's headers
	// and then for each next piece of the stream: a server silent that
	// long fails the call (retryable, code "idle_timeout"). Off by
	// default: some models think for minutes before their first token.
	IdleTimeout time.Duration
}

// Client calls one chat completions API. It is safe for concurrent use.
type Client struct {
	cfg      Config
	endpoint string
	key      string
	http     *http.Client
	max      int64
}

// DefaultMaxResponseBytes is Config.MaxResponseBytes's default.
const DefaultMaxResponseBytes = 16 << 20

// New checks cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("llm: Config.BaseURL %q is not an http or https URL", cfg.BaseURL)
	}
	if cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("llm: Config.IdleTimeout %v is negative", cfg.IdleTimeout)
	}
	if cfg.MaxResponseBytes < 0 {
		return nil, fmt.Errorf("llm: Config.MaxResponseBytes %d is negative", cfg.MaxResponseBytes)
	}
	c := &Client{cfg: cfg, endpoint: strings.TrimRight(cfg.BaseURL, "/") + "/chat/completions",
		key: cfg.LimiterKey, http: cfg.HTTPClient, max: cfg.MaxResponseBytes}
	if c.key == "" {
		c.key = u.Host
	}
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.max == 0 {
		c.max = DefaultMaxResponseBytes
	}
	return c, nil
}

// Chat asks for a completion as the durable effect key of the run (see the
// package documentation): the first call that gets a whole reply stores
// it; every later call of the run with the same key, in this attempt or a
// later one, returns the stored Completion without calling the API. The
// effect is idempotent: found started after a crash, it is run again.
// The request carries the effect's idempotency key in an Idempotency-Key
// header.
//
// An error is returned as the effect's error (recorded, and the next
// attempt calls the API again); pass it to connector.Outcome.
func (cl *Client) Chat(c *yella.Ctx, key string, req Request) (Completion, error) {
	return yella.Effect(c, key, func(ctx context.Context) (Completion, error) {
		return cl.Complete(ctx, req)
	}, yella.Idempotent())
}

// Complete calls the API once, outside any effect: nothing is stored, and
// a retry or a restart calls it again. Inside an effect body (Chat uses it
// so) the effect's idempotency key is sent as the Idempotency-Key header.
func (cl *Client) Complete(ctx context.Context, req Request) (Completion, error) {
	op := "POST " + cl.endpoint
	body, err := encodeRequest(req)
	if err != nil {
		return Completion{}, &connector.Error{Op: op, Code: "invalid_request", Err: err}
	}
	ctx, idle := cl.watchIdle(ctx)
	defer idle.stop()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, cl.endpoint, bytes.NewReader(body))
	if err != nil {
		return Completion{}, &connector.Error{Op: op, Err: err}
	}
	for k, vs := range cl.cfg.Header {
		for _, v := range vs {
			hreq.Header.Add(k, v)
		}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if cl.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+cl.cfg.APIKey)
	}
	if k := yella.EffectIdempotencyKey(ctx); k != "" {
		hreq.Header.Set("Idempotency-Key", k)
	}
	resp, err := cl.http.Do(hreq)
	if err != nil {
		cl.count(req.Model, "retryable")
		return Completion{}, idle.classify(&connector.Error{Op: op, Retryable: true, Err: err})
	}
	defer resp.Body.Close()
	resp.Body = idle.body(resp.Body)
	if resp.StatusCode != http.StatusOK {
		e := cl.statusError(op, resp)
		cl.count(req.Model, outcome(e))
		return Completion{}, e
	}
	comp, err := cl.read(resp, req.OnDelta)
	if err != nil {
		e := &connector.Error{Op: op, Status: resp.StatusCode, Retryable: true, Err: err}
		var se *streamError
		if errors.As(err, &se) {
			e.Code, e.Retryable = se.code, !se.permanent
		}
		e = idle.classify(e)
		cl.count(req.Model, outcome(e))
		return Completion{}, e
	}
	comp.CostUSD = cl.price(comp.Model, req.Model).Cost(comp.Usage)
	cl.holdIfSpent(resp.Header)
	if m := cl.cfg.Metrics; m != nil {
		m.record(req.Model, comp)
	}
	return comp, nil
}

// errIdle is the cause of a call cancelled by Config.IdleTimeout.
var errIdle = errors.New("no data from the server within llm.Config.IdleTimeout")

// idleWatch cancels a call when the server stays silent for
// Config.IdleTimeout; every piece of the body read pushes the deadline on.
type idleWatch struct {
	d      time.Duration
	timer  *time.Timer
	cancel context.CancelCauseFunc
	ctx    context.Context
}

func (cl *Client) watchIdle(ctx context.Context) (context.Context, *idleWatch) {
	w := &idleWatch{d: cl.cfg.IdleTimeout}
	if w.d <= 0 {
		return ctx, w
	}
	w.ctx, w.cancel = context.WithCancelCause(ctx)
	w.timer = time.AfterFunc(w.d, func() { w.cancel(errIdle) })
	return w.ctx, w
}

func (w *idleWatch) stop() {
	if w.timer != nil {
		w.timer.Stop()
		w.cancel(nil)
	}
}

// body wraps a response body so that each read that returns data pushes
// the deadline on.
func (w *idleWatch) body(b io.ReadCloser) io.ReadCloser {
	if w.timer == nil {
		return b
	}
	return &idleBody{ReadCloser: b, w: w}
}

// classify marks an error caused by the idle timeout as such.
func (w *idleWatch) classify(e *connector.Error) *connector.Error {
	if w.timer != nil && errors.Is(context.Cause(w.ctx), errIdle) {
		e.Code, e.Retryable, e.Err = "idle_timeout", true, errIdle
	}
	return e
}

type idleBody struct {
	io.ReadCloser
	w *idleWatch
}

// Read reads from the body and, when it got data, restarts the idle timer.
func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.timer.Reset(b.w.d)
	}
	return n, err
}

// read reads a 200 response: an event stream, or one JSON object from a
// server that ignored stream: true.
func (cl *Client) read(resp *http.Response, onDelta func(string)) (Completion, error) {
	body := &boundedReader{r: resp.Body, n: cl.max}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "text/event-stream", "":
		return readStream(body, int(min(cl.max, 1<<30)), onDelta)
	case "application/json":
		return readJSON(body, onDelta)
	default:
		return Completion{}, &streamError{msg: "response of type " + mt + " is not an event stream: is Config.BaseURL an OpenAI-compatible API?", code: "not_a_stream", permanent: true}
	}
}

func (cl *Client) price(models ...string) Price {
	for _, m := range models {
		if p, ok := cl.cfg.Prices[m]; ok {
			return p
		}
	}
	return Price{}
}

func (cl *Client) count(model, outcome string) {
	if m := cl.cfg.Metrics; m != nil {
		m.requests.WithLabelValues(model, outcome).Inc()
	}
}

// statusError classifies a response other than 200 and tells the Limiter
// how long the API asked callers to wait.
func (cl *Client) statusError(op string, resp *http.Response) *connector.Error {
	const maxBody = 64 << 10
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	e := &connector.Error{Op: op, Status: resp.StatusCode, Retryable: retryableStatus(resp.StatusCode)}
	e.Code, e.Body = errorBody(raw)
	if e.Retryable {
		e.RetryAfter = retryAfter(resp.Header, time.Now())
		if e.RetryAfter > 0 && cl.cfg.Limiter != nil {
			cl.cfg.Limiter.HoldUntil(cl.key, time.Now().Add(e.RetryAfter))
		}
	}
	return e
}

// holdIfSpent tells the Limiter to wait for the reset of a rate limit that
// a successful call used up (x-ratelimit-remaining-* of 0).
func (cl *Client) holdIfSpent(h http.Header) {
	if cl.cfg.Limiter == nil {
		return
	}
	if d := spentReset(h); d > 0 {
		cl.cfg.Limiter.HoldUntil(cl.key, time.Now().Add(d))
	}
}

// outcome is the requests metric's outcome label of a failed call.
func outcome(e *connector.Error) string {
	switch {
	case e.Status == http.StatusTooManyRequests:
		return "rate_limited"
	case e.Retryable:
		return "retryable"
	default:
		return "permanent"
	}
}

// retryableStatus: a timeout, a conflict, a rate limit and a server error
// may pass; any other status is final.
func retryableStatus(s int) bool {
	return s == http.StatusRequestTimeout || s == http.StatusConflict || s == http.StatusTooManyRequests || s >= 500
}

// errorBody reads an error response: the provider's code (or type) and
// message from {"error":{"message","type","code"}} (or {"error":"..."}),
// else the start of the body.
func errorBody(raw []byte) (code, msg string) {
	var obj struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		var ae apiError
		var s string
		switch {
		case json.Unmarshal(obj.Error, &ae) == nil && ae.Message != "":
			return ae.code(), clip(ae.Message, 1000)
		case json.Unmarshal(obj.Error, &s) == nil && s != "":
			return "", clip(s, 1000)
		case obj.Message != "":
			return "", clip(obj.Message, 1000)
		}
	}
	return "", clip(strings.TrimSpace(string(raw)), 500)
}
