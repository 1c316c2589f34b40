package yella

import (
	"sync"
	"time"
)

// dropLogEvery is the shortest interval between two drop log lines of one
// process.
const dropLogEvery = 10 * time.Second

// dropLog logs dropped events at warn level, at most once per process every
// dropLogEvery, each line with the number of drops since the previous one,
// so that a burst of drops is visible without flooding the log.
type dropLog struct {
	mu    sync.Mutex
	procs map[string]*dropCount
}

type dropCount struct {
	last    time.Time // when the last line was written
	pending int64     // drops since then
	event   string    // the event of the latest drop
}

// note counts one drop and writes a line if the process's interval allows.
func (d *dropLog) note(e *Engine, process, event string) {
	now := e.clock.Now()
	d.mu.Lock()
	if d.procs == nil {
		d.procs = map[string]*dropCount{}
	}
	c := d.procs[process]
	if c == nil {
		c = &dropCount{}
		d.procs[process] = c
	}
	c.pending++
	c.event = event
	n, ev := c.take(now, false)
	d.mu.Unlock()
	if n > 0 {
		e.logDrops(process, ev, n)
	}
}

// flush writes the lines owed: every process with drops not yet logged
// whose interval has passed, or all of them when final.
func (d *dropLog) flush(e *Engine, final bool) {
	type line struct {
		process, event string
		n              int64
	}
	var lines []line
	now := e.clock.Now()
	d.mu.Lock()
	for p, c := range d.procs {
		if n, ev := c.take(now, final); n > 0 {
			lines = append(lines, line{p, ev, n})
		}
	}
	d.mu.Unlock()
	for _, l := range lines {
		e.logDrops(l.process, l.event, l.n)
	}
}

// take returns the drops to log now (0 if none or too soon) and resets the
// count.
func (c *dropCount) take(now time.Time, force bool) (int64, string) {
	if c.pending == 0 || !force && !c.last.IsZero() && now.Sub(c.last) < dropLogEvery {
		return 0, ""
	}
	n := c.pending
	c.pending, c.last = 0, now
	return n, c.event
}

func (e *Engine) logDrops(process, event string, n int64) {
	attrs := []any{"process", process, "event", event, "dropped", n}
	if p := e.lookup(process); p != nil {
		attrs = append(attrs, "concurrency", p.Concurrency, "overflow", p.Overflow.String())
	}
	e.log.Warn("events dropped: process at its concurrency cap", attrs...)
}
