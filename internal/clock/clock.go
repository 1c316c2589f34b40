// Package clock is the engine's only source of time. Everything that waits,
// schedules or stamps a record takes a Clock, so tests drive retries, leases
// and timeouts with a Fake clock instead of sleeping.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and schedules callbacks. Implementations must be safe
// for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed. The returned
	// stop function cancels the call; it reports whether it did so before f
	// started, like time.Timer.Stop.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// At calls f once the clock reaches t, and returns AfterFunc's stop. A
// clock that can schedule at a time (an AfterFuncAt method, as Real,
// Fake and the fake clock of package yellatest have) does: a delay
// computed from a time read earlier would be late by however far a fake
// clock was advanced in between. Any other clock is given the delay from
// its Now.
func At(c Clock, t time.Time, f func()) (stop func() bool) {
	if a, ok := c.(interface {
		AfterFuncAt(time.Time, func()) func() bool
	}); ok {
		return a.AfterFuncAt(t, f)
	}
	return c.AfterFunc(t.Sub(c.Now()), f)
}

// Real is the wall clock.
type Real struct{}

// AfterFuncAt calls f in its own goroutine once the time is t.
func (Real) AfterFuncAt(t time.Time, f func()) func() bool {
	return time.AfterFunc(time.Until(t), f).Stop
}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// Fake is a manually advanced clock for tests. Its zero value is not usable;
// call NewFake. Callbacks scheduled with AfterFunc run, in due order, in the
// goroutine that calls Advance (or Set), never on their own.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	seq     int
	pending []*fakeTimer
	waiters []chan struct{}
}

type fakeTimer struct {
	at      time.Time
	seq     int
	f       func()
	stopped bool
}

// NewFake returns a fake clock set to start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f to run when the fake time reaches now+d. A
// non-positive d makes f due at the next Advance, even by zero.
func (c *Fake) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	at := c.now.Add(d)
	c.mu.Unlock()
	return c.AfterFuncAt(at, f)
}

// AfterFuncAt schedules f to run when the fake time reaches at; at the
// next Advance, even by zero, if it already has.
func (c *Fake) AfterFuncAt(at time.Time, f func()) func() bool {
	c.mu.Lock()
	t := &fakeTimer{at: at, seq: c.seq, f: f}
	c.seq++
	c.pending = append(c.pending, t)
	waiters := c.waiters
	c.waiters = nil
	c.mu.Unlock()
	for _, w := range waiters {
		close(w)
	}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if t.stopped {
			return false
		}
		t.stopped = true
		for i, p := range c.pending {
			if p == t {
				c.pending = append(c.pending[:i], c.pending[i+1:]...)
				return true
			}
		}
		return false
	}
}

// Advance moves the clock forward by d and runs every callback that falls
// due, in time order, synchronously.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	c.Set(target)
}

// Set moves the clock to t (never backwards) and runs due callbacks in order.
// Callbacks that schedule new due callbacks see them run in the same call.
func (c *Fake) Set(t time.Time) {
	for {
		c.mu.Lock()
		sort.SliceStable(c.pending, func(i, j int) bool {
			a, b := c.pending[i], c.pending[j]
			if !a.at.Equal(b.at) {
				return a.at.Before(b.at)
			}
			return a.seq < b.seq
		})
		if len(c.pending) == 0 || c.pending[0].at.After(t) {
			if t.After(c.now) {
				c.now = t
			}
			c.mu.Unlock()
			return
		}
		next := c.pending[0]
		c.pending = c.pending[1:]
		next.stopped = true
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
	}
}

// Pending reports how many callbacks are scheduled and not yet run.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// Next reports when the earliest scheduled callback falls due, and false
// when none is scheduled. Advancing the clock to it (Set) runs that
// callback and nothing later.
func (c *Fake) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		return time.Time{}, false
	}
	next := c.pending[0].at
	for _, p := range c.pending[1:] {
		if p.at.Before(next) {
			next = p.at
		}
	}
	return next, true
}

// WaitForTimers blocks until at least n callbacks are scheduled or the
// timeout elapses (real time), and reports whether they are. Tests use it to
// wait until the engine has armed a timer before advancing the clock.
func (c *Fake) WaitForTimers(n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		c.mu.Lock()
		if len(c.pending) >= n {
			c.mu.Unlock()
			return true
		}
		w := make(chan struct{})
		c.waiters = append(c.waiters, w)
		c.mu.Unlock()
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		select {
		case <-w:
		case <-time.After(left):
			return false
		}
	}
}
