package httpapi

import (
	"errors"
	"net/http"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpguard"
)

// logMutation records one mutation at info level, done or refused: who
// (httpguard.Actor: "token", "session:<id prefix>" or "anonymous";
// "unguarded" when the API runs without the guard, as in the CLI), the
// client's address, the route, the runs it touched and the outcome.
func (a *API) logMutation(r *http.Request, runs []string, err error, attrs ...any) {
	who := httpguard.Actor(r.Context())
	if who == "" {
		who = "unguarded"
	}
	if runs == nil {
		runs = []string{}
	}
	args := append([]any{"who", who, "remote", r.RemoteAddr, "route", r.Pattern, "runs", runs, "ok", err == nil}, attrs...)
	if err != nil {
		args = append(args, "code", codeOf(err))
	}
	a.opts.Logger.Info("api mutation", args...)
}

// codeOf is the error code a client is answered with.
func codeOf(err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.code
	}
	if c := yella.CodeOf(err); c != "" {
		return string(c)
	}
	return "INTERNAL"
}

// requeueAllDead requeues the dead letters (of process, if not "") a page
// at a time, logging the ids of each page, and returns how many it
// requeued. A run that changed meanwhile is skipped.
func (a *API) requeueAllDead(r *http.Request, process string) (int, error) {
	ctx := r.Context()
	q := yella.RunQuery{Process: process, Status: []yella.Status{yella.StatusDead}, Order: yella.OldestFirst, Limit: readBatch}
	n := 0
	for {
		page, err := a.eng.Runs(ctx, q)
		if err != nil {
			return n, err
		}
		var done []string
		for _, run := range page.Runs {
			if _, err = a.eng.RequeueDead(ctx, run.ID); errors.Is(err, yella.ErrInvalidRunState) {
				err = nil
				continue
			}
			if err != nil {
				break
			}
			done = append(done, run.ID)
		}
		n += len(done)
		if len(done) > 0 || err != nil {
			a.logMutation(r, done, err, "process", process)
		}
		if err != nil || page.Next == "" {
			return n, err
		}
		q.Cursor = page.Next
	}
}
