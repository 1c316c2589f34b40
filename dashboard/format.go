package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/yella-go/yella"
)

// shortID is a compact form of a run id for tables. Yella's ids are UUIDv7,
// whose leading characters are a timestamp shared by runs created close
// together, so the short form keeps the random tail.
func shortID(id string) string {
	if len(id) <= 12 {
		return id
	}
	return "…" + id[len(id)-8:]
}

// ago says how long before now t was ("4s ago", "in 2m" for the future).
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t)
	switch {
	case d <= -time.Second:
		return "in " + coarse(-d)
	case d < time.Second:
		return "just now"
	}
	return coarse(d) + " ago"
}

// coarse formats a duration with one or two units: 45s, 3m 20s, 5h 2m, 3d 4h.
func coarse(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return twoUnits(int(d/time.Minute), "m", int(d%time.Minute/time.Second), "s")
	case d < 48*time.Hour:
		return twoUnits(int(d/time.Hour), "h", int(d%time.Hour/time.Minute), "m")
	}
	return twoUnits(int(d/(24*time.Hour)), "d", int(d%(24*time.Hour)/time.Hour), "h")
}

func twoUnits(a int, ua string, b int, ub string) string {
	if b == 0 {
		return strconv.Itoa(a) + ua
	}
	return strconv.Itoa(a) + ua + " " + strconv.Itoa(b) + ub
}

// human formats a duration precisely enough for run timings: 0 ms,
// 850 µs, 12.3 ms, 1.25 s, then coarse units from a minute on.
func human(d time.Duration) string {
	switch {
	case d <= 0:
		return "0 ms"
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d/time.Microsecond)
	case d < 100*time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
	case d < time.Second:
		return fmt.Sprintf("%d ms", d/time.Millisecond)
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
	}
	return coarse(d)
}

// timestamp is an absolute time in UTC with milliseconds, or "—".
func timestamp(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000")
}

// iso is t for a datetime attribute ("" when zero).
func iso(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// percent formats a success rate; negative means "no data".
func percent(v float64) string {
	if v < 0 {
		return "—"
	}
	s := strconv.FormatFloat(v*100, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + "%"
}

// number groups digits in thousands: 12,345.
func number(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// anyNumber is number for the integer types templates meet.
func anyNumber(v any) string {
	switch x := v.(type) {
	case int:
		return number(int64(x))
	case int64:
		return number(x)
	}
	return fmt.Sprint(v)
}

// effectKey is a stored effect key as its parts: "charge · 42".
func effectKey(enc string) string { return strings.Join(yella.DecodeKey(enc), " · ") }

func sinceOrZero(from, to time.Time) time.Duration {
	if from.IsZero() || to.IsZero() || to.Before(from) {
		return 0
	}
	return to.Sub(from)
}

// statusLabel is the short label of a status ("dead letter").
func statusLabel(s yella.Status) string {
	if s == yella.StatusDead {
		return "dead letter"
	}
	return string(s)
}

// secretKey matches object keys whose values are masked wherever the
// dashboard shows JSON (payloads, outputs, context, effect outputs).
var secretKey = regexp.MustCompile(`(?i)pass|secret|token|authorization|api[_-]?key|cookie`)

// Display limits of prettyJSON.
const (
	maxJSONShown = 256 << 10 // characters of indented text
	maxJSONDepth = 200
)

// jsonView is a JSON document prepared for display.
type jsonView struct {
	Text      string // indented, with secrets masked
	Empty     bool   // no document at all
	Redacted  int    // values masked
	Truncated bool   // Text was cut at maxJSONShown
	Invalid   bool   // not JSON: not shown
	Size      int    // bytes stored
}

// prettyJSON indents a stored JSON document, keeping key order, and masks
// the values of keys that look like secrets (secretKey).
func prettyJSON(raw json.RawMessage) jsonView {
	v := jsonView{Size: len(raw)}
	if len(bytes.TrimSpace(raw)) == 0 {
		v.Empty = true
		return v
	}
	p := &printer{dec: json.NewDecoder(bytes.NewReader(raw))}
	p.dec.UseNumber()
	if err := p.value(0); err == errShown {
		v.Truncated = true
	} else if err != nil {
		v.Invalid = true
		return v
	}
	v.Text, v.Redacted = p.out.String(), p.redacted
	if len(v.Text) > maxJSONShown {
		cut := maxJSONShown
		for cut > 0 && !utf8Start(v.Text[cut]) {
			cut--
		}
		v.Text, v.Truncated = v.Text[:cut], true
	}
	return v
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

type printer struct {
	dec      *json.Decoder
	out      strings.Builder
	redacted int
}

var errTooDeep = fmt.Errorf("nested too deeply to display")

// errShown stops the printer once it has more than maxJSONShown
// characters: indentation makes the text much larger than the document (a
// 1 MB array at depth 190 would print 200 MB), and only that much is shown.
var errShown = fmt.Errorf("more than is shown")

func (p *printer) value(depth int) error {
	if depth > maxJSONDepth {
		return errTooDeep
	}
	if p.out.Len() > maxJSONShown {
		return errShown
	}
	tok, err := p.dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		return p.container(t, depth)
	case string:
		p.str(t)
	case json.Number:
		p.out.WriteString(t.String())
	case bool:
		p.out.WriteString(strconv.FormatBool(t))
	case nil:
		p.out.WriteString("null")
	}
	return nil
}

func (p *printer) container(open json.Delim, depth int) error {
	closing := "]"
	if open == '{' {
		closing = "}"
	}
	p.out.WriteString(string(open))
	n := 0
	for p.dec.More() {
		if n > 0 {
			p.out.WriteByte(',')
		}
		n++
		p.out.WriteString("\n" + strings.Repeat("  ", depth+1))
		if open == '{' {
			tok, err := p.dec.Token()
			if err != nil {
				return err
			}
			key, _ := tok.(string)
			p.str(key)
			p.out.WriteString(": ")
			if secretKey.MatchString(key) {
				if err := p.skip(); err != nil {
					return err
				}
				p.out.WriteString(`"••••••"`)
				p.redacted++
				continue
			}
		}
		if err := p.value(depth + 1); err != nil {
			return err
		}
	}
	if _, err := p.dec.Token(); err != nil { // the closing delimiter
		return err
	}
	if n > 0 {
		p.out.WriteString("\n" + strings.Repeat("  ", depth))
	}
	p.out.WriteString(closing)
	return nil
}

// skip consumes one value without printing it.
func (p *printer) skip() error {
	depth := 0
	for {
		tok, err := p.dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

func (p *printer) str(s string) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the template escapes for HTML
	enc.Encode(s)
	p.out.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// jsonError describes a JSON syntax error in src by line and column; skip
// is how many bytes of src precede the text that was decoded.
func jsonError(src string, skip int, err error) string {
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends too early"
	case !errors.As(err, &se):
		return err.Error()
	}
	line, col := 1, 1
	for i, c := range src {
		if int64(i) >= int64(skip)+se.Offset-1 {
			break
		}
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("%s (line %d, column %d)", se.Error(), line, col)
}

// parseJSON validates a JSON document typed into a form. Empty (only
// spaces) gives nil: no payload.
func parseJSON(s string) (json.RawMessage, string) {
	t := strings.TrimSpace(s)
	if t == "" {
		return nil, ""
	}
	dec := json.NewDecoder(strings.NewReader(t))
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, "Not valid JSON: " + jsonError(s, strings.Index(s, t), err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, "Not valid JSON: unexpected text after the first value (wrap several values in an array)"
	}
	return json.RawMessage(t), ""
}
