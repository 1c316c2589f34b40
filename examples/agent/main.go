// Agent: a tool-using LLM agent whose every model reply and tool result is
// a durable effect on a local SQLite file.
//
//	go run ./examples/agent                     # a built-in local model, no key needed
//	OPENAI_API_KEY=sk-... go run ./examples/agent -base-url https://api.openai.com/v1 -model gpt-4o-mini
//	go run ./examples/agent -base-url http://127.0.0.1:11434/v1 -model llama3.1   # Ollama
//
// The agent asks the model, runs the tools it calls (add, now), gives it
// their results, and repeats until the model answers. Each model reply is
// one effect (turn-0, turn-1...) and each tool call another, so you can
// kill the program (kill -9) while a reply streams and run it again: the
// turns that completed are replayed from the database, not paid for again;
// the turn that was cut off is asked again, with the same Idempotency-Key.
//
// Flags: -db PATH (default agent.db in the user's cache directory, yella/
// in it), -reset, -question, -base-url, -model, -api-key-env (the variable
// holding the key, default OPENAI_API_KEY), -price-in and -price-out (USD
// per million tokens), -delay (the built-in model's pause between words).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/connector/llm"
	"github.com/yella-go/yella/store/sqlitestore"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// maxTurns bounds the model replies of one task.
const maxTurns = 6

type task struct {
	Question string `json:"question"`
}

// answer is the run's output.
type answer struct {
	Text    string  `json:"text"`
	Turns   int     `json:"turns"`
	Tokens  int     `json:"tokens"`
	CostUSD float64 `json:"cost_usd"`
}

func run(args []string, out io.Writer) error {
	out = &syncWriter{w: out}
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	dbPath := fs.String("db", defaultDB(), "SQLite database file")
	reset := fs.Bool("reset", false, "delete the database first")
	question := fs.String("question", "What is 1234 + 4321, and what time is it?", "the task for the agent")
	baseURL := fs.String("base-url", "", "OpenAI-compatible API base URL (default: a built-in local model)")
	model := fs.String("model", "", "model name (default gpt-4o-mini, or local-demo for the built-in model)")
	keyEnv := fs.String("api-key-env", "OPENAI_API_KEY", "environment variable holding the API key")
	priceIn := fs.Float64("price-in", 0.15, "USD per million prompt tokens")
	priceOut := fs.Float64("price-out", 0.60, "USD per million completion tokens")
	delay := fs.Duration("delay", 150*time.Millisecond, "the built-in model's pause between words")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*dbPath), 0o755); err != nil {
		return err
	}
	fmt.Fprintf(out, "database: %s (-db PATH to choose another)\n", *dbPath)
	if *reset {
		for _, suffix := range []string{"", "-wal", "-shm", ".lock"} {
			os.Remove(*dbPath + suffix)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *baseURL == "" {
		local, err := startLocalModel(*delay)
		if err != nil {
			return err
		}
		defer local.Close()
		*baseURL = local.URL
		if *model == "" {
			*model = "local-demo"
		}
		fmt.Fprintf(out, "model: the built-in local-demo at %s (-base-url URL for a real one)\n", *baseURL)
	}
	if *model == "" {
		*model = "gpt-4o-mini"
	}
	client, err := llm.New(llm.Config{
		BaseURL: *baseURL,
		APIKey:  os.Getenv(*keyEnv),
		Prices:  map[string]llm.Price{*model: {Input: *priceIn, Output: *priceOut}},
	})
	if err != nil {
		return fmt.Errorf("-base-url %q is not an http or https URL", *baseURL)
	}

	st, err := sqlitestore.Open(*dbPath, sqlitestore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		return err
	}
	if err := eng.Register(agent(client, *model, out)); err != nil {
		return err
	}
	eng.Subscribe(func(ev yella.Event) {
		switch ev.Type {
		case yella.EffectReplayed:
			fmt.Fprintf(out, "[%s replayed from the database]\n", yella.DecodeKey(ev.EffectKey)[0])
		case yella.RunRetryScheduled, yella.RunFailed:
			fmt.Fprintf(out, "[%s: %s]\n", ev.Type, ev.Error)
		}
	})
	if err := eng.Start(ctx); err != nil {
		return err
	}
	defer eng.Stop(context.Background())
	// The idempotency key makes a rerun continue the same task.
	em, err := eng.Emit(ctx, "task:assigned", task{Question: *question}, yella.IdempotencyKey(*question))
	if err != nil {
		return err
	}
	if len(em.Runs) == 0 {
		fmt.Fprintln(out, "this task was started by an earlier run; continuing it")
	}
	fmt.Fprintln(out, "task:", *question)
	runs, err := eng.EmitAndWait(ctx, "task:assigned", task{Question: *question}, yella.IdempotencyKey(*question))
	if err != nil {
		return err
	}
	r := runs[0]
	if r.Status != yella.StatusCompleted {
		return fmt.Errorf("run %s ended %s: %s", r.ID, r.Status, r.Error)
	}
	var a answer
	if err := json.Unmarshal(r.Output, &a); err != nil {
		return err
	}
	fmt.Fprintf(out, "answer: %s\n(%d turns, %d tokens, $%.6f)\n", a.Text, a.Turns, a.Tokens, a.CostUSD)
	return nil
}

// agent is the process: model replies and tool calls, each an effect.
func agent(client *llm.Client, model string, out io.Writer) yella.Process {
	return yella.Process{
		Name: "agent", On: "task:assigned",
		Retry: &yella.Retry{Max: 3, Backoff: yella.Exponential(time.Second)},
		Run: yella.Handle(func(c *yella.Ctx, t task) yella.Result {
			msgs := []llm.Message{
				{Role: llm.RoleSystem, Content: "You are a careful assistant. Use the tools for arithmetic and the time."},
				{Role: llm.RoleUser, Content: t.Question},
			}
			var a answer
			for turn := range maxTurns {
				comp, err := client.Chat(c, fmt.Sprintf("turn-%d", turn), llm.Request{
					Model: model, Messages: msgs, Tools: tools,
					OnDelta: func(s string) { fmt.Fprint(out, s) }, // live text, not durable
				})
				if err != nil {
					return connector.Outcome(c, err) // 429, 5xx, a dropped stream: retried
				}
				a.Turns, a.Tokens, a.CostUSD = turn+1, a.Tokens+comp.Usage.TotalTokens, a.CostUSD+comp.CostUSD
				msgs = append(msgs, comp.Message)
				if len(comp.Message.ToolCalls) == 0 {
					fmt.Fprintln(out)
					a.Text = comp.Message.Content
					return c.OK(a)
				}
				for i, call := range comp.Message.ToolCalls {
					result, err := yella.Effect(c, fmt.Sprintf("tool-%d-%d", turn, i), func(context.Context) (string, error) {
						return callTool(call.Function)
					})
					if err != nil {
						return c.Error(err)
					}
					fmt.Fprintf(out, "[tool %s(%s) = %s]\n", call.Function.Name, call.Function.Arguments, result)
					msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Content: result})
				}
			}
			return c.Fail(fmt.Errorf("no answer after %d turns", maxTurns))
		}),
	}
}

var tools = []llm.Tool{
	{Function: llm.Function{Name: "add", Description: "Adds two numbers.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`)}},
	{Function: llm.Function{Name: "now", Description: "Returns the current time (UTC, RFC 3339).",
		Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}},
}

// callTool runs a tool. A tool the model made up or arguments it garbled
// are reported back to the model as the tool's result.
func callTool(f llm.FunctionCall) (string, error) {
	switch f.Name {
	case "add":
		var args struct{ A, B float64 }
		if err := json.Unmarshal([]byte(f.Arguments), &args); err != nil {
			return "error: arguments are not {\"a\": number, \"b\": number}", nil
		}
		return fmt.Sprint(args.A + args.B), nil
	case "now":
		return time.Now().UTC().Format(time.RFC3339), nil
	}
	if f.Name == "" {
		return "", errors.New("a tool call without a name")
	}
	return "error: there is no tool " + strings.TrimSpace(f.Name), nil
}

func defaultDB() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "yella", "agent.db")
}

// syncWriter serialises writes from the engine's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write writes p under the lock.
func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
