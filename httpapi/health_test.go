package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/store"
)

// heartbeatFails fails the engine's heartbeats while down is set (its
// reads still answer), as a store the engine cannot write to.
type heartbeatFails struct {
	store.Store
	down *atomic.Bool
}

func (s heartbeatFails) Heartbeat(ctx context.Context, owner string, now, until time.Time) ([]store.Lease, error) {
	if s.down.Load() {
		return nil, errors.New("connection refused")
	}
	return s.Store.Heartbeat(ctx, owner, now, until)
}

// TestHealthStoreDown: while the engine's store calls fail, /api/health
// answers 503 with status "store-down", since when and the last error,
// even though reads of the store answer; once they succeed again, 200 ok.
func TestHealthStoreDown(t *testing.T) {
	var down atomic.Bool
	f := newFixtureWith(t, func(s store.Store) store.Store { return heartbeatFails{s, &down} }, httpapi.Options{Version: "test", Keepalive: time.Hour})
	health := func() (int, httpapi.Health) {
		code, body := f.do(t, "GET", "/api/health", "")
		var h httpapi.Health
		if err := json.Unmarshal([]byte(body), &h); err != nil {
			t.Fatalf("%d %s: %v", code, body, err)
		}
		return code, h
	}
	if code, h := health(); code != 200 || h.Status != "ok" || h.Store != nil {
		t.Fatalf("before: %d %+v", code, h)
	}
	// until is the store state wanted; each heartbeat (every 10s of the
	// engine's clock) reports it.
	until := func(up bool) {
		for i := 0; f.eng.StoreHealth().Up != up; i++ {
			if i > 1000 {
				t.Fatalf("store never reported up=%v", up)
			}
			f.clk.Advance(10 * time.Second)
			time.Sleep(time.Millisecond)
		}
	}
	down.Store(true)
	went := f.clk.Now()
	until(false)
	code, h := health()
	if code != 503 || h.Status != "store-down" || h.Store == nil || h.Store.LastError != "heartbeat: connection refused" || h.Store.Failures < 1 || h.Store.Since.Before(went) {
		t.Fatalf("during the outage: %d %+v %+v", code, h, h.Store)
	}
	down.Store(false)
	until(true)
	if code, h := health(); code != 200 || h.Status != "ok" || h.Store != nil {
		t.Fatalf("after: %d %+v", code, h)
	}
}
