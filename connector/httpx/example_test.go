package httpx_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/connector/httpx"
	"github.com/yella-go/yella/yellatest"
)

// A handler creates a shipment through an HTTP API that first answers 503
// with Retry-After: 30. The run's retry waits the 30 s the API asked for
// (the policy's backoff is 1 s), and the retry sends the same
// Idempotency-Key. The engine runs on a fake clock: no real waiting.
func Example() {
	var mu sync.Mutex
	var keys []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if len(keys) == 1 {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"shp_1","status":"created"}`)
	}))
	defer api.Close()

	type shipment struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	k, err := yellatest.New(yella.Config{}, yella.Process{
		Name: "ship", On: "order:paid",
		Retry: &yella.Retry{Max: 3, Backoff: yella.Fixed(time.Second)},
		Run: func(c *yella.Ctx) yella.Result {
			s, err := httpx.DoJSON[shipment](c, "create-shipment", httpx.Request{
				Method: "POST", URL: api.URL + "/v1/shipments", JSON: map[string]string{"order": "42"},
			}, httpx.Timeout(10*time.Second))
			if err != nil {
				return connector.Outcome(c, err) // 503: retried; 4xx: failed for good
			}
			return c.OK(s.ID)
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer k.Close()
	ctx := context.Background()
	start := k.Clock.Now()
	em, _ := k.Engine.Emit(ctx, "order:paid", nil)
	if err := k.RunUntilIdle(ctx); err != nil {
		fmt.Println(err)
		return
	}
	r, _ := k.Engine.Run(ctx, em.Runs[0])
	fmt.Println(r.Status, string(r.Output), "after", r.Attempts, "attempts")
	fmt.Println("waited at least 30s:", k.Clock.Now().Sub(start) >= 30*time.Second)
	mu.Lock()
	fmt.Println("calls:", len(keys), "same key:", keys[0] == keys[1])
	mu.Unlock()
	// Output:
	// completed "shp_1" after 2 attempts
	// waited at least 30s: true
	// calls: 2 same key: true
}
