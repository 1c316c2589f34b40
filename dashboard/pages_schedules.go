package dashboard

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/yella-go/yella"
)

type schedulesData struct {
	layout
	Schedules []scheduleRow
}

// scheduleRow is a schedule with the links to its event's runs and to the
// runs of its last tick, and the path of its pause and resume actions.
type scheduleRow struct {
	yella.ScheduleInfo
	EventURL string
	Path     string // /schedules/<name, escaped>
}

// schedules is the schedules page: each cron schedule the engine holds,
// with its next tick, the runs of its last one, and whether it is paused
// (since when) with the button that pauses or resumes it; when none is
// declared, a note that schedules are declared in code.
func (s *server) schedules(w http.ResponseWriter, r *http.Request) {
	d := &schedulesData{layout: s.newLayout(r, "schedules", "Schedules")}
	for _, sc := range s.eng.Schedules() {
		d.Schedules = append(d.Schedules, scheduleRow{ScheduleInfo: sc,
			EventURL: runsFilter{Event: sc.Event, Limit: defPageLimit}.url("/runs"), Path: "/schedules/" + url.PathEscape(sc.Name)})
	}
	s.render(w, r, http.StatusOK, "schedules", d)
}

// pauseSchedule and resumeSchedule pause and resume the schedule named in
// the path, durably and for every engine of the store, and go back to the
// schedules page with a flash. A name the engine has no schedule by gives
// the 404 page.
func (s *server) pauseSchedule(w http.ResponseWriter, r *http.Request) {
	s.scheduleAction(w, r, true)
}

func (s *server) resumeSchedule(w http.ResponseWriter, r *http.Request) {
	s.scheduleAction(w, r, false)
}

func (s *server) scheduleAction(w http.ResponseWriter, r *http.Request, pause bool) {
	if !s.readForm(w, r) {
		return
	}
	name := r.PathValue("name")
	action, do := "resume-schedule", s.eng.ResumeSchedule
	if pause {
		action, do = "pause-schedule", s.eng.PauseSchedule
	}
	if !s.hasSchedule(name) {
		s.log.Info("dashboard action", "action", action, "schedule", quote(name), "who", who(r), "remote", r.RemoteAddr, "ok", false)
		s.errorPage(w, r, http.StatusNotFound, "Schedule not found", "No schedule is named "+quote(name)+" on this engine.")
		return
	}
	err := do(r.Context(), name)
	s.log.Info("dashboard action", "action", action, "schedule", name, "who", who(r), "remote", r.RemoteAddr, "ok", err == nil, "code", yella.CodeOf(err))
	if err != nil {
		s.actionError(w, r, err, "/schedules")
		return
	}
	if pause {
		s.setFlash(w, r, "ok", fmt.Sprintf("Paused schedule %s: its ticks are skipped by every engine until it is resumed, and not caught up then.", flowKey(name)))
	} else {
		s.setFlash(w, r, "ok", fmt.Sprintf("Resumed schedule %s: it runs again from its next tick.", flowKey(name)))
	}
	s.back(w, r, "/schedules")
}

// hasSchedule reports whether the engine has a schedule named name.
// Schedules are never removed, so one found stays.
func (s *server) hasSchedule(name string) bool {
	for _, sc := range s.eng.Schedules() {
		if sc.Name == name {
			return true
		}
	}
	return false
}
