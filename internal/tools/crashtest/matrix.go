package crashtest

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PointResult is the outcome of one crash point.
type PointResult struct {
	Point  string
	K      int
	Report Report
	// Held is the number of runs the killed child held; Reclaim is the
	// time from the restarted process's start to its claiming the last of
	// them again.
	Held         int
	Reclaim      time.Duration
	FirstRun     time.Duration // from the restart to the first handler call, of any run
	EngineFenced int64         // fenced runs the restarted engine reported
	Failures     []string
}

// Matrix kills a child at the k-th hit of every crash point (one run in
// flight at a time, every job chained to a follow-up), restarts it on the
// same file, and checks the invariants; each point gets its own directory
// under dir. The calling binary must run ChildMain first.
func Matrix(dir string, runs int, ks []int) ([]PointResult, error) {
	var out []PointResult
	for _, point := range Points {
		for _, k := range ks {
			d := filepath.Join(dir, fmt.Sprintf("%s-%d", point, k))
			cfg := Config{DB: filepath.Join(d, "crash.db"), Witness: filepath.Join(d, "witness.jsonl"), Acks: filepath.Join(d, "acks.txt"),
				Runs: runs, Exit: true, Concurrency: 1, Chain: true, EmitFirst: point == BeforeCommit}
			res, err := point1(cfg, point, k, runs)
			if err != nil {
				return out, fmt.Errorf("%s-%d: %w", point, k, err)
			}
			out = append(out, res)
		}
	}
	return out, nil
}

func point1(cfg Config, point string, k, runs int) (PointResult, error) {
	res := PointResult{Point: point, K: k}
	if err := mkdir(filepath.Dir(cfg.DB)); err != nil {
		return res, err
	}
	crashing := cfg
	crashing.CrashAt = point + ":" + strconv.Itoa(k)
	c, err := Spawn(crashing)
	if err != nil {
		return res, err
	}
	if o := c.Wait(); !o.Killed {
		res.Failures = append(res.Failures, fmt.Sprintf("child was not killed at %s (drained %v, err %v)", crashing.CrashAt, o.Drained, o.Err))
		return res, nil
	}
	// Right after the kill, before anything is emitted again: every
	// acknowledged admission is there.
	if rep, err := Check(cfg.DB, cfg.Witness, cfg.Acks, "k-"); err != nil || rep.Integrity != "ok" {
		res.Failures = append(res.Failures, fmt.Sprintf("after the kill: integrity %q, %v", rep.Integrity, err))
		return res, nil
	} else if len(rep.Lost) > 0 {
		res.Failures = append(res.Failures, fmt.Sprintf("after the kill: acknowledged admissions lost: %d (%s)", len(rep.Lost), strings.Join(first(rep.Lost, 5), ", ")))
	}
	rc := &Reclaims{DB: cfg.DB}
	if res.Held, err = rc.Killed(); err != nil {
		return res, err
	}
	if res.Held == 0 && slices.Contains(Held, point) {
		res.Failures = append(res.Failures, "the killed child held no run: the reclaim is not measured")
	}
	c, err = Spawn(cfg) // re-emits every key, resumes, drains
	if err != nil {
		return res, err
	}
	o := c.Wait()
	res.FirstRun, res.EngineFenced = o.FirstRun, o.Fenced
	if !o.Drained || o.Err != nil {
		res.Failures = append(res.Failures, fmt.Sprintf("restarted child: drained %v, err %v", o.Drained, o.Err))
		return res, nil
	}
	late, err := rc.Ran(c.Started, time.Now(), time.Second)
	if err != nil {
		return res, err
	}
	res.Reclaim = rc.Max
	res.Failures = append(res.Failures, late...)
	rep, err := Check(cfg.DB, cfg.Witness, cfg.Acks, "k-")
	if err != nil {
		return res, err
	}
	res.Report = rep
	res.Failures = append(res.Failures, rep.Failures()...)
	if rep.Acked != runs || rep.Roots != runs {
		res.Failures = append(res.Failures, fmt.Sprintf("acked %d, root runs %d, want %d", rep.Acked, rep.Roots, runs))
	}
	// Every root completes with a follow-up, or is fenced.
	if rep.Completed+rep.Fenced != rep.Runs || rep.Runs != 2*runs-rep.Fenced {
		res.Failures = append(res.Failures, fmt.Sprintf("%d runs: %d completed + %d fenced, want %d roots, each completed with its follow-up or fenced", rep.Runs, rep.Completed, rep.Fenced, runs))
	}
	if int64(rep.Fenced) != o.Fenced {
		res.Failures = append(res.Failures, fmt.Sprintf("%d runs fenced in the database, %d reported by the engine", rep.Fenced, o.Fenced))
	}
	// With one slot, only a kill inside an effect body leaves an effect of
	// unknown outcome, except after an admission, when the run in flight
	// may be inside its effect, and after a completion committed: the slot
	// was free once the handler returned, so the next run may have started
	// (its claim may share the completion's commit) and be inside its
	// effect.
	afterCompletion := point == AfterCompletion || point == AfterChainedCompletion
	switch {
	case point == InEffect && rep.Fenced != 1:
		res.Failures = append(res.Failures, fmt.Sprintf("%d fenced runs, want the 1 whose effect was cut off", rep.Fenced))
	case (point == AfterAdmission || afterCompletion) && rep.Fenced > 1:
		res.Failures = append(res.Failures, fmt.Sprintf("%d fenced runs, want at most 1", rep.Fenced))
	case point != InEffect && point != AfterAdmission && !afterCompletion && rep.Fenced != 0:
		res.Failures = append(res.Failures, fmt.Sprintf("%d fenced runs, want 0: no effect was in flight", rep.Fenced))
	}
	return res, nil
}
