package llm

import (
	"encoding/json"
)

// Roles of a Message.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer" // OpenAI's newer name for system instructions
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Request is one chat completion request. Model and Messages are required;
// every other field is optional and left out of the request body when it
// has its zero value, so the provider's default applies.
type Request struct {
	// Model names the model, as the provider spells it ("gpt-4o-mini",
	// "llama3.1:8b"...). It is also the model label of the metrics.
	Model string
	// Messages is the conversation so far.
	Messages []Message
	// Tools are the functions the model may call.
	Tools []Tool
	// ToolChoice is sent as it is: "auto", "none", "required" (each a JSON
	// string, with its quotes) or an object naming one function.
	ToolChoice json.RawMessage
	// Temperature, TopP, MaxTokens, MaxCompletionTokens, Seed, Stop,
	// ResponseFormat and User are the OpenAI fields of the same names
	// (temperature, top_p, max_tokens, max_completion_tokens, seed, stop,
	// response_format, user).
	Temperature         *float64
	TopP                *float64
	MaxTokens           int
	MaxCompletionTokens int
	Seed                *int64
	Stop                []string
	ResponseFormat      json.RawMessage
	User                string
	// Extra holds more top-level fields of the request body, for a
	// provider's own options (for instance "top_k" or "reasoning_effort").
	// A key that the client sets itself (model, messages, stream,
	// stream_options, or a field above that is set) is refused.
	Extra map[string]any
	// OnDelta, if set, is called with each piece of the reply's text as it
	// arrives, on the goroutine that called Chat or Complete. It is for
	// showing progress only: it is not durable. When Chat's effect is re-run
	// after a crash, OnDelta sees the whole text again from the start; when
	// the effect already completed, it replays the stored Completion and
	// OnDelta is not called at all.
	OnDelta func(text string)
}

// Message is one message of a conversation: the Request's messages and the
// Completion's reply.
type Message struct {
	// Role is RoleSystem, RoleDeveloper, RoleUser, RoleAssistant or
	// RoleTool.
	Role string `json:"role"`
	// Content is the text of the message. An assistant message that only
	// calls tools has none (sent as null).
	Content string `json:"content"`
	// ContentParts, if set, is sent as the message's content instead of
	// Content: a JSON array of content parts (text, images...), as the
	// provider accepts them.
	ContentParts json.RawMessage `json:"-"`
	// Name optionally names the author of the message.
	Name string `json:"name,omitempty"`
	// ToolCalls are the tools an assistant message calls.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is, in a RoleTool message, the id of the call (ToolCall.ID)
	// whose result Content is.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Refusal is an assistant's refusal message, when the provider gives
	// one apart from the content.
	Refusal string `json:"refusal,omitempty"`
}

// MarshalJSON writes the message in the chat completions wire format:
// ContentParts, when set, as the content; an assistant message with tool
// calls and no text with a null content.
func (m Message) MarshalJSON() ([]byte, error) {
	w := struct {
		Role       string     `json:"role"`
		Content    any        `json:"content"`
		Name       string     `json:"name,omitempty"`
		ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
		ToolCallID string     `json:"tool_call_id,omitempty"`
		Refusal    string     `json:"refusal,omitempty"`
	}{m.Role, m.Content, m.Name, m.ToolCalls, m.ToolCallID, m.Refusal}
	switch {
	case len(m.ContentParts) > 0:
		w.Content = m.ContentParts
	case m.Content == "" && len(m.ToolCalls) > 0:
		w.Content = nil
	}
	return json.Marshal(w)
}

// ToolCall is a call of a tool by the model.
type ToolCall struct {
	// ID identifies the call; the tool's result message names it
	// (Message.ToolCallID).
	ID string `json:"id"`
	// Type is "function".
	Type string `json:"type"`
	// Function is the function called and its arguments.
	Function FunctionCall `json:"function"`
}

// FunctionCall names a function and the arguments the model gave it.
type FunctionCall struct {
	// Name is the function's name.
	Name string `json:"name"`
	// Arguments is the arguments as the model wrote them: normally a JSON
	// object, but the model may produce invalid JSON, so check it.
	Arguments string `json:"arguments"`
}

// Tool is a tool the model may call.
type Tool struct {
	// Type is "function"; empty means "function".
	Type string `json:"type"`
	// Function describes the function.
	Function Function `json:"function"`
}

// Function describes a function the model may call.
type Function struct {
	// Name is the function's name.
	Name string `json:"name"`
	// Description tells the model what the function does.
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the arguments, sent as it is.
	Parameters json.RawMessage `json:"parameters,omitempty"`
	// Strict asks the provider to hold the arguments to the schema.
	Strict *bool `json:"strict,omitempty"`
}

// Completion is the model's whole reply, assembled from the streamed
// chunks. It is Chat's effect result, stored and replayed as JSON.
type Completion struct {
	// ID is the provider's id of the completion.
	ID string `json:"id,omitempty"`
	// Model is the model that answered, as the provider reports it (often
	// more precise than Request.Model).
	Model string `json:"model,omitempty"`
	// Message is the assistant's reply: its text and its tool calls (each
	// call's argument fragments joined in order).
	Message Message `json:"message"`
	// Reasoning is the model's reasoning text, for servers that stream it
	// apart from the content (reasoning_content or reasoning). It is not
	// part of Message, because providers refuse it when it is sent back.
	Reasoning string `json:"reasoning,omitempty"`
	// FinishReason says why the model stopped: "stop", "length",
	// "tool_calls", "content_filter"...
	FinishReason string `json:"finish_reason"`
	// Usage is the token count the provider reported.
	Usage Usage `json:"usage"`
	// CostUSD is the price of the call in US dollars, from Config.Prices;
	// 0 when the model has no price there.
	CostUSD float64 `json:"cost_usd"`
}

// Usage counts the tokens of one call.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`     // tokens read
	CompletionTokens int `json:"completion_tokens"` // tokens written
	TotalTokens      int `json:"total_tokens"`      // their sum, as the provider reports it
}

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	Input  float64 // per million prompt tokens
	Output float64 // per million completion tokens
}

// Cost returns the price of u at p.
func (p Price) Cost(u Usage) float64 {
	return (float64(u.PromptTokens)*p.Input + float64(u.CompletionTokens)*p.Output) / 1e6
}
