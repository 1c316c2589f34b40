package main

import (
	"fmt"
	"os"
	"strings"
)

// errTokenFlag explains why a token is never taken from the command line:
// arguments are visible to every user of the machine (ps, /proc) and in
// pprof's /debug/pprof/cmdline.
const errTokenFlag = "--token is not accepted: a flag's value shows in ps and in /debug/pprof/cmdline. " +
	"Put the token in a file readable only by you and pass --token-file FILE, or set YELLA_TOKEN"

// refuseTokenFlag fails if args hold a --token flag (in any of the flag
// package's spellings), without repeating its value.
func refuseTokenFlag(args []string) error {
	for _, a := range args {
		if a == "--" {
			return nil
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "token" {
			return usageError{errTokenFlag}
		}
	}
	return nil
}

// loadToken is the access token from file (if given) or else the
// environment variable YELLA_TOKEN; "" if neither has one.
func loadToken(file string) (string, error) {
	if file == "" {
		return os.Getenv("YELLA_TOKEN"), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("--token-file %s is empty", file)
	}
	return t, nil
}
