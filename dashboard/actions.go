package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/yella-go/yella"
)

// Operator actions. Each is a POST form: it parses the (bounded) body,
// calls the engine and redirects back (303) with a flash message. An
// unknown run gives the 404 page; a run in the wrong state gives an error
// flash on the page it came from; bad JSON re-renders the form with the
// input kept and a 400.

// readForm parses a POST body; false means a response was written.
func (s *server) readForm(w http.ResponseWriter, r *http.Request) bool {
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.errorPage(w, r, http.StatusRequestEntityTooLarge, "Too large", fmt.Sprintf("The form is larger than %d KiB.", maxBody>>10))
			return false
		}
		s.errorPage(w, r, http.StatusBadRequest, "Bad request", "The form could not be read.")
		return false
	}
	return true
}

// act runs a one-click action on the run named in the path.
func (s *server) act(w http.ResponseWriter, r *http.Request, name string, do func(ctx context.Context, id string) (string, error)) {
	if !s.readForm(w, r) {
		return
	}
	id := r.PathValue("id")
	msg, err := do(r.Context(), id)
	s.log.Info("dashboard action", "action", name, "run", id, "who", who(r), "remote", r.RemoteAddr, "ok", err == nil, "code", yella.CodeOf(err))
	if err != nil {
		s.actionError(w, r, err, "/runs/"+url.PathEscape(id))
		return
	}
	s.setFlash(w, r, "ok", msg)
	s.back(w, r, "/runs/"+url.PathEscape(id))
}

// actionError answers a failed action: the 404 page for an unknown run, a
// flash for a refused transition, an error page for an engine failure.
func (s *server) actionError(w http.ResponseWriter, r *http.Request, err error, fallback string) {
	switch yella.CodeOf(err) {
	case yella.CodeRunNotFound, yella.CodeUnavailable, yella.CodeStopped, "":
		s.engineError(w, r, err)
	default:
		s.setFlash(w, r, "error", "Not done: "+engineMsg(err)+".")
		s.back(w, r, fallback)
	}
}

func (s *server) retry(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, "retry", func(ctx context.Context, id string) (string, error) {
		run, err := s.eng.Retry(ctx, id)
		return fmt.Sprintf("Retried run %s: it is %s again (attempts so far: %d).", shortID(id), run.Status, run.Attempts), err
	})
}

func (s *server) requeue(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, "requeue", func(ctx context.Context, id string) (string, error) {
		run, err := s.eng.RequeueDead(ctx, id)
		return fmt.Sprintf("Requeued dead letter %s with a fresh retry budget: it is %s.", shortID(id), run.Status), err
	})
}

func (s *server) cancel(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, "cancel", func(ctx context.Context, id string) (string, error) {
		_, err := s.eng.Cancel(ctx, id)
		return fmt.Sprintf("Cancelled run %s.", shortID(id)), err
	})
}

func (s *server) resume(w http.ResponseWriter, r *http.Request) {
	if !s.readForm(w, r) {
		return
	}
	id, input := r.PathValue("id"), r.PostForm.Get("payload")
	payload, bad := parseJSON(input)
	if bad != "" {
		s.renderRun(w, r, http.StatusBadRequest, actionForm{Action: "resume", Input: input, Error: bad})
		return
	}
	var arg any // untyped nil: keep the held payload
	if payload != nil {
		arg = payload
	}
	runs, err := s.eng.Resume(r.Context(), id, arg)
	s.log.Info("dashboard action", "action", "resume", "run", id, "who", who(r), "remote", r.RemoteAddr, "ok", err == nil, "code", yella.CodeOf(err))
	if err != nil {
		s.actionError(w, r, err, "/runs/"+url.PathEscape(id))
		return
	}
	s.setFlash(w, r, "ok", fmt.Sprintf("Resumed run %s: %s admitted%s.", shortID(id), plural(len(runs), "follow-up run"), listIDs(runs)))
	s.back(w, r, "/runs/"+url.PathEscape(id))
}

// signalRun ends the wait of a run waiting for a signal with the payload
// typed in its form (empty: null).
func (s *server) signalRun(w http.ResponseWriter, r *http.Request) {
	if !s.readForm(w, r) {
		return
	}
	id, input := r.PathValue("id"), r.PostForm.Get("payload")
	payload, bad := parseJSON(input)
	if bad != "" {
		s.renderRun(w, r, http.StatusBadRequest, actionForm{Action: "signal", Input: input, Error: bad})
		return
	}
	var arg any // untyped nil: the signal carries null
	if payload != nil {
		arg = payload
	}
	_, err := s.eng.SignalRun(r.Context(), id, arg)
	s.log.Info("dashboard action", "action", "signal", "run", id, "who", who(r), "remote", r.RemoteAddr, "ok", err == nil, "code", yella.CodeOf(err))
	if err != nil {
		s.actionError(w, r, err, "/runs/"+url.PathEscape(id))
		return
	}
	s.setFlash(w, r, "ok", fmt.Sprintf("Signalled run %s: its wait ended and it runs again now.", shortID(id)))
	s.back(w, r, "/runs/"+url.PathEscape(id))
}

func (s *server) endWait(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, "end-wait", func(ctx context.Context, id string) (string, error) {
		_, err := s.eng.EndWait(ctx, id)
		return fmt.Sprintf("Ended the wait of run %s: it runs again now.", shortID(id)), err
	})
}

func (s *server) completeEffect(w http.ResponseWriter, r *http.Request) {
	if !s.readForm(w, r) {
		return
	}
	id, key, input := r.PathValue("id"), r.PostForm.Get("key"), r.PostForm.Get("output")
	form := actionForm{Action: "complete-effect", Key: key, Input: input}
	if key == "" {
		form.Error = "Choose the effect to record as done."
		s.renderRun(w, r, http.StatusBadRequest, form)
		return
	}
	out, bad := parseJSON(input)
	if bad != "" {
		form.Error = bad
		s.renderRun(w, r, http.StatusBadRequest, form)
		return
	}
	var arg any // untyped nil: recorded as null
	if out != nil {
		arg = out
	}
	_, err := s.eng.CompleteEffect(r.Context(), id, key, arg)
	s.log.Info("dashboard action", "action", "complete-effect", "run", id, "effect", key, "who", who(r), "remote", r.RemoteAddr, "ok", err == nil, "code", yella.CodeOf(err))
	if err != nil {
		s.actionError(w, r, err, "/runs/"+url.PathEscape(id))
		return
	}
	s.setFlash(w, r, "ok", fmt.Sprintf("Recorded effect %s of run %s as done; the run is requeued and will replay it.", effectKey(key), shortID(id)))
	s.back(w, r, "/runs/"+url.PathEscape(id))
}

func (s *server) requeueAll(w http.ResponseWriter, r *http.Request) {
	if !s.readForm(w, r) {
		return
	}
	process := r.PostForm.Get("process")
	if len(process) > maxNameLen || !utf8.ValidString(process) {
		s.errorPage(w, r, http.StatusBadRequest, "Bad request", "The process name is not valid.")
		return
	}
	n, err := s.eng.RequeueAllDead(r.Context(), process)
	s.log.Info("dashboard action", "action", "requeue-all", "process", process, "who", who(r), "remote", r.RemoteAddr, "requeued", n, "ok", err == nil)
	of := ""
	if process != "" {
		of = " of " + process
	}
	switch {
	case err != nil && n == 0:
		s.actionError(w, r, err, "/dead")
		return
	case err != nil:
		s.setFlash(w, r, "warn", fmt.Sprintf("Requeued %s%s, then stopped: %s.", plural(n, "dead letter"), of, engineMsg(err)))
	case n == 0:
		s.setFlash(w, r, "warn", "There were no dead letters"+of+" to requeue.")
	default:
		s.setFlash(w, r, "ok", fmt.Sprintf("Requeued %s%s with a fresh retry budget.", plural(n, "dead letter"), of))
	}
	s.back(w, r, "/dead")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func listIDs(runs []yella.Run) string {
	if len(runs) == 0 || len(runs) > 5 {
		return ""
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = shortID(r.ID) + " (" + r.Process + ")"
	}
	return ": " + strings.Join(ids, ", ")
}
