package yella

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/yella-go/yella/store"
)

// Flow control: the order in which waiting runs start (priorities), how
// often they start (rate limits) and how many run at once per key
// (per-key concurrency). A run's priority and keys are fixed when it is
// admitted and stored with it, so they hold across restarts; with a
// shared store (store/pgstore) they hold across every node.

// Priority sets the priority of the runs this emission admits, instead of
// their processes' Process.Priority. A run of priority p starts as though
// it had been emitted p minutes (store.PriorityStep) earlier: it overtakes
// the waiting runs of lower priority emitted less than that long before
// it, and a run of low priority is never starved: once it has waited
// (p' − p) minutes, no later run of priority p' goes ahead of it.
// Between -10,000 and 10,000 (about a week either way). Follow-up runs get
// their own processes' Process.Priority.
func Priority(p int) EmitOption { return func(o *emitOpts) { o.priority = &p } }

// RateLimit limits how often runs start, per key, with GCRA (a token
// bucket kept as one time per key): a key starts Burst runs at once, then
// one every Per/Limit; a key that starts nothing for a while gets its
// burst back. Over any span of time d, a key starts at most
// Burst + d×Limit/Per runs; with Burst 1, no span of Per holds more than
// Limit starts. Every attempt counts (a retry is a start). Runs over the
// limit wait in the queue, in order, and start when the key allows: they
// are not dropped or failed, and the wait shows in Metrics and
// Engine.Limits (the API and the dashboard). The state of each key is stored with
// the runs' claims, so a restart resumes it rather than granting a new
// burst.
type RateLimit struct {
	// Name shares the limit between processes: every process naming it
	// counts against the same keys, and must declare the same Limit, Per
	// and Burst. Default: the process's name.
	Name string
	// Limit starts per Per. Required (> 0).
	Limit int
	// Per is the period. Required (> 0).
	Per time.Duration
	// Burst is how many runs of a key may start at once. Default 1.
	Burst int
	// Key picks the run's key (a tenant, an API key). nil: one key for
	// the whole limit.
	Key KeyFunc
}

// KeyConcurrency bounds how many runs run at once per key. A key at its
// bound holds its waiting runs aside, so the runs of other keys pass
// them: one tenant with 10,000 queued runs does not delay another's one.
// Runs of a key otherwise start in priority and emission order. With a
// shared store the bound holds across every node.
type KeyConcurrency struct {
	// Name shares the bound between processes: their runs with the same
	// key count together, and each must declare the same Max. Default:
	// the process's name.
	Name string
	// Max running runs per key. Required (> 0).
	Max int
	// Key picks the run's key. Required.
	Key KeyFunc
}

// KeyOf is what a KeyFunc sees of a run being admitted.
type KeyOf struct {
	Process string
	Event   string
	Payload json.RawMessage
	Context json.RawMessage // the chain's context: nil for a root run
}

// KeyFunc picks a flow-control key from a run being admitted. It must be
// quick and deterministic; a key longer than 128 bytes is stored as its
// SHA-256 ("sha256:…"), so an outsized payload field costs nothing more.
type KeyFunc func(KeyOf) string

// maxKeyLen bounds a stored key; longer ones are hashed, and so are keys
// that are not text (isText: a payload's string may hold a NUL byte,
// which PostgreSQL's text refuses).
const maxKeyLen = 128

// KeyFromPayload returns a KeyFunc that reads a field of the payload by its dotted
// path ("tenant", "customer.id"): a string as it is, a number or a
// boolean as its JSON text. A missing field, null, an object or an array
// gives the empty key, which is one key like any other.
func KeyFromPayload(path string) KeyFunc {
	parts := strings.Split(path, ".")
	return func(k KeyOf) string { return jsonField(k.Payload, parts) }
}

// KeyFromContext is KeyFromPayload for the chain's context (Ctx.Set):
// runs of one chain share it.
func KeyFromContext(path string) KeyFunc {
	parts := strings.Split(path, ".")
	return func(k KeyOf) string { return jsonField(k.Context, parts) }
}

func jsonField(b json.RawMessage, path []string) string {
	for _, p := range path {
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) != nil {
			return ""
		}
		b = m[p]
	}
	if len(b) == 0 {
		return ""
	}
	switch b[0] {
	case '"':
		var s string
		if json.Unmarshal(b, &s) != nil {
			return ""
		}
		return s
	case '{', '[', 'n':
		return ""
	}
	return string(b)
}

// keySep separates a limit's name from a key in a stored key: a control
// character no name may hold.
const keySep = "\x1f"

// splitKey splits a stored key into its limit's name and the key.
func splitKey(stored string) (name, key string) {
	name, key, _ = strings.Cut(stored, keySep)
	return name, key
}

func storedKey(name string, fn KeyFunc, k KeyOf) string {
	var key string
	if fn != nil {
		key = fn(k)
	}
	if len(key) > maxKeyLen || !isText(key) {
		sum := sha256.Sum256([]byte(key))
		key = "sha256:" + hex.EncodeToString(sum[:])
	}
	return name + keySep + key
}

// deriveFlow derives a registered process's flow limits.
func (p *registered) deriveFlow() {
	if rl := p.RateLimit; rl != nil {
		p.rateName = cmp.Or(rl.Name, p.Name)
		p.flow.Rate = store.Rate{Interval: rl.Per / time.Duration(rl.Limit), Burst: max(rl.Burst, 1)}
	}
	if kc := p.KeyConcurrency; kc != nil {
		p.concName = cmp.Or(kc.Name, p.Name)
		p.flow.KeyConcurrency = kc.Max
	}
}

// newRun builds the new run of one listener of an admission: its id, cap,
// priority and keys.
func (p *registered) newRun(a *store.Admission, priority *int) store.NewRun {
	nr := store.NewRun{ID: newID(), Process: p.Name, Limit: p.admitLimit(), Priority: p.Priority}
	if priority != nil {
		nr.Priority = *priority
	}
	if p.rateName == "" && p.concName == "" {
		return nr
	}
	k := KeyOf{Process: p.Name, Event: a.Event, Payload: a.Payload, Context: a.Context}
	if p.rateName != "" {
		nr.RateKey = storedKey(p.rateName, p.RateLimit.Key, k)
	}
	if p.concName != "" {
		nr.ConcurrencyKey = storedKey(p.concName, p.KeyConcurrency.Key, k)
	}
	return nr
}

func validateFlow(p Process, bad func(field, format string, args ...any) error) error {
	if p.Priority < -store.MaxPriority || p.Priority > store.MaxPriority {
		return bad("Priority", "must be between %d and %d, got %d (process %q)", -store.MaxPriority, store.MaxPriority, p.Priority, p.Name)
	}
	if rl := p.RateLimit; rl != nil {
		switch {
		case strings.Contains(cmp.Or(rl.Name, p.Name), keySep) || !isText(rl.Name) || len(rl.Name) > maxNameBytes:
			return bad("RateLimit.Name", "must be at most %d bytes of UTF-8 without control characters (process %q)", maxNameBytes, p.Name)
		case rl.Limit <= 0:
			return bad("RateLimit.Limit", "must be positive, got %d (process %q)", rl.Limit, p.Name)
		case rl.Per <= 0:
			return bad("RateLimit.Per", "must be positive, got %v (process %q)", rl.Per, p.Name)
		case rl.Per/time.Duration(rl.Limit) <= 0:
			return bad("RateLimit.Limit", "%d per %v is more than one start per nanosecond (process %q)", rl.Limit, rl.Per, p.Name)
		case rl.Burst < 0:
			return bad("RateLimit.Burst", "must not be negative, got %d (process %q)", rl.Burst, p.Name)
		}
	}
	if kc := p.KeyConcurrency; kc != nil {
		switch {
		case strings.Contains(cmp.Or(kc.Name, p.Name), keySep) || !isText(kc.Name) || len(kc.Name) > maxNameBytes:
			return bad("KeyConcurrency.Name", "must be at most %d bytes of UTF-8 without control characters (process %q)", maxNameBytes, p.Name)
		case kc.Max <= 0:
			return bad("KeyConcurrency.Max", "must be positive, got %d (process %q)", kc.Max, p.Name)
		case kc.Key == nil:
			return bad("KeyConcurrency.Key", "is required (process %q)", p.Name)
		}
	}
	return nil
}

// checkSharedLimits refuses a process whose named limits differ from those
// of a registered process with the same names. Called under regMu.
func (e *Engine) checkSharedLimits(p *registered) error {
	for _, o := range e.procs {
		if p.rateName != "" && o.rateName == p.rateName && o.flow.Rate != p.flow.Rate {
			return &Error{Code: CodeInvalidConfig, Op: "register", Field: "Process.RateLimit",
				Msg: fmt.Sprintf("rate limit %q is declared by process %q with another Limit, Per or Burst (process %q)", p.rateName, o.Name, p.Name)}
		}
		if p.concName != "" && o.concName == p.concName && o.flow.KeyConcurrency != p.flow.KeyConcurrency {
			return &Error{Code: CodeInvalidConfig, Op: "register", Field: "Process.KeyConcurrency",
				Msg: fmt.Sprintf("key concurrency %q is declared by process %q with another Max (process %q)", p.concName, o.Name, p.Name)}
		}
	}
	return nil
}

// Limits is the state of the engine's flow limits (Engine.Limits).
type Limits struct {
	Rate []RateLimitState
	Key  []KeyLimitState
	// Local: the waiting keys are this engine's view. With a shared store
	// the store holds runs back when a node claims, so no engine sees its
	// waiting keys and Waiting is empty.
	Local bool
}

// RateLimitState is one rate limit and its busiest keys.
type RateLimitState struct {
	Name      string
	Limit     int
	Per       time.Duration
	Burst     int
	Processes []string
	Waiting   []KeyWait // keys holding runs back, most waiting first
}

// KeyLimitState is one per-key concurrency bound and its busiest keys.
type KeyLimitState struct {
	Name      string
	Max       int
	Processes []string
	Waiting   []KeyWait // keys at their bound with runs waiting, most first
}

// KeyWait is one key holding runs back.
type KeyWait struct {
	Key     string
	Waiting int       // runs waiting on the key
	Running int       // concurrency keys: runs running under it
	Next    time.Time // rate keys: when the key next lets a run start
}

// Limits reports every flow limit of the registered processes, with up to
// top of the keys holding runs back in each (the most waiting first).
func (e *Engine) Limits(top int) Limits {
	rate, conc := e.disp.WaitingKeys(4096)
	out := Limits{Local: e.node == nil}
	e.regMu.RLock()
	rl := map[string]*RateLimitState{}
	kl := map[string]*KeyLimitState{}
	for _, name := range sortedKeys(e.procs) {
		p := e.procs[name]
		if p.rateName != "" {
			st := rl[p.rateName]
			if st == nil {
				st = &RateLimitState{Name: p.rateName, Limit: p.RateLimit.Limit, Per: p.RateLimit.Per, Burst: p.flow.Rate.Burst}
				rl[p.rateName] = st
			}
			st.Processes = append(st.Processes, name)
		}
		if p.concName != "" {
			st := kl[p.concName]
			if st == nil {
				st = &KeyLimitState{Name: p.concName, Max: p.flow.KeyConcurrency}
				kl[p.concName] = st
			}
			st.Processes = append(st.Processes, name)
		}
	}
	e.regMu.RUnlock()
	for _, k := range rate {
		name, key := splitKey(k.Key)
		if st := rl[name]; st != nil && len(st.Waiting) < top {
			st.Waiting = append(st.Waiting, KeyWait{Key: key, Waiting: k.Waiting, Next: k.Next})
		}
	}
	for _, k := range conc {
		name, key := splitKey(k.Key)
		if st := kl[name]; st != nil && len(st.Waiting) < top {
			st.Waiting = append(st.Waiting, KeyWait{Key: key, Waiting: k.Waiting, Running: k.Running})
		}
	}
	for _, name := range sortedKeys(rl) {
		out.Rate = append(out.Rate, *rl[name])
	}
	for _, name := range sortedKeys(kl) {
		out.Key = append(out.Key, *kl[name])
	}
	return out
}

// HoldRate holds back the run's rate key (Process.RateLimit) until until:
// no run with that key starts before it, here or, with a shared store, on
// any node, and the hold is stored, so it survives a restart. Use it when
// a downstream says to slow down (an HTTP 429 with Retry-After); the
// run's own retry is delayed by returning the error (RetryDelay). When
// the hold ends the key starts one run, then one per interval, its burst
// refilling as it does after a burst. A hold never shortens an earlier
// one. It does nothing for a run without a
// rate limit; it fails when the attempt no longer owns the run.
func (c *Ctx) HoldRate(until time.Time) error {
	a := c.a
	p := a.proc
	key := a.item.RateKey() // a claim need not return the run's keys (store.Store.Claim)
	if p == nil || p.rateName == "" || key == "" {
		return nil
	}
	// The key's state at which its next start is allowed exactly at until.
	tat := until.Add(time.Duration(p.flow.Rate.Burst-1) * p.flow.Rate.Interval)
	if err := a.e.store.HoldRate(a.e.io, a.run.ID, a.run.Epoch, tat); err != nil {
		return a.writeErr("hold rate", err)
	}
	if a.e.node == nil {
		a.e.disp.HoldRate(key, tat)
	}
	return nil
}

// RateLimiter returns the run's rate limit as a connector's limiter
// (connector.Limiter: HoldUntil(key, until)), so that a connector that
// hears "slow down" from its downstream holds back the run's rate key:
// httpx.Limiter(c.RateLimiter(), ""). The key argument is ignored: the
// key held is the run's own.
func (c *Ctx) RateLimiter() RunRateLimiter { return RunRateLimiter{c: c} }

// RunRateLimiter holds back the rate key of one run (Ctx.RateLimiter).
type RunRateLimiter struct{ c *Ctx }

// HoldUntil holds the run's rate key until until (Ctx.HoldRate); a
// failure is logged, the hold being advice.
func (l RunRateLimiter) HoldUntil(_ string, until time.Time) {
	if err := l.c.HoldRate(until); err != nil {
		l.c.a.e.log.Warn("rate limit hold not stored", "run", l.c.a.run.ID, "err", err)
	}
}
