package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"

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

// opCmd is retry or cancel: one run, no body.
func opCmd(op string) func(context.Context, []string, io.Writer, io.Writer) error {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		fs := newFlags(op, stderr)
		var t target
		t.flags(fs)
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

func requeueCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("requeue", stderr)
	var t target
	t.flags(fs)
	all := fs.Bool("all", false, "requeue every dead-letter run")
	process := fs.String("process", "", "with --all: only this process's")
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
	fmt.Fprintf(stdout, "requeued %d dead-letter runs\n", out.Requeued)
	return nil
}

func resumeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("resume", stderr)
	var t target
	t.flags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usagef("usage: yella resume ID [JSON payload]")
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
	var out struct {
		Runs []httpapi.Admitted `json:"runs"`
	}
	if err := c.call(ctx, "POST", "/api/runs/"+url.PathEscape(pos[0])+"/resume", httpapi.ResumeRequest{Payload: payload}, &out); err != nil {
		return err
	}
	if t.json {
		return printJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "resumed %s: %d follow-up runs%s\n", pos[0], len(out.Runs), list(out.Runs))
	return nil
}

func emitCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("emit", stderr)
	var t target
	t.flags(fs)
	key := fs.String("key", "", "an idempotency key: emitting it again admits nothing new")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usagef("usage: yella emit EVENT [JSON payload] [--key K]")
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
	var out httpapi.Emitted
	if err := c.call(ctx, "POST", "/api/emit", httpapi.EmitRequest{Event: pos[0], Payload: payload, IdempotencyKey: *key}, &out); err != nil {
		return err
	}
	if t.json {
		return printJSON(stdout, out)
	}
	switch {
	case len(out.Runs) > 0:
		fmt.Fprintf(stdout, "admitted %d runs%s\n", len(out.Runs), list(out.Runs))
	case out.Reason == "duplicate":
		fmt.Fprintf(stdout, "nothing new: already admitted under key %q as %s\n", *key, strings.Join(out.Existing, ", "))
	default:
		fmt.Fprintf(stdout, "nothing admitted (%s): dropped by %s\n", out.Reason, strings.Join(out.Dropped, ", "))
	}
	if len(out.Runs) > 0 && len(out.Dropped) > 0 {
		fmt.Fprintf(stdout, "dropped at their cap: %s\n", strings.Join(out.Dropped, ", "))
	}
	return nil
}

func list(runs []httpapi.Admitted) string {
	var b strings.Builder
	for _, r := range runs {
		fmt.Fprintf(&b, "\n  %s  %s  %s", r.ID, r.Process, r.Status)
	}
	return b.String()
}
