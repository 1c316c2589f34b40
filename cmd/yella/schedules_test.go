package main

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/internal/clock"
	"github.com/yella-go/yella/store/memstore"
)

// schedulesServer serves the API of a started engine on a fake clock (a
// Sunday, 09:00 UTC) with its schedules: "daily-report" (weekdays at 09:00
// in Paris, no tick yet), "every-minute" (its tick of 09:00 caught up at
// start, one run), "nightly\x1b[2J" (a name with a control character) and
// "orphan" (a tick whose event no process listens to, which failed).
// Without schedules it serves an engine with none.
func schedulesServer(t *testing.T, withSchedules bool) string {
	t.Helper()
	ctx := context.Background()
	eng, err := yella.New(yella.Config{Store: memstore.New(), Clock: clock.NewFake(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(yella.Process{Name: "report", On: "report:due", Run: func(c *yella.Ctx) yella.Result { return c.OK(nil) }}); err != nil {
		t.Fatal(err)
	}
	if withSchedules {
		paris, err := time.LoadLocation("Europe/Paris")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []yella.Schedule{
			{Name: "daily-report", Cron: "0 9 * * 1-5", Location: paris, Event: "report:due"},
			{Name: "every-minute", Cron: "@every 1m", Event: "report:due", CatchUp: 90 * time.Minute},
			{Name: "nightly\x1b[2J", Cron: "0 2 * * *", Event: "report:due"},
			{Name: "orphan", Cron: "@hourly", Event: "nobody:listens", CatchUp: time.Hour},
		} {
			if err := eng.AddSchedule(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(eng, httpapi.Options{})
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		srv.Close()
		api.Close()
		eng.Stop(ctx)
	})
	return srv.URL
}

// TestSchedulesCommand: yella schedules reads a server's schedules, one a
// line (name, cron spec, time zone, event, catch-up, next and last tick,
// the last tick's runs, its error; an odd name quoted, so it neither
// breaks the table nor reaches the terminal), --json; a server without
// schedules says so; a database opened directly is refused with the way
// to ask a server; arguments are a usage error (golden transcript).
func TestSchedulesCommand(t *testing.T) {
	t.Setenv("YELLA_TOKEN", "")
	t.Setenv("YELLA_SERVER", "")
	s := &session{t: t, db: filepath.Join(t.TempDir(), "cli.db"), ids: map[string]string{}}
	deferredDB(t, s.db)
	busy := schedulesServer(t, true)
	none := schedulesServer(t, false)
	text, err := s.run("schedules", "--server", busy)
	if err != nil {
		t.Fatalf("schedules: %v\n%s", err, text)
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) != 5 {
		t.Errorf("want a header and 4 schedules, one a line:\n%s", text)
	}
	for _, want := range []string{"daily-report", "0 9 * * 1-5", "Europe/Paris", "report:due", "1h30m", `"nightly\x1b[2J"`,
		`no process listens to "nobody:listens"`} {
		if !strings.Contains(text, want) {
			t.Errorf("schedules output lacks %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, "\x1b") {
		t.Errorf("a name's control character reached the output")
	}
	for _, args := range [][]string{
		{"schedules", "--server", busy, "--json"},
		{"schedules", "--server", none},
		{"schedules", "--json"},
		{"schedules", "--server", busy, "now"},
	} {
		s.run(args...)
	}
	golden(t, "schedules", strings.NewReplacer(busy, "<busy>", none, "<none>").Replace(s.out.String()))
}
