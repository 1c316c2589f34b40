package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/yella-go/yella/connector"
)

// wireRequest is the request body. Optional fields are left out when zero.
type wireRequest struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	Tools               []Tool          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	MaxTokens           int             `json:"max_tokens,omitempty"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	Stop                []string        `json:"stop,omitempty"`
	ResponseFormat      json.RawMessage `json:"response_format,omitempty"`
	User                string          `json:"user,omitempty"`
	Stream              bool            `json:"stream"`
	StreamOptions       struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// encodeRequest checks req and encodes the request body. The encoding is
// deterministic: the same Request gives the same bytes.
func encodeRequest(req Request) ([]byte, error) {
	if req.Model == "" {
		return nil, errors.New("request has no model (llm.Request.Model)")
	}
	if len(req.Messages) == 0 {
		return nil, errors.New("request has no messages (llm.Request.Messages)")
	}
	for i, m := range req.Messages {
		switch m.Role {
		case RoleSystem, RoleDeveloper, RoleUser, RoleAssistant, RoleTool:
		default:
			return nil, fmt.Errorf("message %d has role %q (want system, developer, user, assistant or tool)", i, m.Role)
		}
		if m.Role == RoleTool && m.ToolCallID == "" {
			return nil, fmt.Errorf("message %d is a tool result without a tool call id (llm.Message.ToolCallID)", i)
		}
		if len(m.ContentParts) > 0 && !json.Valid(m.ContentParts) {
			return nil, fmt.Errorf("message %d: ContentParts is not valid JSON", i)
		}
	}
	w := wireRequest{Model: req.Model, Messages: req.Messages, ToolChoice: req.ToolChoice,
		Temperature: req.Temperature, TopP: req.TopP, MaxTokens: req.MaxTokens,
		MaxCompletionTokens: req.MaxCompletionTokens, Seed: req.Seed, Stop: req.Stop,
		ResponseFormat: req.ResponseFormat, User: req.User, Stream: true}
	w.StreamOptions.IncludeUsage = true
	for i, t := range req.Tools {
		if t.Function.Name == "" {
			return nil, fmt.Errorf("tool %d has no function name", i)
		}
		if len(t.Function.Parameters) > 0 && !json.Valid(t.Function.Parameters) {
			return nil, fmt.Errorf("tool %s: Parameters is not valid JSON", t.Function.Name)
		}
		if t.Type == "" {
			t.Type = "function"
		}
		w.Tools = append(w.Tools, t)
	}
	for name, raw := range map[string]json.RawMessage{"ToolChoice": req.ToolChoice, "ResponseFormat": req.ResponseFormat} {
		if len(raw) > 0 && !json.Valid(raw) {
			return nil, fmt.Errorf("llm.Request.%s is not valid JSON", name)
		}
	}
	body, err := json.Marshal(w)
	if err != nil || len(req.Extra) == 0 {
		return body, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(req.Extra))
	for k := range req.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, taken := fields[k]; taken {
			return nil, fmt.Errorf("llm.Request.Extra sets %q, which the client sets itself", k)
		}
		v, err := json.Marshal(req.Extra[k])
		if err != nil {
			return nil, fmt.Errorf("llm.Request.Extra[%q]: %w", k, err)
		}
		fields[k] = v
	}
	return json.Marshal(fields)
}

// maxReset bounds a x-ratelimit-reset-* delay: a larger value is not a
// delay (some servers send a point in time there) and is ignored.
const maxReset = 24 * time.Hour

// retryAfter returns how long the response's headers ask callers to wait:
// retry-after-ms, else Retry-After (seconds or an HTTP date), else the
// x-ratelimit-reset-* headers (see resetDelay); 0 when none says.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms <= float64(maxReset/time.Millisecond) {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	if d, ok := connector.ParseRetryAfter(h.Get("Retry-After"), now); ok {
		return d
	}
	spent, all := resetDelays(h)
	if spent > 0 {
		return spent
	}
	return all
}

// spentReset returns the longest reset delay of the rate limits the
// headers report used up (x-ratelimit-remaining-<name>: 0), or 0.
func spentReset(h http.Header) time.Duration {
	spent, _ := resetDelays(h)
	return spent
}

// resetDelays reads the x-ratelimit-reset-<name> headers ("1s", "6m0s",
// "20ms", or a number of seconds): the longest delay of the limits whose
// x-ratelimit-remaining-<name> is 0, and the longest of all.
func resetDelays(h http.Header) (spent, all time.Duration) {
	for name, vs := range h {
		limit, ok := strings.CutPrefix(strings.ToLower(name), "x-ratelimit-reset-")
		if !ok || len(vs) == 0 {
			continue
		}
		d, ok := parseReset(vs[0])
		if !ok {
			continue
		}
		all = max(all, d)
		if strings.TrimSpace(h.Get("X-Ratelimit-Remaining-"+limit)) == "0" {
			spent = max(spent, d)
		}
	}
	return spent, all
}

// parseReset reads a reset delay: a Go duration ("6m0s", "20ms", "1.5s")
// or a number of seconds ("2", "0.5"). Negative, malformed and values over
// a day are refused.
func parseReset(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	d, err := time.ParseDuration(v)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || math.IsNaN(f) || f < 0 || f > maxReset.Seconds() {
			return 0, false
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 0 || d > maxReset {
		return 0, false
	}
	return d, true
}
