//go:build !linux

package browser

import "os/exec"

func setProcAttr(*exec.Cmd) {}

func killGroup(int) {}

func killMarked(string) {}

// MarkedProcesses returns the processes whose command line holds
// --user-data-dir=dir; it reads /proc, so it returns nil outside Linux.
func MarkedProcesses(string) []int { return nil }

func treeMemory(int) (int, int64, int64) { return 0, 0, 0 }
