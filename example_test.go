package yella_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sort"
	"sync/atomic"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/memstore"
)

// A process with a durable effect: the effect's result is stored, so a retry
// or a restart after a crash replays it instead of charging twice.
func Example() {
	ctx := context.Background()
	st := memstore.New() // sqlitestore.Open(...) for durability
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	err = eng.Register(yella.Process{
		Name: "charge", On: "order:placed",
		Retry: &yella.Retry{Max: 2, Backoff: yella.Exponential(0)},
		Run: yella.Handle(func(c *yella.Ctx, order struct{ ID string }) yella.Result {
			receipt, err := yella.Effect(c, yella.MakeKey("charge", order.ID), func(ctx context.Context) (string, error) {
				return "receipt-" + order.ID, nil // call the payment API here
			})
			if err != nil {
				return c.Error(err) // retried by the policy
			}
			if c.Attempt() == 1 {
				return c.Error(errors.New("network blip after charging")) // the retry replays the receipt
			}
			return c.OK(receipt)
		}),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	runs, err := eng.EmitAndWait(ctx, "order:placed", map[string]string{"ID": "42"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(runs[0].Status, string(runs[0].Output), "attempts:", runs[0].Attempts)
	eng.Stop(ctx)
	// Output: completed "receipt-42" attempts: 2
}

// A follow-up event links runs into a chain; two processes listening to it
// fan out. Every run of the chain shares the root's correlation id.
func Example_chainFanOut() {
	ctx := context.Background()
	st := memstore.New()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	err = eng.Register(yella.Process{Name: "validate", On: "webhook:received", Emits: []string{"webhook:validated"},
		Run: func(c *yella.Ctx) yella.Result {
			c.SetContext("tenant", "acme") // inherited by the follow-ups
			return c.OK(map[string]int{"items": 3}, yella.Then("webhook:validated"))
		}})
	if err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{"crm-sync", "notify"} {
		err = eng.Register(yella.Process{Name: name, On: "webhook:validated", Run: func(c *yella.Ctx) yella.Result {
			var tenant string
			c.GetContext("tenant", &tenant)
			return c.OK(c.Process() + " for " + tenant)
		}})
		if err != nil {
			log.Fatal(err)
		}
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	roots, err := eng.EmitAndWait(ctx, "webhook:received", nil)
	if err != nil {
		log.Fatal(err)
	}
	chain, err := eng.Chain(ctx, roots[0].CorrelationID)
	if err != nil {
		log.Fatal(err)
	}
	var lines []string
	for _, r := range chain {
		lines = append(lines, fmt.Sprintf("depth %d %s %s %s", r.Depth, r.Process, r.Status, r.Output))
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	eng.Stop(ctx)
	// Output:
	// depth 0 validate completed {"items":3}
	// depth 1 crm-sync completed "crm-sync for acme"
	// depth 1 notify completed "notify for acme"
}

// A deferred run completes but holds its follow-up until someone resumes it:
// an approval gate.
func Example_approvalFlow() {
	ctx := context.Background()
	eng, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		log.Fatal(err)
	}
	err = eng.Register(yella.Process{Name: "review-gate", On: "content:drafted", Run: func(c *yella.Ctx) yella.Result {
		return c.Defer("content:approved", map[string]string{"title": "Launch post"})
	}})
	if err != nil {
		log.Fatal(err)
	}
	err = eng.Register(yella.Process{Name: "publish", On: "content:approved", Run: func(c *yella.Ctx) yella.Result {
		var in struct{ Title, Reviewer string }
		c.Decode(&in)
		return c.OK(in.Title + " approved by " + in.Reviewer)
	}})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	runs, err := eng.EmitAndWait(ctx, "content:drafted", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("gate:", runs[0].Status)
	children, err := eng.Resume(ctx, runs[0].ID, map[string]string{"reviewer": "ada"}) // merged into the held payload
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	published, err := eng.Run(ctx, children[0].ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("publish:", published.Status, string(published.Output))
	eng.Stop(ctx)
	// Output:
	// gate: deferred
	// publish: completed "Launch post approved by ada"
}

// A run whose retries are exhausted goes to the dead letters; once the
// downstream is fixed, an operator requeues it with a fresh budget.
func Example_deadLetterRequeue() {
	ctx := context.Background()
	eng, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		log.Fatal(err)
	}
	var crmOnline atomic.Bool
	err = eng.Register(yella.Process{Name: "sync-to-crm", On: "contact:updated",
		Retry: &yella.Retry{Max: 1, Backoff: yella.Fixed(0)},
		Run: func(c *yella.Ctx) yella.Result {
			if !crmOnline.Load() {
				return c.Error(errors.New("CRM API timeout"))
			}
			return c.OK("synced")
		}})
	if err != nil {
		log.Fatal(err)
	}
	eng.Subscribe(func(ev yella.Event) {
		switch ev.Type {
		case yella.RunDeadLettered:
			fmt.Println("event:", ev.Type, ev.Error)
		case yella.RunRequeued:
			fmt.Println("event:", ev.Type)
		}
	})
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	runs, err := eng.EmitAndWait(ctx, "contact:updated", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(runs[0].Status, "after", runs[0].Attempts, "attempts:", runs[0].Error)
	crmOnline.Store(true)
	if _, err := eng.RequeueDead(ctx, runs[0].ID); err != nil {
		log.Fatal(err)
	}
	if err := eng.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	r, err := eng.Run(ctx, runs[0].ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Status, string(r.Output))
	eng.Stop(ctx)
	// Output:
	// event: run:dead-lettered CRM API timeout
	// dead-letter after 2 attempts: CRM API timeout
	// event: run:requeued
	// completed "synced"
}

// Flow control: each tenant may call the model at most twice a minute and
// run one call at a time, and an urgent emission goes ahead of the queue.
// The limits hold across restarts (the state is stored with the runs).
func Example_flowControl() {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	err = eng.Register(yella.Process{
		Name: "summarize", On: "doc:uploaded",
		RateLimit:      &yella.RateLimit{Name: "llm", Limit: 2, Per: time.Minute, Key: yella.KeyFromPayload("tenant")},
		KeyConcurrency: &yella.KeyConcurrency{Max: 1, Key: yella.KeyFromPayload("tenant")},
		Run:            func(c *yella.Ctx) yella.Result { return c.OK(nil) },
	})
	if err != nil {
		log.Fatal(err)
	}
	em, err := eng.Emit(ctx, "doc:uploaded", map[string]string{"tenant": "acme"}, yella.Priority(5))
	if err != nil {
		log.Fatal(err)
	}
	r, err := eng.Run(ctx, em.Runs[0])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("priority %d, rate limit %s key %s, concurrency key %s\n", r.Priority, r.RateLimit, r.RateKey, r.ConcurrencyKey)
	// Output: priority 5, rate limit llm key acme, concurrency key acme
}

// A daily report by cron: the tick at 09:00 Paris time on weekdays runs
// once, however many engines hold the schedule and however often they
// restart; a tick missed while no engine ran is run at start if it is at
// most an hour old.
func Example_dailyReport() {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		log.Fatal(err)
	}
	err = eng.Register(yella.Process{Name: "report", On: "report:due", Run: func(c *yella.Ctx) yella.Result {
		var tick struct{ Schedule, Tick string }
		if err := c.Decode(&tick); err != nil {
			return c.Fail(err)
		}
		return c.OK("report for " + tick.Tick)
	}})
	if err != nil {
		log.Fatal(err)
	}
	err = eng.AddSchedule(yella.Schedule{Name: "daily-report", Cron: "0 9 * * 1-5", Location: paris, Event: "report:due", CatchUp: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer eng.Stop(ctx)
	fmt.Println(eng.Schedules()[0].Next.After(time.Now()))
	// Output: true
}

// An approval with a reminder and a deadline: the handler waits for the
// signal "order:<id>" (Engine.Signal, the HTTP API, `yella signal`), holding
// no slot while it waits; after a day without it, it sends a reminder and
// waits one more day.
func Example_approval() {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	type decision struct{ By string }
	err = eng.Register(yella.Process{Name: "approve", On: "order:placed", Run: func(c *yella.Ctx) yella.Result {
		var order string
		if err := c.Decode(&order); err != nil {
			return c.Fail(err)
		}
		d, ok, err := yella.WaitFor[decision](c, "approval", "order:"+order, 24*time.Hour)
		if err != nil {
			return c.Error(err) // yella.ErrWaiting: the run waits
		}
		if !ok {
			if _, err := yella.Effect(c, "reminder", func(context.Context) (bool, error) { return true, nil }); err != nil {
				return c.Error(err)
			}
			if d, ok, err = yella.WaitFor[decision](c, "approval-2", "order:"+order, 24*time.Hour); err != nil {
				return c.Error(err)
			}
		}
		if !ok {
			return c.OK("expired")
		}
		return c.OK("approved by " + d.By)
	}})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer eng.Stop(ctx)
	done := make(chan []yella.Run)
	go func() {
		runs, err := eng.EmitAndWait(ctx, "order:placed", "A-1001")
		if err != nil {
			log.Fatal(err)
		}
		done <- runs
	}()
	for { // until the run waits
		if runs, _ := eng.Runs(ctx, yella.RunQuery{Status: []yella.Status{yella.StatusWaiting}, Limit: 1}); len(runs.Runs) == 1 {
			fmt.Println(runs.Runs[0].Status, "for", runs.Runs[0].Signal)
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := eng.Signal(ctx, "order:A-1001", decision{By: "ann"}); err != nil {
		log.Fatal(err)
	}
	runs := <-done
	fmt.Println(runs[0].Status, string(runs[0].Output))
	// Output:
	// waiting for order:A-1001
	// completed "approved by ann"
}

// A fan-out with a join: the crawl starts one child run per URL in its
// chain and waits for all of them, holding no slot; each child fetches
// with its own retry policy, and a failure reaches the crawl as a result
// it handles.
func Example_fanOut() {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	err = eng.Register(yella.Process{Name: "crawl", On: "crawl:requested", Run: yella.Handle(func(c *yella.Ctx, urls []string) yella.Result {
		payloads := make([]any, len(urls))
		for i, u := range urls {
			payloads[i] = u
		}
		ids, err := yella.Children(c, "fetch", "page:requested", payloads)
		if err != nil {
			return c.Error(err)
		}
		results, err := yella.Join(c, "fetch", ids, 0)
		if err != nil {
			return c.Error(err) // yella.ErrWaiting: the crawl waits for its children
		}
		fetched, failed := 0, 0
		for _, r := range results {
			if r.OK() {
				fetched++
			} else {
				failed++
			}
		}
		return c.OK(fmt.Sprintf("%d fetched, %d failed", fetched, failed))
	})})
	if err != nil {
		log.Fatal(err)
	}
	err = eng.Register(yella.Process{Name: "fetch", On: "page:requested", Retry: &yella.Retry{Max: 2, Backoff: yella.Fixed(time.Millisecond)},
		Run: yella.Handle(func(c *yella.Ctx, url string) yella.Result {
			if url == "https://example.com/missing" {
				return c.Fail(errors.New("404"))
			}
			return c.OK(len(url)) // an httpx.Do call in a real crawl
		})})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer eng.Stop(ctx)
	urls := []string{"https://example.com/a", "https://example.com/b", "https://example.com/missing"}
	runs, err := eng.EmitAndWait(ctx, "crawl:requested", urls)
	if err != nil {
		log.Fatal(err)
	}
	chain, _ := eng.Chain(ctx, runs[0].ID)
	fmt.Println(string(runs[0].Output), "in a chain of", len(chain), "runs")
	// Output: "2 fetched, 1 failed" in a chain of 4 runs
}
