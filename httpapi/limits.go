package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// What one read may cost: a context deadline (Options.QueryTimeout) passed
// down to the store, a slot among Options.MaxHeavyReads for the reads that
// query runs, and a response of at most Options.MaxResponseBytes, built
// piece by piece so that a large answer stops at the limit instead of
// being held whole.

// readBatch is how many runs a listing reads from the store at a time: a
// page of 1,000 runs never has more than this many rows (and their
// payloads) in memory besides the response being built.
const readBatch = 100

// errTooLarge: a response passed Options.MaxResponseBytes.
var errTooLarge = errors.New("response too large")

// read wraps a GET handler: heavy reads take a slot or are refused with 503
// BUSY and Retry-After; every read runs under QueryTimeout.
func (a *API) read(heavy bool, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if heavy {
			select {
			case a.heavy <- struct{}{}:
				defer func() { <-a.heavy }()
			default:
				w.Header().Set("Retry-After", "1")
				a.fail(w, r, &apiError{http.StatusServiceUnavailable, "BUSY",
					fmt.Sprintf("%d reads are in progress, the most this server runs at once; try again in a second", cap(a.heavy))})
				return
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), a.opts.QueryTimeout)
		defer cancel()
		h(w, r.WithContext(ctx))
	}
}

// timedOut reports whether r's read deadline (not the client) ended it.
func timedOut(r *http.Request) bool {
	return errors.Is(r.Context().Err(), context.DeadlineExceeded)
}

// body is a JSON response under construction, bounded by max bytes and
// stopped by its context. The first error sticks; send reports it.
type body struct {
	ctx context.Context
	buf []byte
	max int
	err error
}

func (a *API) newBody(r *http.Request) *body {
	return &body{ctx: r.Context(), max: a.opts.MaxResponseBytes}
}

// raw appends literal JSON text.
func (b *body) raw(s string) { b.add([]byte(s)) }

// value appends v encoded compactly.
func (b *body) value(v any) {
	if b.err != nil {
		return
	}
	if err := b.ctx.Err(); err != nil {
		b.fail(err)
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		b.fail(err)
		return
	}
	b.add(data)
}

func (b *body) add(p []byte) {
	if b.err != nil {
		return
	}
	if len(b.buf)+len(p) > b.max {
		b.fail(errTooLarge)
		return
	}
	b.buf = append(b.buf, p...)
}

func (b *body) fail(err error) {
	b.err, b.buf = err, nil
}

// send writes the body with status, or the error that stopped it.
func (a *API) send(w http.ResponseWriter, r *http.Request, status int, b *body) {
	if b.err == nil {
		b.err = b.ctx.Err()
	}
	if b.err != nil {
		a.fail(w, r, b.err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(b.buf)+1))
	w.WriteHeader(status)
	w.Write(append(b.buf, '\n'))
}

// reply sends v, bounded like every response.
func (a *API) reply(w http.ResponseWriter, r *http.Request, status int, v any) {
	b := a.newBody(r)
	b.value(v)
	a.send(w, r, status, b)
}

// limitError turns the errors of the read limits into API errors, or
// returns nil.
func (a *API) limitError(r *http.Request, err error) *apiError {
	switch {
	case errors.Is(err, errTooLarge):
		return &apiError{http.StatusUnprocessableEntity, "RESPONSE_TOO_LARGE",
			fmt.Sprintf("the answer is larger than this server's response limit (%d bytes); ask for fewer runs (limit=) or narrow the filters", a.opts.MaxResponseBytes)}
	case timedOut(r):
		return &apiError{http.StatusServiceUnavailable, "TIMEOUT",
			fmt.Sprintf("the read took longer than this server's query timeout (%s) and was stopped; narrow it (filters, limit=) or try again", a.opts.QueryTimeout)}
	}
	return nil
}
