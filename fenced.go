package yella

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/yella-go/yella/store"
)

// FencedQuery selects the fenced runs ResolveFenced works on.
type FencedQuery struct {
	// Process selects one process's runs; "" selects every process.
	Process string
	// EffectKey selects runs whose started effect has this stored key (as
	// EffectRecord.Key lists it, such as MakeKey("charge").String()); ""
	// selects any.
	EffectKey string
	// Limit bounds the runs looked at, oldest first: DefaultFencedLimit
	// when 0, at most MaxFencedLimit.
	Limit int
}

// DefaultFencedLimit and MaxFencedLimit bound FencedQuery.Limit.
const (
	DefaultFencedLimit = 1000
	MaxFencedLimit     = 10000
)

// FencedAction is what ResolveFenced does with each selected run.
type FencedAction struct {
	// Complete records the started effect as done with Output (the
	// operator checked that it happened), as CompleteEffect does; without
	// it the run is retried and the effect's body runs again, as Retry does.
	Complete bool
	// Output is the effect's result with Complete (nil: null).
	Output any
	// Apply carries the action out; without it ResolveFenced only says what
	// it would do (a preview), changing nothing.
	Apply bool
}

// FencedItem is one run of a ResolveFenced plan.
type FencedItem struct {
	RunID     string `json:"runId"`
	Process   string `json:"process"`
	EffectKey string `json:"effectKey"` // the started effect whose outcome is unknown
	// Action is "retry" or "complete-effect".
	Action string `json:"action"`
	// Done reports that the action was carried out (with Apply).
	Done bool `json:"done"`
	// Error says why the action failed (with Apply), such as a run that an
	// operator or the engine changed meanwhile.
	Error string `json:"error,omitempty"`
}

// FencedPlan is what ResolveFenced did, or with a preview would do.
type FencedPlan struct {
	Items   []FencedItem `json:"items"`
	Applied int          `json:"applied"` // items carried out
	// More reports that more fenced runs may match than Limit let it
	// look at: call again.
	More bool `json:"more"`
}

// ResolveFenced resolves many fenced runs at once, by process and by
// effect key: each selected run (oldest first) is retried (its effect's
// body runs again) or, with Complete, has its started effect recorded as
// done with Output. Without Apply it changes nothing and returns the plan:
// which runs, which effect, which action. A run changed meanwhile is
// reported in its item and skipped; the others go on.
func (e *Engine) ResolveFenced(ctx context.Context, q FencedQuery, a FencedAction) (FencedPlan, error) {
	limit := q.Limit
	switch {
	case limit < 0 || limit > MaxFencedLimit:
		return FencedPlan{}, &Error{Code: CodeInvalidQuery, Op: "resolve fenced", Msg: fmt.Sprintf("limit must be between 0 and %d, got %d", MaxFencedLimit, limit)}
	case limit == 0:
		limit = DefaultFencedLimit
	}
	var out json.RawMessage
	if a.Complete {
		var err error
		if out, err = e.effectOutput("resolve fenced", a.Output); err != nil {
			return FencedPlan{}, err
		}
	}
	action := "retry"
	if a.Complete {
		action = "complete-effect"
	}
	var plan FencedPlan
	var after int64
	looked := 0
	for looked < limit {
		runs, err := e.store.Runs(ctx, store.RunFilter{Process: q.Process, Statuses: []store.Status{store.StatusFenced},
			Order: store.OldestFirst, Limit: min(200, limit-looked), After: after})
		if err != nil {
			return plan, storeErr("resolve fenced", "", err)
		}
		if len(runs) == 0 {
			return plan, nil
		}
		for _, r := range runs {
			after = r.Seq
			looked++
			key, err := e.startedEffect(ctx, r.ID, q.EffectKey)
			if err != nil {
				return plan, err
			}
			if key == "" {
				continue
			}
			it := FencedItem{RunID: r.ID, Process: r.Process, EffectKey: key, Action: action}
			if a.Apply {
				if a.Complete {
					_, err = e.recordEffectDone(ctx, r.ID, key, out) // key was read started just now
				} else {
					_, err = e.Retry(ctx, r.ID)
				}
				switch {
				case err == nil:
					it.Done = true
					plan.Applied++
				case errors.Is(err, ErrInvalidRunState) || errors.Is(err, ErrRunNotFound):
					it.Error = "changed meanwhile: " + err.Error()
				default:
					return plan, err
				}
			}
			plan.Items = append(plan.Items, it)
		}
	}
	plan.More = true
	return plan, nil
}

// startedEffect returns the key of run's started effect, if it has one
// and it is key (any key when key is "").
func (e *Engine) startedEffect(ctx context.Context, runID, key string) (string, error) {
	effs, err := e.store.Effects(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil // pruned meanwhile
	}
	if err != nil {
		return "", storeErr("resolve fenced", runID, err)
	}
	for _, f := range effs {
		if f.Status == store.EffectStarted && (key == "" || f.Key == key) {
			return f.Key, nil
		}
	}
	return "", nil
}
