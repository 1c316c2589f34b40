package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	if len(pos) > 0 {
		return usagef("schedules takes no arguments, got %q", strings.Join(pos, " "))
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

// printSchedules writes the schedules as a table, a schedule a line.
func printSchedules(w io.Writer, scs []httpapi.Schedule, where string) {
	if len(scs) == 0 {
		fmt.Fprintf(w, "the engine at %s has no schedule: schedules are declared in code, with Engine.AddSchedule\n", where)
		return
	}
	at := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Local().Format(time.DateTime)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULE\tCRON\tTIME ZONE\tEVENT\tCATCH-UP\tNEXT TICK\tLAST TICK\tLAST RUNS\tERROR")
	for _, s := range scs {
		catchUp, runs, errText := "-", "-", "-"
		if s.CatchUpMs > 0 {
			catchUp = shortDuration(time.Duration(s.CatchUpMs) * time.Millisecond)
		}
		if s.Error != "" {
			// A tick that failed has no runs of its own.
			errText = showText(s.Error)
		} else if len(s.LastRuns) > 0 {
			runs = strings.Join(s.LastRuns, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", showKey(s.Name), showText(s.Cron), showText(s.Location), showKey(s.Event),
			catchUp, at(s.Next), at(s.Last), runs, errText)
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
