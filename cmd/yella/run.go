package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command is one subcommand: its one-line summary and its body.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() map[string]command {
	return map[string]command{
		"serve":   {"run the engine with the dashboard, the HTTP API and /metrics", serve},
		"runs":    {"list runs (runs list) or show one (runs show ID)", runsCmd},
		"emit":    {"emit an event: emit EVENT [JSON payload]", emitCmd},
		"retry":   {"retry an errored, dead-letter or fenced run", opCmd("retry")},
		"requeue": {"requeue a dead-letter run with a fresh retry budget (--all: every one)", requeueCmd},
		"cancel":  {"cancel an idle or running run", opCmd("cancel")},
		"resume":  {"release a deferred run's follow-up: resume ID [JSON payload]", resumeCmd},
		"bench":   {"run the benchmark suite (bench list, bench <scenario>, bench report)", benchCmd},
		"report":  {"generate the benchmark charts and page from the reports", reportCmd},
		"restore": {"restore a database from its replica: restore --from URL --to PATH", restoreCmd},
		"version": {"print the version", versionCmd},
	}
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func usage() string {
	var b strings.Builder
	b.WriteString("usage: yella <command> [flags]\n\ncommands:\n")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-9s %s\n", n, cmds[n].summary)
	}
	b.WriteString("\n\"yella <command> -h\" shows a command's flags.\n")
	return b.String()
}

// Run runs the yella command line (without the program name), writing to
// stdout and stderr. main calls it; so do the tests.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return usageError{}
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage())
		return nil
	}
	cmd, ok := commands()[name]
	if !ok {
		return usagef("unknown command %q (yella help lists them)", name)
	}
	err := cmd.run(ctx, rest, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// newFlags is a flag set that reports its errors as usage errors.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("yella "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse parses args, accepting flags after positional arguments too
// ("yella retry ID --db x.db").
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// envOr is the environment variable's value, or def.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
