package yellatest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/yellatest"
)

// A payment that fails twice and is retried with an exponential backoff of
// minutes, then waits (deferred) for an approval that comes a day later,
// run to completion without waiting: RunUntilIdle moves the fake clock to
// each retry's due time once no handler is running, and the test moves it
// a day on by hand.
func Example() {
	ctx := context.Background()
	calls := 0 // handlers of one run never overlap
	k, err := yellatest.New(yella.Config{},
		yella.Process{
			Name: "charge", On: "order:placed",
			Retry: &yella.Retry{Max: 3, Backoff: yella.ExponentialExact(time.Minute)},
			Run: func(c *yella.Ctx) yella.Result {
				receipt, err := yella.Effect(c, "charge", func(context.Context) (string, error) {
					if calls++; calls < 3 {
						return "", errors.New("payment API: 503")
					}
					return "receipt-42", nil
				})
				if err != nil {
					return c.Error(err) // retried after 1 min, then 2 min
				}
				return c.Defer("order:approved", map[string]string{"receipt": receipt})
			},
		},
		yella.Process{Name: "ship", On: "order:approved", Run: func(c *yella.Ctx) yella.Result {
			return c.OK("shipped")
		}},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer k.Close()
	start := k.Clock.Now()

	em, _ := k.Engine.Emit(ctx, "order:placed", map[string]string{"order": "42"})
	if err := k.RunUntilIdle(ctx); err != nil {
		fmt.Println(err)
		return
	}
	charge, _ := k.Engine.Run(ctx, em.Runs[0])
	fmt.Println(charge.Process, charge.Status, "after", charge.Attempts, "attempts and", k.Clock.Now().Sub(start), "of fake time")

	k.Clock.Advance(24 * time.Hour) // the approval comes a day later
	next, err := k.Engine.Resume(ctx, charge.ID, map[string]string{"by": "ops"})
	if err != nil {
		fmt.Println(err)
		return
	}
	k.RunUntilIdle(ctx)
	ship, _ := k.Engine.Run(ctx, next[0].ID)
	fmt.Println(ship.Process, ship.Status, string(ship.Output), string(ship.Payload))
	fmt.Println("fake time in all:", k.Clock.Now().Sub(start))
	// Output:
	// charge deferred after 3 attempts and 3m0s of fake time
	// ship completed "shipped" {"by":"ops","receipt":"receipt-42"}
	// fake time in all: 24h3m0s
}
