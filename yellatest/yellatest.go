// Package yellatest is the test kit for programs built on yella: an engine
// on an in-memory store with a fake clock the test moves, a way to run it
// until it has nothing left to do, and checks of a run's status, timeline
// and effects.
//
//	k := yellatest.Start(t, yella.Config{}, myProcess)
//	em, _ := k.Engine.Emit(ctx, "order:placed", order)
//	if err := k.RunUntilIdle(ctx); err != nil { t.Fatal(err) }
//	k.ExpectStatus(t, em.Runs[0], yella.StatusCompleted)
//
// RunUntilIdle moves the fake clock only while no handler is running, from
// one scheduled timer to the next, so a retry backoff of an hour costs no
// wall time and a handler never sees time jump under it.
//
// Alternatively, testing/synctest works with the engine as it is: inside
// synctest.Test, an engine on memstore with the default wall clock runs in
// the bubble's fake time, and Engine.Drain returns once every retry delay
// has passed in that time (TestSynctestBubble shows it). Use the Clock when
// the test must stop at a chosen time, or outside a bubble (examples,
// benchmarks).
package yellatest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
)

var _ yella.Clock = (*Clock)(nil)

// Kit is a started engine on an in-memory store, with its fake clock.
type Kit struct {
	Engine *yella.Engine
	Clock  *Clock
	Store  store.Store
}

// Start is New for a test: it fails t if the engine cannot start, and stops
// the engine and closes the store when the test ends.
func Start(t testing.TB, cfg yella.Config, procs ...yella.Process) *Kit {
	t.Helper()
	k, err := New(cfg, procs...)
	if err != nil {
		t.Fatalf("yellatest: %v", err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

// New starts an engine with cfg and procs registered. A nil cfg.Store is a
// fresh in-memory store; a nil cfg.Clock is a Clock set to 2026-01-01
// 00:00:00 UTC (a *Clock given in cfg.Clock is used as Kit.Clock). Close
// it when done.
func New(cfg yella.Config, procs ...yella.Process) (*Kit, error) {
	k := &Kit{Store: cfg.Store}
	if k.Store == nil {
		k.Store = memstore.New()
		cfg.Store = k.Store
	}
	switch c := cfg.Clock.(type) {
	case nil:
		k.Clock = NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		cfg.Clock = k.Clock
	case *Clock:
		k.Clock = c
	default:
		return nil, errors.New("Config.Clock must be nil or a *yellatest.Clock: RunUntilIdle moves the kit's clock")
	}
	eng, err := yella.New(cfg)
	if err != nil {
		return nil, err
	}
	k.Engine = eng
	for _, p := range procs {
		if err := eng.Register(p); err != nil {
			return nil, err
		}
	}
	if err := eng.Start(context.Background()); err != nil {
		return nil, err
	}
	return k, nil
}

// Close stops the engine (hard, after a second for handlers to return) and
// closes the store.
func (k *Kit) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := k.Engine.Stop(ctx)
	return errors.Join(err, k.Store.Close())
}

// RunUntilIdle runs the engine until no run is running, ready or waiting
// for a retry delay (deferred runs count as done, as in Engine.Drain).
// Whenever nothing is running or ready but a retry waits, it moves the
// clock to the next scheduled timer. Handlers run in real time. It returns
// an error if ctx ends first, for instance because a handler never returns.
func (k *Kit) RunUntilIdle(ctx context.Context) error {
	for {
		m, err := k.Engine.Metrics(ctx)
		if err != nil {
			return err
		}
		d := m.Dispatcher
		if d.Running == 0 && d.Ready == 0 && d.Delayed > 0 {
			// Only the clock can make progress: move it to the next timer
			// (a retry's delay, or a background tick on the way to one).
			if next, ok := k.Clock.Next(); ok {
				k.Clock.Set(next)
				continue
			}
		}
		// Drain returns at once when the engine is idle; otherwise a short
		// real wait lets running handlers make progress.
		probe, cancel := context.WithTimeout(ctx, time.Millisecond)
		err = k.Engine.Drain(probe)
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("yellatest: not idle when the context ended: %w", err)
		case yella.CodeOf(err) != yella.CodeDrainTimeout:
			return err
		}
	}
}

// Run returns run id, failing t if it cannot be read.
func (k *Kit) Run(t testing.TB, id string) yella.Run {
	t.Helper()
	r, err := k.Engine.Run(context.Background(), id)
	if err != nil {
		t.Fatalf("yellatest: run %s: %v", id, err)
	}
	return r
}

// ExpectStatus fails t unless run id has status want, and returns the run.
func (k *Kit) ExpectStatus(t testing.TB, id string, want yella.Status) yella.Run {
	t.Helper()
	r := k.Run(t, id)
	if r.Status != want {
		msg := ""
		if r.Error != "" {
			msg = " (error: " + r.Error + ")"
		}
		t.Errorf("run %s (%s) is %s%s, want %s", id, r.Process, r.Status, msg, want)
	}
	return r
}

// ExpectTimeline fails t unless the statuses of run id's timeline are want,
// in order, and returns the timeline.
func (k *Kit) ExpectTimeline(t testing.TB, id string, want ...yella.Status) []yella.TimelineEntry {
	t.Helper()
	tl, err := k.Engine.Timeline(context.Background(), id)
	if err != nil {
		t.Fatalf("yellatest: timeline of run %s: %v", id, err)
	}
	got := make([]yella.Status, len(tl))
	for i, e := range tl {
		got[i] = e.Status
	}
	if !slices.Equal(got, want) {
		t.Errorf("timeline of run %s: %s, want %s", id, statuses(got), statuses(want))
	}
	return tl
}

// ExpectEffect fails t unless run id has an effect with key (the parts
// given to yella.MakeKey, or the plain string key) whose status is want,
// and returns its record.
func (k *Kit) ExpectEffect(t testing.TB, id string, want yella.EffectStatus, key ...string) yella.EffectRecord {
	t.Helper()
	effs, err := k.Engine.Effects(context.Background(), id)
	if err != nil {
		t.Fatalf("yellatest: effects of run %s: %v", id, err)
	}
	enc := yella.MakeKey(key...).String()
	var keys []string
	for _, e := range effs {
		if e.Key == enc {
			if e.Status != want {
				t.Errorf("effect %q of run %s is %s (error %q), want %s", strings.Join(key, "/"), id, e.Status, e.Error, want)
			}
			return e
		}
		keys = append(keys, strings.Join(yella.DecodeKey(e.Key), "/"))
	}
	t.Errorf("run %s has no effect %q (it has %q)", id, strings.Join(key, "/"), keys)
	return yella.EffectRecord{}
}

func statuses(ss []yella.Status) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return "[" + strings.Join(out, " ") + "]"
}
