package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const childEnv = "YELLA_AGENT_CHILD"

func TestMain(m *testing.M) {
	if args := os.Getenv(childEnv); args != "" {
		if err := run(strings.Fields(args), os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The agent survives kill -9 while the model's answer streams: run again,
// it replays the model's first reply and the tool results from the
// database (the time the now tool returned is the one recorded before the
// kill) and asks only for the answer again.
func TestAgentResumesAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the agent twice")
	}
	db := filepath.Join(t.TempDir(), "agent.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=-db "+db+" -delay 300ms")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var first bytes.Buffer
	deadline := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() }) // an upper bound only
	buf := make([]byte, 4096)
	for !strings.Contains(first.String(), "The sum ") {
		n, err := out.Read(buf)
		first.Write(buf[:n])
		if err != nil {
			t.Fatalf("the first run ended before the answer streamed: %v\n%s", err, first.String())
		}
	}
	deadline.Stop()
	cmd.Process.Signal(os.Kill) // SIGKILL, mid-answer
	cmd.Wait()
	if strings.Contains(first.String(), "answer:") {
		t.Fatalf("the first run finished before it could be killed:\n%s", first.String())
	}
	now := regexp.MustCompile(`\[tool now\(\{\}\) = (\S+)\]`).FindStringSubmatch(first.String())
	if now == nil {
		t.Fatalf("the first run did not call the now tool:\n%s", first.String())
	}

	var second bytes.Buffer
	if err := run([]string{"-db", db, "-delay", "0s"}, &second); err != nil {
		t.Fatalf("%v\n%s", err, second.String())
	}
	got := second.String()
	for _, want := range []string{
		"this task was started by an earlier run; continuing it",
		"[turn-0 replayed from the database]",
		"[tool-0-0 replayed from the database]",
		"[tool-0-1 replayed from the database]",
		"answer: The sum is 5555, and the time is " + now[1] + ".",
		"(2 turns,",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the second run does not say %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "turn-1 replayed") {
		t.Errorf("the answer cut off by the kill was replayed, not asked again:\n%s", got)
	}
}
