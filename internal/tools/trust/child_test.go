//go:build trust

package trust

import (
	"encoding/json"
	"fmt"
	"os"
)

// childEnv runs a trust-specific child (see childModes).
const childEnv = "YELLA_TRUST_CHILD"

type childSpec struct {
	Mode string            `json:"mode"`
	Args map[string]string `json:"args"`
}

// childModes are the child processes trust tests start.
var childModes = map[string]func(args map[string]string) error{}

func childMain() bool {
	raw := os.Getenv(childEnv)
	if raw == "" {
		return false
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "trust child:", err)
		os.Exit(2)
	}
	run := childModes[spec.Mode]
	if run == nil {
		fmt.Fprintln(os.Stderr, "trust child: unknown mode", spec.Mode)
		os.Exit(2)
	}
	if err := run(spec.Args); err != nil {
		fmt.Fprintln(os.Stderr, "trust child:", err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}
