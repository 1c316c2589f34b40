// Package httpx calls HTTP APIs from Yella handlers as durable effects.
//
// Do runs one request as one yella.Effect: the effect is recorded as started
// before the request is sent and its result (a compact Response) after, so a
// completed call is never sent again, on a retry or after a crash. The
// effect's idempotency key goes with the request (header Idempotency-Key by
// default) so that a downstream that deduplicates can recognise a request
// sent again: after a failed attempt (a timeout whose request may have
// landed), or after a crash when the call is declared Idempotent.
//
// Every failure is a *connector.Error, classified:
//   - 2xx is done.
//   - 408, 425, 429, 500, 502, 503 and 504, a connection error and the
//     per-call timeout are retryable; a Retry-After (seconds or an HTTP
//     date) is carried as RetryAfter, which delays the run's retry (the
//     engine reads it through Error.RetryDelay). A 429, or a 503 with
//     Retry-After, also tells the Limiter to hold the downstream.
//   - Any other status is permanent, with the start of the body in the
//     error.
//   - A body larger than the bound (MaxBody, 1 MiB by default) is a
//     permanent error, never a truncated success.
//
// End the handler's attempt with connector.Outcome(c, err): c.Error when a
// retry can help, c.Fail when it cannot.
package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
)

// Defaults of the options.
const (
	// DefaultMaxBody bounds the response body read (MaxBody).
	DefaultMaxBody = 1 << 20
	// DefaultTimeout bounds one call, from sending the request to reading
	// the end of the body (Timeout).
	DefaultTimeout = 30 * time.Second
	// DefaultIdempotencyHeader carries the effect's idempotency key
	// (IdempotencyHeader).
	DefaultIdempotencyHeader = "Idempotency-Key"
	// DefaultHold is how long a 429 without Retry-After holds the
	// downstream in the Limiter.
	DefaultHold = time.Second
	// errorBodyLen bounds the start of a body quoted in an error.
	errorBodyLen = 512
)

// Request is one HTTP request.
type Request struct {
	// Method defaults to GET, or POST when the request has a body.
	Method string
	// URL is the absolute URL.
	URL string
	// Header holds the request's headers.
	Header http.Header
	// Body is sent as is.
	Body []byte
	// JSON, when not nil, is encoded as the body (replacing Body) with
	// Content-Type application/json.
	JSON any
}

// Response is the compact record of a completed call, stored as the
// effect's result: the status, the headers asked for with KeepHeaders, and
// the body (bounded by MaxBody).
type Response struct {
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Header holds the kept headers (KeepHeaders), by canonical name.
	Header map[string]string `json:"header,omitempty"`
	// Body is the response body, unless DropBody was given.
	Body []byte `json:"body,omitempty"`
}

// Option configures a call.
type Option func(*config)

type config struct {
	client     *http.Client
	timeout    time.Duration
	maxBody    int64
	idemHeader string
	limiter    connector.Limiter
	limiterKey string
	keep       []string
	dropBody   bool
	idempotent bool
	op         string
	classify   func(*Response, http.Header) *connector.Error
	now        func() time.Time
}

// Client sends the requests with c (default http.DefaultClient). Its own
// Timeout, if any, applies as well as the per-call Timeout.
func Client(c *http.Client) Option { return func(o *config) { o.client = c } }

// Timeout bounds one call, from sending the request to reading the end of
// the body (default DefaultTimeout). A call that runs out of time is a
// retryable failure: the downstream may have acted on it, so its retry
// carries the same idempotency key.
func Timeout(d time.Duration) Option { return func(o *config) { o.timeout = d } }

// MaxBody bounds the response body read, in bytes (default DefaultMaxBody).
// A successful response with a longer body is a permanent error.
func MaxBody(n int64) Option { return func(o *config) { o.maxBody = n } }

// IdempotencyHeader names the header that carries the effect's idempotency
// key (default DefaultIdempotencyHeader); "" sends none. A value the
// request already has in that header is kept.
func IdempotencyHeader(name string) Option { return func(o *config) { o.idemHeader = name } }

// Limiter is told when the downstream asks callers to slow down (a 429, or
// a 503 with Retry-After), under key; an empty key means the request URL's
// host. A nil Limiter is allowed.
func Limiter(l connector.Limiter, key string) Option {
	return func(o *config) { o.limiter, o.limiterKey = l, key }
}

// KeepHeaders names the response headers recorded in the Response (by
// default none: the result stays compact).
func KeepHeaders(names ...string) Option {
	return func(o *config) { o.keep = append(o.keep, names...) }
}

// DropBody records a successful response without its body (status and
// kept headers only). The bound still applies.
func DropBody() Option { return func(o *config) { o.dropBody = true } }

// Idempotent declares that the downstream deduplicates by the idempotency
// key: a call whose outcome is unknown after a crash is sent again, with the
// same key, instead of fencing the run (yella.Idempotent).
func Idempotent() Option { return func(o *config) { o.idempotent = true } }

// Op names the call in errors (default the method and the URL without its
// query). Use it when the URL holds a secret, such as a webhook URL.
func Op(name string) Option { return func(o *config) { o.op = name } }

// Classify lets a connector built on httpx read a downstream's own error
// format. fn sees every response whose body was read (within the bound),
// with its full headers; it returns nil to keep the default
// classification, or the error to return instead. httpx fills the error's
// Op, Status and RetryAfter (from Retry-After) when fn leaves them empty,
// and Body when fn leaves Body, Code and Err empty, and tells the Limiter
// when the status is 429 (or 503 with Retry-After).
func Classify(fn func(r *Response, h http.Header) *connector.Error) Option {
	return func(o *config) { o.classify = fn }
}

func newConfig(opts []Option) *config {
	o := &config{client: http.DefaultClient, timeout: DefaultTimeout, maxBody: DefaultMaxBody,
		idemHeader: DefaultIdempotencyHeader, now: time.Now}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// Do sends req as the effect key of c's run and returns its Response. A
// completed call returns its stored Response without being sent again. The
// error, if any, is a *connector.Error (or the engine's own error when the
// effect cannot run, such as a fenced effect); pass it to
// connector.Outcome.
func Do[K yella.EffectKey](c *yella.Ctx, key K, req Request, opts ...Option) (Response, error) {
	o := newConfig(opts)
	var eo []yella.EffectOption
	if o.idempotent {
		eo = append(eo, yella.Idempotent())
	}
	return yella.Effect(c, key, func(ctx context.Context) (Response, error) {
		return o.call(ctx, req)
	}, eo...)
}

// DoJSON sends req as Do does and decodes a successful response's JSON body
// into T; the effect records only the decoded value (KeepHeaders and
// DropBody do not apply). A body that does not decode is a permanent error.
func DoJSON[T any, K yella.EffectKey](c *yella.Ctx, key K, req Request, opts ...Option) (T, error) {
	o := newConfig(opts)
	o.dropBody = false
	var eo []yella.EffectOption
	if o.idempotent {
		eo = append(eo, yella.Idempotent())
	}
	return yella.Effect(c, key, func(ctx context.Context) (T, error) {
		var v T
		r, err := o.call(ctx, req)
		if err != nil {
			return v, err
		}
		if err := json.Unmarshal(r.Body, &v); err != nil {
			return v, &connector.Error{Op: o.opName(req), Status: r.Status, Body: quote(r.Body),
				Err: fmt.Errorf("response does not decode as %T: %w", v, err)}
		}
		return v, nil
	}, eo...)
}

// Call sends req once, outside any effect, with the classification of Do.
// ctx's EffectIdempotencyKey, when it has one, is sent as the idempotency
// key. Connectors use it inside effects of their own.
func Call(ctx context.Context, req Request, opts ...Option) (Response, error) {
	return newConfig(opts).call(ctx, req)
}

func (o *config) opName(req Request) string {
	if o.op != "" {
		return o.op
	}
	u := req.URL
	if p, err := url.Parse(req.URL); err == nil {
		p.RawQuery, p.Fragment, p.User = "", "", nil
		u = p.String()
	}
	return method(req) + " " + u
}

func method(req Request) string {
	switch {
	case req.Method != "":
		return req.Method
	case req.Body != nil || req.JSON != nil:
		return http.MethodPost
	}
	return http.MethodGet
}

func (o *config) call(ctx context.Context, req Request) (Response, error) {
	op := o.opName(req)
	body := req.Body
	if req.JSON != nil {
		b, err := json.Marshal(req.JSON)
		if err != nil {
			return Response{}, &connector.Error{Op: op, Err: fmt.Errorf("request body does not encode as JSON: %w", err)}
		}
		body = b
	}
	parent := ctx
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(ctx, method(req), req.URL, rd)
	if err != nil {
		return Response{}, &connector.Error{Op: op, Err: err}
	}
	for k, vs := range req.Header {
		hr.Header[k] = append([]string(nil), vs...)
	}
	if req.JSON != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if k := yella.EffectIdempotencyKey(ctx); k != "" && o.idemHeader != "" && hr.Header.Get(o.idemHeader) == "" {
		hr.Header.Set(o.idemHeader, k)
	}
	resp, err := o.client.Do(hr)
	if err != nil {
		return Response{}, &connector.Error{Op: op, Retryable: true, Err: o.transportErr(parent, ctx, err)}
	}
	defer resp.Body.Close()
	return o.finish(op, hr.URL.Host, resp, func(err error) error { return o.transportErr(parent, ctx, err) })
}

// finish reads and classifies a response to a request to host; wrap
// explains a failed read.
func (o *config) finish(op, host string, resp *http.Response, wrap func(error) error) (Response, error) {
	b, readErr := io.ReadAll(io.LimitReader(resp.Body, o.maxBody+1))
	over := int64(len(b)) > o.maxBody
	if over {
		b = b[:o.maxBody]
	}
	r := &Response{Status: resp.StatusCode, Body: b}
	for _, name := range o.keep {
		if v := resp.Header.Get(name); v != "" {
			if r.Header == nil {
				r.Header = map[string]string{}
			}
			r.Header[http.CanonicalHeaderKey(name)] = v
		}
	}
	if readErr != nil { // the status came, the body did not: the outcome is not known
		return Response{}, &connector.Error{Op: op, Status: resp.StatusCode, Retryable: true,
			Err: fmt.Errorf("reading the response body: %w", wrap(readErr))}
	}
	retryAfter, hasRetryAfter := connector.ParseRetryAfter(resp.Header.Get("Retry-After"), o.now())
	var e *connector.Error
	if over && success(resp.StatusCode) { // never a truncated success
		e = &connector.Error{Err: fmt.Errorf("response body exceeds %d bytes (httpx.MaxBody)", o.maxBody)}
	}
	if e == nil && o.classify != nil {
		e = o.classify(r, resp.Header)
	}
	if e == nil {
		e = classify(resp.StatusCode)
	}
	if e == nil {
		if o.dropBody {
			r.Body = nil
		}
		return *r, nil
	}
	if e.Op == "" {
		e.Op = op
	}
	if e.Status == 0 {
		e.Status = resp.StatusCode
	}
	if e.Body == "" && e.Err == nil && e.Code == "" {
		e.Body = quote(b)
	}
	if e.Retryable && e.RetryAfter == 0 && hasRetryAfter {
		e.RetryAfter = retryAfter
	}
	o.hold(host, e.Status, e.RetryAfter, hasRetryAfter)
	return Response{}, e
}

// hold tells the Limiter that the downstream asked to slow down.
func (o *config) hold(host string, status int, retryAfter time.Duration, hasRetryAfter bool) {
	if o.limiter == nil {
		return
	}
	d := retryAfter
	switch {
	case status == http.StatusTooManyRequests && !hasRetryAfter:
		d = DefaultHold
	case status == http.StatusTooManyRequests, status == http.StatusServiceUnavailable && hasRetryAfter:
	default:
		return
	}
	key := o.limiterKey
	if key == "" {
		key = host
	}
	o.limiter.HoldUntil(key, o.now().Add(d))
}

// classify is the default classification of a status: nil for 2xx.
func classify(status int) *connector.Error {
	switch {
	case success(status):
		return nil
	case RetryableStatus(status):
		return &connector.Error{Retryable: true}
	}
	return &connector.Error{}
}

func success(status int) bool { return status >= 200 && status < 300 }

// RetryableStatus reports whether a response with status may succeed when
// sent again: 408, 425, 429, 500, 502, 503 and 504.
func RetryableStatus(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// quote renders the start of a body for an error message: at most
// errorBodyLen bytes, valid UTF-8, on one line.
func quote(b []byte) string {
	cut := len(b) > errorBodyLen
	if cut {
		b = b[:errorBodyLen]
	}
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "\uFFFD")), " ")
	if cut {
		s += "…"
	}
	return s
}

// transportErr drops the URL from a transport error (*url.Error repeats
// it, and a URL may hold a secret: the error's Op names the call) and says
// when the per-call timeout ran out.
func (o *config) transportErr(parent, ctx context.Context, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no complete response within %s (httpx.Timeout): %w", o.timeout, err)
	}
	return err
}
