package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/yella-go/yella/replicate"
)

func restoreCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("restore", stdout)
	from := fs.String("from", "", "the replica: file:///path or s3://bucket/path?endpoint=…&region=…")
	to := fs.String("to", "", "the database file to create")
	force := fs.Bool("force", false, "replace an existing database (atomically, after the restored copy passes integrity_check)")
	at := fs.String("timestamp", "", "restore the state as of this time (RFC 3339, e.g. 2026-11-30T05:00:00Z); default the latest")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("restore takes no arguments, got %q", strings.Join(pos, " "))
	}
	if *from == "" || *to == "" {
		return usagef("restore needs --from URL and --to PATH")
	}
	target, err := replicate.ParseURL(*from)
	if err != nil {
		return usagef("--from: %v", err)
	}
	opts := replicate.RestoreOptions{Force: *force}
	if *at != "" {
		if opts.Timestamp, err = time.Parse(time.RFC3339, *at); err != nil {
			return usagef("--timestamp must be RFC 3339 (2026-11-30T05:00:00Z), got %q", *at)
		}
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	if err := replicate.Restore(ctx, target, *to, opts); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored %s from %s in %v (integrity_check ok)\n", *to, target, time.Since(start).Round(time.Millisecond))
	return nil
}
