package stripe

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
)

// fakeStripe behaves like Stripe's documented API for POST /v1/charges:
// bearer authentication, form parameters, error JSON, and idempotency (a
// repeated Idempotency-Key with the same parameters replays the stored
// response with Idempotent-Replayed: true; with other parameters it is a
// 400 idempotency_error). Failures injected with failNext are answered
// before anything is done; dropAfterCharge makes the next charge happen
// and its connection drop before the answer.
type fakeStripe struct {
	mu       sync.Mutex
	charges  int               // charges actually made
	requests int               // requests received
	keys     []string          // Idempotency-Key of each request
	stored   map[string]stored // by idempotency key
	inject   []func(w http.ResponseWriter)
	drop     bool
}

type stored struct {
	params string
	status int
	body   []byte
}

func newFakeStripe(t *testing.T) (*fakeStripe, *httptest.Server) {
	f := &fakeStripe{stored: map[string]stored{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

// failNext answers the next request with status, the error type and code,
// and extra headers.
func (f *fakeStripe) failNext(status int, typ, code string, header ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inject = append(f.inject, func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		writeErr(w, status, map[string]string{"type": typ, "code": code, "message": "injected " + code})
	})
}

func (f *fakeStripe) dropAfterCharge() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drop = true
}

func (f *fakeStripe) counts() (requests, charges int, keys []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests, f.charges, append([]string(nil), f.keys...)
}

func writeErr(w http.ResponseWriter, status int, e map[string]string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": e})
}

func (f *fakeStripe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	key := r.Header.Get("Idempotency-Key")
	f.keys = append(f.keys, key)
	if len(f.inject) > 0 {
		inj := f.inject[0]
		f.inject = f.inject[1:]
		inj(w)
		return
	}
	if r.Header.Get("Authorization") != "Bearer sk_test_good" {
		writeErr(w, http.StatusUnauthorized, map[string]string{"type": "authentication_error", "message": "Invalid API Key provided"})
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/charges" {
		writeErr(w, http.StatusNotFound, map[string]string{"type": "invalid_request_error", "message": "Unrecognized request URL"})
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
		writeErr(w, http.StatusBadRequest, map[string]string{"type": "invalid_request_error", "message": "bad content type " + ct})
		return
	}
	if err := r.ParseForm(); err != nil {
		writeErr(w, http.StatusBadRequest, map[string]string{"type": "invalid_request_error", "message": err.Error()})
		return
	}
	params := r.PostForm.Encode()
	if key != "" {
		if s, ok := f.stored[key]; ok {
			if s.params != params {
				writeErr(w, http.StatusBadRequest, map[string]string{"type": "idempotency_error",
					"message": "Keys for idempotent requests can only be used with the same parameters they were first used with."})
				return
			}
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(s.status)
			w.Write(s.body)
			return
		}
	}
	status, body := f.charge(r)
	if key != "" {
		f.stored[key] = stored{params: params, status: status, body: body}
	}
	if f.drop && status == http.StatusOK {
		f.drop = false
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close() // charged, but the caller never hears of it
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// charge validates the parameters and makes the charge; a declined card
// (amount 402) is stored like any result, as Stripe does.
func (f *fakeStripe) charge(r *http.Request) (int, []byte) {
	enc := func(status int, v any) (int, []byte) {
		b, _ := json.Marshal(v)
		return status, b
	}
	amount, err := strconv.Atoi(r.PostForm.Get("amount"))
	switch {
	case r.PostForm.Get("amount") == "":
		return enc(http.StatusBadRequest, map[string]any{"error": map[string]string{"type": "invalid_request_error", "code": "parameter_missing", "param": "amount", "message": "Missing required param: amount."}})
	case err != nil || amount <= 0:
		return enc(http.StatusBadRequest, map[string]any{"error": map[string]string{"type": "invalid_request_error", "code": "parameter_invalid_integer", "param": "amount", "message": "Invalid integer"}})
	case amount == 402:
		return enc(http.StatusPaymentRequired, map[string]any{"error": map[string]string{"type": "card_error", "code": "card_declined", "decline_code": "insufficient_funds", "message": "Your card has insufficient funds."}})
	}
	f.charges++
	return enc(http.StatusOK, map[string]any{"id": fmt.Sprintf("ch_%d", f.charges), "object": "charge", "amount": amount,
		"currency": r.PostForm.Get("currency"), "metadata": map[string]string{"order": r.PostForm.Get("metadata[order]")}})
}
