package webhook

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkStripeDelivery is one signed 1 KB Stripe delivery through the
// handler, verified and admitted on a memstore engine, each with a new
// event id.
func BenchmarkStripeDelivery(b *testing.B) {
	st := engine(b, "payment:received")
	h, err := New(st, Options{Sources: map[string]Source{"stripe": {Verifier: Stripe{Secrets: []string{"whsec_test"}}, Event: "payment:received"}},
		Now: func() time.Time { return testNow }})
	if err != nil {
		b.Fatal(err)
	}
	pad := strings.Repeat("x", 1000)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		body := `{"id":"evt_` + strconv.Itoa(i) + `","pad":"` + pad + `"}`
		r := httptest.NewRequest("POST", "/hooks/stripe", strings.NewReader(body))
		r.Header.Set("Stripe-Signature", stripeHeader("whsec_test", testNow.Unix(), body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 202 {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
}

// BenchmarkVerifyStripe is the signature check alone, on a 1 KB body.
func BenchmarkVerifyStripe(b *testing.B) {
	v := Stripe{Secrets: []string{"whsec_test"}}
	body := []byte(`{"id":"evt_1","pad":"` + strings.Repeat("x", 1000) + `"}`)
	h := headers("Stripe-Signature", stripeHeader("whsec_test", testNow.Unix(), string(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(h, body, testNow); err != nil {
			b.Fatal(err)
		}
	}
}
