package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// signHex is HMAC-SHA256 of the concatenated parts under secret, in hex.
func signHex(secret string, parts ...string) string {
	m := hmac.New(sha256.New, []byte(secret))
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return hex.EncodeToString(m.Sum(nil))
}

func stripeHeader(secret string, ts int64, body string) string {
	t := strconv.FormatInt(ts, 10)
	return "t=" + t + ",v1=" + signHex(secret, t, ".", body)
}

func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// GitHub's published test values: secret "It's a Secret to Everybody",
// payload "Hello, World!", and the signature below
// (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries,
// "Testing the webhook payload validation").
func TestGitHubPublishedVector(t *testing.T) {
	v := GitHub{Secrets: []string{"It's a Secret to Everybody"}}
	h := headers("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
		"X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958", "X-GitHub-Event", "push")
	d, err := v.Verify(h, []byte("Hello, World!"), time.Now())
	if err != nil {
		t.Fatalf("GitHub's own example refused: %v", err)
	}
	if d.ID != "72d3162e-cc78-11e3-81ab-4c9367dc0958" || d.Type != "push" || d.Reply != nil {
		t.Fatalf("delivery %+v", d)
	}
	if _, err := v.Verify(h, []byte("Hello, World?"), time.Now()); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("tampered payload: %v, want ErrBadSignature", err)
	}
}

// Slack's published example: signing secret, timestamp 1531420618, a slash
// command's form body and its signature
// (https://api.slack.com/authentication/verifying-requests-from-slack,
// "Walk through an example").
func TestSlackPublishedVector(t *testing.T) {
	const body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	v := Slack{Secrets: []string{"8f742231b10e8888abcd99yyyzzz85a5"}}
	h := headers("X-Slack-Signature", "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503",
		"X-Slack-Request-Timestamp", "1531420618")
	at := time.Unix(1531420618+30, 0)
	d, err := v.Verify(h, []byte(body), at)
	if err != nil {
		t.Fatalf("Slack's own example refused: %v", err)
	}
	if d.ID != "398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c" || d.Type != "webhook-collect" {
		t.Fatalf("delivery %+v", d)
	}
	if _, err := v.Verify(h, []byte(body+"x"), at); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("tampered body: %v, want ErrBadSignature", err)
	}
	if _, err := v.Verify(h, []byte(body), at.Add(6*time.Minute)); !errors.Is(err, ErrStale) {
		t.Fatalf("six minutes later: %v, want ErrStale", err)
	}
}

func TestVerifiers(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	ts := now.Unix()
	const ev = `{"id":"evt_1","type":"invoice.paid"}`
	stripe := Stripe{Secrets: []string{"whsec_new", "whsec_old"}}
	gh := GitHub{Secrets: []string{"gh"}}
	slack := Slack{Secrets: []string{"sl"}}
	slackSig := func(ts int64, body string) string {
		return "v0=" + signHex("sl", "v0:", strconv.FormatInt(ts, 10), ":", body)
	}
	generic := HMAC{Secrets: []string{"g"}, Header: "X-Sig", Prefix: "sha256=", TimestampHeader: "X-Ts", IDHeader: "X-Id", TypeHeader: "X-Type"}
	bare := HMAC{Secrets: []string{"g"}, Header: "X-Sig"}
	rawMAC := func(parts ...string) []byte { b, _ := hex.DecodeString(signHex("g", parts...)); return b }
	for _, tc := range []struct {
		name     string
		v        Verifier
		h        http.Header
		body     string
		want     error  // nil: accepted
		id, typ  string // when accepted
		hasReply bool
	}{
		{"stripe", stripe, headers("Stripe-Signature", stripeHeader("whsec_new", ts, ev)), ev, nil, "evt_1", "invoice.paid", false},
		{"stripe old secret during rotation", stripe, headers("Stripe-Signature", stripeHeader("whsec_old", ts, ev)), ev, nil, "evt_1", "invoice.paid", false},
		{"stripe two v1, second good", stripe, headers("Stripe-Signature", "t="+strconv.FormatInt(ts, 10)+",v1="+signHex("other", "x")+",v1="+signHex("whsec_new", strconv.FormatInt(ts, 10), ".", ev)+",v0=abc"), ev, nil, "evt_1", "invoice.paid", false},
		{"stripe unknown secret", stripe, headers("Stripe-Signature", stripeHeader("whsec_x", ts, ev)), ev, ErrBadSignature, "", "", false},
		{"stripe tampered body", stripe, headers("Stripe-Signature", stripeHeader("whsec_new", ts, ev)), `{"id":"evt_2","type":"invoice.paid"}`, ErrBadSignature, "", "", false},
		{"stripe stale", stripe, headers("Stripe-Signature", stripeHeader("whsec_new", ts-301, ev)), ev, ErrStale, "", "", false},
		{"stripe future", stripe, headers("Stripe-Signature", stripeHeader("whsec_new", ts+301, ev)), ev, ErrStale, "", "", false},
		{"stripe edge of tolerance", stripe, headers("Stripe-Signature", stripeHeader("whsec_new", ts-300, ev)), ev, nil, "evt_1", "invoice.paid", false},
		{"stripe signature over another timestamp", stripe, headers("Stripe-Signature", "t="+strconv.FormatInt(ts+1, 10)+",v1="+signHex("whsec_new", strconv.FormatInt(ts, 10), ".", ev)), ev, ErrBadSignature, "", "", false},
		{"stripe missing header", stripe, headers(), ev, ErrMissingHeader, "", "", false},
		{"stripe no timestamp", stripe, headers("Stripe-Signature", "v1="+signHex("whsec_new", ev)), ev, ErrMalformed, "", "", false},
		{"stripe no v1", stripe, headers("Stripe-Signature", "t="+strconv.FormatInt(ts, 10)), ev, ErrBadSignature, "", "", false},
		{"stripe garbage element", stripe, headers("Stripe-Signature", "t=1,zzz"), ev, ErrMalformed, "", "", false},
		{"stripe authentic body without id", stripe, headers("Stripe-Signature", stripeHeader("whsec_new", ts, `{"type":"x"}`)), `{"type":"x"}`, ErrMalformed, "", "", false},
		{"github", gh, headers("X-Hub-Signature-256", "sha256="+signHex("gh", ev), "X-GitHub-Delivery", "d1", "X-GitHub-Event", "issues"), ev, nil, "d1", "issues", false},
		{"github ping", gh, headers("X-Hub-Signature-256", "sha256="+signHex("gh", "{}"), "X-GitHub-Delivery", "d2", "X-GitHub-Event", "ping"), "{}", nil, "d2", "ping", true},
		{"github sha1 only", gh, headers("X-Hub-Signature", "sha1=abc", "X-GitHub-Delivery", "d1"), ev, ErrMissingHeader, "", "", false},
		{"github no delivery id", gh, headers("X-Hub-Signature-256", "sha256="+signHex("gh", ev)), ev, ErrMissingHeader, "", "", false},
		{"github wrong prefix", gh, headers("X-Hub-Signature-256", "sha1="+signHex("gh", ev), "X-GitHub-Delivery", "d1"), ev, ErrMalformed, "", "", false},
		{"github bad hex", gh, headers("X-Hub-Signature-256", "sha256=zz", "X-GitHub-Delivery", "d1"), ev, ErrBadSignature, "", "", false},
		{"slack event", slack, headers("X-Slack-Signature", slackSig(ts, `{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention"}}`), "X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10)),
			`{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention"}}`, nil, "Ev1", "app_mention", false},
		{"slack challenge", slack, headers("X-Slack-Signature", slackSig(ts, `{"type":"url_verification","challenge":"c"}`), "X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10)),
			`{"type":"url_verification","challenge":"c"}`, nil, "challenge", "url_verification", true},
		{"slack interactivity", slack, headers("X-Slack-Signature", slackSig(ts, `payload=%7B%22type%22%3A%22block_actions%22%2C%22trigger_id%22%3A%22tr9%22%7D`), "X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10)),
			`payload=%7B%22type%22%3A%22block_actions%22%2C%22trigger_id%22%3A%22tr9%22%7D`, nil, "tr9", "block_actions", false},
		{"slack no timestamp", slack, headers("X-Slack-Signature", slackSig(ts, ev)), ev, ErrMissingHeader, "", "", false},
		{"slack stale", slack, headers("X-Slack-Signature", slackSig(ts-600, ev), "X-Slack-Request-Timestamp", strconv.FormatInt(ts-600, 10)), ev, ErrStale, "", "", false},
		{"slack timestamp not a number", slack, headers("X-Slack-Signature", "v0="+signHex("sl", "v0:soon:", ev), "X-Slack-Request-Timestamp", "soon"), ev, ErrMalformed, "", "", false},
		{"slack huge timestamp", slack, headers("X-Slack-Signature", "v0="+signHex("sl", "v0:99999999999999999:", ev), "X-Slack-Request-Timestamp", "99999999999999999"), ev, ErrStale, "", "", false},
		{"hmac hex with prefix", generic, headers("X-Sig", "sha256="+signHex("g", strconv.FormatInt(ts, 10), ".", ev), "X-Ts", strconv.FormatInt(ts, 10), "X-Id", "g1", "X-Type", "order.created"), ev, nil, "g1", "order.created", false},
		{"hmac base64", generic, headers("X-Sig", "sha256="+base64.StdEncoding.EncodeToString(rawMAC(strconv.FormatInt(ts, 10), ".", ev)), "X-Ts", strconv.FormatInt(ts, 10), "X-Id", "g1"), ev, nil, "g1", "", false},
		{"hmac stale", generic, headers("X-Sig", "sha256="+signHex("g", strconv.FormatInt(ts-3600, 10), ".", ev), "X-Ts", strconv.FormatInt(ts-3600, 10), "X-Id", "g1"), ev, ErrStale, "", "", false},
		{"hmac signature of the body alone", generic, headers("X-Sig", "sha256="+signHex("g", ev), "X-Ts", strconv.FormatInt(ts, 10), "X-Id", "g1"), ev, ErrBadSignature, "", "", false},
		{"hmac missing id header", generic, headers("X-Sig", "sha256="+signHex("g", ev), "X-Ts", strconv.FormatInt(ts, 10)), ev, ErrMissingHeader, "", "", false},
		{"hmac no prefix", generic, headers("X-Sig", signHex("g", ev), "X-Ts", strconv.FormatInt(ts, 10), "X-Id", "g1"), ev, ErrMalformed, "", "", false},
		{"hmac bare, named by its signature", bare, headers("X-Sig", base64.RawURLEncoding.EncodeToString(rawMAC(ev))), ev, nil, "sig-" + signHex("g", ev), "", false},
		{"hmac bare, truncated signature", bare, headers("X-Sig", signHex("g", ev)[:40]), ev, ErrBadSignature, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := tc.v.Verify(tc.h, []byte(tc.body), now)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("err %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if d.ID != tc.id || d.Type != tc.typ || (d.Reply != nil) != tc.hasReply {
				t.Fatalf("delivery %+v (reply %q), want id %q type %q reply %v", d, d.Reply, tc.id, tc.typ, tc.hasReply)
			}
		})
	}
}

func TestVerifierValidation(t *testing.T) {
	for _, v := range []validator{Stripe{}, GitHub{Secrets: []string{""}}, Slack{}, HMAC{Secrets: []string{"x"}}, HMAC{Header: "X"}} {
		if v.validate() == nil {
			t.Errorf("%#v: accepted", v)
		}
	}
}
