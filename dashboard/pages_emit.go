package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/yella-go/yella"
)

// emitData is the emit form, possibly re-shown with an error.
type emitData struct {
	layout
	Events       []emitEvent
	Event        string
	Payload      string
	Key          string
	Error        string // about the form as a whole
	EventError   string
	PayloadError string
	KeyError     string
}

// emitEvent is a registered event and the processes it starts.
type emitEvent struct {
	Name      string
	Processes string
}

func (s *server) emitEvents() []emitEvent {
	by := map[string][]string{}
	var names []string
	for _, p := range s.eng.Processes() {
		if _, ok := by[p.On]; !ok {
			names = append(names, p.On)
		}
		by[p.On] = append(by[p.On], p.Name)
	}
	slices.Sort(names)
	out := make([]emitEvent, len(names))
	for i, n := range names {
		out[i] = emitEvent{Name: n, Processes: strings.Join(by[n], ", ")}
	}
	return out
}

func (s *server) emitForm(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		s.errorPage(w, r, http.StatusBadRequest, "Bad request", "The query string is malformed.")
		return
	}
	d := &emitData{layout: s.newLayout(r, "emit", "Emit an event"), Events: s.emitEvents(), Payload: "{}"}
	if ev := q.Get("event"); len(ev) <= maxNameLen && utf8.ValidString(ev) {
		d.Event = ev
	}
	if d.Event == "" && len(d.Events) == 1 {
		d.Event = d.Events[0].Name
	}
	s.render(w, r, http.StatusOK, "emit", d)
}

// emitPost emits the event of the form. One admitted run redirects to it;
// several to the runs of the event; a repeated idempotency key to the run
// admitted before. Invalid input shows the form again, input kept.
func (s *server) emitPost(w http.ResponseWriter, r *http.Request) {
	d := &emitData{layout: s.newLayout(r, "emit", "Emit an event"), Events: s.emitEvents()}
	if err := r.ParseForm(); err != nil {
		d.Error = "The form could not be read."
		status := http.StatusBadRequest
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			d.Error, status = fmt.Sprintf("The form is larger than %d KiB; nothing was emitted.", maxBody>>10), http.StatusRequestEntityTooLarge
		}
		s.render(w, r, status, "emit", d)
		return
	}
	d.Event, d.Payload, d.Key = r.PostForm.Get("event"), r.PostForm.Get("payload"), r.PostForm.Get("key")
	switch {
	case strings.TrimSpace(d.Event) == "":
		d.EventError = "Choose the event to emit."
	case len(d.Event) > maxNameLen || !utf8.ValidString(d.Event):
		d.EventError = fmt.Sprintf("The event name must be valid text of at most %d bytes.", maxNameLen)
	}
	if len(d.Key) > maxNameLen || !utf8.ValidString(d.Key) {
		d.KeyError = fmt.Sprintf("The idempotency key must be valid text of at most %d bytes.", maxNameLen)
	}
	payload, bad := parseJSON(d.Payload)
	d.PayloadError = bad
	if d.EventError != "" || d.KeyError != "" || d.PayloadError != "" {
		d.Error = "Nothing was emitted: fix the fields marked below."
		s.render(w, r, http.StatusBadRequest, "emit", d)
		return
	}
	var arg any // untyped nil: no payload
	if payload != nil {
		arg = payload
	}
	var opts []yella.EmitOption
	if d.Key != "" {
		opts = append(opts, yella.IdempotencyKey(d.Key))
	}
	em, err := s.eng.Emit(r.Context(), d.Event, arg, opts...)
	s.log.Info("dashboard action", "action", "emit", "event", d.Event, "remote", r.RemoteAddr, "runs", len(em.Runs), "ok", err == nil, "code", yella.CodeOf(err))
	if err != nil {
		s.emitFailed(w, r, d, err)
		return
	}
	s.emitted(w, r, d, em)
}

func (s *server) emitFailed(w http.ResponseWriter, r *http.Request, d *emitData, err error) {
	switch yella.CodeOf(err) {
	case yella.CodeUnknownEvent:
		d.EventError = "No process listens to " + quote(d.Event) + "."
		d.Error = "Nothing was emitted."
		s.render(w, r, http.StatusUnprocessableEntity, "emit", d)
	case yella.CodePayloadTooLarge, yella.CodeInvalidPayload:
		d.PayloadError = engineMsg(err) + "."
		d.Error = "Nothing was emitted."
		s.render(w, r, http.StatusUnprocessableEntity, "emit", d)
	default:
		s.engineError(w, r, err)
	}
}

func (s *server) emitted(w http.ResponseWriter, r *http.Request, d *emitData, em yella.Emission) {
	dropped := ""
	if len(em.Dropped) > 0 {
		dropped = " Dropped at their concurrency cap: " + strings.Join(em.Dropped, ", ") + "."
	}
	switch {
	case len(em.Runs) == 0 && em.Reason == yella.ReasonDuplicate:
		s.setFlash(w, r, "warn", fmt.Sprintf("Nothing new: the idempotency key %s was already used for %s; showing the run admitted then.", quote(d.Key), d.Event))
		s.redirect(w, r, "/runs/"+url.PathEscape(em.Existing[0]))
	case len(em.Runs) == 0:
		d.Error = "Nothing was emitted: every process listening to " + quote(d.Event) + " is at its concurrency cap." + dropped
		s.render(w, r, http.StatusConflict, "emit", d)
	case len(em.Runs) == 1:
		kind := "ok"
		if dropped != "" {
			kind = "warn"
		}
		s.setFlash(w, r, kind, fmt.Sprintf("Emitted %s: run %s admitted.%s", d.Event, shortID(em.Runs[0]), dropped))
		s.redirect(w, r, "/runs/"+url.PathEscape(em.Runs[0]))
	default:
		kind := "ok"
		if dropped != "" {
			kind = "warn"
		}
		s.setFlash(w, r, kind, fmt.Sprintf("Emitted %s: %d runs admitted, one per listening process.%s", d.Event, len(em.Runs), dropped))
		s.redirect(w, r, runsFilter{Event: d.Event, Root: true, Limit: defPageLimit}.url("/runs"))
	}
}
