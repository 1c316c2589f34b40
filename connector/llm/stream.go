package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// The chunk of a streamed completion, as OpenAI-compatible servers send it.
type chunk struct {
	ID      string        `json:"id"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage"`
	Error   *apiError     `json:"error"`
}

type chunkChoice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	Message      *delta  `json:"message"` // a non-streamed response's message
	FinishReason *string `json:"finish_reason"`
}

type delta struct {
	Role             string          `json:"role"`
	Content          *string         `json:"content"`
	Refusal          *string         `json:"refusal"`
	ReasoningContent *string         `json:"reasoning_content"`
	Reasoning        *string         `json:"reasoning"`
	ToolCalls        []toolCallDelta `json:"tool_calls"`
}

type toolCallDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// apiError is the error object of an OpenAI-compatible response. Code is
// a string or a number, depending on the server.
type apiError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// code returns the error's code, or its type when it has no code.
func (e *apiError) code() string {
	var s string
	if json.Unmarshal(e.Code, &s) == nil && s != "" {
		return s
	}
	if c := strings.TrimSpace(string(e.Code)); c != "" && c != "null" && c != `""` {
		return c
	}
	return e.Type
}

// streamError is a stream that cannot be used; permanent tells whether
// asking again may help.
type streamError struct {
	msg       string
	code      string
	permanent bool
	err       error
}

func (e *streamError) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

func (e *streamError) Unwrap() error { return e.err }

// assembler builds a Completion from the chunks of a stream.
type assembler struct {
	c       Completion
	text    strings.Builder
	reason  strings.Builder
	refusal strings.Builder
	calls   map[int]*ToolCall
	last    int // index of the tool call a delta without index continues
	onDelta func(string)
}

func newAssembler(onDelta func(string)) *assembler {
	return &assembler{calls: map[int]*ToolCall{}, last: -1, onDelta: onDelta}
}

// add applies one chunk.
func (a *assembler) add(data []byte) error {
	var ch chunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return &streamError{msg: fmt.Sprintf("malformed chunk %q", clip(string(data), 200)), code: "malformed_stream", err: err}
	}
	if ch.Error != nil {
		return apiStreamError(ch.Error)
	}
	if ch.ID != "" {
		a.c.ID = ch.ID
	}
	if ch.Model != "" {
		a.c.Model = ch.Model
	}
	if ch.Usage != nil {
		a.c.Usage = *ch.Usage
	}
	for _, choice := range ch.Choices {
		if choice.Index != 0 {
			continue // one reply is asked for; other choices are ignored
		}
		d := &choice.Delta
		if choice.Message != nil {
			d = choice.Message
		}
		a.addDelta(d)
		if choice.FinishReason != nil && *choice.FinishReason != "" {
			a.c.FinishReason = *choice.FinishReason
		}
	}
	return nil
}

func (a *assembler) addDelta(d *delta) {
	if d.Content != nil && *d.Content != "" {
		a.text.WriteString(*d.Content)
		if a.onDelta != nil {
			a.onDelta(*d.Content)
		}
	}
	if d.Refusal != nil {
		a.refusal.WriteString(*d.Refusal)
	}
	if d.ReasoningContent != nil {
		a.reason.WriteString(*d.ReasoningContent)
	} else if d.Reasoning != nil {
		a.reason.WriteString(*d.Reasoning)
	}
	for _, tc := range d.ToolCalls {
		i := a.last
		switch {
		case tc.Index != nil:
			i = *tc.Index
		case tc.ID != "" || i < 0:
			// No index: a delta with a new id (or the first) starts a call.
			i = len(a.calls)
			for a.calls[i] != nil {
				i++
			}
		}
		call := a.calls[i]
		if call == nil {
			call = &ToolCall{}
			a.calls[i] = call
		}
		a.last = i
		if tc.ID != "" {
			call.ID = tc.ID
		}
		if tc.Type != "" {
			call.Type = tc.Type
		}
		call.Function.Name += tc.Function.Name
		call.Function.Arguments += tc.Function.Arguments
	}
}

// completion returns what was assembled.
func (a *assembler) completion() Completion {
	c := a.c
	c.Message = Message{Role: RoleAssistant, Content: a.text.String(), Refusal: a.refusal.String()}
	c.Reasoning = a.reason.String()
	idx := make([]int, 0, len(a.calls))
	for i := range a.calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		call := *a.calls[i]
		if call.Type == "" {
			call.Type = "function"
		}
		c.Message.ToolCalls = append(c.Message.ToolCalls, call)
	}
	return c
}

// readStream reads an SSE stream to its end and returns the completion. It
// fails on a stream that ends before [DONE], on [DONE] without a finish
// reason, on a malformed chunk and on an error event; what was assembled
// until then is dropped.
func readStream(body io.Reader, max int, onDelta func(string)) (Completion, error) {
	a := newAssembler(onDelta)
	sr := newSSEReader(body, max)
	for {
		event, data, err := sr.next()
		if err != nil {
			switch {
			case errors.Is(err, errTooLarge):
				return Completion{}, &streamError{msg: "stream too large", code: "too_large", permanent: true, err: err}
			case errors.Is(err, io.EOF):
				return Completion{}, &streamError{msg: "stream ended before [DONE]", code: "incomplete_stream", err: io.ErrUnexpectedEOF}
			default:
				return Completion{}, &streamError{msg: "stream broken before [DONE]", code: "incomplete_stream", err: err}
			}
		}
		if string(bytes.TrimSpace(data)) == "[DONE]" {
			break
		}
		if event == "error" {
			var e struct {
				Error *apiError `json:"error"`
			}
			if json.Unmarshal(data, &e) != nil || e.Error == nil {
				e.Error = &apiError{Message: clip(string(data), 200)}
			}
			return Completion{}, apiStreamError(e.Error)
		}
		if err := a.add(data); err != nil {
			return Completion{}, err
		}
	}
	if a.c.FinishReason == "" {
		return Completion{}, &streamError{msg: "stream ended with [DONE] but no finish_reason", code: "incomplete_stream"}
	}
	return a.completion(), nil
}

// readJSON reads a whole (not streamed) completion, for servers that answer
// a streaming request with one JSON object.
func readJSON(body io.Reader, onDelta func(string)) (Completion, error) {
	data, err := io.ReadAll(body)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			return Completion{}, &streamError{msg: "response too large", code: "too_large", permanent: true, err: err}
		}
		return Completion{}, &streamError{msg: "response cut short", code: "incomplete_stream", err: err}
	}
	a := newAssembler(onDelta)
	if err := a.add(data); err != nil {
		return Completion{}, err
	}
	if a.c.FinishReason == "" {
		return Completion{}, &streamError{msg: "response has no finish_reason", code: "incomplete_stream"}
	}
	return a.completion(), nil
}

// apiStreamError is an error the server reported inside a 200 response.
// An invalid request stays invalid; anything else (an overloaded or failed
// server) may pass.
func apiStreamError(e *apiError) error {
	code := e.code()
	permanent := e.Type == "invalid_request_error" || code == "invalid_request_error"
	msg := e.Message
	if msg == "" {
		msg = "error event without a message"
	}
	return &streamError{msg: "provider error in stream: " + clip(msg, 500), code: code, permanent: permanent}
}

// clip shortens s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
