package stripe_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/connector/stripe"
	"github.com/yella-go/yella/yellatest"
)

// A handler creates a PaymentIntent. The effect's idempotency key goes to
// Stripe as Idempotency-Key, so a retry or a restart never charges twice;
// a declined card fails the run for good, a Stripe outage is retried.
func Example() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		fmt.Fprintf(w, `{"id":"pi_1","amount":%s,"status":"requires_confirmation"}`, r.PostForm.Get("amount"))
	}))
	defer api.Close()
	cl := &stripe.Client{Key: "sk_test_123", BaseURL: api.URL} // BaseURL: only for the local fake

	type intent struct {
		ID     string `json:"id"`
		Amount int    `json:"amount"`
	}
	k, err := yellatest.New(yella.Config{}, yella.Process{Name: "pay", On: "order:placed",
		Run: func(c *yella.Ctx) yella.Result {
			pi, err := stripe.Post[intent](c, cl, "payment-intent", "/v1/payment_intents", url.Values{
				"amount": {"2000"}, "currency": {"eur"}, "metadata[order]": {"42"},
			})
			if err != nil {
				return connector.Outcome(c, err)
			}
			return c.OK(pi)
		}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer k.Close()
	ctx := context.Background()
	em, _ := k.Engine.Emit(ctx, "order:placed", nil)
	k.RunUntilIdle(ctx)
	r, _ := k.Engine.Run(ctx, em.Runs[0])
	fmt.Println(r.Status, string(r.Output))
	// Output:
	// completed {"id":"pi_1","amount":2000}
}
