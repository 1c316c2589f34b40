// Daily report: a cron schedule on a local SQLite file.
//
//	go run ./examples/dailyreport
//
// The "daily-report" schedule emits report:due at 09:00 Europe/Paris on
// weekdays, and a process writes the report. Each tick runs once, however
// often the program is restarted or killed (the tick's idempotency key is
// its schedule and its time), and a tick missed while the program was not
// running is run at start when it is at most -catch-up old.
//
// To watch it tick without waiting for 09:00, give another spec:
//
//	go run ./examples/dailyreport -cron '@every 2s' -for 7s
//
// Flags: -db PATH (default dailyreport.db in the user's cache directory,
// yella/ in it), -cron SPEC, -tz ZONE, -catch-up D, -for D (stop after D;
// default: until Ctrl-C).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/sqlitestore"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "dailyreport:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("dailyreport", flag.ContinueOnError)
	db := fs.String("db", defaultDB(), "the SQLite file")
	spec := fs.String("cron", "0 9 * * 1-5", "the schedule: five cron fields, @daily, @every 2s…")
	tz := fs.String("tz", "Europe/Paris", "the time zone the fields are read in")
	catchUp := fs.Duration("catch-up", time.Hour, "run a tick missed while stopped if it is at most this old (0: skip it)")
	runFor := fs.Duration("for", 0, "stop after this long (0: until Ctrl-C)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	loc, err := time.LoadLocation(*tz)
	if err != nil {
		return fmt.Errorf("-tz: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(*db), 0o755); err != nil {
		return err
	}
	st, err := sqlitestore.Open(*db, sqlitestore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		return err
	}
	err = eng.Register(yella.Process{Name: "write-report", On: "report:due", Run: func(c *yella.Ctx) yella.Result {
		var tick struct{ Schedule, Tick string }
		if err := c.Decode(&tick); err != nil {
			return c.Fail(err)
		}
		fmt.Printf("report for the tick of %s (run %s)\n", tick.Tick, c.RunID())
		return c.OK(nil)
	}})
	if err != nil {
		return err
	}
	if err := eng.AddSchedule(yella.Schedule{Name: "daily-report", Cron: *spec, Location: loc, Event: "report:due", CatchUp: *catchUp}); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *runFor)
		defer cancel()
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}
	fmt.Printf("next tick: %s\n", eng.Schedules()[0].Next.Format(time.RFC3339))
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return eng.Stop(stopCtx)
}

func defaultDB() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "yella", "dailyreport.db")
}
