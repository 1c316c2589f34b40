package llm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/connector/llm"
	"github.com/yella-go/yella/store/memstore"
)

// An agent step: the model's reply is one durable effect. Once the stream
// ended, the completion (text or tool calls, usage, cost) is stored; a
// retry or a restart replays it instead of paying for it again. Here the
// API is a local stand-in that streams "Paris." in two pieces.
func Example() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range []string{
			`{"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"role":"assistant","content":"Par"}}]}`,
			`{"choices":[{"index":0,"delta":{"content":"is."},"finish_reason":"stop"}]}`,
			`{"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":2,"total_tokens":22}}`,
			`[DONE]`,
		} {
			io.WriteString(w, "data: "+e+"\n\n")
		}
	}))
	defer api.Close()

	client, err := llm.New(llm.Config{
		BaseURL: api.URL + "/v1", // "https://api.openai.com/v1", "http://127.0.0.1:11434/v1"...
		APIKey:  "sk-...",
		Prices:  map[string]llm.Price{"gpt-4o-mini": {Input: 0.15, Output: 0.60}}, // USD per million tokens
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	eng, err := yella.New(yella.Config{Store: memstore.New()}) // sqlitestore.Open(...) for durability
	if err != nil {
		log.Fatal(err)
	}
	err = eng.Register(yella.Process{
		Name: "answer", On: "question:asked",
		Retry: &yella.Retry{Max: 3, Backoff: yella.Exponential(time.Second)},
		Run: yella.Handle(func(c *yella.Ctx, q struct{ Text string }) yella.Result {
			comp, err := client.Chat(c, "reply", llm.Request{
				Model: "gpt-4o-mini",
				Messages: []llm.Message{
					{Role: llm.RoleSystem, Content: "Answer in one word."},
					{Role: llm.RoleUser, Content: q.Text},
				},
			})
			if err != nil {
				return connector.Outcome(c, err) // 429, 5xx, dropped stream: retried; 400, 401: final
			}
			return c.OK(comp.Message.Content)
		}),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer eng.Stop(ctx)
	runs, err := eng.EmitAndWait(ctx, "question:asked", map[string]string{"Text": "Capital of France?"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(runs[0].Status, string(runs[0].Output))

	// The effect's stored result is the whole Completion.
	effects, err := eng.Effects(ctx, runs[0].ID)
	if err != nil {
		log.Fatal(err)
	}
	var comp llm.Completion
	if err := json.Unmarshal(effects[0].Output, &comp); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %s: %s, %d tokens in, %d out, $%.7f\n", yella.DecodeKey(effects[0].Key)[0], effects[0].Status,
		comp.Model, comp.Usage.PromptTokens, comp.Usage.CompletionTokens, comp.CostUSD)
	// Output:
	// completed "Paris."
	// reply completed: gpt-4o-mini-2024-07-18, 20 tokens in, 2 out, $0.0000042
}
