package yella

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/yella-go/yella/store"
)

// Process binds a handler to one event. Several processes may listen to
// the same event (fan-out); each emission creates one run per listener, in
// registration order.
type Process struct {
	// Name identifies the process; unique per engine. Required: at most
	// 256 bytes of UTF-8 without NUL, as On and Version are.
	Name string
	// On is the event the process listens to. Required.
	On string
	// Run is the handler. Required.
	Run func(*Ctx) Result
	// Emits declares the follow-up events the handler may produce, for the
	// event graph. Optional; undeclared follow-ups still work.
	Emits []string

	// Concurrency caps this process's runs: at most Concurrency run at once,
	// and Overflow says how many more may wait. 0 means no cap.
	Concurrency int
	// Overflow says what happens to events beyond the cap. The default (the
	// zero value) is a bounded queue: up to DefaultQueueLimit (1000) runs
	// wait beyond the cap, like Queue(1000), and only events beyond that are
	// dropped. Queue(n) sets another bound; Drop admits nothing beyond the
	// cap. A dropped event is never silent: Emit reports it
	// (Emission.Dropped, Emission.Err), it is counted (Metrics), published
	// (run:dropped) and logged at warn level, at most once per process every
	// 10 seconds with the number dropped since the last line.
	Overflow Overflow
	// Retry overrides the engine's retry policy for this process.
	Retry *Retry
	// Timeout overrides Config.HandlerTimeout; negative disables it.
	Timeout time.Duration
	// Version is stamped on every run it executes (Run.Version).
	Version string
	// Validate, if set, checks every payload this process would receive
	// before it is admitted: at Emit, EmitBatch and EmitTx (the emission is
	// refused for every listener, nothing is admitted) and for follow-ups
	// (Then: the parent run fails with CodeSchemaValidationFailed; Resume:
	// the run stays deferred). The error is returned with
	// CodeSchemaValidationFailed. Decodes[T] builds one from a payload type;
	// Topic.Process sets it.
	Validate func(payload json.RawMessage) error

	// Priority orders this process's runs among due runs waiting for a
	// slot: a run of priority p starts as though it had been emitted p
	// minutes earlier (see Priority). Between -10,000 and 10,000; 0 by
	// default. The Priority emit option overrides it for one emission.
	Priority int
	// RateLimit, if set, limits how often runs of this process start, per
	// key. Runs over the limit wait; they are not dropped or failed.
	RateLimit *RateLimit
	// KeyConcurrency, if set, bounds the running runs per key: one busy
	// key does not hold back the runs of other keys.
	KeyConcurrency *KeyConcurrency
}

// Overflow is a per-process policy for events beyond its Concurrency cap.
// The zero value is the default: Queue(DefaultQueueLimit).
type Overflow struct {
	mode  overflowMode
	queue int
}

type overflowMode uint8

const (
	overflowDefault overflowMode = iota
	overflowDrop
	overflowQueue
)

// DefaultQueueLimit is how many runs may wait beyond a process's
// Concurrency cap when its Overflow is left unset.
const DefaultQueueLimit = 1000

// Drop admits nothing beyond the cap: while Concurrency runs of the process
// are active (idle or running), an event is dropped for it. Use it when a
// later event supersedes a waiting one. The drop is reported by Emit,
// counted, published (run:dropped) and logged.
var Drop = Overflow{mode: overflowDrop}

// Queue lets up to limit runs wait beyond the cap; only events beyond that
// are dropped (and reported as with Drop). Queued runs are durable like any
// other. Queue(0) is Drop.
func Queue(limit int) Overflow { return Overflow{mode: overflowQueue, queue: limit} }

// QueueLimit reports how many runs may wait beyond the cap: 0 for Drop,
// DefaultQueueLimit for the default. It applies only to a process with a
// Concurrency cap.
func (o Overflow) QueueLimit() int {
	switch o.mode {
	case overflowDrop:
		return 0
	case overflowQueue:
		return o.queue
	}
	return DefaultQueueLimit
}

// String names the policy: "drop", "queue(n)" or "default (queue(1000))".
func (o Overflow) String() string {
	switch o.mode {
	case overflowDrop:
		return "drop"
	case overflowQueue:
		return fmt.Sprintf("queue(%d)", o.queue)
	}
	return fmt.Sprintf("default (queue(%d))", DefaultQueueLimit)
}

// Retry is a retry policy for thrown errors (Ctx.Error, a returned error, a
// panic or a timeout) and for abandoned attempts. Failures returned with
// Ctx.Fail are never retried.
//
// A thrown error may lengthen the delay before its retry: when it, or an
// error it wraps, has a method RetryDelay() time.Duration returning d > 0,
// the retry waits the longer of the backoff and d (a downstream that asked
// callers to wait, with Retry-After, is not called again sooner). Max and
// the dead letters are unaffected.
type Retry struct {
	// Max is the number of retries after the first attempt. 0 means a first
	// failure is final (and the run goes to the dead letters).
	Max int
	// Backoff gives the delay before retry n (n = 1 for the first retry).
	// Defaults to Fixed(time.Second).
	Backoff Backoff
}

func (r *Retry) validate(field string) error {
	if r.Max < 0 {
		return invalid(field+".Max", "must be >= 0, got %d", r.Max)
	}
	return nil
}

func (r *Retry) delay(n int) time.Duration {
	if r.Backoff == nil {
		return time.Second
	}
	return max(r.Backoff(n), 0)
}

// Backoff returns the delay before retry n (n >= 1).
type Backoff func(n int) time.Duration

// Fixed waits d before every retry.
func Fixed(d time.Duration) Backoff { return func(int) time.Duration { return d } }

// Exponential waits about base, 2·base, 4·base … before retries 1, 2, 3
// …, capped at one hour, with equal jitter: each delay is drawn uniformly
// from the upper half of its step (between d/2 and d, for d the exact
// doubling ExponentialExact gives). Runs that failed together (a downstream
// outage) thus spread their retries instead of returning at the same
// instant, and no retry comes sooner than half its step. A base of 0 or
// less retries at once.
func Exponential(base time.Duration) Backoff {
	exact := ExponentialExact(base)
	return func(n int) time.Duration {
		d := exact(n)
		if d <= 1 {
			return d
		}
		return d - rand.N(d/2+1)
	}
}

// ExponentialExact waits exactly base, 2·base, 4·base … before retries 1,
// 2, 3 …, capped at one hour: Exponential without the jitter, for tests
// and for a single client whose retries cannot collide with others'. A
// base of 0 or less retries at once.
func ExponentialExact(base time.Duration) Backoff {
	return func(n int) time.Duration {
		if base <= 0 {
			return 0
		}
		d := base
		for i := 1; i < n && d < time.Hour; i++ {
			d *= 2
		}
		return min(d, time.Hour)
	}
}

// registered is a process with its derived settings.
type registered struct {
	Process
	flow     store.Flow // its flow limits as the dispatcher and stores apply them
	rateName string     // the names of its limits ("" for none)
	concName string
}

// admitLimit is the cap on active runs at admission (0: none).
func (p *registered) admitLimit() int {
	if p.Concurrency <= 0 {
		return 0
	}
	return p.Concurrency + p.Overflow.QueueLimit()
}

// queueLimit is how many runs may wait beyond the cap (0 without a cap).
func (p *registered) queueLimit() int {
	if p.Concurrency <= 0 {
		return 0
	}
	return p.Overflow.QueueLimit()
}

// maxNameBytes bounds the names a store keeps with each run (a process's
// name, its event and version, a limit's name, a schedule's name): the
// runs' indexes hold them with a key, and an entry of a PostgreSQL index
// holds at most about 2.7 KB.
const maxNameBytes = 256

// badName says what is wrong with a name (empty if nothing): it must be
// text every store keeps (isText) and at most maxNameBytes.
func badName(s string) string {
	switch {
	case !isText(s):
		return fmt.Sprintf("must be UTF-8 without NUL, got %q", s)
	case len(s) > maxNameBytes:
		return fmt.Sprintf("must be at most %d bytes, got %d", maxNameBytes, len(s))
	}
	return ""
}

func validateProcess(p Process) error {
	bad := func(field, format string, args ...any) error {
		return &Error{Code: CodeInvalidConfig, Op: "register", Field: "Process." + field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case p.Name == "":
		return bad("Name", "is required")
	case badName(p.Name) != "":
		return bad("Name", "%s", badName(p.Name))
	case p.On == "":
		return bad("On", "is required (process %q)", p.Name)
	case badName(p.On) != "":
		return bad("On", "%s (process %q)", badName(p.On), p.Name)
	case badName(p.Version) != "":
		return bad("Version", "%s (process %q)", badName(p.Version), p.Name)
	case p.Run == nil:
		return bad("Run", "is required (process %q)", p.Name)
	case p.Concurrency < 0:
		return bad("Concurrency", "must not be negative, got %d (process %q)", p.Concurrency, p.Name)
	case p.Overflow.queue < 0:
		return bad("Overflow", "queue limit must not be negative, got %d (process %q)", p.Overflow.queue, p.Name)
	case p.Overflow.mode == overflowQueue && p.Overflow.queue > 0 && p.Concurrency == 0:
		return bad("Overflow", "a queue needs a Concurrency cap (process %q)", p.Name)
	}
	if p.Retry != nil {
		if err := p.Retry.validate("Process.Retry"); err != nil {
			err.(*Error).Op = "register"
			return err
		}
	}
	return validateFlow(p, bad)
}
