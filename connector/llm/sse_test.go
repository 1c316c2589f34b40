package llm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type sseEvent struct{ event, data string }

// readAll reads every event of in, and the error that ended the stream.
func readAll(r io.Reader, max int) ([]sseEvent, error) {
	s := newSSEReader(r, max)
	var out []sseEvent
	for {
		ev, data, err := s.next()
		if err != nil {
			return out, err
		}
		out = append(out, sseEvent{ev, string(data)})
	}
}

func TestSSEReader(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []sseEvent
		err  error
	}{
		{"LF", "data: a\n\ndata: b\n\n", []sseEvent{{"", "a"}, {"", "b"}}, io.EOF},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []sseEvent{{"", "a"}, {"", "b"}}, io.EOF},
		{"CR", "data: a\r\rdata: b\r\r", []sseEvent{{"", "a"}, {"", "b"}}, io.EOF},
		{"mixed endings", "data: a\r\n\ndata: b\r\r\n", []sseEvent{{"", "a"}, {"", "b"}}, io.EOF},
		{"no space after colon", "data:a\n\n", []sseEvent{{"", "a"}}, io.EOF},
		{"only one space stripped", "data:  a \n\n", []sseEvent{{"", " a "}}, io.EOF},
		{"multi-line event with CRLF", "data: a\r\ndata: b\r\n\r\n", []sseEvent{{"", "a\nb"}}, io.EOF},
		{"multi-line event", "data: {\"a\":\ndata: 1}\n\n", []sseEvent{{"", "{\"a\":\n1}"}}, io.EOF},
		{"comments and other fields", ": keep-alive\nid: 7\nretry: 10\nevent: delta\ndata: x\n\n:\n\n", []sseEvent{{"delta", "x"}}, io.EOF},
		{"event name reset after dispatch", "event: error\ndata: x\n\ndata: y\n\n", []sseEvent{{"error", "x"}, {"", "y"}}, io.EOF},
		{"blank lines without data", "\n\n\r\n", nil, io.EOF},
		{"field without colon", "data\n\n", []sseEvent{{"", ""}}, io.EOF},
		{"empty data", "data:\n\n", []sseEvent{{"", ""}}, io.EOF},
		{"byte order mark", "\xEF\xBB\xBFdata: a\n\n", []sseEvent{{"", "a"}}, io.EOF},
		{"event cut by the end", "data: a\n\ndata: b\n", []sseEvent{{"", "a"}}, io.EOF},
		{"line cut by the end", "data: a\n\ndata: b", []sseEvent{{"", "a"}}, io.EOF},
		{"line too long", "data: " + strings.Repeat("x", 64) + "\n\n", nil, errTooLarge},
		{"event too large", strings.Repeat("data: xxxxxxxxxx\n", 8) + "\n", nil, errTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(strings.NewReader(tc.in), 32)
			if !errors.Is(err, tc.err) {
				t.Errorf("error %v, want %v", err, tc.err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("events %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("event %d = %q, want %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestBoundedReader(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int64
		want string
		err  error
	}{
		{"abc", 3, "abc", nil},
		{"abc", 4, "abc", nil},
		{"abcd", 3, "abc", errTooLarge},
	} {
		got, err := io.ReadAll(&boundedReader{r: strings.NewReader(tc.in), n: tc.n})
		if string(got) != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("%q bounded to %d: %q, %v; want %q, %v", tc.in, tc.n, got, err, tc.want, tc.err)
		}
	}
}

// FuzzSSE: the reader never panics, never returns more than its bound, and
// returns the same events however the stream is cut into reads; events
// written with any line ending (and comments between them) read back as
// they were written.
func FuzzSSE(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[]}\n\ndata: [DONE]\n\n"), "x\ny", uint8(0))
	f.Add([]byte("data: a\r\n\r\n: c\r\ndata: b\r\rdata: c"), "a", uint8(1))
	f.Add([]byte("\xEF\xBB\xBFevent: error\ndata:\n\n\r\r\n"), "", uint8(2))
	f.Add([]byte(strings.Repeat("data: x\n", 300)+"\n"), "\r\n", uint8(3))
	f.Fuzz(func(t *testing.T, in []byte, payload string, ending uint8) {
		const max = 512
		whole, werr := readAll(bytes.NewReader(in), max)
		bytewise, berr := readAll(iotest.OneByteReader(bytes.NewReader(in)), max)
		if !errors.Is(werr, io.EOF) && !errors.Is(werr, errTooLarge) {
			t.Fatalf("unexpected error %v", werr)
		}
		if !errors.Is(berr, werr) || len(bytewise) != len(whole) {
			t.Fatalf("read at once: %q, %v; a byte at a time: %q, %v", whole, werr, bytewise, berr)
		}
		for i := range whole {
			if whole[i] != bytewise[i] {
				t.Fatalf("event %d: %q at once, %q a byte at a time", i, whole[i], bytewise[i])
			}
			if len(whole[i].data) > max {
				t.Fatalf("event %d has %d bytes of data, over the bound %d", i, len(whole[i].data), max)
			}
		}

		// Round trip: payload's lines as data lines, with the chosen ending.
		if len(payload) > max || strings.ContainsRune(payload, '\r') {
			return
		}
		eol := []string{"\n", "\r\n", "\r"}[int(ending)%3]
		var b strings.Builder
		b.WriteString(": comment" + eol)
		for _, l := range strings.Split(payload, "\n") {
			b.WriteString("data: " + l + eol)
		}
		b.WriteString(eol + "data: [DONE]" + eol + eol)
		got, err := readAll(strings.NewReader(b.String()), max+8)
		if !errors.Is(err, io.EOF) || len(got) != 2 || got[0].data != payload || got[1].data != "[DONE]" {
			t.Fatalf("round trip of %q with %q: %q, %v", payload, eol, got, err)
		}
	})
}

// FuzzReadStream: whatever a server sends, reading it never panics; a
// stream is accepted only if it ended with [DONE] and named a finish
// reason, and the text OnDelta saw is the completion's text.
func FuzzReadStream(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":2,\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{\"}},{\"function\":{\"arguments\":\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("event: error\ndata: {\"error\":{\"message\":\"x\",\"code\":7}}\n\n"))
	f.Add([]byte("data: {\"usage\":{\"prompt_tokens\":-1},\"error\":null}\r\n\r\ndata: [DONE]\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var seen strings.Builder
		c, err := readStream(bytes.NewReader(in), 4096, func(s string) { seen.WriteString(s) })
		if err != nil {
			return
		}
		if c.FinishReason == "" || !bytes.Contains(in, []byte("[DONE]")) {
			t.Fatalf("accepted a stream without [DONE] or a finish reason: %+v", c)
		}
		if seen.String() != c.Message.Content {
			t.Fatalf("OnDelta saw %q, the completion has %q", seen.String(), c.Message.Content)
		}
	})
}
