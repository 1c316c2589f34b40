package main

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector/webhook"
)

// hooksPath is where serve mounts the webhook sources: POST /hooks/NAME.
const hooksPath = "/hooks/"

// hookUsage is the help of --hook.
const hookUsage = "admit signed webhooks POSTed to /hooks/NAME, without the token (the signature authenticates): " +
	"`NAME=KIND:EVENT[,OPTION…]`, repeatable. KIND is stripe, github, slack or hmac; EVENT may hold {type} (the provider's event type). " +
	"Options: secret-env=VAR or secret-file=FILE (required; repeat for rotation; never the secret itself), tolerance=DURATION (stripe, slack, hmac), " +
	"process=NAME (repeatable: the processes that handle EVENT, when this server runs none of them; their runs wait for an engine that has them), " +
	"and for hmac: header=H (required), prefix=P, timestamp-header=H, id-header=H, type-header=H"

// hookFileUsage is the help of --hook-file.
const hookFileUsage = "read more --hook values from `FILE`, one per line (blank lines and lines starting with # are skipped)"

// hookFlags collects the values of --hook.
type hookFlags []string

// String implements flag.Value.
func (h *hookFlags) String() string { return strings.Join(*h, " ") }

// Set implements flag.Value.
func (h *hookFlags) Set(v string) error {
	*h = append(*h, v)
	return nil
}

// hookSpec is one parsed --hook.
type hookSpec struct {
	name, kind, event string
	secrets           []string
	processes         []string
	source            webhook.Source
}

// hookKinds are the KIND values of --hook.
var hookKinds = []string{"stripe", "github", "slack", "hmac"}

// hookFileValues reads the --hook values of a --hook-file, each with the
// place it came from for error messages.
func hookFileValues(path string) (values, places []string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, usagef("--hook-file: %v", err)
	}
	for i, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			values = append(values, line)
			places = append(places, fmt.Sprintf("--hook-file %s line %d: ", path, i+1))
		}
	}
	return values, places, nil
}

// parseHooks parses every --hook, then the lines of the --hook-file if
// file is not "", reading the secrets from the environment and files.
// Every error names the flag and the source.
func parseHooks(flags []string, file string, getenv func(string) string) ([]hookSpec, error) {
	values := append([]string(nil), flags...)
	places := make([]string, len(flags))
	if file != "" {
		fv, fp, err := hookFileValues(file)
		if err != nil {
			return nil, err
		}
		values, places = append(values, fv...), append(places, fp...)
	}
	var specs []hookSpec
	seen := map[string]bool{}
	for i, v := range values {
		s, err := parseHook(v, getenv)
		if err != nil {
			if places[i] != "" {
				return nil, usagef("%s%v", places[i], err)
			}
			return nil, err
		}
		if seen[s.name] {
			return nil, usagef("--hook %s: the name is given twice", s.name)
		}
		seen[s.name] = true
		specs = append(specs, s)
	}
	return specs, nil
}

func parseHook(v string, getenv func(string) string) (hookSpec, error) {
	var s hookSpec
	head, rest, _ := strings.Cut(v, ",")
	name, target, ok := strings.Cut(head, "=")
	s.name = strings.TrimSpace(name)
	fail := func(format string, args ...any) (hookSpec, error) {
		label := s.name
		if label == "" {
			label = fmt.Sprintf("%q", v)
		}
		return hookSpec{}, usagef("--hook %s: %s", label, fmt.Sprintf(format, args...))
	}
	if !ok || s.name == "" {
		return fail("want NAME=KIND:EVENT[,OPTION…], such as stripe=stripe:payment:received,secret-env=STRIPE_WEBHOOK_SECRET")
	}
	if strings.ContainsAny(s.name, "/?#% ") {
		return fail("the name is a path element: no /, ?, #, %% or spaces")
	}
	s.kind, s.event, _ = strings.Cut(target, ":")
	s.kind, s.event = strings.TrimSpace(s.kind), strings.TrimSpace(s.event)
	if !contains(hookKinds, s.kind) {
		return fail("KIND must be one of %s, got %q", strings.Join(hookKinds, ", "), s.kind)
	}
	if s.event == "" {
		return fail("the EVENT to emit is missing: %s=%s:EVENT", s.name, s.kind)
	}
	var tolerance time.Duration
	var m webhook.HMAC
	if rest != "" {
		for _, opt := range strings.Split(rest, ",") {
			k, val, _ := strings.Cut(opt, "=")
			k, val = strings.TrimSpace(k), strings.TrimSpace(val)
			if val == "" && k != "prefix" {
				return fail("option %q needs a value (%s=…)", k, k)
			}
			hmacOnly := func() error {
				if s.kind != "hmac" {
					return fmt.Errorf("option %s is for KIND hmac, not %s", k, s.kind)
				}
				return nil
			}
			var err error
			switch k {
			case "secret":
				return fail("secrets never go on the command line (arguments show in ps): use secret-env=VAR or secret-file=FILE")
			case "secret-env":
				sec := getenv(val)
				if sec == "" {
					return fail("secret-env=%s: the environment variable is unset or empty", val)
				}
				s.secrets = append(s.secrets, sec)
			case "secret-file":
				secs, ferr := readSecrets(val)
				if ferr != nil {
					return fail("secret-file=%s: %v", val, ferr)
				}
				s.secrets = append(s.secrets, secs...)
			case "tolerance":
				if s.kind == "github" {
					return fail("option tolerance is not for github: GitHub signs no timestamp")
				}
				if tolerance, err = time.ParseDuration(val); err != nil || tolerance <= 0 {
					return fail("tolerance=%s: want a positive duration such as 5m", val)
				}
			case "process":
				s.processes = append(s.processes, val)
			case "header":
				err, m.Header = hmacOnly(), val
			case "prefix":
				err, m.Prefix = hmacOnly(), val
			case "timestamp-header":
				err, m.TimestampHeader = hmacOnly(), val
			case "id-header":
				err, m.IDHeader = hmacOnly(), val
			case "type-header":
				err, m.TypeHeader = hmacOnly(), val
			default:
				return fail("unknown option %q (options: secret-env, secret-file, tolerance, process, header, prefix, timestamp-header, id-header, type-header)", k)
			}
			if err != nil {
				return fail("%v", err)
			}
		}
	}
	if len(s.secrets) == 0 {
		return fail("a secret is required: secret-env=VAR or secret-file=FILE")
	}
	switch s.kind {
	case "stripe":
		s.source.Verifier = webhook.Stripe{Secrets: s.secrets, Tolerance: tolerance}
	case "github":
		s.source.Verifier = webhook.GitHub{Secrets: s.secrets}
	case "slack":
		s.source.Verifier = webhook.Slack{Secrets: s.secrets, Tolerance: tolerance}
	case "hmac":
		if m.Header == "" {
			return fail("KIND hmac needs header=NAME, the header that carries the signature")
		}
		m.Secrets, m.Tolerance = s.secrets, tolerance
		s.source.Verifier = m
	}
	s.source.Event = s.event
	return s, nil
}

// readSecrets reads the secrets of a file: one per non-empty line, so a
// rotation can list the new and the old one.
func readSecrets(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the file holds no secret")
	}
	return out, nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// webhooks builds the handler of serve's --hook sources on eng. A fixed
// EVENT needs a listener: one of the engine's processes, or the process=
// names, registered as placeholders that this server never executes
// (allowed only when its engine does not run, since a running engine
// would claim their runs).
func webhooks(eng *yella.Engine, specs []hookSpec, engineRuns bool, opts webhook.Options) (*webhook.Handler, error) {
	listens := map[string]bool{}
	for _, p := range eng.Processes() {
		listens[p.On] = true
	}
	opts.Sources = map[string]webhook.Source{}
	for _, s := range specs {
		templated := strings.Contains(s.event, webhook.TypePlaceholder)
		switch {
		case len(s.processes) > 0 && templated:
			return nil, usagef("--hook %s: process= needs a fixed EVENT, not one with %s", s.name, webhook.TypePlaceholder)
		case len(s.processes) > 0 && engineRuns:
			return nil, usagef("--hook %s: process= names processes that run elsewhere, but this server's engine runs (the demo) "+
				"and would claim their runs: drop process=, or run serve with --demo=false", s.name)
		case len(s.processes) == 0 && !templated && !listens[s.event]:
			return nil, usagef("--hook %s: no process listens to %q on this server: name the processes that handle it with "+
				"process=NAME (their runs wait, idle, until an engine that has them starts on the database)", s.name, s.event)
		case templated && !anyOfForm(listens, s.event):
			return nil, usagef("--hook %s: no process on this server listens to an event of the form %q, so every delivery would be refused; "+
				"give a fixed EVENT with process=NAME", s.name, s.event)
		}
		for _, n := range s.processes {
			err := eng.Register(yella.Process{Name: n, On: s.event, Run: func(c *yella.Ctx) yella.Result {
				return c.Fail(errors.New("placeholder of yella serve --hook: never executed"))
			}})
			if err != nil {
				return nil, usagef("--hook %s: process=%s: %v", s.name, n, err)
			}
		}
		opts.Sources[s.name] = s.source
	}
	return webhook.New(eng, opts)
}

// anyOfForm reports whether an event in events matches form, whose
// {type} stands for any non-empty text.
func anyOfForm(events map[string]bool, form string) bool {
	before, after, _ := strings.Cut(form, webhook.TypePlaceholder)
	for ev := range events {
		if len(ev) > len(before)+len(after) && strings.HasPrefix(ev, before) && strings.HasSuffix(ev, after) {
			return true
		}
	}
	return false
}

// hookLines describes the sources for serve's summary.
func hookLines(specs []hookSpec) string {
	var parts []string
	for _, s := range specs {
		parts = append(parts, fmt.Sprintf("%s%s (%s → %s)", hooksPath, s.name, s.kind, s.event))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ") + "; POST without the token (the signature authenticates)"
}
