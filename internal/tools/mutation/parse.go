package mutation

import (
	"regexp"
	"strings"
)

// Parsed is what go test's output (with or without -v) says about a run.
type Parsed struct {
	BuildFailed bool   // the package or its test binary did not build
	Failed      string // the most specific failing test, if any
	Message     string // its first failure message (or the panic, or the build error)
	Deepest     int    // the most '/'-separated levels of a passing test's name
}

var (
	reMarker  = regexp.MustCompile(`^=== (?:RUN|CONT|NAME)\s+(\S+)`)
	reResult  = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+)`)
	reMessage = regexp.MustCompile(`^\s+([\w.-]+\.go:\d+: .*)$`)
	reCompile = regexp.MustCompile(`^(\S+\.go:\d+:\d+: .*)$`)
	reRunning = regexp.MustCompile(`^\s+(Test\S*) \(`)
)

var reVarying = regexp.MustCompile(`[0-9a-f]*[0-9][0-9a-f]*`)

// normalize blanks out what varies between runs of a test (numbers, ids,
// times), so that a line the unmutated run printed too is recognised.
func normalize(line string) string { return reVarying.ReplaceAllString(line, "#") }

// Logged returns the normalized message lines of a run's output: what the
// tests log when they pass, for Parse to tell from failure messages.
func Logged(out string) map[string]bool {
	known := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if m := reMessage.FindStringSubmatch(line); m != nil {
			known[normalize(strings.TrimSpace(m[1]))] = true
		}
	}
	return known
}

// Parse reads go test output. A failing test's message is its first line
// that is not in known (lines the passing run logged too, see Logged), or
// else its first line.
func Parse(out string, known map[string]bool) Parsed {
	var p Parsed
	cur := ""
	first := map[string]string{} // test → its first message line
	var failed []string
	panicMsg, panicTest := "", ""
	inRunning := false
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "[build failed]") || strings.Contains(line, "[setup failed]") {
			p.BuildFailed = true
		}
		if m := reCompile.FindStringSubmatch(line); m != nil && p.Message == "" {
			p.Message = m[1] // kept only if the build failed
		}
		if m := reMarker.FindStringSubmatch(line); m != nil {
			cur = m[1]
			inRunning = false
			continue
		}
		if m := reResult.FindStringSubmatch(line); m != nil {
			switch m[1] {
			case "FAIL":
				failed = append(failed, m[2])
				cur = m[2] // without -v, the messages follow the FAIL line
			case "PASS":
				p.Deepest = max(p.Deepest, strings.Count(m[2], "/")+1)
			}
			continue
		}
		if strings.HasPrefix(line, "panic: ") && panicMsg == "" {
			panicMsg, panicTest = strings.TrimSpace(line), cur
			continue
		}
		if strings.TrimSpace(line) == "running tests:" {
			inRunning = true
			continue
		}
		if m := reRunning.FindStringSubmatch(line); inRunning && m != nil {
			panicTest = m[1] // a test timeout names the tests still running
			continue
		}
		if m := reMessage.FindStringSubmatch(line); m != nil && cur != "" {
			msg := strings.TrimSpace(m[1])
			f, ok := first[cur]
			if !ok || (known[normalize(f)] && !known[normalize(msg)]) {
				first[cur] = msg
			}
		}
	}
	if p.BuildFailed {
		return p
	}
	p.Message = ""
	if panicMsg != "" {
		p.Failed, p.Message = panicTest, panicMsg
		return p
	}
	// The most specific failing test with a message: subtests before their
	// parents, earlier failures before later ones.
	best := -1
	for i, name := range failed {
		if _, ok := first[name]; !ok {
			continue
		}
		if best < 0 || strings.Count(name, "/") > strings.Count(failed[best], "/") {
			best = i
		}
	}
	if best >= 0 {
		p.Failed, p.Message = failed[best], first[failed[best]]
	} else if len(failed) > 0 {
		p.Failed = failed[len(failed)-1]
		for _, name := range failed {
			if strings.Count(name, "/") > strings.Count(p.Failed, "/") {
				p.Failed = name
			}
		}
	}
	return p
}
