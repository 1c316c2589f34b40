// Package connector holds what Yella's connectors share: a classified error
// that says whether a retry can help and how long the downstream asked
// callers to wait, the hook through which a downstream's "slow down" reaches
// a rate limiter, and the mapping from a call's error to a handler's Result.
//
// The connectors themselves live in the packages below this one; none is
// needed by the engine.
package connector

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/yella-go/yella"
)

// Limiter is told by a connector when a downstream asked its callers to slow
// down (an HTTP 429, or a 503 with Retry-After, or a provider's rate-limit
// headers). A rate limiter implements it to hold back every run that shares
// key until the time given. Connectors accept a nil Limiter.
type Limiter interface {
	// HoldUntil asks that nothing call the downstream named by key again
	// before until. A later call with an earlier time does not shorten a
	// hold.
	HoldUntil(key string, until time.Time)
}

// Error is a failed call to a downstream, classified. Connectors return it
// (possibly wrapped) for every failure they can classify.
type Error struct {
	// Op names the call, such as "POST https://api.example.com/v1/things".
	Op string
	// Status is the HTTP status of the response, or 0 when there was none
	// (the request was not sent, or the connection failed).
	Status int
	// Code is the downstream's own error code or type, when it gave one.
	Code string
	// Retryable reports whether the same call may succeed later.
	Retryable bool
	// RetryAfter is how long the downstream asked callers to wait, or 0.
	RetryAfter time.Duration
	// Body is the start of the response body (bounded by the connector), for
	// the error message.
	Body string
	// Err is the underlying error, if any.
	Err error
}

// Error renders the call, the status and what the downstream said.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": %d %s", e.Status, http.StatusText(e.Status))
	}
	if e.Code != "" {
		fmt.Fprintf(&b, " (%s)", e.Code)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Body != "" {
		fmt.Fprintf(&b, ": %s", e.Body)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether a retry of the call that returned err may
// succeed: a classified Error says so itself; any other non-nil error (a
// connection reset, a timeout) counts as retryable, since the outcome is not
// known to be final.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Retryable
	}
	return true
}

// RetryAfter returns how long the downstream asked callers to wait before
// the call that returned err is retried, or 0.
func RetryAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// Outcome ends a handler's attempt after a failed call: c.Error (retried by
// the process's retry policy) when a retry may help, c.Fail (final, no
// retry) when it cannot. A nil err is not a failure; Outcome then returns
// c.OK(nil).
func Outcome(c *yella.Ctx, err error) yella.Result {
	switch {
	case err == nil:
		return c.OK(nil)
	case Retryable(err):
		return c.Error(err)
	default:
		return c.Fail(err)
	}
}

// ParseRetryAfter reads an HTTP Retry-After value: a number of seconds, or
// an HTTP date taken relative to now. A date in the past gives 0 and true;
// an empty, negative or malformed value gives 0 and false.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		const maxSeconds = int64(1<<63-1) / int64(time.Second)
		return time.Duration(min(n, maxSeconds)) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// RetryDelay returns RetryAfter: the engine schedules the retry of a run
// whose attempt ended with this error (c.Error) no earlier than that.
func (e *Error) RetryDelay() time.Duration { return e.RetryAfter }
