// Package yella is a durable execution runtime for event-triggered
// automations and agents, embedded in one Go process.
//
// A Process binds a handler to an event. Emitting the event admits one run
// per listening process into the store (SQLite by default, see
// store/sqlitestore), atomically and with an optional idempotency key. The
// engine executes runs with bounded fleet concurrency and per-process caps,
// retries thrown errors with backoff, moves exhausted runs to the dead
// letters, and links follow-up events into chains that share a correlation
// id. Every run, retry and durable effect is stored as it happens, so an
// engine killed mid-work restarts and picks up where it left off:
//
//   - Runs abandoned by a dead engine are reclaimed when the next one starts
//     (at once on SQLite, which knows the previous owner is gone) and by a
//     periodic lease sweep.
//   - Every claim bumps a lease epoch; writes of an attempt that lost its
//     run are fenced.
//   - An Effect that completed returns its stored result and never runs
//     twice; one whose outcome is unknown after a crash stops the run in the
//     fenced status for an operator to resolve, unless it is Idempotent.
//
// A minimal program:
//
//	st := memstore.New() // or sqlitestore.Open(…)
//	eng, _ := yella.New(yella.Config{Store: st})
//	eng.Register(yella.Process{Name: "greet", On: "user:joined",
//		Run: func(c *yella.Ctx) yella.Result {
//			var u struct{ Name string }
//			if err := c.Decode(&u); err != nil {
//				return c.Fail(err)
//			}
//			msg, err := yella.Effect(c, "send", func(ctx context.Context) (string, error) {
//				return "hello " + u.Name, nil
//			})
//			if err != nil {
//				return c.Error(err)
//			}
//			return c.OK(msg)
//		}})
//	eng.Start(ctx)
//	eng.Emit(ctx, "user:joined", map[string]string{"Name": "Ada"})
//	eng.Drain(ctx)
//	eng.Stop(ctx)
//
// Lifecycle events (Subscribe), counters (Metrics) and bucketed rollups
// with accurate percentiles (Observability) make every state change
// visible; none is silent.
package yella
