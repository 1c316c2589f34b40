package yella

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// refCheck is checkJSON's specification, built from the standard library:
// valid JSON, valid UTF-8 (outside strings valid JSON is ASCII) and a
// nesting depth within max.
func refCheck(b []byte, max int) (ok, deep bool) {
	if !json.Valid(b) || !utf8.Valid(b) {
		return false, false
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber() // numbers beyond float64 are valid JSON
	depth := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return true, false
		}
		if err != nil {
			return false, false
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if depth++; depth > max {
				return false, true
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

func TestCheckJSON(t *testing.T) {
	nest := func(n int, open, close string) string { return strings.Repeat(open, n) + strings.Repeat(close, n) }
	for _, c := range []struct {
		in       string
		ok, deep bool
		what     string
	}{
		{in: `{"a":[1,2.5,-0,1e9,-1.5E-3,true,false,null,"x"]}`, ok: true},
		{in: ` "\u00e9\n\"\\\/" `, ok: true},
		{in: `"Zoë — 😀"`, ok: true},
		{in: `"\ud800"`, ok: true}, // an escaped lone surrogate is ASCII on the wire
		{in: `{}`, ok: true},
		{in: `[]`, ok: true},
		{in: `[{}, [], {"a": {}}]`, ok: true},
		{in: nest(3, "[", "]"), ok: true},
		{in: nest(4, "[", "]"), deep: true, what: "nesting"},
		{in: `{"a":{"b":{"c":1}}}`, ok: true},
		{in: `{"a":{"b":{"c":{}}}}`, deep: true, what: "nesting"},
		{in: "\"\xff\xfe\"", what: "invalid UTF-8"},
		{in: "{\"k\xc3\":1}", what: "invalid UTF-8"},
		{in: "\"\xed\xa0\x80\"", what: "invalid UTF-8"}, // a UTF-8 encoded surrogate
		{in: "\"\xc0\xaf\"", what: "invalid UTF-8"},     // overlong
		{in: "\"\t\"", what: "control character in a string"},
		{in: `"\x"`, what: "invalid escape"},
		{in: `"\u12g4"`, what: "invalid \\u escape"},
		{in: `{"a" 1}`, what: "missing colon after an object key"},
		{in: `{1:2}`, what: "unexpected '1', want an object key"},
		{in: `{"a":1,}`, what: "unexpected '}', want an object key"},
		{in: `[1,]`, what: "unexpected ']'"},
		{in: `[1 2]`, what: "unexpected '2'"},
		{in: `[1}`, what: "unexpected '}'"},
		{in: `01`, what: "unexpected '1' after the value"},
		{in: `1.`, what: "invalid number"},
		{in: `-`, what: "invalid number"},
		{in: `1e`, what: "invalid number"},
		{in: `tru`, what: "invalid literal"},
		{in: `nulls`, what: "unexpected 's' after the value"},
		{in: ``, what: "unexpected end of JSON"},
		{in: `   `, what: "unexpected end of JSON"},
		{in: `{"a":`, what: "unexpected end of JSON"},
		{in: `"abc`, what: "unexpected end of JSON"},
		{in: "\xff", what: "unexpected byte 0xff"},
	} {
		pe := checkJSON([]byte(c.in), 3)
		refOK, refDeep := refCheck([]byte(c.in), 3)
		if refOK != c.ok || refDeep != c.deep {
			t.Fatalf("table entry %q disagrees with the reference (ok %v deep %v)", c.in, refOK, refDeep)
		}
		switch {
		case c.ok && pe != nil:
			t.Errorf("%q refused: %s at %d", c.in, pe.what, pe.off)
		case !c.ok && pe == nil:
			t.Errorf("%q accepted, want %q", c.in, c.what)
		case !c.ok && (pe.what != c.what || pe.deep != c.deep):
			t.Errorf("%q refused with %q (deep %v), want %q (deep %v)", c.in, pe.what, pe.deep, c.what, c.deep)
		}
	}
}

// FuzzCheckJSON: checkJSON accepts exactly what the standard library's
// validation, utf8.Valid and a token-counted depth accept.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":null}]}`, `[[[[1]]]]`, "\"\xff\"", `"\ud800"`, `-0.5e+3`, `{"a":1,}`, ` [ ] `, `"\u00e9"`, "\"é\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		const max = 4
		ok, deep := refCheck(b, max)
		pe := checkJSON(b, max)
		if ok != (pe == nil) {
			t.Fatalf("%q: checkJSON %+v, reference ok=%v", b, pe, ok)
		}
		// Where the text is too deep and also malformed further on, either
		// reason may be reported; on well-formed text only nesting is.
		if pe != nil && json.Valid(b) && utf8.Valid(b) && pe.deep != deep {
			t.Fatalf("%q: checkJSON deep=%v (%s), reference deep=%v", b, pe.deep, pe.what, deep)
		}
		if pe != nil && (pe.off < 0 || pe.off > len(b)) {
			t.Fatalf("%q: offset %d out of range", b, pe.off)
		}
	})
}

// BenchmarkCheckJSON compares the payload check with json.Valid, which it
// replaces on raw payloads.
func BenchmarkCheckJSON(b *testing.B) {
	doc := []byte(`{"id":"evt_1","data":{"object":{"amount":4200,"customer":{"name":"Zoë Ångström","address":{"city":"Wien"}},` +
		`"charges":[{"id":"ch_1","outcome":{"risk_score":12,"seller_message":"Payment complete."}}],"note":"Lieferung — danke!"}},"type":"payment_intent.succeeded"}`)
	b.Run("checkJSON", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for range b.N {
			if checkJSON(doc, DefaultMaxPayloadDepth) != nil {
				b.Fatal("refused")
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for range b.N {
			if !json.Valid(doc) {
				b.Fatal("refused")
			}
		}
	})
}
