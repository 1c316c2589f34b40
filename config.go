package yella

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store"
)

// Clock tells the time and schedules callbacks. The engine reads time only
// through its Clock, so tests can drive retries, leases and timeouts with a
// fake one (yellatest.Clock). Implementations must be safe for concurrent
// use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed. The
	// returned stop function cancels the call; it reports whether it did so
	// before f started, like time.Timer.Stop.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Config configures an Engine. The zero value of every field except Store
// means "the default", stated on the field.
type Config struct {
	// Store persists runs. Required. The engine does not close it: whoever
	// opened the store closes it after Stop.
	Store store.Store

	// Concurrency is the number of handlers this engine executes at once
	// (fleet concurrency). A handler's place is free as soon as it
	// returns, while its outcome is still being written, so the next run's
	// start can share that write; a process's cap (Process.Concurrency)
	// and a key's limit count the run until its outcome is written.
	// Defaults to 10.
	Concurrency int
	// MaxQueued bounds the idle runs this engine keeps in memory ready to
	// start (runs waiting for a retry time, a signal, a cap or a flow limit
	// are not counted). Runs emitted beyond it wait in the store and are
	// read back in admission order as the queue drains, so memory stays
	// bounded however large the backlog. Follow-ups of running runs, retries
	// and runs with a priority above 0 always join the queue: a chain's next
	// stage and an urgent run do not wait behind the backlog. Defaults to
	// DefaultMaxQueued. On a shared store an engine holds only the runs it
	// claimed, and this does not apply.
	MaxQueued int
	// MaxChainDepth refuses a follow-up run deeper than this (a root run has
	// depth 0). Defaults to 10.
	MaxChainDepth int
	// MaxPayloadBytes limits the JSON encoding of emitted payloads, handler
	// outputs and follow-up payloads. Defaults to 1 MiB.
	MaxPayloadBytes int
	// MaxPayloadDepth limits how deep arrays and objects may nest in the
	// same payloads (and in values given to Ctx.SetContext): payloads come
	// from outside senders, and every reader of a run decodes them.
	// Deeper ones are refused with CodeInvalidPayload, as are strings that
	// are not valid UTF-8. Defaults to DefaultMaxPayloadDepth (100).
	MaxPayloadDepth int
	// HandlerTimeout limits one attempt of a handler; a process may override
	// it. Defaults to 30s; negative disables the limit.
	HandlerTimeout time.Duration
	// LeaseTimeout is how long a claimed run stays owned without a
	// heartbeat. Defaults to 30s.
	LeaseTimeout time.Duration
	// HeartbeatInterval is how often one bulk heartbeat extends every lease
	// this engine holds. Defaults to LeaseTimeout/3; must be below
	// LeaseTimeout.
	HeartbeatInterval time.Duration
	// ReclaimInterval is how often expired leases are looked for and their
	// runs reclaimed, while the engine runs. Defaults to HeartbeatInterval.
	ReclaimInterval time.Duration

	// Retry is the policy for processes without their own. Nil means no
	// automatic retry: a thrown error fails the run (errored) unless its
	// process has a policy. Abandoned attempts are bounded by
	// AbandonRetries then.
	Retry *Retry
	// AbandonRetries bounds how often a run whose attempt was abandoned (its
	// engine crashed or was hard-stopped) is requeued when its process has no
	// retry policy; with a policy, abandoned attempts count against it.
	// Defaults to 2; negative means none.
	AbandonRetries int

	// Retention prunes completed runs (with their timeline and effects) this
	// long after they completed. Deferred, errored, dead-letter, fenced and
	// cancelled runs are kept. 0 keeps everything. A pruned run's
	// idempotency key is kept longer (KeyRetention).
	Retention time.Duration
	// KeyRetention is how long an idempotency key is kept after its
	// emission, independently of Retention: a run's key lasts as long as
	// the run, and when retention prunes the run the key stays until
	// KeyRetention has passed since the emission, so a sender retrying
	// after the run is gone (webhook providers retry for up to 3 days) is
	// still answered as a duplicate (ReasonProcessed) instead of being
	// processed twice. Defaults to DefaultKeyRetention (7 days); negative
	// keeps keys forever.
	KeyRetention time.Duration
	// SignalRetention is how long a signal sent while no run waits for its
	// key is kept for the next wait on it (Engine.Signal). Defaults to
	// DefaultSignalRetention (7 days); negative keeps none: a signal then
	// reaches only a run already waiting.
	SignalRetention time.Duration
	// RetentionInterval is how often a retention sweep runs. Defaults to
	// Retention/2, bounded to [1s, 1m].
	RetentionInterval time.Duration
	// RetentionBatch bounds the runs (and the kept keys) deleted by one
	// store call, so a sweep never holds the store for long. Defaults to 500.
	RetentionBatch int
	// ObservabilityRetention prunes observability rollups and error records
	// older than this. Defaults to 7 days; negative keeps them forever.
	ObservabilityRetention time.Duration
	// ObservabilityBucket is the base rollup bucket. Defaults to 1 minute.
	ObservabilityBucket time.Duration
	// FlushInterval is how often observability rollups are written to the
	// store. Defaults to 10s.
	FlushInterval time.Duration

	// Owner names this engine instance in leases. Defaults to a random id.
	Owner string
	// Logger receives the engine's logs. Defaults to discarding them.
	Logger *slog.Logger
	// Clock is the engine's source of time. Defaults to the wall clock.
	Clock Clock
}

// Defaults of Config fields that callers may want to state or compare.
const (
	// DefaultMaxQueued is the default of Config.MaxQueued: about 1 MB of
	// queued runs.
	DefaultMaxQueued = 4096
	// DefaultMaxPayloadDepth is the default of Config.MaxPayloadDepth.
	DefaultMaxPayloadDepth = 100
	// DefaultKeyRetention is the default of Config.KeyRetention.
	DefaultKeyRetention = 7 * 24 * time.Hour
	// DefaultSignalRetention is the default of Config.SignalRetention.
	DefaultSignalRetention = 7 * 24 * time.Hour
)

func invalid(field, format string, args ...any) error {
	return &Error{Code: CodeInvalidConfig, Op: "config", Field: field, Msg: fmt.Sprintf(format, args...)}
}

// withDefaults validates c and returns it with defaults applied. Each error
// names the offending field.
func (c Config) withDefaults() (Config, error) {
	if c.Store == nil {
		return c, invalid("Store", "is required")
	}
	pos := []struct {
		name string
		v    int
	}{{"Concurrency", c.Concurrency}, {"MaxQueued", c.MaxQueued}, {"MaxChainDepth", c.MaxChainDepth}, {"MaxPayloadBytes", c.MaxPayloadBytes}, {"MaxPayloadDepth", c.MaxPayloadDepth}, {"RetentionBatch", c.RetentionBatch}}
	for _, f := range pos {
		if f.v < 0 {
			return c, invalid(f.name, "must not be negative, got %d", f.v)
		}
	}
	durs := []struct {
		name string
		v    time.Duration
	}{{"LeaseTimeout", c.LeaseTimeout}, {"HeartbeatInterval", c.HeartbeatInterval}, {"ReclaimInterval", c.ReclaimInterval},
		{"Retention", c.Retention}, {"RetentionInterval", c.RetentionInterval}, {"ObservabilityBucket", c.ObservabilityBucket}, {"FlushInterval", c.FlushInterval}}
	for _, f := range durs {
		if f.v < 0 {
			return c, invalid(f.name, "must not be negative, got %s", f.v)
		}
	}
	if c.Concurrency == 0 {
		c.Concurrency = 10
	}
	if c.MaxQueued == 0 {
		c.MaxQueued = DefaultMaxQueued
	}
	if c.MaxChainDepth == 0 {
		c.MaxChainDepth = 10
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = 1 << 20
	}
	if c.MaxPayloadDepth == 0 {
		c.MaxPayloadDepth = DefaultMaxPayloadDepth
	}
	if c.HandlerTimeout == 0 {
		c.HandlerTimeout = 30 * time.Second
	}
	if c.LeaseTimeout == 0 {
		c.LeaseTimeout = 30 * time.Second
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = c.LeaseTimeout / 3
	}
	if c.HeartbeatInterval >= c.LeaseTimeout {
		return c, invalid("HeartbeatInterval", "(%s) must be less than LeaseTimeout (%s)", c.HeartbeatInterval, c.LeaseTimeout)
	}
	if c.HeartbeatInterval <= 0 {
		return c, invalid("HeartbeatInterval", "must be positive (LeaseTimeout %s is too short)", c.LeaseTimeout)
	}
	if c.ReclaimInterval == 0 {
		c.ReclaimInterval = c.HeartbeatInterval
	}
	if c.Retry != nil {
		if err := c.Retry.validate("Retry"); err != nil {
			return c, err
		}
	}
	if c.AbandonRetries == 0 {
		c.AbandonRetries = 2
	}
	if c.RetentionInterval == 0 {
		c.RetentionInterval = min(max(c.Retention/2, time.Second), time.Minute)
	}
	if c.RetentionBatch == 0 {
		c.RetentionBatch = 500
	}
	if c.KeyRetention == 0 {
		c.KeyRetention = DefaultKeyRetention
	}
	if c.SignalRetention == 0 {
		c.SignalRetention = DefaultSignalRetention
	}
	if c.ObservabilityRetention == 0 {
		c.ObservabilityRetention = 7 * 24 * time.Hour
	}
	if c.ObservabilityBucket == 0 {
		c.ObservabilityBucket = time.Minute
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	return c, nil
}
