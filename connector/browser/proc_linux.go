//go:build linux

package browser

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// setProcAttr starts the browser in its own process group (so that Close
// kills the group) with SIGKILL as its parent-death signal (so that a
// killed engine takes its browsers with it). chromedp starts the process
// from a goroutine locked to its thread until the process exits, which the
// parent-death signal needs: it fires when the starting thread ends.
func setProcAttr(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// killGroup sends SIGKILL to the process group led by pid.
func killGroup(pid int) { syscall.Kill(-pid, syscall.SIGKILL) }

// killMarked kills every process whose command line holds
// --user-data-dir=dir (a browser's helpers that left its group), until a few
// looks in a row find none, for at most two seconds.
func killMarked(dir string) {
	deadline := time.Now().Add(2 * time.Second)
	for quiet := 0; quiet < 3 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		pids := MarkedProcesses(dir)
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if len(pids) == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
}

// MarkedProcesses returns the processes whose command line holds
// --user-data-dir=dir: the processes of the browser started with that user
// data directory (Linux; nil elsewhere). Tests use it to check that no
// browser outlives its engine.
func MarkedProcesses(dir string) []int {
	want := []byte("--user-data-dir=" + dir)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for _, arg := range bytes.Split(cmdline, []byte{0}) {
			if bytes.Equal(arg, want) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// treeMemory returns the number of processes in the tree rooted at pid and
// the sums of their resident set sizes and proportional set sizes.
func treeMemory(pid int) (n int, rss, pss int64) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0, 0
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := parentOf(p); ok {
			children[pp] = append(children[pp], p)
		}
	}
	queue := []int{pid}
	seen := map[int]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		r, ok := statusKB(p, "status", "VmRSS:")
		if !ok {
			continue
		}
		s, _ := statusKB(p, "smaps_rollup", "Pss:")
		n++
		rss += r
		pss += s
		queue = append(queue, children[p]...)
	}
	return n, rss, pss
}

// parentOf reads a process's parent from /proc/pid/stat.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseStatParent(b)
}

// parseStatParent reads the parent pid from the text of /proc/pid/stat:
// the field after the state, which follows the command name in
// parentheses. The name is the process's own choice (it may hold spaces,
// parentheses and digits), so the fields are read after its last ')'.
func parseStatParent(b []byte) (int, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(f[1])
	if err != nil || pp < 0 {
		return 0, false
	}
	return pp, true
}

// statusKB reads a size in kB from a line of /proc/pid/<file> (VmRSS: of
// status, Pss: of smaps_rollup), in bytes; a process without the line (a
// zombie) has 0.
func statusKB(pid int, file, field string) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + file)
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, true
}

// ownerFile is the lock file in a browser's user data directory: locked
// (flock) by the process whose pool started the browser for as long as
// that process lives; the kernel releases the lock when the process dies,
// however it dies, so a directory whose lock can be taken has no owner.
const ownerFile = ".yella-owner"

// ownDir marks dir as this process's: a lock file, locked before it takes
// its name in dir, so that no pool sweeping directories ever finds it
// unlocked while its owner lives. The file returned holds the lock: close
// it once the directory is removed.
func ownDir(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, ownerFile+"-")
	if err != nil {
		return nil, err
	}
	if err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, ownerFile))
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// sweepStale removes the user data directories in tmp (yella-browser-*)
// whose owner is gone: a process that died without removing its browsers'
// directories (a SIGKILL, a crash). A directory is removed only if its
// lock file is there and its lock can be taken; directories of live
// processes, and directories without a lock file, are left alone. Any
// process still marked with a removed directory (a helper of the dead
// browser) is killed first. It returns the directories removed.
func sweepStale(tmp string) []string {
	dirs, _ := filepath.Glob(filepath.Join(tmp, "yella-browser-*"))
	var removed []string
	for _, d := range dirs {
		f, err := os.Open(filepath.Join(d, ownerFile))
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			killMarked(d)
			if os.RemoveAll(d) == nil {
				removed = append(removed, d)
			}
		}
		f.Close()
	}
	return removed
}
