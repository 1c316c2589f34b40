// Package stripe calls the Stripe API from Yella handlers, each call a
// durable effect (on connector/httpx).
//
// Every call sends the effect's idempotency key as Stripe's Idempotency-Key,
// so a POST sent again (after a timeout, a dropped connection or a crash)
// is answered by Stripe with the stored result of the first, not done
// twice. That makes a POST safe to re-run: calls are yella.Idempotent, so a
// call whose outcome is unknown after a crash is sent again with the same
// key instead of fencing the run. Stripe keeps keys for at least 24 hours;
// a call re-run later (an operator's retry of an old run) is new to Stripe.
//
// Stripe's errors ({"error":{"type","code","message","decline_code"}}) are
// mapped to a *connector.Error whose Err is an *APIError:
//   - card_error, invalid_request_error, authentication_error and
//     idempotency_error (the key reused with other parameters) are
//     permanent;
//   - rate_limit_error and HTTP 429 (which also holds the Limiter),
//     api_error and 5xx, 409 (a lock timeout or a concurrent request with
//     the same key) and connection errors are retryable.
//
// Stripe's Stripe-Should-Retry header, when present, overrides the mapping.
package stripe

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/connector/httpx"
)

// DefaultBaseURL is Stripe's API.
const DefaultBaseURL = "https://api.stripe.com"

// Client holds what every call needs. The zero value but for Key is ready
// to use.
type Client struct {
	// Key is the secret API key (sk_...), sent as a bearer token.
	Key string
	// BaseURL is the API's address (default DefaultBaseURL); tests point it
	// at a local fake.
	BaseURL string
	// HTTP sends the requests (default http.DefaultClient).
	HTTP *http.Client
	// Timeout bounds one call (default httpx.DefaultTimeout).
	Timeout time.Duration
	// Limiter is told when Stripe answers 429; may be nil.
	Limiter connector.Limiter
	// LimiterKey names Stripe in the Limiter (default "stripe").
	LimiterKey string
	// Version, when set, is sent as the Stripe-Version header.
	Version string
}

// APIError is Stripe's description of a failed request. It is the Err of
// the *connector.Error a call returns; reach it with errors.As.
type APIError struct {
	// Type is the error's type: card_error, invalid_request_error,
	// api_error, idempotency_error, rate_limit_error or
	// authentication_error.
	Type string `json:"type"`
	// Code is Stripe's short code, such as card_declined or lock_timeout.
	Code string `json:"code,omitempty"`
	// DeclineCode is the card issuer's reason for a declined card.
	DeclineCode string `json:"decline_code,omitempty"`
	// Message is Stripe's human-readable explanation.
	Message string `json:"message,omitempty"`
	// Param names the parameter the error is about, if any.
	Param string `json:"param,omitempty"`
}

// Error renders the type, the codes and the message.
func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString(e.Type)
	if e.Code != "" {
		b.WriteString("/" + e.Code)
	}
	if e.DeclineCode != "" {
		b.WriteString("/" + e.DeclineCode)
	}
	if e.Param != "" {
		b.WriteString(" (param " + e.Param + ")")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// Post sends a form-encoded POST of params to path (such as
// "/v1/payment_intents") as the effect key of c's run, and decodes the
// object Stripe returns into T (json.RawMessage keeps it whole). A
// completed call returns its stored object without calling Stripe again.
func Post[T any, K yella.EffectKey](c *yella.Ctx, cl *Client, key K, path string, params url.Values) (T, error) {
	req := httpx.Request{Method: http.MethodPost, URL: cl.base() + path, Header: cl.header(), Body: []byte(params.Encode())}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return httpx.DoJSON[T](c, key, req, cl.options()...)
}

// Get reads path (with params as its query) as the effect key of c's run
// and decodes the object into T. The read is recorded like any effect, so
// a retry of the run sees the same object.
func Get[T any, K yella.EffectKey](c *yella.Ctx, cl *Client, key K, path string, params url.Values) (T, error) {
	u := cl.base() + path
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	return httpx.DoJSON[T](c, key, httpx.Request{Method: http.MethodGet, URL: u, Header: cl.header()}, cl.options()...)
}

func (cl *Client) base() string {
	if cl.BaseURL == "" {
		return DefaultBaseURL
	}
	return strings.TrimSuffix(cl.BaseURL, "/")
}

func (cl *Client) header() http.Header {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+cl.Key)
	if cl.Version != "" {
		h.Set("Stripe-Version", cl.Version)
	}
	return h
}

func (cl *Client) options() []httpx.Option {
	key := cl.LimiterKey
	if key == "" {
		key = "stripe"
	}
	opts := []httpx.Option{httpx.Idempotent(), httpx.IdempotencyHeader("Idempotency-Key"),
		httpx.Limiter(cl.Limiter, key), httpx.Classify(Classify)}
	if cl.HTTP != nil {
		opts = append(opts, httpx.Client(cl.HTTP))
	}
	if cl.Timeout > 0 {
		opts = append(opts, httpx.Timeout(cl.Timeout))
	}
	return opts
}

// Classify maps a Stripe response to its error (nil for a 2xx, which
// succeeds). It is the httpx.Classify of every call of this package. A
// failure without Stripe's error JSON (a proxy's 502 page) is classified by
// its status alone, as httpx does, but for 409, which is retryable.
func Classify(r *httpx.Response, h http.Header) *connector.Error {
	if r.Status >= 200 && r.Status < 300 {
		return nil
	}
	var body struct {
		Error *APIError `json:"error"`
	}
	e := &connector.Error{}
	typ := ""
	if json.Unmarshal(r.Body, &body) == nil && body.Error != nil && body.Error.Type != "" {
		typ = body.Error.Type
		e.Code, e.Err = typ, body.Error
	}
	switch {
	case r.Status == http.StatusConflict: // a lock timeout, or the same key still in flight
		e.Retryable = true
	case r.Status == http.StatusTooManyRequests, typ == "rate_limit_error":
		e.Retryable = true
	case typ == "api_error":
		e.Retryable = true
	case typ == "card_error", typ == "invalid_request_error", typ == "authentication_error", typ == "idempotency_error":
		e.Retryable = false
	case typ == "" && h.Get("Stripe-Should-Retry") == "":
		return nil // not Stripe's answer: classified by its status
	default:
		e.Retryable = r.Status >= 500 && r.Status != http.StatusNotImplemented
	}
	switch h.Get("Stripe-Should-Retry") {
	case "true":
		e.Retryable = true
	case "false":
		e.Retryable = false
	}
	return e
}
