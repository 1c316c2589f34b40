package webhook

import (
	"encoding/base64"
	"encoding/hex"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzSignatures sends arbitrary signature headers, timestamps and bodies
// to every scheme through the handler. It must never panic, and a request
// may be admitted only when its header carries a signature made with the
// secret over that very body (checked here independently of the
// verifiers).
func FuzzSignatures(f *testing.F) {
	ts := strconv.FormatInt(testNow.Unix(), 10)
	ev := `{"id":"evt_1","type":"x"}`
	f.Add(uint8(0), "t="+ts+",v1="+signHex("whsec_test", ts, ".", ev), "", ev)
	f.Add(uint8(0), "t="+ts+",v1=00,v1="+signHex("whsec_test", ts, ".", ev), "", ev)
	f.Add(uint8(0), "t=,v1=", "", "")
	f.Add(uint8(1), "sha256="+signHex("gh", ev), "", ev)
	f.Add(uint8(2), "v0="+signHex("sl", "v0:", ts, ":", ev), ts, ev)
	f.Add(uint8(2), "v0="+signHex("sl", "v0:", ts, ":", "a=b&trigger_id=t"), ts, "a=b&trigger_id=t")
	f.Add(uint8(3), "sha256="+signHex("g", ev), "", ev)
	f.Add(uint8(3), "sha256=", "", "\xff")
	f.Fuzz(func(t *testing.T, kind uint8, sig, stamp, body string) {
		em := &fakeEmitter{}
		h, err := New(em, Options{Now: func() time.Time { return testNow }, Sources: map[string]Source{
			"s": {Event: "e", Verifier: []Verifier{
				Stripe{Secrets: []string{"whsec_test"}},
				GitHub{Secrets: []string{"gh"}},
				Slack{Secrets: []string{"sl"}},
				HMAC{Secrets: []string{"g"}, Header: "X-Sig", Prefix: "sha256="},
			}[kind%4]},
		}})
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("POST", "/hooks/s", strings.NewReader(body))
		// Header values the client could not send are the server's to
		// refuse before the handler sees them.
		if !validHeader(sig) || !validHeader(stamp) {
			return
		}
		for _, k := range []string{"Stripe-Signature", "X-Hub-Signature-256", "X-Slack-Signature", "X-Sig"} {
			r.Header.Set(k, sig)
		}
		r.Header.Set("X-Slack-Request-Timestamp", stamp)
		r.Header.Set("X-GitHub-Delivery", "d1")
		r.Header.Set("X-GitHub-Event", "push")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if em.calls() == 0 && w.Code/100 != 2 {
			return
		}
		if w.Code/100 == 2 && em.calls() == 0 && w.Body.Len() == 0 {
			t.Fatalf("2xx without an answer")
		}
		if em.calls() > 0 && !signedWithSecret(kind%4, sig, stamp, body) {
			t.Fatalf("admitted a body whose signature was not made with the secret: kind %d sig %q stamp %q body %q", kind%4, sig, stamp, body)
		}
	})
}

// validHeader reports whether net/http would send v as a header value.
func validHeader(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return v == strings.TrimSpace(v)
}

// signedWithSecret is the reference check: the header holds the expected
// signature of the scheme, made with the test secret over body.
func signedWithSecret(kind uint8, sig, stamp, body string) bool {
	switch kind {
	case 0:
		var t string
		var v1 []string
		for _, p := range strings.Split(sig, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if k == "t" {
				t = v
			} else if k == "v1" {
				v1 = append(v1, strings.ToLower(v))
			}
		}
		for _, v := range v1 {
			if v == signHex("whsec_test", t, ".", body) {
				return true
			}
		}
		return false
	case 1:
		return strings.EqualFold(sig, "sha256="+signHex("gh", body))
	case 2:
		return strings.EqualFold(sig, "v0="+signHex("sl", "v0:", stamp, ":", body))
	}
	enc, ok := strings.CutPrefix(sig, "sha256=")
	if !ok {
		return false
	}
	want, _ := hex.DecodeString(signHex("g", body))
	for _, e := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if enc == e.EncodeToString(want) {
			return true
		}
	}
	return strings.EqualFold(enc, signHex("g", body))
}
