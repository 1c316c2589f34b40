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
	"time"
)

// command is one subcommand: its one-line summary and its body.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() map[string]command {
	return map[string]command{
		"serve":     {"run the engine with the dashboard, the HTTP API and /metrics (--read-only: look only)", serve},
		"runs":      {"list runs (runs list) or show one (runs show ID)", runsCmd},
		"emit":      {"emit an event: emit EVENT [JSON payload]", emitCmd},
		"retry":     {"retry an errored, dead-letter, fenced or cancelled run", opCmd("retry")},
		"requeue":   {"requeue a dead-letter run with a fresh retry budget (--all: every one)", requeueCmd},
		"cancel":    {"cancel an idle, running or waiting run", opCmd("cancel")},
		"resume":    {"release a deferred run's follow-up: resume ID [JSON payload]", resumeCmd},
		"signal":    {"send a signal to the run waiting for it: signal KEY [JSON payload] (--run ID: to one run)", signalCmd},
		"end-wait":  {"end a waiting run's wait now, without a signal", opCmd("end-wait")},
		"fenced":    {"resolve fenced runs in bulk (--retry or --complete JSON; a preview unless --apply)", fencedCmd},
		"nodes":     {"list the engine processes sharing a PostgreSQL database and the runs each holds", nodesCmd},
		"limits":    {"list the flow limits (rate limits, per-key concurrency) and the keys holding runs back", limitsCmd},
		"schedules": {"list the cron schedules with their next and last tick; schedules pause|resume NAME", schedulesCmd},
		"bench":     {"run the benchmark suite (bench list, bench <scenario>, bench report)", benchCmd},
		"report":    {"generate the benchmark charts and page from the reports", reportCmd},
		"restore":   {"restore a database from its replica: restore --from URL --to PATH", restoreCmd},
		"version":   {"print the version", versionCmd},
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
	b.WriteString("\n\"yella help <command>\" or \"yella <command> -h\" shows a command's subcommands and flags.\n")
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
		if len(rest) == 0 {
			fmt.Fprint(stdout, usage())
			return nil
		}
		name, rest = rest[0], append(append([]string{}, rest[1:]...), "-h")
	}
	cmd, ok := commands()[name]
	if !ok {
		return usagef("unknown command %q (yella help lists them)", name)
	}
	err := cmd.run(ctx, rest, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return forCLI(err)
}

// libraryWording maps phrases of library errors that name Go fields to
// the flags a CLI user gives.
var libraryWording = strings.NewReplacer(
	"(use Force to replace it)", "(restore --force replaces it)",
	"(use Force to discard it)", "(restore --force discards it)",
	"Group: a Singleton or Debounce key", "a --singleton or --debounce key",
	"Debounce: debounce window", "--window",
)

// cliError is an error reworded for the command line; it unwraps to the
// library's error, so errors.Is and errors.As still see it.
type cliError struct {
	msg string
	err error
}

// Error implements error.
func (e *cliError) Error() string { return e.msg }

// Unwrap returns the library's error.
func (e *cliError) Unwrap() error { return e.err }

// forCLI rewords err where a library names a Go field.
func forCLI(err error) error {
	if err == nil {
		return nil
	}
	if msg := libraryWording.Replace(err.Error()); msg != err.Error() {
		return &cliError{msg, err}
	}
	return err
}

// flagSet is a command's flags with the text of its help: "yella CMD -h"
// prints the usage line, the description and every flag to stdout.
type flagSet struct {
	*flag.FlagSet
	use, about string
	stdout     io.Writer
}

// newFlags is the flag set of command name ("runs list"), whose help
// (helps) goes to out. Parse errors come back as usage errors (parse),
// never with the whole help.
func newFlags(name string, out io.Writer) *flagSet {
	fs := flag.NewFlagSet("yella "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	h, ok := helps[name]
	if !ok {
		h.use = name + " [flags]"
	}
	return &flagSet{FlagSet: fs, use: h.use, about: h.about, stdout: out}
}

// help writes the command's usage line, description and flags.
func (fs *flagSet) help(w io.Writer) {
	fmt.Fprintf(w, "usage: yella %s\n", fs.use)
	if fs.about != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(fs.about))
	}
	printFlags(w, fs.FlagSet)
}

// printFlags lists fs's flags as "--name VALUE  usage (default …)",
// wrapped to helpWidth columns.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	type row struct{ left, usage string }
	var rows []row
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		value, use := flag.UnquoteUsage(f)
		left := "--" + f.Name
		if value != "" {
			left += " " + value
		}
		def := f.DefValue
		if g, ok := f.Value.(flag.Getter); ok {
			if d, ok := g.Get().(time.Duration); ok {
				def = shortDuration(d)
			}
		}
		if def != "" && def != "0" && def != "0s" && def != "false" && !strings.Contains(use, "(default") {
			use += fmt.Sprintf(" (default %s)", def)
		}
		rows = append(rows, row{left, use})
		width = max(width, len(left))
	})
	if len(rows) == 0 {
		return
	}
	width = min(width, 22)
	fmt.Fprintln(w, "\nflags:")
	for _, r := range rows {
		lines := wrap(r.usage, helpWidth-width-4)
		if len(r.left) > width {
			fmt.Fprintf(w, "  %s\n", r.left)
		} else {
			fmt.Fprintf(w, "  %-*s  %s\n", width, r.left, lines[0])
			lines = lines[1:]
		}
		for _, l := range lines {
			fmt.Fprintf(w, "  %*s  %s\n", width, "", l)
		}
	}
}

// helpWidth is the width help text is wrapped to.
const helpWidth = 100

// wrap splits text into lines of at most n columns, at spaces.
func wrap(text string, n int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > n {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}

// shortDuration prints 72h rather than 72h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// parse parses args, accepting flags after positional arguments too
// ("yella retry ID --db x.db"). -h prints the help to stdout and returns
// flag.ErrHelp. A --token flag is refused without echoing its value.
func parse(fs *flagSet, args []string) ([]string, error) {
	if err := refuseTokenFlag(args); err != nil {
		return nil, err
	}
	var pos []string
	for {
		before := args
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.help(fs.stdout)
				return nil, err
			}
			return nil, usageError{fmt.Sprintf("%v (yella %s -h lists the flags)", err, strings.TrimPrefix(fs.Name(), "yella "))}
		}
		args = fs.Args()
		if used := before[:len(before)-len(args)]; len(used) > 0 && used[len(used)-1] == "--" {
			return append(pos, args...), nil // everything after "--" is positional
		}
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

// plural is "1 run", "2 runs".
func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// flagGiven reports whether the flag name was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
