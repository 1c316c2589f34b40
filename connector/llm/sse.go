package llm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// errTooLarge: the response is larger than Config.MaxResponseBytes.
var errTooLarge = errors.New("response larger than the limit (llm.Config.MaxResponseBytes)")

// boundedReader reads at most n bytes from r and then fails with
// errTooLarge, so that an oversized stream is not mistaken for one that
// ended early.
type boundedReader struct {
	r io.Reader
	n int64
}

// Read reads from the underlying reader, failing with errTooLarge once the
// bound is passed.
func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n <= 0 {
		// One more byte tells a stream of exactly n bytes from a longer one.
		var one [1]byte
		if n, err := b.r.Read(one[:]); n > 0 {
			return 0, errTooLarge
		} else if err != nil {
			return 0, err
		}
		return 0, nil
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	return n, err
}

// sseReader reads a Server-Sent Events stream: lines ended by LF, CRLF or
// CR; "field: value" lines; comments (lines starting with ':'); events
// dispatched at a blank line, their data lines joined with '\n'.
type sseReader struct {
	r      *bufio.Reader
	max    int // bound on one line and on one event's data
	skipLF bool
	first  bool
	line   []byte
	data   []byte
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 32<<10), max: max, first: true}
}

// next returns the next event's type ("" when the event named none) and
// data. An event that the stream's end cuts short is dropped: next then
// returns io.EOF, or the read error.
func (s *sseReader) next() (event string, data []byte, err error) {
	s.data = s.data[:0]
	hasData := false
	for {
		line, err := s.readLine()
		if err != nil {
			return "", nil, err
		}
		if len(line) == 0 {
			if hasData {
				return event, s.data, nil
			}
			event = ""
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if hasData {
				s.data = append(s.data, '\n')
			}
			if len(s.data)+len(value) > s.max {
				return "", nil, errTooLarge
			}
			s.data = append(s.data, value...)
			hasData = true
		case "event":
			event = string(value)
		}
	}
}

// readLine returns the next line without its end. A line cut short by the
// stream's end is not a line: readLine returns io.EOF.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		b, err := s.r.ReadByte()
		if err != nil {
			return nil, err
		}
		if s.skipLF {
			s.skipLF = false
			if b == '\n' {
				continue
			}
		}
		switch b {
		case '\n':
			return s.stripBOM(), nil
		case '\r':
			s.skipLF = true
			return s.stripBOM(), nil
		}
		if len(s.line) >= s.max {
			return nil, errTooLarge
		}
		s.line = append(s.line, b)
	}
}

// stripBOM drops a byte order mark at the start of the stream.
func (s *sseReader) stripBOM() []byte {
	if s.first {
		s.first = false
		return bytes.TrimPrefix(s.line, []byte("\xEF\xBB\xBF"))
	}
	return s.line
}
