package yella

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	// The time zone database, so that a schedule's Location loads on a
	// machine or container image without one.
	_ "time/tzdata"

	"github.com/yella-go/yella/internal/clock"
)

// Schedule emits an event on a cron schedule. Each tick is admitted with
// an idempotency key made of the schedule's name and the tick's time
// ("cron:<name>:<time>"), so a tick runs once however many engines (nodes
// of a shared store) hold the schedule and however often they restart:
// every engine that reaches a tick emits it, and the store admits it once.
type Schedule struct {
	// Name identifies the schedule and its ticks; unique per engine:
	// at most 256 bytes of UTF-8 without NUL. Renaming a schedule makes
	// its ticks new ones.
	Name string
	// Cron is the schedule: five fields (minute hour day-of-month month
	// day-of-week, as crontab(5)), or @yearly, @monthly, @weekly, @daily,
	// @hourly, or @every <duration> (counted from the Unix epoch in
	// Location, so every engine agrees on the ticks).
	Cron string
	// Location is the time zone the fields are read in (daylight saving
	// included: a 02:30 tick is skipped on the night that has none).
	// Default UTC. The time zone database is built in, so
	// time.LoadLocation works without the system's.
	Location *time.Location
	// Event is emitted at each tick. Required, and some process must
	// listen to it when a tick comes (else the tick is logged and lost).
	Event string
	// Payload is each tick's payload. Default: {"schedule": Name, "tick":
	// the tick's time in RFC 3339}.
	Payload any
	// CatchUp is how old a tick missed while no engine ran may be and
	// still run, once, when the engine starts: the latest missed tick not
	// older than CatchUp is emitted (0, the default: missed ticks are
	// skipped). It must not exceed Config.KeyRetention, which is how long
	// a tick's key proves it ran. Ticks missed while the engine runs (a
	// stalled machine, a clock jump) follow the same rule: the latest due
	// tick is emitted, the ones before it are skipped.
	CatchUp time.Duration
}

// ScheduleInfo describes one schedule (Engine.Schedules).
type ScheduleInfo struct {
	Name     string
	Cron     string
	Location string
	Event    string
	CatchUp  time.Duration
	// Next is the next tick, zero before Start.
	Next time.Time
	// Last is the latest tick this engine emitted (whether it admitted it
	// or found it admitted already), and LastRuns the runs of that tick;
	// zero and nil before the first.
	Last     time.Time
	LastRuns []string
	// Err is the error of the latest tick's emission, "" when it worked.
	Err string
	// Paused: the schedule is paused (Engine.PauseSchedule) since
	// PausedAt, as this engine last read it (at its latest tick, or its
	// own pause or resume): its ticks are skipped.
	Paused   bool
	PausedAt time.Time
}

// schedule is a registered Schedule with its parsed spec and state.
type schedule struct {
	Schedule
	spec cron.Schedule

	mu       sync.Mutex
	armed    bool // started: Start and AddSchedule may race to start it
	next     time.Time
	last     time.Time
	lastRuns []string
	err      string
	pausedAt time.Time // zero: not paused, as last read from the store
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseCron parses a schedule's spec; @every counts from the Unix epoch.
func parseCron(spec string) (cron.Schedule, error) {
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, err
	}
	if every, ok := s.(cron.ConstantDelaySchedule); ok {
		return epochEvery{every.Delay}, nil
	}
	return s, nil
}

// AddSchedule registers a schedule. Before Start it is armed when the
// engine starts; after Start at once. Errors: CodeInvalidConfig for a
// missing name or event, a repeated name, a cron spec that does not
// parse, or a CatchUp longer than Config.KeyRetention.
func (e *Engine) AddSchedule(s Schedule) error {
	bad := func(field, format string, args ...any) error {
		return &Error{Code: CodeInvalidConfig, Op: "add schedule", Field: "Schedule." + field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case s.Name == "":
		return bad("Name", "is required")
	case badName(s.Name) != "":
		return bad("Name", "%s", badName(s.Name))
	case s.Event == "":
		return bad("Event", "is required (schedule %q)", s.Name)
	case badName(s.Event) != "":
		return bad("Event", "%s (schedule %q)", badName(s.Event), s.Name)
	case s.CatchUp < 0:
		return bad("CatchUp", "must not be negative, got %v (schedule %q)", s.CatchUp, s.Name)
	case e.cfg.KeyRetention > 0 && s.CatchUp > e.cfg.KeyRetention:
		return bad("CatchUp", "%v is longer than Config.KeyRetention (%v), which is how long a tick's key proves it ran (schedule %q)", s.CatchUp, e.cfg.KeyRetention, s.Name)
	}
	if s.Location == nil {
		s.Location = time.UTC
	}
	if strings.HasPrefix(strings.TrimSpace(s.Cron), "TZ=") || strings.HasPrefix(strings.TrimSpace(s.Cron), "CRON_TZ=") {
		return bad("Cron", "set the time zone with Location, not in the spec (schedule %q)", s.Name)
	}
	spec, err := parseCron(s.Cron)
	if err != nil {
		return bad("Cron", "%q does not parse: %v (schedule %q)", s.Cron, err, s.Name)
	}
	sc := &schedule{Schedule: s, spec: spec}
	e.schedMu.Lock()
	if _, dup := e.schedules[s.Name]; dup {
		e.schedMu.Unlock()
		return bad("Name", "schedule %q is already added", s.Name)
	}
	e.schedules[s.Name] = sc
	e.schedMu.Unlock()
	if e.isState(stateStarted) {
		e.startSchedule(sc)
	}
	return nil
}

// Schedules describes the schedules, by name.
func (e *Engine) Schedules() []ScheduleInfo {
	e.schedMu.Lock()
	scs := make([]*schedule, 0, len(e.schedules))
	for _, sc := range e.schedules {
		scs = append(scs, sc)
	}
	e.schedMu.Unlock()
	slices.SortFunc(scs, func(a, b *schedule) int { return strings.Compare(a.Name, b.Name) })
	out := make([]ScheduleInfo, len(scs))
	for i, sc := range scs {
		sc.mu.Lock()
		out[i] = ScheduleInfo{Name: sc.Name, Cron: sc.Cron, Location: sc.Location.String(), Event: sc.Event, CatchUp: sc.CatchUp,
			Next: sc.next, Last: sc.last, LastRuns: slices.Clone(sc.lastRuns), Err: sc.err,
			Paused: !sc.pausedAt.IsZero(), PausedAt: sc.pausedAt}
		sc.mu.Unlock()
	}
	return out
}

// startSchedules arms every schedule (Start).
func (e *Engine) startSchedules() {
	e.schedMu.Lock()
	scs := make([]*schedule, 0, len(e.schedules))
	for _, sc := range e.schedules {
		scs = append(scs, sc)
	}
	e.schedMu.Unlock()
	for _, sc := range scs {
		e.startSchedule(sc)
	}
}

// startSchedule emits the latest missed tick within CatchUp, if any, and
// arms the schedule's timer for its next tick.
func (e *Engine) startSchedule(sc *schedule) {
	sc.mu.Lock()
	armed := sc.armed
	sc.armed = true
	sc.mu.Unlock()
	if armed {
		return
	}
	now := e.clock.Now()
	if sc.CatchUp > 0 {
		if t, ok := latestTick(sc.spec, now.Add(-sc.CatchUp), now, sc.Location); ok {
			e.emitTick(sc, t)
		}
	}
	e.armSchedule(sc, now)
}

// latestTick is the latest tick of spec in [from, to].
func latestTick(spec cron.Schedule, from, to time.Time, loc *time.Location) (time.Time, bool) {
	if ev, ok := spec.(epochEvery); ok {
		t := time.Unix(0, to.UnixNano()/int64(ev.d)*int64(ev.d)).In(loc)
		return t, !t.Before(from)
	}
	var last time.Time
	for t := spec.Next(from.Add(-time.Nanosecond).In(loc)); !t.IsZero() && !t.After(to); t = spec.Next(t) {
		last = t
	}
	return last, !last.IsZero()
}

// armSchedule sets the schedule's timer for its first tick after after.
func (e *Engine) armSchedule(sc *schedule, after time.Time) {
	next := sc.spec.Next(after.In(sc.Location))
	sc.mu.Lock()
	sc.next = next
	sc.mu.Unlock()
	if next.IsZero() {
		return // a spec with no more ticks
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.loopsOff {
		return
	}
	e.timerSeq++
	id := e.timerSeq
	e.timers[id] = clock.At(e.clock, next, func() { e.fireSchedule(sc, id) })
}

// fireSchedule emits the latest due tick (ticks skipped meanwhile are not
// run: see Schedule.CatchUp) and arms the next.
func (e *Engine) fireSchedule(sc *schedule, id int) {
	e.mu.Lock()
	delete(e.timers, id)
	if e.loopsOff {
		e.mu.Unlock()
		return
	}
	e.loopWG.Add(1)
	e.mu.Unlock()
	defer e.loopWG.Done()
	now := e.clock.Now()
	sc.mu.Lock()
	due := sc.next
	sc.mu.Unlock()
	if now.Before(due) {
		// Woken before the tick by the wall clock (it was set back): wait
		// for the tick itself, not the one after it.
		e.armSchedule(sc, due.Add(-time.Nanosecond))
		return
	}
	if t, ok := latestTick(sc.spec, due, now, sc.Location); ok {
		var ee *Error
		if err := e.emitTick(sc, t); errors.As(err, &ee) && ee.Code == CodeUnavailable {
			e.retrySchedule(sc)
			return
		}
	}
	e.armSchedule(sc, now)
}

// retrySchedule tries a tick again a second later, while the store fails,
// until the tick after it is due.
func (e *Engine) retrySchedule(sc *schedule) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.loopsOff {
		return
	}
	e.timerSeq++
	id := e.timerSeq
	e.timers[id] = e.clock.AfterFunc(time.Second, func() { e.fireSchedule(sc, id) })
}

// emitTick admits one tick under its idempotency key, unless the schedule
// is paused (read from the store at each tick, so a pause by any engine
// holds on all).
func (e *Engine) emitTick(sc *schedule, t time.Time) error {
	paused, err := e.store.PausedSchedules(e.io)
	if err != nil {
		e.storeFailed("schedule", err)
		return &Error{Code: CodeUnavailable, Op: "schedule", Err: err}
	}
	sc.mu.Lock()
	sc.pausedAt = paused[sc.Name]
	sc.mu.Unlock()
	if _, ok := paused[sc.Name]; ok {
		return nil // skipped: not admitted, not caught up after a resume
	}
	payload := sc.Payload
	if payload == nil {
		payload = map[string]string{"schedule": sc.Name, "tick": t.UTC().Format(time.RFC3339Nano)}
	}
	em, _, err := e.emit(e.io, nil, sc.Event, payload, []EmitOption{IdempotencyKey(TickKey(sc.Name, t))}, false)
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.last, sc.err = t, ""
	if err != nil {
		sc.err, sc.lastRuns = err.Error(), nil
		var ee *Error
		if !errors.As(err, &ee) || ee.Code != CodeStopped {
			e.log.Error("schedule tick not admitted", "schedule", sc.Name, "tick", t, "err", err)
		}
		return err
	}
	sc.lastRuns = append(append([]string(nil), em.Runs...), em.Existing...)
	return nil
}

// PauseSchedule pauses the schedule name, durably: its ticks are skipped,
// by this engine and every other engine on the store (each reads the pause
// at its ticks), across restarts, until ResumeSchedule. Ticks skipped while
// paused are not caught up. CodeInvalidConfig when no schedule has that
// name here.
func (e *Engine) PauseSchedule(ctx context.Context, name string) error {
	return e.setPaused(ctx, name, true)
}

// ResumeSchedule resumes a paused schedule from its next tick.
func (e *Engine) ResumeSchedule(ctx context.Context, name string) error {
	return e.setPaused(ctx, name, false)
}

func (e *Engine) setPaused(ctx context.Context, name string, paused bool) error {
	op := "resume schedule"
	if paused {
		op = "pause schedule"
	}
	e.schedMu.Lock()
	sc := e.schedules[name]
	e.schedMu.Unlock()
	if sc == nil {
		return &Error{Code: CodeInvalidConfig, Op: op, Field: "name", Msg: "no schedule named " + quote(name)}
	}
	now := e.clock.Now()
	if err := e.store.PauseSchedule(ctx, name, paused, now); err != nil {
		return storeErr(op, "", err)
	}
	all, err := e.store.PausedSchedules(ctx)
	if err != nil {
		return storeErr(op, "", err)
	}
	sc.mu.Lock()
	sc.pausedAt = all[name]
	sc.mu.Unlock()
	return nil
}

// TickKey is the idempotency key a schedule's tick is admitted with.
func TickKey(schedule string, tick time.Time) string {
	return "cron:" + schedule + ":" + tick.UTC().Format(time.RFC3339Nano)
}

// epochEvery is @every d with its ticks at whole multiples of d since the
// Unix epoch, so that every engine (and every restart) has the same ticks.
type epochEvery struct{ d time.Duration }

// Next is the first whole multiple of the interval after t.
func (s epochEvery) Next(t time.Time) time.Time {
	n := t.UnixNano()/int64(s.d)*int64(s.d) + int64(s.d)
	return time.Unix(0, n).In(t.Location())
}
