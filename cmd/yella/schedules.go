package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/yella-go/yella/httpapi"
)

func schedulesCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("schedules", stdout)
	var t target
	t.flags(fs, stderr)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	sub := "list"
	if len(pos) > 0 {
		sub, pos = pos[0], pos[1:]
	}
	switch sub {
	case "list", "ls":
		if len(pos) > 0 {
			return usagef("schedules %s takes no arguments, got %q (yella schedules pause NAME or resume NAME act on one)", sub, strings.Join(pos, " "))
		}
	case "pause", "resume":
		if len(pos) != 1 {
			return usagef("schedules %s needs one schedule name: yella schedules %s NAME", sub, sub)
		}
	default:
		return usagef("unknown schedules subcommand %q: want list, pause NAME or resume NAME", sub)
	}
	c, err := t.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	if c.eng != nil {
		// Direct mode: schedules are added in code to a running engine,
		// and this one has none.
		return fmt.Errorf("%s is open directly, with no engine running its schedules: schedules are declared in code by the program "+
			"that embeds the engine; ask its server (--server URL, or --db of a database a yella server holds)", c.where)
	}
	if sub != "list" && sub != "ls" {
		return pauseSchedule(ctx, c, &t, sub, pos[0], stdout)
	}
	var raw json.RawMessage
	if err := c.call(ctx, "GET", "/api/schedules", nil, &raw); err != nil {
		return err
	}
	if t.json {
		return printJSON(stdout, raw)
	}
	var out []httpapi.Schedule
	if err := json.Unmarshal(raw, &out); err != nil {
		return err
	}
	printSchedules(stdout, out, c.where)
	return nil
}

// pauseSchedule pauses or resumes (op) the schedule name on c's server
// and says what that means.
func pauseSchedule(ctx context.Context, c *client, t *target, op, name string, stdout io.Writer) error {
	var raw json.RawMessage
	if err := c.call(ctx, "POST", "/api/schedules/"+url.PathEscape(name)+"/"+op, nil, &raw); err != nil {
		return err
	}
	if t.json {
		return printJSON(stdout, raw)
	}
	var s httpapi.Schedule
	if err := json.Unmarshal(raw, &s); err != nil {
		return err
	}
	switch {
	case s.Paused:
		fmt.Fprintf(stdout, "schedule %s is paused since %s: its ticks are skipped by every engine of the database, "+
			"and not caught up, until yella schedules resume %s\n", showKey(s.Name), localTime(s.PausedAt), showKey(s.Name))
	case s.Next != nil:
		fmt.Fprintf(stdout, "schedule %s runs: its next tick is at %s (ticks skipped while it was paused are not caught up)\n",
			showKey(s.Name), localTime(s.Next))
	default:
		fmt.Fprintf(stdout, "schedule %s runs (its spec has no tick to come)\n", showKey(s.Name))
	}
	return nil
}

// localTime prints a time of the API as the listing does: local, to the
// second; "-" when absent.
func localTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

// printSchedules writes the schedules as a table, a schedule a line.
func printSchedules(w io.Writer, scs []httpapi.Schedule, where string) {
	if len(scs) == 0 {
		fmt.Fprintf(w, "the engine at %s has no schedule: schedules are declared in code, with Engine.AddSchedule\n", where)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULE\tCRON\tTIME ZONE\tEVENT\tCATCH-UP\tPAUSED\tNEXT TICK\tLAST TICK\tLAST RUNS\tERROR")
	for _, s := range scs {
		catchUp, paused, runs, errText := "-", "-", "-", "-"
		if s.CatchUpMs > 0 {
			catchUp = shortDuration(time.Duration(s.CatchUpMs) * time.Millisecond)
		}
		if s.Paused {
			// Its next tick is skipped, like every one until it is resumed.
			paused = "since " + localTime(s.PausedAt)
		}
		if s.Error != "" {
			// A tick that failed has no runs of its own.
			errText = showText(s.Error)
		} else if len(s.LastRuns) > 0 {
			runs = strings.Join(s.LastRuns, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", showKey(s.Name), showText(s.Cron), showText(s.Location), showKey(s.Event),
			catchUp, paused, localTime(s.Next), localTime(s.Last), runs, errText)
	}
	tw.Flush()
}

// showText prints free text (a cron spec, an error message) as it is
// unless it holds a control character (which would break the table or
// reach the terminal): then quoted, in Go syntax.
func showText(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsGraphic(r) && r != ' ' }) {
		return strconv.Quote(s)
	}
	return s
}
