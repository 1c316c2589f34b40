package webhook

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzSignatures sends arbitrary signature headers, timestamps and bodies
// to every scheme through the handler, and bodies signed with the secret
// then tampered with (a byte flipped, bytes appended). It must never
// panic, and a request may be admitted only when its header carries a
// signature made with the secret over the very body sent (checked here
// independently of the verifiers).
func FuzzSignatures(f *testing.F) {
	ts := strconv.FormatInt(testNow.Unix(), 10)
	ev := `{"id":"evt_1","type":"x"}`
	for kind := range uint8(4) {
		f.Add(kind, "", "", ev, uint16(0), "")   // signed here, sent as signed
		f.Add(kind, "", "", ev, uint16(7), "")   // a byte flipped
		f.Add(kind, "", "", ev, uint16(0), "  ") // bytes appended
		f.Add(kind, "", "", "a=b&trigger_id=t", uint16(0), "&c=d")
	}
	f.Add(uint8(0), "t="+ts+",v1=00,v1="+signHex("whsec_test", ts, ".", ev), "", ev, uint16(0), "")
	f.Add(uint8(0), "t=,v1=", "", "", uint16(0), "")
	f.Add(uint8(1), "sha256="+signHex("gh", ev), "", ev, uint16(0), "")
	f.Add(uint8(2), "v0="+signHex("sl", "v0:", ts, ":", ev), ts, ev, uint16(0), "")
	f.Add(uint8(3), "sha256=", "", "\xff", uint16(0), "")
	f.Fuzz(func(t *testing.T, kind uint8, sig, stamp, body string, flip uint16, suffix string) {
		kind %= 4
		if sig == "" { // sign body with the secret, as the provider would
			sig, stamp = signFor(kind, body, ts)
		}
		sent := []byte(body)
		if flip != 0 && len(sent) > 0 {
			sent[int(flip)%len(sent)] ^= byte(flip>>8) | 1
		}
		sent = append(sent, suffix...)
		// Header values a client could not send are the server's to
		// refuse before any handler sees them.
		if !validHeader(sig) || !validHeader(stamp) {
			return
		}
		em := &fakeEmitter{}
		h, err := New(em, Options{Now: func() time.Time { return testNow }, Sources: map[string]Source{
			"s": {Event: "e", Verifier: []Verifier{
				Stripe{Secrets: []string{"whsec_test"}},
				GitHub{Secrets: []string{"gh"}},
				Slack{Secrets: []string{"sl"}},
				HMAC{Secrets: []string{"g"}, Header: "X-Sig", Prefix: "sha256="},
			}[kind]},
		}})
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("POST", "/hooks/s", bytes.NewReader(sent))
		for _, k := range []string{"Stripe-Signature", "X-Hub-Signature-256", "X-Slack-Signature", "X-Sig"} {
			r.Header.Set(k, sig)
		}
		r.Header.Set("X-Slack-Request-Timestamp", stamp)
		r.Header.Set("X-GitHub-Delivery", "d1")
		r.Header.Set("X-GitHub-Event", "push")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if em.calls() > 0 && !signedWithSecret(kind, sig, stamp, string(sent)) {
			t.Fatalf("admitted a body whose signature was not made with the secret: kind %d sig %q stamp %q body %q", kind, sig, stamp, sent)
		}
		if em.calls() == 0 && w.Code/100 == 2 && !strings.Contains(string(sent), "url_verification") {
			t.Fatalf("answered %d without admitting: %s", w.Code, w.Body)
		}
	})
}

// signFor signs body for the scheme of kind, as its provider does, and
// returns the signature header and the timestamp header.
func signFor(kind uint8, body, ts string) (sig, stamp string) {
	switch kind {
	case 0:
		return "t=" + ts + ",v1=" + signHex("whsec_test", ts, ".", body), ""
	case 1:
		return "sha256=" + signHex("gh", body), ""
	case 2:
		return "v0=" + signHex("sl", "v0:", ts, ":", body), ts
	}
	return "sha256=" + signHex("g", body), ""
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
