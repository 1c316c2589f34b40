package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultTolerance is how far a signed timestamp may be from the receiver's
// clock, in the past or the future, when a verifier's Tolerance is zero.
const DefaultTolerance = 5 * time.Minute

// maxSignatures bounds the signatures one header may offer (Stripe sends one
// per active secret during a rotation): a header with more is malformed.
const maxSignatures = 8

// The errors a Verifier returns, wrapped with details (errors.Is tells them
// apart). The handler answers each with its status and counts it under its
// outcome; any other error from a Verifier counts as a bad signature.
var (
	// ErrMissingHeader: a header the scheme needs is absent (400,
	// outcome "missing-header").
	ErrMissingHeader = errors.New("missing header")
	// ErrMalformed: a header or an authentic body does not have the shape
	// the scheme needs, such as a body without its event id (400, outcome
	// "malformed").
	ErrMalformed = errors.New("malformed request")
	// ErrBadSignature: no offered signature was made over this body with
	// any of the secrets (401, outcome "bad-signature").
	ErrBadSignature = errors.New("bad signature")
	// ErrStale: the signature is authentic but its timestamp is further
	// than the tolerance from now, in the past (a replay) or the future
	// (401, outcome "stale").
	ErrStale = errors.New("timestamp outside the tolerance")
)

// Delivery is what a Verifier learned from an authentic request.
type Delivery struct {
	// ID is the provider's id of the event: the same for every retry of one
	// event. It becomes the idempotency key of the emission.
	ID string
	// Type is the provider's event type ("invoice.paid", "push"), or "".
	// It replaces {type} in Source.Event.
	Type string
	// Reply, when not nil, is answered as is (200, JSON) and nothing is
	// admitted: the provider's handshake, such as Slack's url_verification
	// challenge or GitHub's ping.
	Reply []byte
}

// Verifier authenticates one webhook request and names its event. It gets
// the request's headers, its whole body (within the handler's cap) and
// the time now; it returns an error wrapping one of the Err values above
// when the request is not authentic or not usable. It must compare
// signatures in constant time and must not keep body.
type Verifier interface {
	Verify(h http.Header, body []byte, now time.Time) (Delivery, error)
}

// validator is implemented by the package's verifiers, so New can refuse a
// configuration that could never accept anything.
type validator interface{ validate() error }

// mac is HMAC-SHA256 of the parts, in order, under secret.
func mac(secret string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// matches reports whether any offered signature equals the MAC of the parts
// under any secret. Each MAC is computed once; each comparison takes
// constant time.
func matches(secrets []string, offered [][]byte, parts ...[]byte) bool {
	ok := false
	for _, s := range secrets {
		want := mac(s, parts...)
		for _, o := range offered {
			if hmac.Equal(want, o) {
				ok = true
			}
		}
	}
	return ok
}

// fresh checks a Unix-seconds timestamp against now within tolerance.
func fresh(ts string, now time.Time, tolerance time.Duration) error {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sec < 0 {
		return fmt.Errorf("%w: timestamp %q is not Unix seconds", ErrMalformed, clip(ts))
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	// Compare in seconds: time.Unix of a huge value would overflow Sub.
	diff := now.Unix() - sec
	if diff > int64(tolerance/time.Second) || -diff > int64(tolerance/time.Second) {
		return fmt.Errorf("%w: signed at %d, now is %d (tolerance %s)", ErrStale, sec, now.Unix(), tolerance)
	}
	return nil
}

func checkSecrets(scheme string, secrets []string) error {
	if len(secrets) == 0 {
		return fmt.Errorf("webhook: %s needs at least one secret", scheme)
	}
	for i, s := range secrets {
		if s == "" {
			return fmt.Errorf("webhook: %s secret %d is empty", scheme, i+1)
		}
	}
	return nil
}

// clip bounds a value quoted in an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Stripe verifies Stripe's Stripe-Signature header, "t=TIMESTAMP,v1=SIG"
// with one v1 per active signing secret: HMAC-SHA256 of "TIMESTAMP.BODY" in
// hex. The event id is the JSON body's "id", the type its "type".
type Stripe struct {
	// Secrets are the endpoint's signing secrets (whsec_…); a request
	// signed with any of them is accepted, so a rotation can hold the old
	// and the new one. At least one.
	Secrets []string
	// Tolerance is how far the signed timestamp may be from now. Defaults
	// to DefaultTolerance (5 minutes).
	Tolerance time.Duration
}

func (s Stripe) validate() error { return checkSecrets("Stripe", s.Secrets) }

// Verify implements Verifier.
func (s Stripe) Verify(h http.Header, body []byte, now time.Time) (Delivery, error) {
	hdr := h.Get("Stripe-Signature")
	if hdr == "" {
		return Delivery{}, fmt.Errorf("%w: Stripe-Signature", ErrMissingHeader)
	}
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(hdr, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Delivery{}, fmt.Errorf("%w: Stripe-Signature element %q is not key=value", ErrMalformed, clip(part))
		}
		switch k {
		case "t":
			if ts != "" {
				return Delivery{}, fmt.Errorf("%w: Stripe-Signature has two timestamps", ErrMalformed)
			}
			ts = v
		case "v1":
			if len(sigs) == maxSignatures {
				return Delivery{}, fmt.Errorf("%w: Stripe-Signature has more than %d signatures", ErrMalformed, maxSignatures)
			}
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	if ts == "" {
		return Delivery{}, fmt.Errorf("%w: Stripe-Signature has no timestamp (t=)", ErrMalformed)
	}
	if !matches(s.Secrets, sigs, []byte(ts), []byte("."), body) {
		return Delivery{}, fmt.Errorf("%w: no v1 signature of Stripe-Signature matches", ErrBadSignature)
	}
	if err := fresh(ts, now, s.Tolerance); err != nil {
		return Delivery{}, err
	}
	var ev struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	if json.Unmarshal(body, &ev) != nil || ev.ID == "" {
		return Delivery{}, fmt.Errorf(`%w: the body is not a Stripe event with an "id"`, ErrMalformed)
	}
	return Delivery{ID: ev.ID, Type: ev.Type}, nil
}

// GitHub verifies GitHub's X-Hub-Signature-256 header, "sha256=SIG":
// HMAC-SHA256 of the body in hex. The event id is the X-GitHub-Delivery
// header (the same on a redelivery), the type the X-GitHub-Event header.
// GitHub signs no timestamp: a replay is caught by the delivery id alone.
// The "ping" event GitHub sends when a hook is created is answered and
// admits nothing.
type GitHub struct {
	// Secrets are the webhook's secrets; any of them is accepted. At least
	// one.
	Secrets []string
}

func (g GitHub) validate() error { return checkSecrets("GitHub", g.Secrets) }

// Verify implements Verifier.
func (g GitHub) Verify(h http.Header, body []byte, now time.Time) (Delivery, error) {
	hdr := h.Get("X-Hub-Signature-256")
	if hdr == "" {
		return Delivery{}, fmt.Errorf("%w: X-Hub-Signature-256", ErrMissingHeader)
	}
	id := h.Get("X-GitHub-Delivery")
	if id == "" {
		return Delivery{}, fmt.Errorf("%w: X-GitHub-Delivery", ErrMissingHeader)
	}
	hexSig, ok := strings.CutPrefix(hdr, "sha256=")
	if !ok {
		return Delivery{}, fmt.Errorf("%w: X-Hub-Signature-256 does not start with sha256=", ErrMalformed)
	}
	sig, err := hex.DecodeString(hexSig)
	if err != nil || !matches(g.Secrets, [][]byte{sig}, body) {
		return Delivery{}, fmt.Errorf("%w: X-Hub-Signature-256 does not match", ErrBadSignature)
	}
	typ := h.Get("X-GitHub-Event")
	if typ == "ping" {
		return Delivery{ID: id, Type: typ, Reply: []byte(`{"ok":true}`)}, nil
	}
	return Delivery{ID: id, Type: typ}, nil
}

// Slack verifies Slack's X-Slack-Signature header, "v0=SIG": HMAC-SHA256 of
// "v0:TIMESTAMP:BODY" in hex, with the timestamp in
// X-Slack-Request-Timestamp. The event id is the event_id of an Events API
// body (the same on Slack's retries) and the type its event's type; a
// form-encoded body (slash commands, interactivity) is named by its
// trigger_id (of the form, or of its JSON "payload" field), its type by its
// command or its payload's type; a body with neither is named by its
// signature, which a replay of the same request repeats. The
// url_verification handshake is answered with its challenge and admits
// nothing.
type Slack struct {
	// Secrets are the app's signing secrets; any of them is accepted. At
	// least one.
	Secrets []string
	// Tolerance is how far the signed timestamp may be from now. Defaults
	// to DefaultTolerance (5 minutes).
	Tolerance time.Duration
}

func (s Slack) validate() error { return checkSecrets("Slack", s.Secrets) }

// Verify implements Verifier.
func (s Slack) Verify(h http.Header, body []byte, now time.Time) (Delivery, error) {
	hdr := h.Get("X-Slack-Signature")
	if hdr == "" {
		return Delivery{}, fmt.Errorf("%w: X-Slack-Signature", ErrMissingHeader)
	}
	ts := h.Get("X-Slack-Request-Timestamp")
	if ts == "" {
		return Delivery{}, fmt.Errorf("%w: X-Slack-Request-Timestamp", ErrMissingHeader)
	}
	hexSig, ok := strings.CutPrefix(hdr, "v0=")
	if !ok {
		return Delivery{}, fmt.Errorf("%w: X-Slack-Signature does not start with v0=", ErrMalformed)
	}
	sig, err := hex.DecodeString(hexSig)
	if err != nil || !matches(s.Secrets, [][]byte{sig}, []byte("v0:"+ts+":"), body) {
		return Delivery{}, fmt.Errorf("%w: X-Slack-Signature does not match", ErrBadSignature)
	}
	if err := fresh(ts, now, s.Tolerance); err != nil {
		return Delivery{}, err
	}
	return slackDelivery(body, sig), nil
}

// slackDelivery names an authentic Slack body.
func slackDelivery(body, sig []byte) Delivery {
	var ev struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
		EventID   string `json:"event_id"`
		TriggerID string `json:"trigger_id"`
		Command   string `json:"command"`
		Event     struct {
			Type string `json:"type"`
		} `json:"event"`
	}
	if json.Unmarshal(body, &ev) == nil {
		if ev.Type == "url_verification" {
			reply, _ := json.Marshal(map[string]string{"challenge": ev.Challenge})
			return Delivery{ID: "challenge", Type: ev.Type, Reply: reply}
		}
		d := Delivery{ID: ev.EventID, Type: ev.Type}
		if ev.Event.Type != "" {
			d.Type = ev.Event.Type
		}
		if d.ID == "" {
			d.ID = ev.TriggerID
		}
		if d.ID == "" {
			d.ID = "sig-" + hex.EncodeToString(sig)
		}
		return d
	}
	d := Delivery{}
	if form, err := url.ParseQuery(string(body)); err == nil {
		d.ID, d.Type = form.Get("trigger_id"), strings.TrimPrefix(form.Get("command"), "/")
		if p := form.Get("payload"); p != "" && json.Unmarshal([]byte(p), &ev) == nil {
			if d.ID == "" {
				d.ID = ev.TriggerID
			}
			if d.Type == "" {
				d.Type = ev.Type
			}
		}
	}
	if d.ID == "" {
		d.ID = "sig-" + hex.EncodeToString(sig)
	}
	return d
}

// HMAC verifies a generic HMAC-SHA256 signature header, as many services
// send: the header holds the MAC of the body (or, with TimestampHeader, of
// "TIMESTAMP.BODY") in hex or base64 (standard or URL alphabet, padded or
// not), after an optional prefix such as "sha256=".
type HMAC struct {
	// Secrets are the shared secrets; any of them is accepted. At least
	// one.
	Secrets []string
	// Header is the signature header, such as "X-Signature". Required.
	Header string
	// Prefix is removed from the header's value before decoding, such as
	// "sha256=". Optional; a value without it is malformed.
	Prefix string
	// TimestampHeader, when set, names the header that holds the signing
	// time in Unix seconds: the MAC is then of "TIMESTAMP.BODY", and a
	// timestamp further than Tolerance from now is refused.
	TimestampHeader string
	// Tolerance is how far the timestamp may be from now. Defaults to
	// DefaultTolerance (5 minutes).
	Tolerance time.Duration
	// IDHeader names the header that holds the event id. When empty the
	// signature itself names the event, so only a repeat of the very same
	// signed request is recognised as a retry.
	IDHeader string
	// TypeHeader names the header that holds the event type. Optional.
	TypeHeader string
}

func (m HMAC) validate() error {
	if m.Header == "" {
		return errors.New("webhook: HMAC needs the signature Header")
	}
	return checkSecrets("HMAC", m.Secrets)
}

// Verify implements Verifier.
func (m HMAC) Verify(h http.Header, body []byte, now time.Time) (Delivery, error) {
	hdr := h.Get(m.Header)
	if hdr == "" {
		return Delivery{}, fmt.Errorf("%w: %s", ErrMissingHeader, m.Header)
	}
	var ts string
	if m.TimestampHeader != "" {
		if ts = h.Get(m.TimestampHeader); ts == "" {
			return Delivery{}, fmt.Errorf("%w: %s", ErrMissingHeader, m.TimestampHeader)
		}
	}
	var id string
	if m.IDHeader != "" {
		if id = h.Get(m.IDHeader); id == "" {
			return Delivery{}, fmt.Errorf("%w: %s", ErrMissingHeader, m.IDHeader)
		}
	}
	enc, ok := strings.CutPrefix(strings.TrimSpace(hdr), m.Prefix)
	if !ok {
		return Delivery{}, fmt.Errorf("%w: %s does not start with %q", ErrMalformed, m.Header, m.Prefix)
	}
	sig := decodeMAC(enc)
	parts := [][]byte{body}
	if ts != "" {
		parts = [][]byte{[]byte(ts), []byte("."), body}
	}
	if sig == nil || !matches(m.Secrets, [][]byte{sig}, parts...) {
		return Delivery{}, fmt.Errorf("%w: %s does not match", ErrBadSignature, m.Header)
	}
	if ts != "" {
		if err := fresh(ts, now, m.Tolerance); err != nil {
			return Delivery{}, err
		}
	}
	if id == "" {
		id = "sig-" + hex.EncodeToString(sig)
	}
	d := Delivery{ID: id}
	if m.TypeHeader != "" {
		d.Type = h.Get(m.TypeHeader)
	}
	return d, nil
}

// decodeMAC decodes a SHA-256 MAC written in hex (64 characters) or base64
// (44 padded, 43 not; standard or URL alphabet), or returns nil.
func decodeMAC(s string) []byte {
	var b []byte
	var err error
	switch len(s) {
	case 64:
		b, err = hex.DecodeString(s)
	case 44:
		if b, err = base64.StdEncoding.DecodeString(s); err != nil {
			b, err = base64.URLEncoding.DecodeString(s)
		}
	case 43:
		if b, err = base64.RawStdEncoding.DecodeString(s); err != nil {
			b, err = base64.RawURLEncoding.DecodeString(s)
		}
	default:
		return nil
	}
	if err != nil || len(b) != sha256.Size {
		return nil
	}
	return b
}
