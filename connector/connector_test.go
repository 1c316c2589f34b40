package connector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"  ", 0, false},
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{" 7 ", 7 * time.Second, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"99999999999999999999", 0, false}, // overflows int64: malformed
		{"9223372036854775807", time.Duration(9223372036) * time.Second, true},
		{"Tue, 01 Dec 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Tue, 01 Dec 2026 11:59:00 GMT", 0, true},
		{"Tuesday, 01-Dec-26 12:01:00 GMT", time.Minute, true},
	} {
		got, ok := ParseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestClassification(t *testing.T) {
	perm := &Error{Op: "POST x", Status: 400, Code: "invalid_request", Body: "bad"}
	busy := &Error{Op: "POST x", Status: 429, Retryable: true, RetryAfter: 3 * time.Second}
	for _, tc := range []struct {
		err       error
		retryable bool
		after     time.Duration
	}{
		{nil, false, 0},
		{perm, false, 0},
		{fmt.Errorf("charge: %w", perm), false, 0},
		{busy, true, 3 * time.Second},
		{fmt.Errorf("charge: %w", busy), true, 3 * time.Second},
		{io.ErrUnexpectedEOF, true, 0},
		{context.DeadlineExceeded, true, 0},
	} {
		if got := Retryable(tc.err); got != tc.retryable {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.retryable)
		}
		if got := RetryAfter(tc.err); got != tc.after {
			t.Errorf("RetryAfter(%v) = %v, want %v", tc.err, got, tc.after)
		}
	}
	if !errors.Is(&Error{Op: "GET y", Err: io.EOF}, io.EOF) {
		t.Error("Error does not unwrap to its cause")
	}
}

func TestErrorMessage(t *testing.T) {
	e := &Error{Op: "POST https://api.example.com/v1/charges", Status: 429, Code: "rate_limit", Body: `{"error":"slow down"}`, RetryAfter: 2 * time.Second}
	want := `POST https://api.example.com/v1/charges: 429 Too Many Requests (rate_limit): {"error":"slow down"} (retry after 2s)`
	if got := e.Error(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	e = &Error{Op: "GET http://x", Err: io.ErrUnexpectedEOF}
	if got, want := e.Error(), "GET http://x: unexpected EOF"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
