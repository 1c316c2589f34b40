package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// localModel is a stand-in for an OpenAI-compatible server, so the example
// runs without a key: it calls the tools first (add with the first two
// numbers of the question, and now), then streams an answer built from
// their results, a word at a time.
type localModel struct {
	URL   string
	srv   *http.Server
	delay time.Duration
}

func startLocalModel(delay time.Duration) (*localModel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &localModel{URL: "http://" + ln.Addr().String() + "/v1", delay: delay}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", m.complete)
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go m.srv.Serve(ln)
	return m, nil
}

// Close stops the server.
func (m *localModel) Close() error { return m.srv.Close() }

var numbers = regexp.MustCompile(`-?\d+(\.\d+)?`)

func (m *localModel) complete(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err != nil || json.Unmarshal(raw, &req) != nil || len(req.Messages) == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"expected a chat completions request","type":"invalid_request_error","code":null}}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		w.(http.Flusher).Flush()
		return r.Context().Err() == nil
	}
	chunk := func(delta any, finish any) map[string]any {
		return map[string]any{"id": "local-1", "object": "chat.completion.chunk", "model": "local-demo",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	var question string
	var results []string
	for _, msg := range req.Messages {
		switch msg.Role {
		case "user":
			question = msg.Content
		case "tool":
			results = append(results, msg.Content)
		}
	}
	words := 0
	if len(results) == 0 {
		a, b := "2", "40"
		if n := numbers.FindAllString(question, 2); len(n) == 2 {
			a, b = n[0], n[1]
		}
		args := fmt.Sprintf(`{"a": %s, "b": %s}`, a, b)
		// The calls come in fragments, as real servers send them.
		steps := []any{
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"index": 0, "id": "call_add", "type": "function", "function": map[string]any{"name": "add", "arguments": ""}}}},
			map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": args[:len(args)/2]}}}},
			map[string]any{"tool_calls": []any{map[string]any{"index": 1, "id": "call_now", "type": "function", "function": map[string]any{"name": "now", "arguments": "{}"}}}},
			map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": args[len(args)/2:]}}}},
		}
		for _, s := range steps {
			if !send(chunk(s, nil)) {
				return
			}
		}
		words = 12
		if !send(chunk(map[string]any{}, "tool_calls")) {
			return
		}
	} else {
		text := "The sum is " + results[0]
		if len(results) > 1 {
			text += ", and the time is " + results[1]
		}
		text += "."
		for i, word := range strings.SplitAfter(text, " ") {
			if i > 0 {
				select {
				case <-time.After(m.delay):
				case <-r.Context().Done():
					return
				}
			}
			if !send(chunk(map[string]any{"content": word}, nil)) {
				return
			}
			words++
		}
		if !send(chunk(map[string]any{}, "stop")) {
			return
		}
	}
	prompt := len(raw) / 4
	send(map[string]any{"id": "local-1", "model": "local-demo", "choices": []any{},
		"usage": map[string]int{"prompt_tokens": prompt, "completion_tokens": words, "total_tokens": prompt + words}})
	io.WriteString(w, "data: [DONE]\n\n")
}
