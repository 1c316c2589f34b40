package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestIndentJSON: within the depth bound the output is json.Indent's;
// beyond it, deeper parts stay compact, so a deeply nested payload prints
// in size linear in its input (fully indented, 9,000 nested arrays of
// 18 KB print as 162 MB).
func TestIndentJSON(t *testing.T) {
	for _, doc := range []string{
		`{}`, `[]`, `1`, `"a\"[{,:"`, `{"a":[1,2,{"b":null}],"c":{},"d":[]}`,
		`[[[[["deep",{"k":"v"}]]]]]`, ` { "sp" : [ 1 , 2 ] } `, `{"s":"\\"}`,
	} {
		var want, got bytes.Buffer
		if err := json.Indent(&want, []byte(doc), "", "  "); err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		json.Compact(&compact, []byte(doc))
		want.Reset()
		json.Indent(&want, compact.Bytes(), "", "  ")
		if err := indentJSON(&got, []byte(doc), 64); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%s:\ngot  %s\nwant %s", doc, got.String(), want.String())
		}
	}
	deep := strings.Repeat("[", 9000) + strings.Repeat("]", 9000)
	var out bytes.Buffer
	if err := indentJSON(&out, []byte(deep), maxIndentDepth); err != nil {
		t.Fatal(err)
	}
	if out.Len() > 2*len(deep) {
		t.Errorf("9,000 nested arrays (%d bytes) printed as %d bytes", len(deep), out.Len())
	}
	if !json.Valid(out.Bytes()) {
		t.Error("the bounded output is not valid JSON")
	}
	if err := indentJSON(&out, []byte(`{"a":`), 4); err == nil {
		t.Error("invalid JSON accepted")
	}
}

// FuzzIndentJSON: the output is valid JSON equal to the input once
// compacted, and equals json.Indent's when the depth bound is not reached.
func FuzzIndentJSON(f *testing.F) {
	f.Add(`{"a":[1,{"b":"x\"y"}],"c":[]}`, 2)
	f.Add(`[[[[[]]]]]`, 1)
	f.Fuzz(func(t *testing.T, doc string, max int) {
		if !json.Valid([]byte(doc)) || max < 0 || max > 100 {
			return
		}
		var got bytes.Buffer
		if err := indentJSON(&got, []byte(doc), max); err != nil {
			t.Fatal(err)
		}
		var a, b bytes.Buffer
		json.Compact(&a, []byte(doc))
		if err := json.Compact(&b, got.Bytes()); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, got.String())
		}
		if a.String() != b.String() {
			t.Fatalf("content changed:\n%s\n%s", a.String(), b.String())
		}
		if max == 100 {
			var want bytes.Buffer
			json.Indent(&want, a.Bytes(), "", "  ")
			if want.String() != got.String() && strings.Count(doc, "[")+strings.Count(doc, "{") < 100 {
				t.Fatalf("differs from json.Indent:\n%s\n%s", got.String(), want.String())
			}
		}
	})
}
