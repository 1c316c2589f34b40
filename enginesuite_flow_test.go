package yella_test

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
)

// starts records when each run of a case started, on the engines' clock.
type starts struct {
	mu  sync.Mutex
	ids []string
	at  []time.Time
	key map[string]int // running runs per key
	max map[string]int // most running at once per key
}

func (s *starts) add(h *H, c *yella.Ctx) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, c.RunID())
	s.at = append(s.at, h.Now())
}

func (s *starts) n() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

func (s *starts) order() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

// enter and leave count the running runs of key.
func (s *starts) enter(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key == nil {
		s.key, s.max = map[string]int{}, map[string]int{}
	}
	s.key[key]++
	s.max[key] = max(s.max[key], s.key[key])
}

func (s *starts) leave(key string) {
	s.mu.Lock()
	s.key[key]--
	s.mu.Unlock()
}

// settle waits for n starts, then a moment more, so that a start the
// limit should have held back has the time to show.
func (s *starts) settle(h *H, what string, n int) {
	h.Helper()
	h.WaitFor(fmt.Sprintf("%s: %d starts", what, n), func() bool { return s.n() >= n })
	time.Sleep(30 * time.Millisecond)
	Expect(h, what, s.n(), n)
}

func tenant(t string) map[string]string { return map[string]string{"tenant": t} }

// flowCases: priorities, rate limits and per-key concurrency.
func flowCases() []Case {
	return []Case{
		Case{Name: "Flow/RateLimitExactPerPeriod", Note: "new: a rate limit of 5 per second (burst 1) starts exactly one run per 200 ms per key, on a fake clock; runs over it wait, none is dropped or failed", Fn: func(h *H) {
			clk := h.Fake()
			var s starts
			e := h.Started(yella.Config{Concurrency: 20}, yella.Process{Name: "call", On: "ev",
				RateLimit: &yella.RateLimit{Limit: 5, Per: time.Second, Key: yella.KeyFromPayload("tenant")},
				Run:       func(c *yella.Ctx) yella.Result { s.add(h, c); return c.OK(nil) }})
			var ids []string
			for range 12 {
				ids = append(ids, h.One(e, "ev", tenant("a")))
			}
			other := h.One(e, "ev", tenant("b"))
			s.settle(h, "at once: one of a, one of b", 2)
			for i := 1; i <= 11; i++ {
				clk.Advance(199 * time.Millisecond)
				s.settle(h, "just before the interval", 1+i)
				clk.Advance(time.Millisecond)
				s.settle(h, "at the interval", 2+i)
			}
			h.Drain(e)
			for _, id := range append(ids, other) {
				r := h.Run(id)
				Expect(h, "completed", r.Status, store.StatusCompleted)
				Expect(h, "one attempt", r.Attempts, 1)
			}
			Expect(h, "dropped", len(h.Events(yella.RunDropped)), 0)
			run, err := e.Run(h.Ctx(), ids[0])
			Expect(h, "read", err, nil)
			Expect(h, "limit name", run.RateLimit, "call")
			Expect(h, "key", run.RateKey, "a")
		}},
		Case{Name: "Flow/RateLimitBurst", Note: "new: a burst of 3 starts three runs of a key at once, then one per interval; an idle key gets its burst back", Fn: func(h *H) {
			clk := h.Fake()
			var s starts
			e := h.Started(yella.Config{Concurrency: 20}, yella.Process{Name: "call", On: "ev",
				RateLimit: &yella.RateLimit{Limit: 1, Per: time.Minute, Burst: 3},
				Run:       func(c *yella.Ctx) yella.Result { s.add(h, c); return c.OK(nil) }})
			for range 5 {
				h.One(e, "ev", nil)
			}
			s.settle(h, "burst", 3)
			if lim := e.Limits(5); lim.Local {
				page, err := e.Runs(h.Ctx(), yella.RunQuery{Status: []yella.Status{yella.StatusIdle}, Limit: 10})
				runs := page.Runs
				Expect(h, "idle runs", err, nil)
				Expect(h, "two held back", len(runs), 2)
				r, err := e.Run(h.Ctx(), runs[0].ID)
				Expect(h, "read", err, nil)
				Expect(h, "why", r.Waiting, "rate limit")
				Expect(h, "until", r.WaitingUntil.Equal(clk.Now().Add(time.Minute)), true)
				Expect(h, "waiting on the rate", fmt.Sprint(lim.Rate[0].Waiting), fmt.Sprint([]yella.KeyWait{{Key: "", Waiting: 2, Next: clk.Now().Add(time.Minute)}}))
				m, _ := e.Metrics(h.Ctx())
				Expect(h, "rate-limited runs", m.Dispatcher.RateLimited, 2)
			}
			clk.Advance(time.Minute)
			s.settle(h, "one more after a minute", 4)
			clk.Advance(time.Minute)
			s.settle(h, "and another", 5)
			clk.Advance(10 * time.Minute)
			for range 4 {
				h.One(e, "ev", nil)
			}
			s.settle(h, "burst again after idling", 8)
		}},
		Case{Name: "Flow/RateLimitSharedByName", Note: "new: processes naming the same rate limit count against the same keys", Fn: func(h *H) {
			clk := h.Fake()
			var s starts
			rl := func() *yella.RateLimit { return &yella.RateLimit{Name: "openai", Limit: 1, Per: time.Second} }
			run := func(c *yella.Ctx) yella.Result { s.add(h, c); return c.OK(nil) }
			e := h.Started(yella.Config{Concurrency: 20},
				yella.Process{Name: "summarize", On: "a", RateLimit: rl(), Run: run},
				yella.Process{Name: "classify", On: "b", RateLimit: rl(), Run: run})
			h.One(e, "a", nil)
			h.One(e, "b", nil)
			s.settle(h, "one start for both", 1)
			clk.Advance(time.Second)
			s.settle(h, "the other a second later", 2)
			err := e.Register(yella.Process{Name: "other", On: "c", RateLimit: &yella.RateLimit{Name: "openai", Limit: 2, Per: time.Second}, Run: run})
			ExpectCode(h, "a shared limit declared twice differently", err, yella.CodeInvalidConfig)
		}},
		Case{Name: "Flow/RateLimitAcrossRestart", Durable: true, Note: "new: a restarted engine resumes each key's rate state from the store: the burst used before the restart is not granted again", Fn: func(h *H) {
			clk := h.Fake()
			var s starts
			proc := yella.Process{Name: "call", On: "ev", RateLimit: &yella.RateLimit{Limit: 1, Per: time.Minute, Burst: 2},
				Run: func(c *yella.Ctx) yella.Result { s.add(h, c); return c.OK(nil) }}
			e := h.Started(yella.Config{}, proc)
			h.One(e, "ev", nil)
			h.One(e, "ev", nil)
			s.settle(h, "burst", 2)
			h.Drain(e)
			h.Reopen()
			e = h.Started(yella.Config{}, proc)
			h.One(e, "ev", nil)
			s.settle(h, "held after the restart", 2)
			clk.Advance(time.Minute)
			s.settle(h, "a minute later", 3)
		}},
		Case{Name: "Flow/RateHoldBacksOffKey", Note: "new: a run told to slow down (a 429) holds its rate key: no run of that key starts before the time given, on any node, then one per interval; other keys are not held", Fn: func(h *H) {
			clk := h.Fake()
			var s starts
			t0 := clk.Now()
			e := h.Started(yella.Config{Concurrency: 10}, yella.Process{Name: "call", On: "ev",
				RateLimit: &yella.RateLimit{Name: "api", Limit: 100, Per: time.Second, Burst: 10, Key: yella.KeyFromPayload("tenant")},
				Run: func(c *yella.Ctx) yella.Result {
					s.add(h, c)
					var in map[string]string
					_ = c.Decode(&in)
					if in["hold"] != "" {
						c.RateLimiter().HoldUntil("", t0.Add(time.Minute))      // as a connector does on a 429
						if err := c.HoldRate(t0.Add(time.Second)); err != nil { // a shorter hold shortens nothing
							h.Errorf("hold: %v", err)
						}
					}
					return c.OK(nil)
				}})
			first := h.One(e, "ev", map[string]string{"tenant": "a", "hold": "yes"})
			h.WaitStatus(first, store.StatusCompleted)
			h.One(e, "ev", tenant("a"))
			h.One(e, "ev", tenant("a"))
			h.One(e, "ev", tenant("b"))
			s.settle(h, "the other key at once", 2)
			clk.Advance(time.Minute - time.Millisecond)
			s.settle(h, "the held key not before the hold ends", 2)
			clk.Advance(time.Millisecond)
			s.settle(h, "one start of the held key at the end of the hold", 3)
			clk.Advance(10 * time.Millisecond)
			s.settle(h, "then one per interval: the burst refills as usual", 4)
		}},
		Case{Name: "Flow/KeyConcurrencyFair", Note: "new: at most Max running runs per key; a key with 10,000 queued runs does not delay another key's run", Fn: func(h *H) {
			var s starts
			release := make(chan struct{})
			e := h.Started(yella.Config{Concurrency: 10}, yella.Process{Name: "crawl", On: "ev",
				KeyConcurrency: &yella.KeyConcurrency{Max: 2, Key: yella.KeyFromPayload("tenant")},
				Run: func(c *yella.Ctx) yella.Result {
					var in map[string]string
					_ = c.Decode(&in)
					s.enter(in["tenant"])
					defer s.leave(in["tenant"])
					s.add(h, c)
					<-release
					return c.OK(nil)
				}})
			batch := make([]yella.BatchEvent, 10_000)
			for i := range batch {
				batch[i] = yella.BatchEvent{Event: "ev", Payload: tenant("busy")}
			}
			if _, err := e.EmitBatch(h.Ctx(), batch); err != nil {
				h.Fatal(err)
			}
			b := h.One(e, "ev", tenant("quiet"))
			s.settle(h, "two of busy and quiet's one", 3)
			h.WaitStatus(b, store.StatusRunning)
			s.mu.Lock()
			Expect(h, "busy running at most", s.max["busy"], 2)
			s.mu.Unlock()
			lim := e.Limits(5)
			Expect(h, "limits", len(lim.Key), 1)
			Expect(h, "limit", lim.Key[0].Name+"/"+fmt.Sprint(lim.Key[0].Max), "crawl/2")
			if lim.Local {
				Expect(h, "waiting keys", fmt.Sprint(lim.Key[0].Waiting), "[{busy 9998 2 0001-01-01 00:00:00 +0000 UTC}]")
				m, err := e.Metrics(h.Ctx())
				Expect(h, "metrics", err, nil)
				Expect(h, "key-limited runs", m.Dispatcher.KeyLimited, 9998)
			}
			close(release)
			h.WaitFor("100 more", func() bool { return s.n() >= 100 })
			s.mu.Lock()
			Expect(h, "busy never above its bound", s.max["busy"], 2)
			s.mu.Unlock()
			r, err := e.Run(h.Ctx(), b)
			Expect(h, "read", err, nil)
			Expect(h, "limit", r.ConcurrencyLimit, "crawl")
			Expect(h, "key", r.ConcurrencyKey, "quiet")
		}},
		Case{Name: "Flow/PriorityOvertakesBacklog", Note: "new: a run of higher priority starts before a backlog of lower ones; a run that has waited longer than the difference in priority minutes is not overtaken", Fn: func(h *H) {
			clk := h.Fake()
			var s starts
			release := make(chan struct{})
			// No handler timeout and a long lease: the fake clock's jump
			// below must not end the blocking attempt, or the old run
			// would start before the later one exists and the order
			// would prove nothing.
			e := h.Started(yella.Config{Concurrency: 1, HandlerTimeout: -1, LeaseTimeout: time.Hour}, yella.Process{Name: "work", On: "ev",
				Run: func(c *yella.Ctx) yella.Result { s.add(h, c); <-release; return c.OK(nil) }})
			first := h.One(e, "ev", nil)
			s.settle(h, "first", 1)
			for range 100 {
				h.One(e, "ev", nil)
			}
			urgent := h.One(e, "ev", nil, yella.Priority(10))
			close(release)
			h.Drain(e)
			order := s.order()
			Expect(h, "first", order[0], first)
			pos := -1
			for i, id := range order {
				if id == urgent {
					pos = i
				}
			}
			if pos < 1 || pos > 2 { // a shared store's node may have claimed one more run ahead
				h.Fatalf("urgent run started at position %d of %d, want right after the first", pos, len(order))
			}

			// Aging: an old run of priority 0 is not overtaken by a run of
			// priority 1 emitted more than a minute later.
			release = make(chan struct{})
			block := h.One(e, "ev", nil)
			h.WaitStatus(block, store.StatusRunning)
			old := h.One(e, "ev", nil)
			clk.Advance(61 * time.Second)
			later := h.One(e, "ev", nil, yella.Priority(1))
			close(release)
			h.Drain(e)
			order = s.order()
			tail := strings.Join(order[len(order)-2:], ",")
			Expect(h, "the old run first", tail, old+","+later)
		}},
		Case{Name: "Flow/PriorityAcrossRestart", Durable: true, Note: "new: a run's priority is stored: after a restart the urgent run admitted last still starts first", Fn: func(h *H) {
			var s starts
			proc := yella.Process{Name: "work", On: "ev", Run: func(c *yella.Ctx) yella.Result { s.add(h, c); return c.OK(nil) }}
			e := h.Engine(yella.Config{Concurrency: 1}, proc)
			for range 20 {
				h.One(e, "ev", nil)
			}
			urgent := h.One(e, "ev", nil, yella.Priority(100))
			h.Reopen()
			e = h.Started(yella.Config{Concurrency: 1}, proc)
			h.Drain(e)
			Expect(h, "first after the restart", s.order()[0], urgent)
		}},
		Case{Name: "Flow/PriorityAndKeysStored", Note: "new: a run's priority (process default or emit option) and its flow keys are stored with it; long keys are stored as their SHA-256", Fn: func(h *H) {
			e := h.Engine(yella.Config{}, yella.Process{Name: "p", On: "ev", Priority: 3,
				RateLimit:      &yella.RateLimit{Name: "api", Limit: 10, Per: time.Second, Key: yella.KeyFromPayload("account.id")},
				KeyConcurrency: &yella.KeyConcurrency{Max: 1, Key: yella.KeyFromPayload("host")},
				Run:            func(c *yella.Ctx) yella.Result { return c.OK(nil) }})
			long := strings.Repeat("x", 500)
			a := h.One(e, "ev", map[string]any{"account": map[string]any{"id": 42}, "host": long})
			b := h.One(e, "ev", nil, yella.Priority(-7))
			ra, err := e.Run(h.Ctx(), a)
			Expect(h, "read", err, nil)
			Expect(h, "default priority", ra.Priority, 3)
			Expect(h, "rate key", ra.RateLimit+"/"+ra.RateKey, "api/42")
			Expect(h, "hashed key", strings.HasPrefix(ra.ConcurrencyKey, "sha256:") && len(ra.ConcurrencyKey) == 7+64, true)
			rb, _ := e.Run(h.Ctx(), b)
			Expect(h, "emit priority", rb.Priority, -7)
			Expect(h, "empty key", rb.RateLimit+"/"+rb.RateKey, "api/")
			_, err = e.Emit(h.Ctx(), "ev", nil, yella.Priority(10_001))
			ExpectCode(h, "priority out of range", err, yella.CodeInvalidConfig)
		}},
	}
}
