package dashboard

import (
	"net/http"

	"github.com/yella-go/yella"
)

type schedulesData struct {
	layout
	Schedules []scheduleRow
}

// scheduleRow is a schedule with the links to its event's runs and to the
// runs of its last tick.
type scheduleRow struct {
	yella.ScheduleInfo
	EventURL string
}

// schedules is the schedules page: each cron schedule the engine holds,
// with its next tick and the runs of its last one; when none is declared,
// a note that schedules are declared in code.
func (s *server) schedules(w http.ResponseWriter, r *http.Request) {
	d := &schedulesData{layout: s.newLayout(r, "schedules", "Schedules")}
	for _, sc := range s.eng.Schedules() {
		d.Schedules = append(d.Schedules, scheduleRow{ScheduleInfo: sc,
			EventURL: runsFilter{Event: sc.Event, Limit: defPageLimit}.url("/runs")})
	}
	s.render(w, r, http.StatusOK, "schedules", d)
}
