// Package webhook ingests signed webhooks: an http.Handler that, for each
// configured source, bounds the body, verifies the sender's signature in
// constant time (Stripe, GitHub, Slack, or a generic HMAC-SHA256 header),
// and admits one event per delivery through the engine's Emit with the
// provider's event id as the idempotency key. A provider's retry of an
// event it already delivered admits nothing new and is still answered 2xx,
// so the provider stops retrying. The handler only admits: it answers as
// soon as the runs are stored, without waiting for them.
//
// Mount it at a pattern with a {name} wildcard (mux.Handle("/hooks/{name}",
// h)) or under a prefix whose last path element names the source. `yella
// serve --hook` mounts it at /hooks/{name}.
//
// The payload of the emitted event is the verified body: a JSON body as
// that JSON; a form-encoded body (Slack's slash commands and
// interactivity) as a JSON object of its fields, each a string, or an array
// of strings when the field repeats (a JSON "payload" field stays a string
// for the handler to decode); any other UTF-8 body as a JSON string.
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/yella-go/yella"
)

// Defaults of Options.
const (
	DefaultMaxBody     = 1 << 20
	DefaultMaxInFlight = 64
)

// TypePlaceholder in Source.Event is replaced by the delivery's event type.
const TypePlaceholder = "{type}"

// Emitter admits events; *yella.Engine implements it.
type Emitter interface {
	Emit(ctx context.Context, event string, payload any, opts ...yella.EmitOption) (yella.Emission, error)
}

// Source is one sender of webhooks.
type Source struct {
	// Verifier authenticates its requests and names their events: Stripe,
	// GitHub, Slack, HMAC, or one of your own. Required.
	Verifier Verifier
	// Event is the event emitted for each delivery. "{type}" in it is
	// replaced by the delivery's type ("stripe:{type}" emits
	// "stripe:invoice.paid"); a delivery without a type is then refused as
	// malformed. Required.
	Event string
}

// Options configures a Handler. Zero values mean the defaults.
type Options struct {
	// Sources maps a source's name, the last element of the request path,
	// to the source. At least one. A name is non-empty and has no "/".
	Sources map[string]Source
	// MaxBody bounds a request body in bytes: a larger one is answered 413
	// and is never read past the bound. Defaults to DefaultMaxBody (1 MiB).
	MaxBody int64
	// MaxInFlight bounds the requests handled at once; more are answered
	// 503 with Retry-After, which providers retry. Defaults to
	// DefaultMaxInFlight (64).
	MaxInFlight int
	// Logger receives refused requests: at debug level the sender's
	// mistakes (bad signatures, stale timestamps, ...), as warnings what
	// the receiver must fix (no process listens, an admission failed).
	// Defaults to discarding them.
	Logger *slog.Logger
	// Now is the clock signed timestamps are checked against. Defaults to
	// time.Now.
	Now func() time.Time
}

// Handler is the webhook endpoint. Create it with New; it is safe for
// concurrent use.
type Handler struct {
	em      Emitter
	opts    Options
	slots   chan struct{}
	metrics *metrics
}

// New validates opts and returns the handler that admits through em.
func New(em Emitter, opts Options) (*Handler, error) {
	if em == nil {
		return nil, errors.New("webhook: the Emitter is nil")
	}
	if len(opts.Sources) == 0 {
		return nil, errors.New("webhook: no Sources")
	}
	names := make([]string, 0, len(opts.Sources))
	sources := make(map[string]Source, len(opts.Sources)) // a copy: the caller's map may change later
	for name, src := range opts.Sources {
		if name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("webhook: source name %q must be non-empty without /", name)
		}
		if src.Verifier == nil {
			return nil, fmt.Errorf("webhook: source %s has no Verifier", name)
		}
		if v, ok := src.Verifier.(validator); ok {
			if err := v.validate(); err != nil {
				return nil, fmt.Errorf("source %s: %w", name, err)
			}
		}
		if strings.TrimSpace(src.Event) == "" {
			return nil, fmt.Errorf("webhook: source %s has no Event", name)
		}
		names = append(names, name)
		sources[name] = src
	}
	opts.Sources = sources
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Handler{em: em, opts: opts, slots: make(chan struct{}, opts.MaxInFlight), metrics: newMetrics(names)}, nil
}

// Response is the JSON answer to an admitted (or already admitted) delivery.
type Response struct {
	Source string `json:"source"`
	Event  string `json:"event"`
	ID     string `json:"id"` // the provider's event id
	// Runs are the runs admitted now (202); empty for a repeat (200).
	Runs []string `json:"runs"`
	// Existing are the runs an earlier delivery of the same event admitted.
	Existing []string `json:"existing,omitempty"`
}

// refusal is a request answered with an error.
type refusal struct {
	status  int
	outcome string
	msg     string // for the sender
	err     error  // for the log only: what the sender is not told
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == "" {
		name = path.Base(r.URL.Path)
	}
	src, known := h.opts.Sources[name]
	if !known {
		name = ""
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.refuse(w, name, &refusal{http.StatusMethodNotAllowed, OutcomeMethodNotAllowed, r.Method + " is not allowed: webhooks are POSTed", nil})
		return
	}
	if !known {
		h.refuse(w, name, &refusal{http.StatusNotFound, OutcomeUnknownSource, "no webhook source is configured at " + r.URL.Path, nil})
		return
	}
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	default:
		w.Header().Set("Retry-After", "1")
		h.refuse(w, name, &refusal{http.StatusServiceUnavailable, OutcomeBusy,
			fmt.Sprintf("%d webhook requests are in progress, the most handled at once; try again in a second", cap(h.slots)), nil})
		return
	}
	ok, ref := h.handle(r, name, src)
	if ref != nil {
		if ref.status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		h.refuse(w, name, ref)
		return
	}
	h.metrics.add(name, ok.outcome)
	writeJSON(w, ok.status, ok.body)
}

// answer is a request answered with success.
type answer struct {
	status  int
	outcome string
	body    []byte
}

// handle reads, verifies and admits one delivery.
func (h *Handler) handle(r *http.Request, name string, src Source) (answer, *refusal) {
	body, ref := h.read(r)
	if ref != nil {
		return answer{}, ref
	}
	d, err := src.Verifier.Verify(r.Header, body, h.opts.Now())
	if err != nil {
		return answer{}, verifyRefusal(err)
	}
	if d.Reply != nil {
		return answer{http.StatusOK, OutcomeHandshake, d.Reply}, nil
	}
	if d.ID == "" {
		return answer{}, &refusal{http.StatusBadRequest, OutcomeMalformed, "the delivery has no event id", nil}
	}
	event := src.Event
	if strings.Contains(event, TypePlaceholder) {
		if d.Type == "" {
			return answer{}, &refusal{http.StatusBadRequest, OutcomeMalformed, "the delivery has no event type for " + TypePlaceholder + " in " + event, nil}
		}
		event = strings.ReplaceAll(event, TypePlaceholder, d.Type)
	}
	payload, ref := payloadOf(r.Header.Get("Content-Type"), body)
	if ref != nil {
		return answer{}, ref
	}
	em, err := h.em.Emit(r.Context(), event, payload, yella.IdempotencyKey(name+":"+d.ID))
	if err != nil {
		return answer{}, h.emitRefusal(event, err)
	}
	if len(em.Dropped) > 0 {
		// A process dropped at its cap does not consume the key: the
		// provider's retry admits it, and finds the others' runs.
		return answer{}, &refusal{http.StatusServiceUnavailable, OutcomeAtCapacity,
			"dropped for " + strings.Join(em.Dropped, ", ") + " (at the concurrency cap); retry later", nil}
	}
	resp := Response{Source: name, Event: event, ID: d.ID, Runs: em.Runs, Existing: em.Existing}
	if resp.Runs == nil {
		resp.Runs = []string{}
	}
	data, err := json.Marshal(resp)
	if err != nil {
		return answer{}, &refusal{http.StatusInternalServerError, OutcomeEmitFailed, err.Error(), nil}
	}
	if len(em.Runs) == 0 {
		return answer{http.StatusOK, OutcomeDuplicate, data}, nil
	}
	return answer{http.StatusAccepted, OutcomeAdmitted, data}, nil
}

// read reads the body up to MaxBody; never more than one byte past it.
func (h *Handler) read(r *http.Request) ([]byte, *refusal) {
	tooLarge := &refusal{http.StatusRequestEntityTooLarge, OutcomeTooLarge,
		fmt.Sprintf("the body is larger than %d bytes, the most this endpoint reads", h.opts.MaxBody), nil}
	if r.ContentLength > h.opts.MaxBody {
		return nil, tooLarge
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, h.opts.MaxBody+1))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge
	case err != nil:
		return nil, &refusal{http.StatusBadRequest, OutcomeMalformed, "reading the body: " + err.Error(), nil}
	case int64(len(body)) > h.opts.MaxBody:
		return nil, tooLarge
	}
	return body, nil
}

// verifyRefusal maps a Verifier's error to its answer.
func verifyRefusal(err error) *refusal {
	switch {
	case errors.Is(err, ErrMissingHeader):
		return &refusal{http.StatusBadRequest, OutcomeMissingHeader, err.Error(), nil}
	case errors.Is(err, ErrMalformed):
		return &refusal{http.StatusBadRequest, OutcomeMalformed, err.Error(), nil}
	case errors.Is(err, ErrStale):
		return &refusal{http.StatusUnauthorized, OutcomeStale, err.Error(), nil}
	case errors.Is(err, ErrBadSignature):
		return &refusal{http.StatusUnauthorized, OutcomeBadSignature, err.Error(), nil}
	}
	return &refusal{http.StatusUnauthorized, OutcomeBadSignature, "not authenticated: " + err.Error(), nil}
}

// emitRefusal maps a failed Emit to its answer: the sender's mistakes are
// 4xx (a retry would fail the same way), the receiver's 503 (a retry may
// succeed).
func (h *Handler) emitRefusal(event string, err error) *refusal {
	switch yella.CodeOf(err) {
	case yella.CodeUnknownEvent:
		return &refusal{http.StatusUnprocessableEntity, OutcomeUnroutable, fmt.Sprintf("no process listens to %q here", event), nil}
	case yella.CodePayloadTooLarge:
		return &refusal{http.StatusRequestEntityTooLarge, OutcomeTooLarge, err.Error(), nil}
	case yella.CodeInvalidPayload, yella.CodeInvalidConfig: // the delivery's id or payload
		return &refusal{http.StatusBadRequest, OutcomeMalformed, err.Error(), nil}
	}
	return &refusal{http.StatusServiceUnavailable, OutcomeEmitFailed, "the event could not be admitted now; retry later", err}
}

// payloadOf turns a verified body into the emitted payload (see the
// package comment).
func payloadOf(contentType string, body []byte) (any, *refusal) {
	if len(body) == 0 {
		return nil, nil
	}
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "application/x-www-form-urlencoded" {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, &refusal{http.StatusBadRequest, OutcomeMalformed, "the form-encoded body does not parse: " + err.Error(), nil}
		}
		fields := make(map[string]any, len(form))
		for k, vs := range form {
			if len(vs) == 1 {
				fields[k] = vs[0]
			} else {
				fields[k] = vs
			}
		}
		return fields, nil
	}
	if json.Valid(body) {
		return json.RawMessage(body), nil
	}
	if utf8.Valid(body) {
		return string(body), nil
	}
	return nil, &refusal{http.StatusUnsupportedMediaType, OutcomeMalformed, "the body is neither JSON, a form nor UTF-8 text", nil}
}

// refuse answers an error as the HTTP API does, and counts it.
func (h *Handler) refuse(w http.ResponseWriter, source string, ref *refusal) {
	h.metrics.add(source, ref.outcome)
	// The sender's mistakes are counted and logged at debug level only, so
	// that a scan of the endpoint cannot flood the log; what an operator
	// must fix (no listener, an admission that failed) is a warning.
	level := slog.LevelDebug
	if ref.status >= 500 || ref.outcome == OutcomeUnroutable {
		level = slog.LevelWarn
	}
	attrs := []any{"source", source, "status", ref.status, "outcome", ref.outcome, "msg", ref.msg}
	if ref.err != nil {
		attrs = append(attrs, "err", ref.err)
	}
	h.opts.Logger.Log(context.Background(), level, "webhook refused", attrs...)
	data, _ := json.Marshal(map[string]map[string]string{"error": {"code": strings.ToUpper(strings.ReplaceAll(ref.outcome, "-", "_")), "message": ref.msg}})
	writeJSON(w, ref.status, data)
}

func writeJSON(w http.ResponseWriter, status int, data []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}
