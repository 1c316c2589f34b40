package yella

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestFlowValidation(t *testing.T) {
	run := func(c *Ctx) Result { return c.OK(nil) }
	key := KeyFromPayload("tenant")
	for _, tc := range []struct {
		name  string
		p     Process
		field string // "" for valid
	}{
		{"valid", Process{RateLimit: &RateLimit{Limit: 5, Per: time.Second, Key: key}, KeyConcurrency: &KeyConcurrency{Max: 2, Key: key}, Priority: 10_000}, ""},
		{"priority too high", Process{Priority: 10_001}, "Process.Priority"},
		{"priority too low", Process{Priority: -10_001}, "Process.Priority"},
		{"no rate", Process{RateLimit: &RateLimit{Per: time.Second}}, "Process.RateLimit.Limit"},
		{"no period", Process{RateLimit: &RateLimit{Limit: 1}}, "Process.RateLimit.Per"},
		{"faster than a nanosecond", Process{RateLimit: &RateLimit{Limit: 2, Per: time.Nanosecond}}, "Process.RateLimit.Limit"},
		{"negative burst", Process{RateLimit: &RateLimit{Limit: 1, Per: time.Second, Burst: -1}}, "Process.RateLimit.Burst"},
		{"control character in a name", Process{RateLimit: &RateLimit{Name: "a\x1fb", Limit: 1, Per: time.Second}}, "Process.RateLimit.Name"},
		{"no max", Process{KeyConcurrency: &KeyConcurrency{Key: key}}, "Process.KeyConcurrency.Max"},
		{"no key", Process{KeyConcurrency: &KeyConcurrency{Max: 1}}, "Process.KeyConcurrency.Key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.Name, tc.p.On, tc.p.Run = "p", "ev", run
			err := validateProcess(tc.p)
			var ye *Error
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.field != "" && (!errors.As(err, &ye) || ye.Code != CodeInvalidConfig || ye.Field != tc.field):
				t.Fatalf("got %v, want CodeInvalidConfig on %s", err, tc.field)
			}
		})
	}
}

func TestKeyFromPayload(t *testing.T) {
	for _, tc := range []struct {
		path, payload, want string
	}{
		{"tenant", `{"tenant":"acme"}`, "acme"},
		{"account.id", `{"account":{"id":42}}`, "42"},
		{"flag", `{"flag":true}`, "true"},
		{"missing", `{"tenant":"acme"}`, ""},
		{"tenant", `{"tenant":null}`, ""},
		{"tenant", `{"tenant":{"a":1}}`, ""},
		{"tenant", `{"tenant":[1]}`, ""},
		{"tenant", `[1,2]`, ""},
		{"tenant", ``, ""},
		{"a.b", `{"a":"not an object"}`, ""},
		{"tenant", `{"tenant":"\u00e9\n"}`, "é\n"},
	} {
		if got := KeyFromPayload(tc.path)(KeyOf{Payload: json.RawMessage(tc.payload)}); got != tc.want {
			t.Errorf("%s of %s = %q, want %q", tc.path, tc.payload, got, tc.want)
		}
	}
	if got := KeyFromContext("t")(KeyOf{Context: json.RawMessage(`{"t":"x"}`)}); got != "x" {
		t.Errorf("KeyFromContext = %q", got)
	}
	long := strings.Repeat("k", 200)
	stored := storedKey("lim", func(KeyOf) string { return long }, KeyOf{})
	if name, key := splitKey(stored); name != "lim" || !strings.HasPrefix(key, "sha256:") || len(key) != 7+64 {
		t.Errorf("a long key is stored as %q/%q", name, key)
	}
	if name, key := splitKey(storedKey("lim", nil, KeyOf{})); name != "lim" || key != "" {
		t.Errorf("no key function: %q/%q", name, key)
	}
}

// FuzzKeyFromPayload: any payload and path gives a key without a panic,
// the same key every time, and a stored key that splits back into the
// limit's name.
func FuzzKeyFromPayload(f *testing.F) {
	f.Add("tenant", `{"tenant":"acme"}`)
	f.Add("a.b.c", `{"a":{"b":{"c":[1,{"d":2}]}}}`)
	f.Add("x", `{"x":1e400}`)
	f.Fuzz(func(t *testing.T, path, payload string) {
		fn := KeyFromPayload(path)
		k := KeyOf{Payload: json.RawMessage(payload)}
		a, b := fn(k), fn(k)
		if a != b {
			t.Fatalf("not deterministic: %q then %q", a, b)
		}
		name, key := splitKey(storedKey("lim", fn, k))
		if name != "lim" || (len(a) <= maxKeyLen && key != a) || len(key) > maxKeyLen {
			t.Fatalf("stored as %q/%q for key %q", name, key, a)
		}
	})
}
