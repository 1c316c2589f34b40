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

// TestSchedulesPauseCommand: yella schedules pause NAME pauses a
// server's schedule (since when, and what that means), the listing shows
// it paused (PAUSED since), pausing again keeps the first time, resume
// ends it and names the next tick; an odd name is sent escaped and shown
// quoted; --json prints the API's answer; an unknown name, a missing or
// extra name and an unknown subcommand are refused; a database opened
// directly is refused with the way to ask a server (golden transcript).
func TestSchedulesPauseCommand(t *testing.T) {
	t.Setenv("YELLA_TOKEN", "")
	t.Setenv("YELLA_SERVER", "")
	s := &session{t: t, db: filepath.Join(t.TempDir(), "cli.db"), ids: map[string]string{}}
	deferredDB(t, s.db)
	busy := schedulesServer(t, true)
	text, err := s.run("schedules", "pause", "daily-report", "--server", busy)
	if err != nil || !strings.Contains(text, "schedule daily-report is paused since") {
		t.Fatalf("pause: %v\n%s", err, text)
	}
	text, err = s.run("schedules", "--server", busy)
	if err != nil {
		t.Fatalf("schedules: %v\n%s", err, text)
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "daily-report") != strings.Contains(line, "since ") {
			t.Errorf("only daily-report is paused:\n%s", text)
		}
	}
	var outputs strings.Builder
	for _, args := range [][]string{
		{"schedules", "pause", "daily-report", "--server", busy},
		{"schedules", "list", "--json", "--server", busy},
		{"schedules", "--server", busy, "resume", "daily-report", "--json"},
		{"schedules", "resume", "daily-report", "--server", busy},
		{"schedules", "pause", "nightly\x1b[2J", "--server", busy},
		{"schedules", "ls", "--server", busy},
		{"schedules", "pause", "nope", "--server", busy},
		{"schedules", "pause", "--server", busy},
		{"schedules", "resume", "a", "b", "--server", busy},
		{"schedules", "list", "now", "--server", busy},
		{"schedules", "stop", "daily-report", "--server", busy},
		{"schedules", "pause", "daily-report"},
	} {
		text, _ := s.run(args...)
		outputs.WriteString(text)
	}
	if strings.Contains(outputs.String(), "\x1b") {
		t.Errorf("a name's control character reached the output")
	}
	// The transcript echoes the command line as given: its ESC is spelled out.
	golden(t, "schedules-pause", strings.NewReplacer(busy, "<busy>", "\x1b", `\x1b`).Replace(s.out.String()))
}

// TestEmitGroupsCommand: yella emit --singleton KEY admits a run per
// process unless one emitted with the key is still to run, then names it;
// --debounce KEY --window D admits a run that starts D later and folds
// the next emission with the key into it, saying so; --json prints the
// API's answer; both flags, --debounce without --window, --window alone,
// an empty or oversized key and a negative window are refused, naming
// flags rather than Go options, and admit nothing (golden transcript).
func TestEmitGroupsCommand(t *testing.T) {
	t.Setenv("YELLA_TOKEN", "")
	t.Setenv("YELLA_SERVER", "")
	s := &session{t: t, db: filepath.Join(t.TempDir(), "cli.db"), ids: map[string]string{}}
	srv, eng, _ := waitsServer(t)
	ctx := context.Background()
	before, err := eng.Runs(ctx, yella.RunQuery{Limit: 1000, WithTotal: true})
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		text, _ := s.run(append(args, "--server", srv)...)
		return text
	}
	first := uuidRE.FindString(run("emit", "approval:requested", `{"name":"g"}`, "--singleton", "user-7"))
	waitFor(t, eng, first, yella.StatusWaiting)
	run("emit", "approval:requested", `{"name":"g"}`, "--singleton", "user-7")
	run("emit", "approval:requested", `{"name":"g"}`, "--singleton", "user-7", "--json")
	deb := uuidRE.FindString(run("emit", "plain", `{"n":1}`, "--debounce", "doc-7", "--window", "30s"))
	run("emit", "plain", `{"n":2}`, "--debounce", "doc-7", "--window", "30s")
	if r, err := eng.Run(ctx, deb); err != nil || string(r.Payload) != `{"n":2}` || r.Status != yella.StatusIdle {
		t.Fatalf("the debounced run: %+v %v", r, err)
	}
	after, err := eng.Runs(ctx, yella.RunQuery{Limit: 1000, WithTotal: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"emit", "plain", "--singleton", "a", "--debounce", "b", "--window", "1s"},
		{"emit", "plain", "--debounce", "b"},
		{"emit", "plain", "--window", "1s"},
		{"emit", "plain", "--singleton", ""},
		{"emit", "plain", "--singleton", strings.Repeat("k", yella.MaxGroupKeyBytes+1)},
		{"emit", "plain", "--debounce", "b", "--window", "-1s"},
		{"emit", "plain", "--debounce", "b", "--window", "soon"},
	} {
		if text := run(args...); !strings.Contains(text, "error: ") || strings.Contains(text, "Singleton") ||
			strings.Contains(text, "Debounce") || strings.Contains(text, "Group") {
			t.Errorf("yella %s: %s", strings.Join(args, " "), text)
		}
	}
	last, err := eng.Runs(ctx, yella.RunQuery{Limit: 1000, WithTotal: true})
	if err != nil {
		t.Fatal(err)
	}
	if after.Total != before.Total+2 || last.Total != after.Total {
		t.Errorf("runs: %d before, %d after the groups (want 2 more), %d after the refusals", before.Total, after.Total, last.Total)
	}
	// The singleton's run starts at once: the status the server reads back
	// after admitting it depends on how far its handler got.
	started := "  approve  <idle, running or waiting>\n"
	golden(t, "emit-groups", strings.NewReplacer(srv, "<server>", strings.Repeat("k", yella.MaxGroupKeyBytes+1), "<513 k>",
		"  approve  idle\n", started, "  approve  running\n", started, "  approve  waiting\n", started).Replace(s.out.String()))
}
