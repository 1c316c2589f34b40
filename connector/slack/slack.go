// Package slack posts Slack messages from Yella handlers, each post a
// durable effect (on connector/httpx): to an incoming webhook (Webhook) or
// through the Web API's chat.postMessage (PostMessage).
//
// A completed post is never sent again. Slack has no idempotency key, so a
// post whose outcome is unknown after a crash fences the run by default
// (an operator checks the channel, then records the post as done or
// re-runs it); Client.Resend sends it again instead, accepting a possible
// duplicate. A post that failed with a retryable error (a timeout whose
// request may have landed) is sent again by the run's retry either way.
//
// Slack answers most Web API failures with HTTP 200 and {"ok":false,
// "error":"..."}; the error is the *connector.Error's Code. ratelimited,
// internal_error, fatal_error, service_unavailable and request_timeout
// are retryable, every other error (channel_not_found, invalid_auth,
// not_authed, ...) is permanent. An HTTP 429 is retryable, carries its
// Retry-After to the run's retry and holds the Limiter; other statuses are
// classified as httpx does (5xx retryable, 4xx permanent) with Slack's
// error text (webhooks answer in plain text: invalid_payload,
// channel_not_found, no_service...) as the Code.
package slack

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/connector/httpx"
)

// DefaultBaseURL is Slack's Web API.
const DefaultBaseURL = "https://slack.com/api"

// Client holds what every post needs. The zero value is ready for
// webhooks; PostMessage needs Token.
type Client struct {
	// Token is the bot or user token (xoxb-...) for the Web API, sent as a
	// bearer token. Webhooks carry their secret in their URL instead.
	Token string
	// BaseURL is the Web API's address (default DefaultBaseURL); tests
	// point it at a local fake.
	BaseURL string
	// HTTP sends the requests (default http.DefaultClient).
	HTTP *http.Client
	// Timeout bounds one post (default httpx.DefaultTimeout).
	Timeout time.Duration
	// Limiter is told when Slack answers 429; may be nil.
	Limiter connector.Limiter
	// LimiterKey names Slack in the Limiter (default "slack").
	LimiterKey string
	// Resend makes a post whose outcome is unknown after a crash be sent
	// again (a possible duplicate message) instead of fencing the run.
	Resend bool
}

// Message is a message to post. Text is the fallback shown in
// notifications when Blocks are given.
type Message struct {
	// Channel is the channel ID or name (chat.postMessage; a webhook posts
	// to its own channel).
	Channel string `json:"channel,omitempty"`
	// Text is the message text (mrkdwn).
	Text string `json:"text,omitempty"`
	// Blocks is a Block Kit layout, as JSON.
	Blocks json.RawMessage `json:"blocks,omitempty"`
	// ThreadTS posts the message as a reply in the thread of that message.
	ThreadTS string `json:"thread_ts,omitempty"`
}

// Posted identifies a message chat.postMessage posted.
type Posted struct {
	// Channel is the ID of the channel the message is in.
	Channel string `json:"channel"`
	// TS is the message's timestamp, its ID within the channel.
	TS string `json:"ts"`
}

// retryable are the Web API errors that a later retry may not meet.
var retryable = map[string]bool{
	"ratelimited": true, "rate_limited": true, "internal_error": true, "fatal_error": true,
	"service_unavailable": true, "request_timeout": true,
}

// PostMessage posts msg with chat.postMessage as the effect key of c's run.
// A completed post returns its stored Posted without posting again.
func PostMessage[K yella.EffectKey](c *yella.Ctx, cl *Client, key K, msg Message) (Posted, error) {
	base := cl.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	h := http.Header{}
	if cl.Token != "" {
		h.Set("Authorization", "Bearer "+cl.Token)
	}
	h.Set("Content-Type", "application/json; charset=utf-8")
	body, err := json.Marshal(msg)
	if err != nil {
		return Posted{}, &connector.Error{Op: "slack chat.postMessage", Err: err}
	}
	req := httpx.Request{Method: http.MethodPost, URL: strings.TrimSuffix(base, "/") + "/chat.postMessage", Header: h, Body: body}
	return httpx.DoJSON[Posted](c, key, req, cl.options("slack chat.postMessage")...)
}

// Webhook posts msg to the incoming webhook at url as the effect key of
// c's run. The URL is a secret: errors name the call "slack webhook".
func Webhook[K yella.EffectKey](c *yella.Ctx, cl *Client, key K, url string, msg Message) error {
	body, err := json.Marshal(msg)
	if err != nil {
		return &connector.Error{Op: "slack webhook", Err: err}
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	_, err = httpx.Do(c, key, httpx.Request{Method: http.MethodPost, URL: url, Header: h, Body: body},
		append(cl.options("slack webhook"), httpx.DropBody())...)
	return err
}

func (cl *Client) options(op string) []httpx.Option {
	key := cl.LimiterKey
	if key == "" {
		key = "slack"
	}
	opts := []httpx.Option{httpx.Op(op), httpx.IdempotencyHeader(""), httpx.Limiter(cl.Limiter, key), httpx.Classify(Classify)}
	if cl.Resend {
		opts = append(opts, httpx.Idempotent())
	}
	if cl.HTTP != nil {
		opts = append(opts, httpx.Client(cl.HTTP))
	}
	if cl.Timeout > 0 {
		opts = append(opts, httpx.Timeout(cl.Timeout))
	}
	return opts
}

// Classify maps a Slack answer to its error, nil for a success. It is the
// httpx.Classify of every post of this package.
func Classify(r *httpx.Response, _ http.Header) *connector.Error {
	var ans struct {
		OK    *bool  `json:"ok"`
		Error string `json:"error"`
	}
	isJSON := json.Unmarshal(r.Body, &ans) == nil && ans.OK != nil
	ok2xx := r.Status >= 200 && r.Status < 300
	switch {
	case isJSON && *ans.OK && ok2xx:
		return nil
	case isJSON && !*ans.OK:
		code := ans.Error
		if code == "" {
			code = "unknown_error"
		}
		return &connector.Error{Code: code, Retryable: retryable[code] || r.Status == http.StatusTooManyRequests || r.Status >= 500}
	case ok2xx:
		return nil // a webhook's "ok"
	}
	// A webhook's failure: plain text naming the error, classified by status.
	code := strings.TrimSpace(string(r.Body))
	if len(code) > 64 || strings.ContainsAny(code, " \n<{") {
		code = ""
	}
	return &connector.Error{Code: code, Retryable: httpx.RetryableStatus(r.Status)}
}
