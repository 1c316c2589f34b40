package yella

import (
	"fmt"
	"unicode/utf8"
)

// payloadError says why a JSON text was refused and where.
type payloadError struct {
	off  int    // byte offset of the problem
	what string // "invalid UTF-8", "nesting", or a syntax problem
	deep bool   // refused for nesting deeper than the limit
}

// checkJSON validates b in one pass: it must be one JSON value (RFC 8259)
// whose strings are valid UTF-8 and whose arrays and objects nest at most
// maxDepth deep. Escapes (\u…) are checked for form only: an escaped lone
// surrogate is valid JSON and stays ASCII on the wire.
func checkJSON(b []byte, maxDepth int) *payloadError {
	var buf [64]bool // open containers: true for an object
	stack := buf[:0]
	i := skipWS(b, 0)
	for {
		// A value starts at i.
		if i >= len(b) {
			return &payloadError{off: i, what: "unexpected end of JSON"}
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) >= maxDepth {
				return &payloadError{off: i, what: "nesting", deep: true}
			}
			stack = append(stack, c == '{')
			i = skipWS(b, i+1)
			if i < len(b) && (b[i] == '}' && c == '{' || b[i] == ']' && c == '[') {
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				var err *payloadError
				if i, err = scanKey(b, i); err != nil {
					return err
				}
			}
			continue // the first member's value
		case c == '"':
			var err *payloadError
			if i, err = scanString(b, i); err != nil {
				return err
			}
		case c == '-' || c >= '0' && c <= '9':
			var err *payloadError
			if i, err = scanNumber(b, i); err != nil {
				return err
			}
		case c == 't':
			if !hasLiteral(b, i, "true") {
				return &payloadError{off: i, what: "invalid literal"}
			}
			i += 4
		case c == 'f':
			if !hasLiteral(b, i, "false") {
				return &payloadError{off: i, what: "invalid literal"}
			}
			i += 5
		case c == 'n':
			if !hasLiteral(b, i, "null") {
				return &payloadError{off: i, what: "invalid literal"}
			}
			i += 4
		default:
			return &payloadError{off: i, what: fmt.Sprintf("unexpected %s", describeByte(c))}
		}
		// A value ended at i: close containers until a comma asks for the
		// next value.
		next := false
		for !next {
			i = skipWS(b, i)
			if len(stack) == 0 {
				if i != len(b) {
					return &payloadError{off: i, what: fmt.Sprintf("unexpected %s after the value", describeByte(b[i]))}
				}
				return nil
			}
			if i >= len(b) {
				return &payloadError{off: i, what: "unexpected end of JSON"}
			}
			obj := stack[len(stack)-1]
			switch c := b[i]; {
			case c == ',':
				i = skipWS(b, i+1)
				if obj {
					var err *payloadError
					if i, err = scanKey(b, i); err != nil {
						return err
					}
				}
				next = true
			case c == '}' && obj, c == ']' && !obj:
				stack = stack[:len(stack)-1]
				i++
			default:
				return &payloadError{off: i, what: fmt.Sprintf("unexpected %s", describeByte(c))}
			}
		}
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// scanKey reads an object member's key and its colon; it returns the
// offset of the member's value.
func scanKey(b []byte, i int) (int, *payloadError) {
	if i >= len(b) || b[i] != '"' {
		if i >= len(b) {
			return i, &payloadError{off: i, what: "unexpected end of JSON"}
		}
		return i, &payloadError{off: i, what: fmt.Sprintf("unexpected %s, want an object key", describeByte(b[i]))}
	}
	i, err := scanString(b, i)
	if err != nil {
		return i, err
	}
	i = skipWS(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, &payloadError{off: i, what: "missing colon after an object key"}
	}
	return skipWS(b, i+1), nil
}

// scanString reads the string starting at b[i] == '"' and returns the
// offset after its closing quote.
func scanString(b []byte, i int) (int, *payloadError) {
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(b) {
				return i, &payloadError{off: i, what: "unexpected end of JSON"}
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, &payloadError{off: i, what: "invalid \\u escape"}
				}
				i += 6
			default:
				return i, &payloadError{off: i, what: "invalid escape"}
			}
		case c < 0x20:
			return i, &payloadError{off: i, what: "control character in a string"}
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return i, &payloadError{off: i, what: "invalid UTF-8"}
			}
			i += size
		}
	}
	return i, &payloadError{off: i, what: "unexpected end of JSON"}
}

// scanNumber reads the number starting at b[i] and returns the offset
// after it.
func scanNumber(b []byte, i int) (int, *payloadError) {
	start := i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return i, &payloadError{off: start, what: "invalid number"}
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return i, &payloadError{off: start, what: "invalid number"}
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return i, &payloadError{off: start, what: "invalid number"}
		}
		i = j
	}
	return i, nil
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

func describeByte(c byte) string {
	if c >= 0x20 && c < utf8.RuneSelf {
		return fmt.Sprintf("%q", c)
	}
	return fmt.Sprintf("byte 0x%02x", c)
}
