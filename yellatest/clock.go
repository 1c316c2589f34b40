package yellatest

import (
	"time"

	"github.com/yella-go/yella/internal/clock"
)

// Clock is a fake clock for yella.Config.Clock: time stands still until the
// test moves it. Callbacks the engine schedules (retry delays, heartbeats,
// lease sweeps, timeouts) run in due order in the goroutine that calls
// Advance or Set, never on their own. It is safe for concurrent use.
type Clock struct{ f *clock.Fake }

// NewClock returns a fake clock set to start.
func NewClock(start time.Time) *Clock { return &Clock{f: clock.NewFake(start)} }

// Now returns the fake time.
func (c *Clock) Now() time.Time { return c.f.Now() }

// AfterFunc schedules f for when the fake time reaches Now()+d (at the next
// Advance, even by zero, when d is not positive). The returned stop
// function cancels it and reports whether it did so before f ran. The
// engine calls it; a test rarely needs to.
func (c *Clock) AfterFunc(d time.Duration, f func()) (stop func() bool) { return c.f.AfterFunc(d, f) }

// AfterFuncAt schedules f for when the fake time reaches t (at the next
// Advance, even by zero, when it already has). The engine calls it where
// it knows the time it waits for, so a test that advances the clock
// concurrently cannot make the callback late.
func (c *Clock) AfterFuncAt(t time.Time, f func()) (stop func() bool) { return c.f.AfterFuncAt(t, f) }

// Advance moves the clock forward by d and runs every callback that falls
// due on the way, in time order.
func (c *Clock) Advance(d time.Duration) { c.f.Advance(d) }

// Set moves the clock to t (never backwards) and runs the callbacks that
// fall due on the way, in time order.
func (c *Clock) Set(t time.Time) { c.f.Set(t) }

// Next reports when the earliest scheduled callback falls due, and false
// when none is scheduled.
func (c *Clock) Next() (time.Time, bool) { return c.f.Next() }
