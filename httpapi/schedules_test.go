package httpapi_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store/memstore"
)

// TestSchedulesRoute: GET /api/schedules lists the schedules with their
// next tick, and an empty list (not null) without any.
func TestSchedulesRoute(t *testing.T) {
	eng, err := yella.New(yella.Config{Store: memstore.New(), Clock: clock.NewFake(t0), Owner: "test-engine"})
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(eng, httpapi.Options{})
	defer api.Close()
	get := func() string {
		w := httptest.NewRecorder()
		api.ServeHTTP(w, httptest.NewRequest("GET", "/api/schedules", nil))
		if w.Code != 200 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		return w.Body.String()
	}
	if got := get(); got != "[]\n" {
		t.Errorf("no schedules: %q", got)
	}
	if err := eng.Register(yella.Process{Name: "report", On: "report:due", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }}); err != nil {
		t.Fatal(err)
	}
	if err := eng.AddSchedule(yella.Schedule{Name: "daily", Cron: "0 9 * * *", Event: "report:due", CatchUp: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer eng.Stop(t.Context())
	// The engine starts at a tick (t0 is 09:00): with CatchUp it is run.
	var got []httpapi.Schedule
	if err := json.Unmarshal([]byte(get()), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "daily" || got[0].Cron != "0 9 * * *" || got[0].Location != "UTC" || got[0].Event != "report:due" ||
		got[0].CatchUpMs != 3600000 || got[0].Next == nil || !got[0].Next.Equal(t0.AddDate(0, 0, 1)) ||
		got[0].Last == nil || !got[0].Last.Equal(t0) || len(got[0].LastRuns) != 1 || got[0].Error != "" {
		t.Errorf("schedules: %+v", got)
	}
}
