package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/httpapi"
)

// jsonArg validates an optional JSON argument (a payload).
func jsonArg(pos []string, i int, what string) (json.RawMessage, error) {
	if len(pos) <= i {
		return nil, nil
	}
	if !json.Valid([]byte(pos[i])) {
		return nil, usagef("the %s is not valid JSON: %s", what, pos[i])
	}
	return json.RawMessage(pos[i]), nil
}

// opCmd is retry, cancel or end-wait: one run, no body.
func opCmd(op string) func(context.Context, []string, io.Writer, io.Writer) error {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		fs := newFlags(op, stdout)
		var t target
		t.flags(fs, stderr)
		pos, err := parse(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usagef("%s needs one run id", op)
		}
		return runAction(ctx, &t, op, pos[0], stdout)
	}
}

func runAction(ctx context.Context, t *target, op, id string, stdout io.Writer) error {
	c, err := t.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	var raw json.RawMessage
	if err := c.call(ctx, "POST", "/api/runs/"+url.PathEscape(id)+"/"+op, nil, &raw); err != nil {
		return err
	}
	if t.json {
		return printJSON(stdout, raw)
	}
	var r httpapi.Run
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "run %s (%s): %s\n", r.ID, r.Process, r.Status)
	return nil
}

// signalCmd sends a signal to the run waiting for a key, or to one
// waiting run (--run).
func signalCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("signal", stdout)
	var t target
	t.flags(fs, stderr)
	run := fs.String("run", "", "send the signal to the run `ID` only (it must be waiting for a signal), instead of to the run waiting for a key")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	var key string
	switch {
	case *run == "" && (len(pos) < 1 || len(pos) > 2):
		return usagef("signal needs a key and, optionally, a JSON payload: yella signal KEY [JSON payload], or yella signal --run ID [JSON payload]")
	case *run == "" && pos[0] == "":
		return usagef("the signal key is empty")
	case *run == "":
		key, pos = pos[0], pos[1:]
	case len(pos) > 1:
		return usagef("with --run, signal takes only a JSON payload: yella signal --run ID [JSON payload]")
	}
	payload, err := jsonArg(pos, 0, "payload")
	if err != nil {
		return err
	}
	c, err := t.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	var out httpapi.Signalled
	if *run != "" {
		err = c.call(ctx, "POST", "/api/runs/"+url.PathEscape(*run)+"/signal", httpapi.RunSignalRequest{Payload: payload}, &out)
	} else {
		err = c.call(ctx, "POST", "/api/signals", httpapi.SignalRequest{Key: key, Payload: payload}, &out)
	}
	if err != nil {
		return err
	}
	if t.json {
		return printJSON(stdout, out)
	}
	switch {
	case *run != "":
		fmt.Fprintf(stdout, "signalled run %s: its wait ended and it runs again\n", out.RunID)
	case out.RunID != "":
		fmt.Fprintf(stdout, "signal %s ended the wait of run %s: it runs again\n", showKey(key), out.RunID)
	case out.Kept:
		fmt.Fprintf(stdout, "no run waits for %s: the signal is kept for the next wait on it\n", showKey(key))
	default:
		fmt.Fprintf(stdout, "no run waits for %s, and the engine keeps no signals: nothing was done\n", showKey(key))
	}
	return nil
}

func requeueCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("requeue", stdout)
	var t target
	t.flags(fs, stderr)
	all := fs.Bool("all", false, "requeue every dead-letter run")
	process := fs.String("process", "", "with --all: only the dead letters of the process `NAME`")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case *all && len(pos) > 0:
		return usagef("give a run id or --all, not both")
	case !*all && len(pos) != 1:
		return usagef("requeue needs one run id, or --all")
	case !*all && *process != "":
		return usagef("--process goes with --all")
	case !*all:
		return runAction(ctx, &t, "requeue", pos[0], stdout)
	}
	c, err := t.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	path := "/api/dead-letters/requeue"
	if *process != "" {
		path += "?process=" + url.QueryEscape(*process)
	}
	var out struct {
		Requeued int `json:"requeued"`
	}
	if err := c.call(ctx, "POST", path, nil, &out); err != nil {
		return err
	}
	if t.json {
		return printJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "requeued %s\n", plural(out.Requeued, "dead-letter run", "dead-letter runs"))
	return nil
}

// processesFlag is --process of emit and resume in direct mode.
const processesUsage = "with no server (direct mode): admit runs for the processes `NAMES` (comma-separated); " +
	"they wait, idle, until an engine that has them starts on the database"

// splitNames splits a comma-separated list, dropping blanks.
func splitNames(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// placeholders registers processes named names on event with c's engine
// (direct mode). The engine is never started, so their handler never runs:
// the runs wait for an engine that has the real processes.
func placeholders(c *client, names []string, event string) error {
	for _, n := range names {
		err := c.eng.Register(yella.Process{Name: n, On: event, Run: func(c *yella.Ctx) yella.Result {
			return c.Fail(errors.New("placeholder of the yella CLI: never executed"))
		}})
		if err != nil {
			return usagef("--process %s: %v", n, err)
		}
	}
	return nil
}

// noEngineNote says who will run runs admitted in direct mode.
func noEngineNote(w io.Writer, names []string, db string) {
	fmt.Fprintf(w, "no engine runs them here: they wait, idle, until an engine that has %s starts on %s\n",
		strings.Join(names, ", "), db)
}

func resumeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("resume", stdout)
	var t target
	t.flags(fs, stderr)
	procs := fs.String("process", "", processesUsage)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usagef("resume needs a run id and, optionally, a JSON payload: yella resume ID [JSON payload]")
	}
	payload, err := jsonArg(pos, 1, "payload")
	if err != nil {
		return err
	}
	c, err := t.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	names := splitNames(*procs)
	switch {
	case c.eng == nil && len(names) > 0:
		return usagef("--process is for direct mode (no server); %s resumes with its own processes", c.where)
	case c.eng != nil && !t.readOnly:
		r, err := c.eng.Run(ctx, pos[0])
		if err == nil && r.Status == yella.StatusDeferred {
			if len(names) == 0 {
				return fmt.Errorf("no server holds %s, and this command runs no processes: resuming %s admits its follow-up event %q, "+
					"one run per process that listens to it, and only the application knows them. Resume through the application's "+
					"server (--server URL), or name the processes with --process NAME[,NAME] (their runs then wait, idle, until an "+
					"engine that has them starts)", redactURL(t.db), pos[0], r.Then)
			}
			if err := placeholders(c, names, r.Then); err != nil {
				return err
			}
		}
	}
	var out struct {
		Runs []httpapi.Admitted `json:"runs"`
	}
	if err := c.call(ctx, "POST", "/api/runs/"+url.PathEscape(pos[0])+"/resume", httpapi.ResumeRequest{Payload: payload}, &out); err != nil {
		return err
	}
	if t.json {
		return printJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "resumed %s: %s%s\n", pos[0], plural(len(out.Runs), "follow-up run", "follow-up runs"), list(out.Runs))
	if c.eng != nil && len(out.Runs) > 0 {
		noEngineNote(stdout, names, redactURL(t.db))
	}
	return nil
}

func emitCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("emit", stdout)
	var t target
	t.flags(fs, stderr)
	key := fs.String("key", "", "an idempotency `KEY`: emitting it again admits nothing new")
	singleton := fs.String("singleton", "", "admit a process's run only when none of its runs emitted with this `KEY` is idle, running or waiting: "+
		"at most one at a time per key (else the answer names the run that stands in)")
	debounce := fs.String("debounce", "", "run only the latest of a burst of emissions with this `KEY`: the run starts --window after the emission, "+
		"and an emission with the key before it started replaces its payload and moves its start (with --window)")
	window := fs.Duration("window", 0, "with --debounce: the `DURATION` a burst must be quiet before its run starts, such as 30s (0s: at once)")
	procs := fs.String("process", "", processesUsage)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usagef("emit needs an event and, optionally, a JSON payload: yella emit EVENT [JSON payload] [--key K]")
	}
	payload, err := jsonArg(pos, 1, "payload")
	if err != nil {
		return err
	}
	req := httpapi.EmitRequest{Event: pos[0], Payload: payload, IdempotencyKey: *key}
	switch given := flagGiven(fs.FlagSet, "singleton"); {
	case given && flagGiven(fs.FlagSet, "debounce"):
		return usagef("give --singleton or --debounce, not both")
	case flagGiven(fs.FlagSet, "debounce") && !flagGiven(fs.FlagSet, "window"):
		return usagef("--debounce needs --window DURATION: how long a burst must be quiet before its run starts")
	case flagGiven(fs.FlagSet, "window") && !flagGiven(fs.FlagSet, "debounce"):
		return usagef("--window goes with --debounce KEY")
	case given:
		// An empty key is sent as given: the engine refuses it.
		req.Singleton = singleton
	case flagGiven(fs.FlagSet, "debounce"):
		req.Debounce = &httpapi.DebounceRequest{Key: *debounce, Window: window.String()}
	}
	c, err := t.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	names := splitNames(*procs)
	switch {
	case c.eng == nil && len(names) > 0:
		return usagef("--process is for direct mode (no server); %s admits runs for its own processes", c.where)
	case c.eng != nil && !t.readOnly && len(names) == 0:
		return fmt.Errorf("no server holds %s, and this command runs no processes: emitting %q admits one run per process "+
			"that listens to it, and only the application knows them. Emit through the application's server (--server URL), "+
			"or name the processes with --process NAME[,NAME] to admit their runs now (they wait, idle, until an engine that "+
			"has them starts on %s)", redactURL(t.db), pos[0], redactURL(t.db))
	case c.eng != nil && !t.readOnly:
		if err := placeholders(c, names, pos[0]); err != nil {
			return err
		}
	}
	var out httpapi.Emitted
	if err := c.call(ctx, "POST", "/api/emit", req, &out); err != nil {
		return err
	}
	if t.json {
		return printJSON(stdout, out)
	}
	switch {
	case len(out.Runs) > 0:
		fmt.Fprintf(stdout, "admitted %s%s\n", plural(len(out.Runs), "run", "runs"), list(out.Runs))
	case out.Reason == "duplicate":
		fmt.Fprintf(stdout, "nothing new: already admitted under key %q as %s\n", *key, strings.Join(out.Existing, ", "))
	case out.Reason == yella.ReasonGrouped:
	default:
		fmt.Fprintf(stdout, "nothing admitted (%s): dropped by %s\n", out.Reason, strings.Join(out.Dropped, ", "))
	}
	if len(out.Grouped) > 0 {
		printGrouped(stdout, out.Grouped, req, *window)
	}
	if len(out.Runs) > 0 && len(out.Dropped) > 0 {
		fmt.Fprintf(stdout, "dropped at their cap: %s\n", strings.Join(out.Dropped, ", "))
	}
	if c.eng != nil && len(out.Runs) > 0 {
		noEngineNote(stdout, names, redactURL(t.db))
	}
	return nil
}

// printGrouped says which runs stood in for an emission with a singleton
// or debounce key, and what that did to them.
func printGrouped(w io.Writer, ids []string, req httpapi.EmitRequest, window time.Duration) {
	one := len(ids) == 1
	runs := "runs " + strings.Join(ids, ", ")
	if one {
		runs = "run " + ids[0]
	}
	if req.Debounce != nil {
		they, carry, start := "they", "carry", "start"
		if one {
			they, carry, start = "it", "carries", "starts"
		}
		fmt.Fprintf(w, "debounced into %s (key %s): %s now %s this payload and %s in %s, unless the key is emitted again first\n",
			runs, showKey(req.Debounce.Key), they, carry, start, shortDuration(window))
		return
	}
	is, their := "are", "their processes"
	if one {
		is, their = "is", "its process"
	}
	fmt.Fprintf(w, "singleton key %s: %s %s still idle, running or waiting, so none is admitted for %s\n",
		showKey(*req.Singleton), runs, is, their)
}

func list(runs []httpapi.Admitted) string {
	var b strings.Builder
	for _, r := range runs {
		fmt.Fprintf(&b, "\n  %s  %s  %s", r.ID, r.Process, r.Status)
	}
	return b.String()
}

// fencedCmd resolves fenced runs in bulk: a preview unless --apply.
func fencedCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("fenced", stdout)
	var t target
	t.flags(fs, stderr)
	process := fs.String("process", "", "only the fenced runs of the process `NAME`")
	effect := fs.String("effect", "", "only runs whose started effect has the stored key `KEY` (as runs show lists it)")
	retry := fs.Bool("retry", false, "retry the runs: the started effect's body runs again")
	complete := fs.String("complete", "", "record the started effect as done with the result `JSON` (checked to have happened)")
	apply := fs.Bool("apply", false, "carry the action out (without it: a preview that changes nothing)")
	limit := fs.Int("limit", 0, "look at most at `N` fenced runs, oldest first (default 1000, at most 10000)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("fenced takes no arguments, only flags (got %q)", pos[0])
	}
	req := httpapi.ResolveFencedRequest{Process: *process, EffectKey: *effect, Apply: *apply, Limit: *limit}
	switch {
	case *retry && *complete != "":
		return usagef("give --retry or --complete, not both")
	case *retry:
		req.Action = "retry"
	case *complete != "":
		if !json.Valid([]byte(*complete)) {
			return usagef("--complete: the result is not valid JSON: %s", *complete)
		}
		req.Action, req.Output = "complete-effect", json.RawMessage(*complete)
	default:
		return usagef("fenced needs --retry or --complete JSON")
	}
	if *limit < 0 || *limit > yella.MaxFencedLimit {
		return usagef("--limit must be between 0 and %d", yella.MaxFencedLimit)
	}
	c, err := t.connect(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	var plan yella.FencedPlan
	if err := c.call(ctx, "POST", "/api/fenced/resolve", req, &plan); err != nil {
		return err
	}
	if t.json {
		return printJSON(stdout, plan)
	}
	verb := map[string]string{"retry": "retry", "complete-effect": "record as done"}[req.Action]
	for _, it := range plan.Items {
		switch {
		case !*apply:
			fmt.Fprintf(stdout, "would %s: run %s (%s), effect %s\n", verb, it.RunID, it.Process, it.EffectKey)
		case it.Done:
			fmt.Fprintf(stdout, "%s: run %s (%s), effect %s\n", map[string]string{"retry": "retried", "complete-effect": "recorded as done"}[req.Action], it.RunID, it.Process, it.EffectKey)
		default:
			fmt.Fprintf(stdout, "skipped: run %s (%s): %s\n", it.RunID, it.Process, it.Error)
		}
	}
	switch {
	case !*apply:
		fmt.Fprintf(stdout, "%s; nothing changed (preview): add --apply to carry it out\n", plural(len(plan.Items), "fenced run would be resolved", "fenced runs would be resolved"))
	default:
		fmt.Fprintf(stdout, "%s\n", plural(plan.Applied, "fenced run resolved", "fenced runs resolved"))
	}
	if plan.More {
		fmt.Fprintln(stdout, "more fenced runs may match: run it again")
	}
	return nil
}
