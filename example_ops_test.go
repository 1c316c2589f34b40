package yella_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/memstore"
)

// crashDuringEffect stands for a process killed while an effect of its run
// was in flight: an engine on st starts the run of event, whose handler
// signals inFlight from inside the effect and never returns; the engine is
// then stopped hard, which leaves the effect recorded as started and hands
// the run back, as a crash does. It returns the run's id.
func crashDuringEffect(st *memstore.Store, p yella.Process, event string, inFlight <-chan struct{}) string {
	ctx := context.Background()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Register(p); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	em, err := eng.Emit(ctx, event, map[string]int{"order": 42})
	if err != nil {
		log.Fatal(err)
	}
	<-inFlight
	gone, cancel := context.WithCancel(ctx)
	cancel() // no grace: the attempt is abandoned where it is
	if err := eng.Stop(gone); yella.CodeOf(err) != yella.CodeGracefulStopTimeout {
		log.Fatal(err)
	}
	return em.Runs[0]
}

// An effect whose outcome is unknown (its process died while it ran) fences
// its run: the next engine does not guess, and no retry is spent. An
// operator checks with the downstream, here that the card was charged, and
// records the effect as done with its result; the run goes on from there.
func ExampleEngine_CompleteEffect() {
	ctx := context.Background()
	st := memstore.New() // the database both engines use (sqlitestore in production)
	inFlight, hang := make(chan struct{}), make(chan struct{})
	defer close(hang)
	var once sync.Once
	charge := yella.Process{Name: "charge", On: "order:placed", Run: func(c *yella.Ctx) yella.Result {
		receipt, err := yella.Effect(c, "charge-card", func(ctx context.Context) (string, error) {
			once.Do(func() { close(inFlight); <-hang }) // the first process dies here
			return "ch_new", nil
		})
		if err != nil {
			return c.Error(err)
		}
		return c.OK(receipt)
	}}
	id := crashDuringEffect(st, charge, "order:placed", inFlight)

	eng, err := yella.New(yella.Config{Store: st}) // the process started again
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Register(charge); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer eng.Stop(ctx)
	if err := eng.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	run, err := eng.Run(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	effs, err := eng.Effects(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(run.Status, run.ErrorCode, "effect", yella.DecodeKey(effs[0].Key)[0], effs[0].Status)

	// The payment provider shows charge ch_1 for order 42: record it.
	if _, err := eng.CompleteEffect(ctx, id, effs[0].Key, "ch_1"); err != nil {
		log.Fatal(err)
	}
	if err := eng.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	if run, err = eng.Run(ctx, id); err != nil {
		log.Fatal(err)
	}
	fmt.Println(run.Status, string(run.Output))
	// Output:
	// fenced EFFECT_FENCED effect charge-card started
	// completed "ch_1"
}

// An effect declared Idempotent is run again when its outcome is unknown,
// with the same idempotency key as the first time: a downstream that
// deduplicates by key (a payment API) does the work once.
func ExampleIdempotent() {
	ctx := context.Background()
	st := memstore.New()
	inFlight, hang := make(chan struct{}), make(chan struct{})
	defer close(hang)
	var (
		mu   sync.Mutex
		keys []string // the keys the downstream was called with
	)
	charge := yella.Process{Name: "charge", On: "order:placed", Run: func(c *yella.Ctx) yella.Result {
		receipt, err := yella.Effect(c, "charge-card", func(ctx context.Context) (string, error) {
			mu.Lock()
			keys = append(keys, yella.EffectIdempotencyKey(ctx)) // sent as the API's Idempotency-Key
			first := len(keys) == 1
			mu.Unlock()
			if first {
				close(inFlight)
				<-hang // the first process dies here
			}
			return "ch_1", nil
		}, yella.Idempotent())
		if err != nil {
			return c.Error(err)
		}
		return c.OK(receipt)
	}}
	id := crashDuringEffect(st, charge, "order:placed", inFlight)

	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Register(charge); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer eng.Stop(ctx)
	if err := eng.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	run, err := eng.Run(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Println(run.Status, string(run.Output), "after", run.Attempts, "attempts")
	fmt.Println("calls:", len(keys), "same key:", keys[0] == keys[1])
	// Output:
	// completed "ch_1" after 2 attempts
	// calls: 2 same key: true
}

// A process capped at Concurrency runs at once queues a bounded number of
// events beyond its cap (Queue); past that, an event is dropped for it,
// which Emit reports and the engine publishes: never silently.
func ExampleQueue() {
	ctx := context.Background()
	eng, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		log.Fatal(err)
	}
	err = eng.Register(yella.Process{Name: "render", On: "report:asked",
		Concurrency: 1, Overflow: yella.Queue(1), // one at a time, one waiting
		Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
	if err != nil {
		log.Fatal(err)
	}
	eng.Subscribe(func(ev yella.Event) {
		if ev.Type == yella.RunDropped {
			fmt.Println("event:", ev.Type, ev.Process)
		}
	})
	// Before Start nothing runs, so the three emissions meet a full cap.
	for i := 1; i <= 3; i++ {
		em, err := eng.Emit(ctx, "report:asked", map[string]int{"report": i})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("report %d: admitted %d, dropped %v, err %v\n", i, len(em.Runs), em.Dropped, em.Err())
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer eng.Stop(ctx)
	if err := eng.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	m, err := eng.Metrics(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("completed:", m.Queue[yella.StatusCompleted], "dropped:", m.Processes["render"].Dropped)
	// Output:
	// report 1: admitted 1, dropped [], err <nil>
	// report 2: admitted 1, dropped [], err <nil>
	// event: run:dropped render
	// report 3: admitted 0, dropped [render], err emit: event dropped for render: at the concurrency cap
	// completed: 2 dropped: 1
}

// Drop admits nothing beyond the cap: while a run of the process is active,
// the next event is dropped for it. Emission.Err makes the drop an error
// when every listener matters.
func ExampleDrop() {
	ctx := context.Background()
	eng, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		log.Fatal(err)
	}
	err = eng.Register(yella.Process{Name: "sync-inventory", On: "inventory:changed",
		Concurrency: 1, Overflow: yella.Drop, // a newer sync supersedes a waiting one
		Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
	if err != nil {
		log.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		em, err := eng.Emit(ctx, "inventory:changed", nil)
		if err != nil {
			log.Fatal(err)
		}
		if err := em.Err(); errors.Is(err, yella.ErrDropped) {
			fmt.Println("change", i, "dropped for", em.Dropped)
			continue
		}
		fmt.Println("change", i, "admitted")
	}
	// Output:
	// change 1 admitted
	// change 2 dropped for [sync-inventory]
}

// Subscribe receives every lifecycle event, synchronously, in the goroutine
// that caused it: hand events to a channel and handle them elsewhere.
func ExampleEngine_Subscribe() {
	ctx := context.Background()
	eng, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		log.Fatal(err)
	}
	err = eng.Register(yella.Process{Name: "welcome", On: "user:joined", Run: func(c *yella.Ctx) yella.Result {
		if _, err := yella.Effect(c, "send-mail", func(context.Context) (bool, error) { return true, nil }); err != nil {
			return c.Error(err)
		}
		return c.OK(nil)
	}})
	if err != nil {
		log.Fatal(err)
	}
	events := make(chan yella.Event, 16) // buffered: the subscriber must not block
	unsubscribe := eng.Subscribe(func(ev yella.Event) { events <- ev })
	defer unsubscribe()
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer eng.Stop(ctx)
	if _, err := eng.Emit(ctx, "user:joined", map[string]string{"name": "Ada"}); err != nil {
		log.Fatal(err)
	}
	for range 4 {
		ev := <-events
		fmt.Println(ev.Type, ev.Process, ev.Status, yella.DecodeKey(ev.EffectKey))
	}
	// Output:
	// run:admitted welcome idle []
	// run:started welcome running []
	// effect:completed welcome running [send-mail]
	// run:completed welcome completed []
}

// Runs lists runs a page at a time; RunPage.Next is the cursor of the
// next page, "" on the last one. Pages stay stable while new runs arrive.
func ExampleEngine_Runs() {
	ctx := context.Background()
	eng, err := yella.New(yella.Config{Store: memstore.New()})
	if err != nil {
		log.Fatal(err)
	}
	err = eng.Register(yella.Process{Name: "index", On: "doc:saved", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
	if err != nil {
		log.Fatal(err)
	}
	for _, doc := range []string{"a", "b", "c", "d", "e"} {
		if _, err := eng.Emit(ctx, "doc:saved", doc); err != nil {
			log.Fatal(err)
		}
	}
	q := yella.RunQuery{Process: "index", Order: yella.OldestFirst, Limit: 2, WithTotal: true}
	for page := 1; ; page++ {
		p, err := eng.Runs(ctx, q)
		if err != nil {
			log.Fatal(err)
		}
		var docs []string
		for _, r := range p.Runs {
			docs = append(docs, string(r.Payload))
		}
		fmt.Println("page", page, "of", p.Total, "runs:", docs)
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	// Output:
	// page 1 of 5 runs: ["a" "b"]
	// page 2 of 5 runs: ["c" "d"]
	// page 3 of 5 runs: ["e"]
}
