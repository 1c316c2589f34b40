package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpapi"
)

func nodesCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("nodes", stdout)
	var t target
	t.flags(fs, stderr)
	limit := fs.Int("limit", yella.DefaultNodeLimit, fmt.Sprintf("list at most `N` nodes, 1 to %d", yella.MaxNodeLimit))
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("nodes takes no arguments, got %q", strings.Join(pos, " "))
	}
	if *limit < 1 || *limit > yella.MaxNodeLimit {
		return usagef("--limit must be a number from 1 to %d, got %d", yella.MaxNodeLimit, *limit)
	}
	c, err := t.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	var raw json.RawMessage
	if err := c.call(ctx, "GET", "/api/nodes?"+url.Values{"limit": {strconv.Itoa(*limit)}}.Encode(), nil, &raw); err != nil {
		return err
	}
	if t.json {
		return printJSON(stdout, raw)
	}
	var out httpapi.Nodes
	if err := json.Unmarshal(raw, &out); err != nil {
		return err
	}
	if !out.Shared {
		fmt.Fprintf(stdout, "%s is single-node: the engine that holds it is its only one (several servers share a PostgreSQL database)\n", c.where)
		return nil
	}
	if len(out.Nodes) == 0 {
		fmt.Fprintf(stdout, "no node has joined %s: no engine runs on it now\n", c.where)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tHEARTBEAT\tJOINED\tRUNNING\tHELD BY PROCESS")
	live := 0
	for _, n := range out.Nodes {
		if n.State == "live" {
			live++
		}
		owner := n.Owner
		if n.Self {
			owner += " (this)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s ago\t%s\t%d\t%s\n", owner, n.State, shortDuration(time.Duration(n.HeartbeatAgeSeconds*float64(time.Second)).Round(100*time.Millisecond)),
			n.JoinedAt.Local().Format(time.DateTime), n.Running, held(n.ByProcess))
	}
	tw.Flush()
	more := ""
	if len(out.Nodes) == *limit {
		more = " (the first " + strconv.Itoa(*limit) + "; --limit lists more)"
	}
	fmt.Fprintf(stdout, "%d live, %d gone%s; heartbeats on the database's clock\n", live, len(out.Nodes)-live, more)
	return nil
}

// held is a node's runs by process, "ship 2, take-order 1", in name order.
func held(by map[string]int64) string {
	if len(by) == 0 {
		return "-"
	}
	names := make([]string, 0, len(by))
	for p := range by {
		names = append(names, p)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, p := range names {
		parts[i] = fmt.Sprintf("%s %d", p, by[p])
	}
	return strings.Join(parts, ", ")
}
