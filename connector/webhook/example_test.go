package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector/webhook"
	"github.com/yella-go/yella/store/memstore"
)

// Stripe events become runs: the delivery is verified, admitted under its
// event id, and a redelivery of the same event admits nothing new.
func Example() {
	ctx := context.Background()
	st := memstore.New() // sqlitestore.Open(...) for durability
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	err = eng.Register(yella.Process{Name: "fulfil", On: "stripe:checkout.session.completed",
		Run: yella.Handle(func(c *yella.Ctx, ev struct{ ID string }) yella.Result {
			return c.OK("fulfilled " + ev.ID)
		})})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer eng.Stop(ctx)

	const secret = "whsec_example" // from the environment in a real program
	hooks, err := webhook.New(eng, webhook.Options{Sources: map[string]webhook.Source{
		"stripe": {Verifier: webhook.Stripe{Secrets: []string{secret}}, Event: "stripe:{type}"},
	}})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /hooks/{name}", hooks)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	body := `{"id":"evt_1","type":"checkout.session.completed"}`
	deliver := func(signed, sent string) {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(ts + "." + signed))
		req, _ := http.NewRequest("POST", srv.URL+"/hooks/stripe", strings.NewReader(sent))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(m.Sum(nil)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
	}
	deliver(body, body)                               // admitted
	deliver(body, body)                               // Stripe's retry: nothing new
	deliver(body, strings.Replace(body, "1", "2", 1)) // tampered: refused
	if err := eng.Drain(ctx); err != nil {
		log.Fatal(err)
	}
	page, err := eng.Runs(ctx, yella.RunQuery{Event: "stripe:checkout.session.completed"})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range page.Runs {
		fmt.Println(r.Status, r.IdempotencyKey, string(r.Output))
	}
	// Output:
	// 202 Accepted
	// 200 OK
	// 401 Unauthorized
	// completed stripe:evt_1 "fulfilled evt_1"
}
