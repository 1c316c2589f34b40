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

func limitsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("limits", stdout)
	var t target
	t.flags(fs, stderr)
	top := fs.Int("top", httpapi.DefaultLimitsTop, fmt.Sprintf("list at most `N` waiting keys per limit, 1 to %d", httpapi.MaxLimitsTop))
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("limits takes no arguments, got %q", strings.Join(pos, " "))
	}
	if *top < 1 || *top > httpapi.MaxLimitsTop {
		return usagef("--top must be a number from 1 to %d, got %d", httpapi.MaxLimitsTop, *top)
	}
	c, err := t.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	if c.eng != nil {
		// Direct mode: limits are declared by the processes of a running
		// engine, and this one has none.
		return fmt.Errorf("%s is open directly, with no engine running its processes: flow limits are declared by the processes "+
			"of a running engine; ask its server (--server URL, or --db of a database a yella server holds)", c.where)
	}
	var raw json.RawMessage
	if err := c.call(ctx, "GET", "/api/limits?"+url.Values{"top": {strconv.Itoa(*top)}}.Encode(), nil, &raw); err != nil {
		return err
	}
	if t.json {
		return printJSON(stdout, raw)
	}
	var out httpapi.Limits
	if err := json.Unmarshal(raw, &out); err != nil {
		return err
	}
	printLimits(stdout, out, c.where, *top)
	return nil
}

// printLimits writes the rate limits and the per-key concurrency bounds as
// tables, a waiting key a line.
func printLimits(w io.Writer, l httpapi.Limits, where string, top int) {
	if len(l.Rate) == 0 && len(l.Key) == 0 {
		fmt.Fprintf(w, "no process of the engine at %s declares a rate limit or a per-key concurrency bound\n", where)
		return
	}
	more := false
	if len(l.Rate) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "RATE LIMIT\tLIMIT\tBURST\tPROCESSES\tKEY\tWAITING\tNEXT START")
		for _, r := range l.Rate {
			head := fmt.Sprintf("%s\t%d per %s\t%d\t%s", r.Name, r.Limit, shortDuration(time.Duration(r.PerMs*float64(time.Millisecond))), r.Burst, strings.Join(r.Processes, ", "))
			if len(r.Waiting) == 0 {
				fmt.Fprintf(tw, "%s\t-\t0\t-\n", head)
			}
			for i, k := range r.Waiting {
				if i > 0 {
					head = "\t\t\t"
				}
				next := "-"
				if k.Next != nil {
					next = k.Next.Local().Format(time.DateTime)
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", head, showKey(k.Key), k.Waiting, next)
			}
			more = more || len(r.Waiting) == top
		}
		tw.Flush()
	}
	if len(l.Key) > 0 {
		if len(l.Rate) > 0 {
			fmt.Fprintln(w)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY CONCURRENCY\tMAX\tPROCESSES\tKEY AT ITS BOUND\tRUNNING\tWAITING")
		for _, k := range l.Key {
			head := fmt.Sprintf("%s\t%d\t%s", k.Name, k.Max, strings.Join(k.Processes, ", "))
			if len(k.Waiting) == 0 {
				fmt.Fprintf(tw, "%s\t-\t-\t0\n", head)
			}
			for i, kw := range k.Waiting {
				if i > 0 {
					head = "\t\t"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", head, showKey(kw.Key), kw.Running, kw.Waiting)
			}
			more = more || len(k.Waiting) == top
		}
		tw.Flush()
	}
	switch {
	case !l.Local:
		fmt.Fprintln(w, "the store is shared: it holds runs back when a node claims them, so no node sees the waiting keys; the limits hold across every node")
	case more:
		fmt.Fprintf(w, "at most %s per limit listed, the most waiting first; --top lists more\n", plural(top, "key", "keys"))
	}
}

// showKey prints a flow-control key as it is when it is plain, else
// quoted: the empty key, and keys with spaces or control characters
// (which would break the table or reach the terminal), are shown in Go
// syntax.
func showKey(k string) string {
	if k == "" || strings.ContainsFunc(k, func(r rune) bool { return !unicode.IsGraphic(r) || unicode.IsSpace(r) || r == '"' }) {
		return strconv.Quote(k)
	}
	return k
}
