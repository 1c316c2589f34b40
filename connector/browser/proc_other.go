//go:build !linux

package browser

import (
	"os"
	"os/exec"
)

func setProcAttr(*exec.Cmd) {}

func killGroup(int) {}

func killMarked(string) {}

// MarkedProcesses returns the processes whose command line holds
// --user-data-dir=dir; it reads /proc, so it returns nil outside Linux.
func MarkedProcesses(string) []int { return nil }

func treeMemory(int) (int, int64, int64) { return 0, 0, 0 }

// ownDir marks dir as this process's on Linux; elsewhere directories of
// dead processes are not swept, and it does nothing.
func ownDir(string) (*os.File, error) { return nil, nil }

func sweepStale(string) []string { return nil }
