package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpapi"
)

func runsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("runs needs a subcommand: list or show ID (yella runs -h shows both)")
	}
	switch args[0] {
	case "list", "ls":
		return runsList(ctx, args[1:], stdout, stderr)
	case "show":
		return runsShow(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprintf(stdout, "usage: yella runs list [flags]\n       yella runs show ID [flags]\n\n%s\n", strings.TrimSpace(helps["runs"].about))
		list, _ := runsListFlags(stdout, stderr)
		fmt.Fprintf(stdout, "\nyella runs list: %s\n", strings.SplitN(list.about, "\n", 2)[0])
		printFlags(stdout, list.FlagSet)
		show, _ := runsShowFlags(stdout, stderr)
		fmt.Fprintf(stdout, "\nyella runs show ID: %s\n", strings.SplitN(show.about, "\n", 2)[0])
		printFlags(stdout, show.FlagSet)
		return nil
	}
	return usagef("unknown runs subcommand %q: want list or show", args[0])
}

type runsListOpts struct {
	t                                     target
	status, process, event, order, cursor *string
	root                                  *bool
	limit                                 *int
}

func runsListFlags(stdout, stderr io.Writer) (*flagSet, *runsListOpts) {
	fs := newFlags("runs list", stdout)
	o := &runsListOpts{}
	o.t.flags(fs, stderr)
	o.status = fs.String("status", "", "only runs in these `STATUSES`, comma-separated: idle, running, waiting, completed, deferred, errored, dead-letter, fenced, cancelled")
	o.process = fs.String("process", "", "only runs of the process `NAME`")
	o.event = fs.String("event", "", "only runs of this `EVENT`")
	o.root = fs.Bool("root", false, "only root runs")
	o.order = fs.String("order", "newest", "`ORDER`: newest or oldest first")
	o.limit = fs.Int("limit", 20, "`N` runs per page, 1 to 1000")
	o.cursor = fs.String("cursor", "", "start at this `CURSOR`, as printed after a page")
	return fs, o
}

func runsShowFlags(stdout, stderr io.Writer) (*flagSet, *target) {
	fs := newFlags("runs show", stdout)
	var t target
	t.flags(fs, stderr)
	return fs, &t
}

func runsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, o := runsListFlags(stdout, stderr)
	t, status, process, event, root, order, limit, cursor := &o.t, o.status, o.process, o.event, o.root, o.order, o.limit, o.cursor
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("runs list takes no arguments, got %q", strings.Join(pos, " "))
	}
	q := url.Values{"order": {*order}, "limit": {strconv.Itoa(*limit)}, "total": {"true"}}
	for k, v := range map[string]string{"status": *status, "process": *process, "event": *event, "cursor": *cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if *root {
		q.Set("root", "true")
	}
	c, err := t.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	var raw json.RawMessage
	if err := c.call(ctx, "GET", "/api/runs?"+q.Encode(), nil, &raw); err != nil {
		return err
	}
	if t.json {
		return printJSON(stdout, raw)
	}
	var page httpapi.RunPage
	if err := json.Unmarshal(raw, &page); err != nil {
		return err
	}
	// A page with a waiting run gets a column saying what each waits for.
	waits := slices.ContainsFunc(page.Runs, func(r httpapi.Run) bool { return r.Status == yella.StatusWaiting })
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "ID\tPROCESS\tEVENT\tSTATUS\tATTEMPTS\tCREATED")
	if waits {
		fmt.Fprint(tw, "\tWAITS FOR")
	}
	fmt.Fprintln(tw)
	for _, r := range page.Runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s", r.ID, r.Process, r.Event, r.Status, r.Attempts, r.CreatedAt.Local().Format(time.DateTime))
		if waits {
			fmt.Fprintf(tw, "\t%s", waitsFor(r, func(t time.Time) string { return t.Local().Format(time.DateTime) }))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	total := ""
	if page.Total != nil {
		total = fmt.Sprintf(" of %d", *page.Total)
	}
	fmt.Fprintf(stdout, "%s%s", plural(len(page.Runs), "run", "runs"), total)
	if page.Next != "" {
		fmt.Fprintf(stdout, "; next page: --cursor %s", page.Next)
	}
	fmt.Fprintln(stdout)
	return nil
}

func runsShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, t := runsShowFlags(stdout, stderr)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("runs show needs one run id")
	}
	c, err := t.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	var raw json.RawMessage
	if err := c.call(ctx, "GET", "/api/runs/"+url.PathEscape(pos[0]), nil, &raw); err != nil {
		return err
	}
	if t.json {
		return printJSON(stdout, raw)
	}
	var d httpapi.RunDetail
	if err := json.Unmarshal(raw, &d); err != nil {
		return err
	}
	printRun(stdout, d)
	return nil
}

func printRun(w io.Writer, d httpapi.RunDetail) {
	r := d.Run
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	when := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return stamp(*t)
	}
	row("run", r.ID)
	row("process", r.Process)
	row("event", r.Event)
	row("status", string(r.Status))
	row("attempts", strconv.Itoa(r.Attempts))
	if r.CorrelationID != r.ID {
		row("chain", r.CorrelationID)
	}
	row("parent", r.ParentID)
	row("idempotency key", r.IdempotencyKey)
	if r.Priority != 0 {
		row("priority", strconv.Itoa(r.Priority))
	}
	if k := r.RateLimit; k != nil {
		row("rate limit", k.Name+", key "+showKey(k.Key))
	}
	if k := r.KeyConcurrency; k != nil {
		row("key concurrency", k.Name+", key "+showKey(k.Key))
	}
	row("error", r.Error)
	row("error code", r.ErrorCode)
	row("then", r.Then)
	if r.Status == yella.StatusWaiting {
		row("waits for", waitsFor(r, nil))
		row("wait key", r.WaitKey)
		row("waiting since", when(r.WaitingSince))
		if r.WaitingUntil == nil {
			row("waiting until", "no deadline")
		} else {
			row("waiting until", when(r.WaitingUntil))
		}
	} else {
		row("retry at", when(r.RetryAt))
	}
	row("created", stamp(r.CreatedAt))
	row("started", when(r.StartedAt))
	row("completed", when(r.CompletedAt))
	row("payload", compact(r.Payload))
	row("output", compact(r.Output))
	row("context", compact(r.Context))
	tw.Flush()
	fmt.Fprintln(w, "\ntimeline")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range d.Timeline {
		detail := e.Note
		if e.Error != "" {
			detail += ": " + e.Error
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\tattempt %d\t%s\n", e.N, stamp(e.At), e.Status, e.Attempt, detail)
	}
	tw.Flush()
	if len(d.Effects) > 0 {
		fmt.Fprintln(w, "\neffects")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, e := range d.Effects {
			res := compact(e.Output)
			if e.Error != "" {
				res = "error: " + e.Error
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", e.Key, e.Status, res)
		}
		tw.Flush()
	}
}

// waitsFor says what a waiting run waits for: a signal (its key, quoted
// when odd) or a sleep, and, with until to print it, its deadline; "" for
// other runs.
func waitsFor(r httpapi.Run, until func(time.Time) string) string {
	if r.Status != yella.StatusWaiting {
		return ""
	}
	s := "sleep"
	if r.Signal != "" {
		s = "signal " + showKey(r.Signal)
	}
	if until != nil && r.RetryAt != nil {
		s += " until " + until(*r.RetryAt)
	}
	return s
}

// compact prints JSON on one line.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// stampLayout is RFC 3339 with milliseconds, the way times are printed.
const stampLayout = "2006-01-02T15:04:05.000Z07:00"

// stamp prints t in local time, RFC 3339 with milliseconds.
func stamp(t time.Time) string { return t.Local().Format(stampLayout) }
