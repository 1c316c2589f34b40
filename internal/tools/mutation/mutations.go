package mutation

import "time"

// Test runs shared by several mutations. memConf and sqlConf select a case
// of the engine suite (the root package's TestEngineSuite: the engine
// driven over each store) on the in-memory or the SQLite store; sqlStore
// selects a case of the SQLite store's own conformance test (the store-only
// suite, store/storetest).
func memConf(c string) Test {
	return Test{Pkg: ".", Run: "^TestEngineSuite$/^memstore$/^" + c + "$"}
}
func sqlConf(c string) Test {
	return Test{Pkg: ".", Run: "^TestEngineSuite$/^sqlitestore$/^" + c + "$"}
}
func sqlStore(c string) Test {
	return Test{Pkg: "./store/sqlitestore", Run: "^TestConformance$/^" + c + "$"}
}
func sqlTest(name string) Test {
	return Test{Pkg: "./store/sqlitestore", Run: "^" + name + "$"}
}

// pgConf selects a case of the engine suite on the PostgreSQL store, and
// pgTest a test of the PostgreSQL store's package: both need YELLA_PG_URL
// (the mutations that use them name it in Needs).
func pgConf(c string) Test {
	return Test{Pkg: ".", Run: "^TestEngineSuite$/^pgstore$/^" + c + "$"}
}

// pgStore selects a case of the store conformance suite on the PostgreSQL
// store.
func pgStore(c string) Test {
	return Test{Pkg: "./store/pgstore", Run: "^TestConformance$/^" + c + "$"}
}
func pgTest(name string) Test {
	return Test{Pkg: "./store/pgstore", Run: "^" + name + "$"}
}

// pgURL is the variable the PostgreSQL tests need.
const pgURL = "YELLA_PG_URL"

var (
	crashPoints = Test{Pkg: "./store/sqlitestore", Run: "^TestCrashPoints$", Full: true}
	powerLoss   = Test{Pkg: "./internal/tools/trust", Run: "^TestPowerLoss$", Tags: "trust", Full: true, Timeout: 10 * time.Minute}
	burst       = Test{Pkg: "./internal/tools/trust", Run: "^TestBurst$", Tags: "trust", Full: true, Timeout: 5 * time.Minute}
	retryModel  = Test{Pkg: "./internal/tools/trust", Run: "^TestRetryModel$", Tags: "trust", Full: true, Timeout: 10 * time.Minute}
)

// All is the mutation check: one deliberate break per guarantee of the
// README's reliability section, with the tests that must catch it (the
// README names them). Each edit's old text must occur exactly once in its
// file; when the code it targets changes, the check fails naming the
// mutation, which must then be re-targeted, not dropped.
var All = append(append(coreMutations, connectorMutations...), pgMutations...)

// coreMutations break the guarantees of the engine and the SQLite store.
var coreMutations = []Mutation{
	{
		Name:      "effect-start-after-body",
		Guarantee: "an effect is recorded as started before its body runs",
		Edits: []Edit{{
			File: "effect.go",
			Old:  "\terr := a.e.store.StartEffect(a.e.io, a.run.ID, a.run.Epoch, k, a.e.clock.Now())\n\tif err != nil {\n\t\ta.mu.Lock()\n\t\tdelete(a.inflight, k)",
			New:  "\tvar err error\n\tif err != nil {\n\t\ta.mu.Lock()\n\t\tdelete(a.inflight, k)",
		}, {
			File: "effect.go",
			Old:  "\tdur := a.e.clock.Now().Sub(start)\n",
			New:  "\ta.e.store.StartEffect(a.e.io, a.run.ID, a.run.Epoch, k, a.e.clock.Now())\n\tdur := a.e.clock.Now().Sub(start)\n",
		}},
		Tests: []Test{memConf("Effect/FencedAfterAbandonedAttempt"), crashPoints},
	},
	{
		Name:      "queued-effect-end-never-written",
		Guarantee: "an effect's end the handler does not wait for is written all the same, before the attempt's later writes",
		Edits: []Edit{{
			File: "effect.go",
			Old:  "wait := eq.QueueFinishEffect(a.e.io, a.run.ID, a.run.Epoch, k, st, q.out, msg, q.now)",
			New:  "wait := func() error { _ = eq; return nil }",
		}},
		Tests: []Test{sqlConf("Effect/EndWrittenWhileHandlerGoesOn"), sqlConf("Effect/ReplayedOnRetry"), crashPoints},
	},
	{
		Name:      "claim-backoff-doubles-per-failure",
		Guarantee: "the wait after failed claims doubles once per round of failures, so the engine resumes within seconds once the cause passes",
		Edits: []Edit{{
			File: "execute.go",
			Old:  "if e.backoff == 0 || !now.Before(e.backoffSince.Add(e.backoff)) {",
			New:  "if true || !now.Before(e.backoffSince.Add(e.backoff)) {",
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestClaimBackoffDoublesPerRound$"}},
	},
	{
		Name:      "claim-reads-follow-up-as-root",
		Guarantee: "a claimed follow-up run keeps its chain's correlation id (only a root's NULL reads as its own id)",
		Edits: []Edit{{
			File: "store/sqlitestore/stmts.go",
			Old:  "\tif !c.correlation.Valid {\n",
			New:  "\tif true {\n",
		}},
		// The engine's claims of follow-ups find them kept as admitted
		// (Store.fresh) and never read this column: the store's own case
		// claims one by id alone.
		Tests: []Test{sqlStore("Store/Admit/ChildGetsCorrelationContextParent")},
	},
	{
		Name:      "kept-follow-up-claimed-as-root",
		Guarantee: "a follow-up run claimed as kept from its admission keeps its chain's correlation id",
		Edits: []Edit{{
			File: "store/sqlitestore/fresh.go",
			Old:  "r.CorrelationID, r.ParentID, r.IdempotencyKey = x.correlation, x.parent, x.idem",
			New:  "r.ParentID, r.IdempotencyKey = x.parent, x.idem",
		}},
		Tests: []Test{sqlStore("Store/Admit/ChildGetsCorrelationContextParent"), sqlConf("Chain/DepthWithinLimit"), sqlConf("Chain/FromAnyRun")},
	},
	{
		Name:      "merged-row-drops-blobs",
		Guarantee: "a run read by a merged statement on the driver connection keeps its payload and context bytes",
		Edits: []Edit{{
			File: "store/sqlitestore/raw.go",
			Old:  "\t\tcase []byte:\n\t\t\t*d = x\n",
			New:  "\t\tcase []byte:\n\t\t\t*d = nil\n",
		}},
		Tests: []Test{sqlTest("TestClaimsMerged"), sqlConf("Children/JoinOf100")},
	},
	{
		Name:      "held-end-changes-unchecked",
		Guarantee: "an attempt end of a run held from its claim, which returns nothing, is answered as applied only if it changed the run's row",
		Edits: []Edit{{
			File: "store/sqlitestore/finish.go",
			Old:  "n+m != int64(want)",
			New:  "n+m < 0",
		}},
		Tests: []Test{sqlTest("TestHeldEndFindsItsRunChanged")},
	},
	{
		Name:      "queued-effect-event-after-run-end",
		Guarantee: "an effect's event comes before its run's end event, however slow its delivery",
		Edits: []Edit{{
			File: "effect.go",
			Old:  "\t\t\t\tif q.err == nil {\n\t\t\t\t\ta.effectEnded(q)\n\t\t\t\t}\n\t\t\t\tclose(q.done)\n",
			New:  "\t\t\t\tclose(q.done)\n\t\t\t\tif q.err == nil {\n\t\t\t\t\ta.effectEnded(q)\n\t\t\t\t}\n",
		}},
		Tests: []Test{sqlConf("Effect/EventBeforeRunEnd")},
	},
	{
		Name:      "failed-queued-effect-end-not-rewritten",
		Guarantee: "an effect's end the store failed to write is written again before its attempt's end: no run ends with its effect left started",
		Edits: []Edit{{
			File: "effect.go",
			Old:  "func (a *attempt) effectsBefore() error {\n",
			New:  "func (a *attempt) effectsBefore() error {\n\tif true {\n\t\treturn nil\n\t}\n",
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestQueuedEffectEndWrittenAgain$"}},
	},
	{
		Name:      "completed-effect-rerun",
		Guarantee: "a completed effect is never run again: its stored result is replayed",
		Edits: []Edit{{
			File: "effect.go",
			Old:  "\t\tcase store.EffectCompleted:\n\t\t\ta.mu.Unlock()\n\t\t\treturn &rec, nil",
			New:  "\t\tcase store.EffectCompleted:\n\t\t\ta.mu.Unlock()\n\t\t\treturn nil, nil",
		}},
		Tests: []Test{memConf("Effect/ReplayedOnRetry"), sqlConf("Restart/CompletedEffectReplayed"), crashPoints},
	},
	{
		Name:      "started-effect-rerun",
		Guarantee: "by default an effect found started by a dead attempt fences its run (at most once)",
		Edits: []Edit{{
			File: "effect.go",
			Old:  "\t\tcase store.EffectStarted:\n\t\t\tif !idempotent {",
			New:  "\t\tcase store.EffectStarted:\n\t\t\tif false && !idempotent {",
		}},
		Tests: []Test{memConf("Effect/FencedAfterAbandonedAttempt"), crashPoints},
	},
	{
		Name:      "completion-ignores-epoch",
		Guarantee: "a completion carries the lease epoch: a stale attempt's completion changes nothing",
		Edits: []Edit{{
			File: "store/sqlitestore/stmts.go",
			Old:  "WHERE id = ?13 AND status = 'running' AND epoch = ?14 RETURNING ",
			New:  "WHERE id = ?13 AND status = 'running' AND ?14 > 0 RETURNING ",
		}},
		Tests: []Test{sqlConf("Lease/StaleCompletionWhileRunning")},
	},
	{
		Name:      "merged-completion-ignores-epoch",
		Guarantee: "attempt ends made together carry their lease epochs: a stale attempt's end changes nothing",
		Edits: []Edit{{
			File: "store/sqlitestore/stmts.go",
			Old:  "WHERE runs.id = c.column1 AND +status = 'running' AND epoch = c.column2",
			New:  "WHERE runs.id = c.column1 AND +status = 'running' AND c.column2 > 0",
		}},
		Tests: []Test{sqlTest("TestAttemptEndsMerged")},
	},
	{
		Name:      "prune-pass-never-restarts",
		Guarantee: "retention reads the runs in passes: a run kept by one pass (a parent, a run not yet completed) is pruned by a later one",
		Edits: []Edit{{
			File: "store/prune.go",
			Old:  "if w.over || (w.taken < w.limit && w.read < w.Rows()) {",
			New:  "if w.over && false {",
		}},
		Tests: []Test{{Pkg: "./store", Run: "^TestPruneWindow$"}, sqlStore("Store/Prune/LeafFirstKeepsDeferred")},
	},
	{
		Name:      "prune-never-advances",
		Guarantee: "retention goes on where its last call stopped: a backlog of runs it keeps delays the completed runs behind it, not for good",
		Edits: []Edit{{
			File: "store/prune.go",
			Old:  "\treturn w.from\n}",
			New:  "\treturn 0\n}",
		}},
		Tests: []Test{{Pkg: "./store", Run: "^TestPruneWindow$"}, sqlStore("Store/Prune/PassesOverKeptRuns")},
	},
	{
		Name:      "effect-start-ignores-epoch",
		Guarantee: "an effect write carries the lease epoch: a stale attempt cannot start an effect",
		Edits: []Edit{{
			File: "store/sqlitestore/stmts.go",
			Old:  "FROM runs WHERE id = ? AND status = 'running' AND epoch = ?\n\t\t\t\tON CONFLICT (run_seq, key)",
			New:  "FROM runs WHERE id = ? AND status = 'running' AND ? > 0\n\t\t\t\tON CONFLICT (run_seq, key)",
		}},
		Tests: []Test{sqlConf("Lease/StaleEffectStartFenced")},
	},
	{
		Name:      "batch-partly-admitted",
		Guarantee: "EmitBatch admits all of its events or none",
		Edits: []Edit{{
			File: "store/sqlitestore/batch.go",
			Old:  "return batchAbort{err} // fails the transaction, not only this command",
			New:  "return err",
		}},
		Tests: []Test{sqlStore("Store/AdmitBatch/AllOrNothing")},
	},
	{
		Name:      "reclaim-at-start-delayed",
		Guarantee: "a fresh process resumes a dead owner's runs at once, not after their leases",
		Edits: []Edit{{
			File: "engine.go",
			Old:  "\tif err := e.reclaim(ctx, true); err != nil {\n\t\te.storeFailed(\"reclaim\", err)\n\t}\n",
			New:  "\tgo func() { time.Sleep(2 * time.Second); e.reclaim(e.io, true) }()\n",
		}},
		Tests: []Test{sqlConf("Restart/DeadOwnerReclaimedAtStart"), crashPoints},
	},
	{
		Name:      "dead-owner-not-known",
		Guarantee: "the exclusive lock proves an earlier owner dead: its runs are reclaimed at once",
		Edits: []Edit{{
			File: "store/sqlitestore/write.go",
			Old:  "func (s *Store) ownerAlive(owner string) bool {\n\tif !s.exclusive {",
			New:  "func (s *Store) ownerAlive(owner string) bool {\n\tif true || !s.exclusive {",
		}},
		Tests: []Test{sqlConf("Restart/DeadOwnerReclaimedAtStart")},
	},
	{
		Name:      "idempotency-ignored",
		Guarantee: "an idempotency key admits each listener at most once",
		Edits: []Edit{{
			File: "store/sqlitestore/write.go",
			Old:  "\t\tif a.IdempotencyKey != \"\" {\n\t\t\tr, _, err := scanRun(w.s.st.selIdem",
			New:  "\t\tif false && a.IdempotencyKey != \"\" {\n\t\t\tr, _, err := scanRun(w.s.st.selIdem",
		}, {
			File: "store/sqlitestore/duplicate.go",
			Old:  "\tif a.IdempotencyKey == \"\" || a.ParentID != \"\" || len(a.Runs) == 0 {",
			New:  "\tif true {",
		}},
		Tests: []Test{sqlConf("Idempotency/DuplicateAndDifferentKeys"), sqlConf("Engine/DuplicateEmitAndWaitReturnsExisting"), crashPoints},
	},
	{
		Name:      "idempotency-ignored-in-writer",
		Guarantee: "an idempotency key admits each listener at most once, also when its first admission is not committed yet",
		Edits: []Edit{{
			File: "store/sqlitestore/write.go",
			Old:  "\t\tif a.IdempotencyKey != \"\" {\n\t\t\tr, _, err := scanRun(w.s.st.selIdem",
			New:  "\t\tif false && a.IdempotencyKey != \"\" {\n\t\t\tr, _, err := scanRun(w.s.st.selIdem",
		}},
		Tests: []Test{sqlStore("Store/AdmitBatch/InOrder")},
	},
	{
		Name:      "ack-before-commit",
		Guarantee: "an admission is acknowledged only after its transaction commits",
		Edits: []Edit{{
			File: "store/sqlitestore/writer.go",
			Old:  "\t// Tests may hold or fail the commit here (internal/commithook).\n",
			New:  "\tfor _, c := range cmds {\n\t\tselect {\n\t\tcase <-c.done:\n\t\tdefault:\n\t\t\tclose(c.done)\n\t\t}\n\t}\n\t// Tests may hold or fail the commit here (internal/commithook).\n",
		}, {
			File: "store/sqlitestore/writer.go",
			Old:  "\tfor _, c := range batch {\n\t\tclose(c.done)\n\t}",
			New:  "\tfor _, c := range batch {\n\t\tselect {\n\t\tcase <-c.done:\n\t\tdefault:\n\t\t\tclose(c.done)\n\t\t}\n\t}",
		}},
		Tests: []Test{sqlTest("TestEmitAnsweredAfterCommit"), crashPoints, powerLoss},
	},
	{
		Name:      "synchronous-full-ignored",
		Guarantee: "Synchronous Full fsyncs every commit: nothing acknowledged is lost on power loss",
		Edits: []Edit{{
			File: "store/sqlitestore/sqlitestore.go",
			Old:  "q.Add(\"_pragma\", \"synchronous(\"+string(o.Synchronous)+\")\")",
			New:  "q.Add(\"_pragma\", \"synchronous(NORMAL)\")",
		}},
		Tests: []Test{sqlTest("TestSynchronousModeOnWriter"), powerLoss},
	},
	{
		Name:      "retry-budget-off-by-one",
		Guarantee: "a run is retried at most Retry.Max times, then dead-lettered",
		Edits: []Edit{{
			File: "lifecycle.go",
			Old:  "\tcase pol != nil && attempts <= pol.Max:",
			New:  "\tcase pol != nil && attempts <= pol.Max+1:",
		}},
		Tests: []Test{memConf("Retry/ExhaustedToDeadLetter"), retryModel},
	},
	{
		Name:      "retry-delay-ignored",
		Guarantee: "a thrown error's RetryDelay (a downstream's Retry-After) delays its retry past a shorter backoff",
		Edits: []Edit{{
			File: "execute.go",
			Old:  "if d := retryDelay(err); act == store.ActionRetryLater && d > 0 {",
			New:  "if d := retryDelay(err); act == store.ActionRetryLater && d < 0 {",
		}},
		Tests: []Test{memConf("Retry/RetryDelayLengthensBackoff")},
	},
	{
		Name:      "rate-limit-ignored",
		Guarantee: "a rate key starts at most Burst runs at once, then one per Per/Limit",
		Edits: []Edit{{
			File: "internal/dispatch/flow.go",
			Old:  "ok, next, _ := r.Allow(f.tats[k], now)",
			New:  "ok, next, _ := r.Allow(time.Time{}, now)",
		}},
		Tests: []Test{memConf("Flow/RateLimitExactPerPeriod"), memConf("Flow/RateLimitBurst"), {Pkg: "./internal/dispatch", Run: "^TestRateLimitNeverExceeded$"}},
	},
	{
		Name:      "rate-hold-ignored",
		Guarantee: "a run told to slow down holds its whole rate key until the time given",
		Edits: []Edit{{
			File: "internal/dispatch/flow.go",
			Old:  "\tif tat.After(d.flow.tats[key]) {\n\t\td.flow.tats[key] = tat\n\t}\n}",
			New:  "\tif tat.After(d.flow.tats[key]) {\n\t\t_ = tat\n\t}\n}",
		}},
		Tests: []Test{memConf("Flow/RateHoldBacksOffKey"), sqlConf("Flow/RateHoldBacksOffKey")},
	},
	{
		Name:      "rate-state-not-resumed",
		Guarantee: "a restarted engine resumes each rate key's state from the store: no new burst",
		Edits: []Edit{{
			File: "engine.go",
			Old:  "\t\te.disp.LoadRates(tats)",
			New:  "\t\t_ = tats",
		}},
		Tests: []Test{sqlConf("Flow/RateLimitAcrossRestart"), Test{Pkg: ".", Run: "^TestCrashFlowLimits$", Timeout: 5 * time.Minute}.full()},
	},
	{
		Name:      "key-concurrency-ignored",
		Guarantee: "at most Max runs run at once per concurrency key",
		Edits: []Edit{{
			File: "internal/dispatch/flow.go",
			Old:  "if d.flow.keyRun[k] < lim {",
			New:  "if d.flow.keyRun[k] < lim+1 {",
		}},
		Tests: []Test{memConf("Flow/KeyConcurrencyFair"), {Pkg: "./internal/dispatch", Run: "^TestKeyConcurrencyFair$"}, Test{Pkg: ".", Run: "^TestCrashFlowLimits$", Timeout: 5 * time.Minute}.full()},
	},
	{
		Name:      "key-blocks-others",
		Guarantee: "a key at its concurrency bound does not hold back the runs of other keys",
		// Runs of a full key stay in the ready queue, blocking what is
		// behind them, instead of waiting aside.
		Edits: []Edit{{
			File: "internal/dispatch/dispatch.go",
			Old:  "\t\tif d.keyFullLocked(e) {\n\t\t\tcontinue\n\t\t}",
			New:  "\t\tif d.keyFullLocked(e) {\n\t\t\tpop(d.flow.keyPark, e.ConcKey())\n\t\t\td.nKey--\n\t\t\te.where = inReady\n\t\t\theap.Push(&d.ready, e)\n\t\t\tbreak\n\t\t}",
		}},
		Tests: []Test{memConf("Flow/KeyConcurrencyFair"), {Pkg: "./internal/dispatch", Run: "^TestKeyConcurrencyFair$"}},
	},
	{
		Name:      "priority-ignored",
		Guarantee: "a run of higher priority starts before waiting runs of lower priority, and aging bounds how long a lower one waits",
		Edits: []Edit{{
			File: "store/flow.go",
			Old:  "return at - int64(priority)*int64(PriorityStep)",
			New:  "return at",
		}},
		Tests: []Test{memConf("Flow/PriorityOvertakesBacklog")},
	},
	{
		Name:      "priority-starves",
		Guarantee: "a run of lower priority is not overtaken by runs emitted more than the difference in priority minutes after it (aging)",
		// Strict priority: a higher level always goes first.
		Edits: []Edit{{
			File: "store/flow.go",
			Old:  "return at - int64(priority)*int64(PriorityStep)",
			New:  "return at/1e12 - int64(priority)*int64(PriorityStep)",
		}},
		Tests: []Test{memConf("Flow/PriorityOvertakesBacklog")},
	},
	{
		Name:      "delay-ignored",
		Guarantee: "a delayed emission's runs start no earlier than their time, across restarts",
		Edits: []Edit{{
			File: "store/sqlitestore/write.go",
			Old:  "\tif a.NotBefore.After(a.Now) {\n\t\tnotBefore = a.NotBefore",
			New:  "\tif false {\n\t\tnotBefore = a.NotBefore",
		}},
		Tests: []Test{sqlConf("Wait/DelayedEmit"), sqlConf("Wait/DelayedEmitAcrossRestart"), sqlConf("Wait/ThenAfter")},
	},
	{
		Name:      "cron-tick-not-keyed",
		Guarantee: "a schedule's tick runs once however many engines hold it and however often they restart",
		Edits: []Edit{{
			File: "schedule.go",
			Old:  "[]EmitOption{IdempotencyKey(TickKey(sc.Name, t))}",
			New:  "nil",
		}},
		Tests: []Test{memConf("Cron/OneRunPerTickAcrossEngines"), sqlConf("Cron/MissedTickPolicy"), Test{Pkg: ".", Run: "^TestCrashCronTicks$", Timeout: 5 * time.Minute}.full()},
	},
	{
		Name:      "wait-spends-attempt",
		Guarantee: "a wait ends its attempt without spending the retry budget",
		Edits: []Edit{{
			File: "store/lifecycle.go",
			Old:  "RetryAt: Set, RefundAttempt: true, Effects: EffectsWait",
			New:  "RetryAt: Set, Effects: EffectsWait",
		}},
		Tests: []Test{memConf("Waits/NoRetrySpent"), sqlStore("Store/Waits/SleepUntilDeadline")},
	},
	{
		Name:      "sleep-ends-early",
		Guarantee: "a durable sleep never ends before its time",
		Edits: []Edit{{
			File: "execute.go",
			Old:  "u.Action, u.RetryAt, u.Wait = store.ActionWait, w.until, &store.Wait{Key: w.key, Signal: w.signal}",
			New:  "u.Action, u.RetryAt, u.Wait = store.ActionWait, w.until.Add(-time.Minute), &store.Wait{Key: w.key, Signal: w.signal}",
		}},
		Tests: []Test{memConf("Waits/SleepOnceAtItsTime"), sqlConf("Waits/SleepAcrossRestart")},
	},
	{
		Name:      "waiting-result-used",
		Guarantee: "once a handler reached a wait, the run waits whatever the handler returns",
		Edits: []Edit{{
			File: "execute.go",
			Old:  "if w != nil && ef == nil { // whatever the handler returned, the run waits",
			New:  "if w != nil && ef == nil && res.kind == resultError { // whatever the handler returned, the run waits",
		}},
		Tests: []Test{memConf("Waits/WaitingIsSticky")},
	},
	{
		Name:      "wait-ignores-kept-signal",
		Guarantee: "a signal sent before its wait begins is kept and delivered to it",
		Edits: []Edit{{
			File: "store/sqlitestore/write.go",
			Old:  "	signalled := sig.seq != 0 && rule.Signalled != \"\"",
			New:  "	signalled := false && sig.seq != 0 && rule.Signalled != \"\"",
		}},
		Tests: []Test{sqlStore("Store/Waits/SignalBeforeWait"), sqlStore("Store/Waits/SignalRacesWait"), sqlConf("Waits/SignalBeforeWait"),
			Test{Pkg: ".", Run: "^TestCrashWaits$", Timeout: 5 * time.Minute}.full()},
	},
	{
		Name:      "signal-wakes-any-run",
		Guarantee: "a signal ends the wait of a run waiting for its key, once",
		Edits: []Edit{{
			File: "store/sqlitestore/stmts.go",
			Old:  "waiterSQL = `SELECT seq FROM runs WHERE status = 'waiting' AND wait_key = ? ORDER BY seq LIMIT 1`",
			New:  "waiterSQL = `SELECT seq FROM runs WHERE status = 'waiting' AND (wait_key = ? OR 1) ORDER BY seq LIMIT 1`",
		}},
		Tests: []Test{sqlStore("Store/Waits/TwoWaiters"), sqlConf("Waits/NoSlotHeld"), Test{Pkg: ".", Run: "^TestCrashWaits$", Timeout: 5 * time.Minute}.full()},
	},
	{
		Name:      "children-admitted-twice",
		Guarantee: "a handler's children are admitted once, even when the attempt that admitted them could not record it",
		Edits: []Edit{{
			File: "children.go",
			Old:  "adm.Runs[j].ID = childID(a.run.ID, k, i, adm.Runs[j].Process)",
			New:  "adm.Runs[j].ID = newID() + k[:0]",
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestChildrenAdmittedOnceAfterLostRecord$"}},
	},
	{
		Name:      "join-not-woken",
		Guarantee: "a child's end wakes its parent waiting in Join",
		Edits: []Edit{{
			File: "children.go",
			Old:  "\tif r.ParentID != \"\" && r.Status.Final() && e.joins.has(r.ParentID) {\n\t\te.wakeJoin(r.ParentID)\n\t}",
			New:  "",
		}},
		Tests: []Test{memConf("Children/ChildEndWakesParent"), sqlConf("Children/ChildEndWakesParent")},
	},
	{
		Name:      "hard-stop-not-cancelling",
		Guarantee: "a hard stop ends the context of every running handler",
		Edits: []Edit{{
			File: "execute.go",
			Old:  "\tfor _, a := range as {\n\t\ta.cancel(errStopped)\n\t}",
			New:  "\t_ = as",
		}},
		Tests: []Test{memConf("Stop/HardStopCancelsHandlers"), sqlConf("Stop/HardStopCancelsHandlers")},
	},
	{
		Name:      "queue-unbounded",
		Guarantee: "an engine keeps at most MaxQueued ready runs in memory; the rest of a backlog waits in the store",
		Edits: []Edit{{
			File: "queue.go",
			Old:  "\tif !s.on && e.disp.Ready()+len(items) <= e.cfg.MaxQueued {",
			New:  "\tif true {",
		}},
		Tests: []Test{memConf("Queue/BacklogBeyondMaxQueued"), sqlConf("Queue/BacklogBeyondMaxQueued")},
	},
	{
		Name:      "queue-spill-admits-ahead",
		Guarantee: "while a backlog waits in the store, runs emitted later wait behind it",
		Edits: []Edit{{
			File: "queue.go",
			Old:  "\tif !s.on && e.disp.Ready()+len(items) <= e.cfg.MaxQueued {",
			New:  "\tif e.disp.Ready()+len(items) <= e.cfg.MaxQueued {",
		}},
		Tests: []Test{memConf("Queue/EmittedDuringARead"), sqlConf("Queue/EmittedDuringARead")},
	},
	{
		Name:      "queue-spill-ends-with-runs-left",
		Guarantee: "runs left in the store while the loader reads are read by a later page, never forgotten",
		Edits: []Edit{{
			File: "queue.go",
			Old:  "\tif s.from != math.MaxInt64 { // left in the store during the read\n\t\treturn true\n\t}\n",
			New:  "\t_ = math.MaxInt64\n",
		}},
		Tests: []Test{memConf("Queue/EmittedDuringARead"), sqlConf("Queue/EmittedDuringARead")},
	},
	{
		Name:      "queue-urgent-left-in-store",
		Guarantee: "a run of priority above 0 joins a full queue and overtakes the backlog",
		Edits: []Edit{{
			File: "lifecycle.go",
			Old:  "case emitted && r.Priority <= 0:",
			New:  "case emitted:",
		}},
		Tests: []Test{memConf("Queue/UrgentAndWaitedRunsJoinAFullQueue"), sqlConf("Queue/UrgentAndWaitedRunsJoinAFullQueue")},
	},
	{
		Name:      "queue-waited-left-in-store",
		Guarantee: "a run EmitAndWait waits for joins a full queue, so the wait does not read the store until the backlog drains",
		Edits: []Edit{{
			File: "emit.go",
			Old:  "\t\te.admitted(adm, res, !waited)\n",
			New:  "\t\te.admitted(adm, res, true)\n",
		}},
		Tests: []Test{memConf("Queue/UrgentAndWaitedRunsJoinAFullQueue"), sqlConf("Queue/UrgentAndWaitedRunsJoinAFullQueue")},
	},
	{
		Name:      "register-after-start-not-loaded",
		Guarantee: "a process registered after Start gets its idle runs queued, and Drain waits for them",
		Edits: []Edit{{
			File: "engine.go",
			Old:  "\t\t\te.spillFrom(0) // its idle runs are in the store: the loader reads them\n",
			New:  "",
		}},
		Tests: []Test{memConf("Queue/RegisteredAfterStart"), sqlConf("Queue/RegisteredAfterStart")},
	},
	{
		Name:      "merged-claim-twice",
		Guarantee: "claims that share a statement get each run once",
		Edits: []Edit{{
			File: "store/sqlitestore/write.go",
			Old:  "\t\t\tdelete(b.claimed, id)\n",
			New:  "",
		}},
		Tests: []Test{sqlTest("TestClaimsMerged")},
	},
	{
		Name:      "merged-claim-not-due",
		Guarantee: "claims that share a statement take only runs that are due",
		Edits: []Edit{{
			File: "store/sqlitestore/stmts.go",
			Old:  "AND retry_at IS NOT NULL) AND (retry_at IS NULL OR retry_at <= c.column3)",
			New:  "AND retry_at IS NOT NULL)",
		}},
		Tests: []Test{sqlTest("TestClaimsMerged")},
	},
	{
		Name:      "merged-rows-past-one-statement-dropped",
		Guarantee: "claims and attempt ends made together are all made, however many share the batch",
		Edits: []Edit{{
			File: "store/sqlitestore/many.go",
			Old:  "rows = rows[len(chunk):]",
			New:  "rows = nil",
		}},
		Tests: []Test{sqlTest("TestAttemptEndsMergedInChunks"), sqlTest("TestClaimsMerged")},
	},
	{
		Name:      "end-from-claim-drops-stored-fields",
		Guarantee: "an attempt end answered from its run's claim returns the run exactly as stored",
		Edits: []Edit{{
			File: "store/sqlitestore/finish.go",
			Old:  "r.CreatedAt, r.IdempotencyKey, r.Then, r.Version = time.Unix(0, c.created), c.idem, c.then, c.version",
			New:  "r.CreatedAt, r.IdempotencyKey = time.Unix(0, c.created), c.idem",
		}},
		Tests: []Test{sqlTest("TestAttemptEndsMerged")},
	},
	{
		Name:      "end-from-claim-keeps-claimed-version",
		Guarantee: "an attempt end answered from its run's claim returns the version the end wrote, not the claim's",
		Edits: []Edit{{
			File: "store/sqlitestore/finish.go",
			Old:  "if v := row[13].(string); v != \"\" {",
			New:  "if v := row[13].(string); v == \"-\" {",
		}},
		Tests: []Test{sqlTest("TestAttemptEndsMerged")},
	},
	{
		Name:      "kept-run-claimed-when-changed",
		Guarantee: "the claim of a run kept as admitted claims it from its kept fields only while the run is as admitted",
		Edits: []Edit{{
			File: "store/sqlitestore/stmts.go",
			Old:  "WHERE seq = ?5 AND +status = 'idle' AND tl = 1",
			New:  "WHERE seq = ?5 AND +status = 'idle'",
		}, {
			File: "store/sqlitestore/stmts.go",
			Old:  "WHERE runs.seq = c.column1 AND +status = 'idle' AND tl = 1",
			New:  "WHERE runs.seq = c.column1 AND +status = 'idle'",
		}},
		Tests: []Test{sqlTest("TestClaimsOfKeptRuns")},
	},
	{
		Name:      "kept-run-slot-of-another-run",
		Guarantee: "a claim uses a kept run's slot only for the run the slot holds, whatever seq the request gives",
		Edits: []Edit{{
			File: "store/sqlitestore/fresh.go",
			Old:  "if f.seq != seq || f.idHash != maphash.String(s.freshSeed, id) {",
			New:  "if f.seq != seq {",
		}},
		Tests: []Test{sqlTest("TestClaimsOfKeptRuns")},
	},
	{
		Name:      "kept-run-loses-fields",
		Guarantee: "a run claimed as kept from its admission is the run the claim that returns it whole would give",
		Edits: []Edit{{
			File: "store/sqlitestore/fresh.go",
			Old:  "\t\tr.RateKey, r.ConcurrencyKey, r.GroupKey = x.rateKey, x.concKey, x.groupKey\n",
			New:  "",
		}},
		Tests: []Test{sqlTest("TestKeptRunClaimedAsReturned")},
	},
	{
		Name:      "kept-run-priority-truncated",
		Guarantee: "a run is kept as admitted only if its slot holds its fields whole",
		Edits: []Edit{{
			File: "store/sqlitestore/fresh.go",
			Old:  " || int(int32(r.Depth)) != r.Depth || int(int32(r.Priority)) != r.Priority {",
			New:  " {",
		}},
		Tests: []Test{sqlTest("TestClaimsOfKeptRuns")},
	},
	{
		Name:      "end-from-claim-keeps-claimed-then",
		Guarantee: "an attempt end answered from its run's claim returns the follow-up event the end wrote, not the claim's",
		Edits: []Edit{{
			File: "store/sqlitestore/finish.go",
			Old:  "if row[7].(int) == 1 {\n\t\tr.Then = row[8].(string)",
			New:  "if row[7].(int) == 2 {\n\t\tr.Then = row[8].(string)",
		}},
		Tests: []Test{sqlTest("TestAttemptEndsMerged")},
	},
	{
		Name:      "merged-completion-keeps-then",
		Guarantee: "a completion merged into its batch's completion statement stores the run as an end made alone does",
		Edits: []Edit{{
			File: "store/sqlitestore/stmts.go",
			Old:  "output = c.column3, then_event = c.column4, retry_at = NULL",
			New:  "output = c.column3, then_event = then_event, retry_at = NULL",
		}},
		Tests: []Test{sqlTest("TestAttemptEndsMerged")},
	},
	{
		Name:      "merged-fenced-end-admits-follow-up",
		Guarantee: "an attempt end merged into its batch's statement admits its follow-up runs only if the end applied",
		Edits: []Edit{{
			File: "store/sqlitestore/finish.go",
			Old: `			if !isSentinel(c.err) {
				return nil, c.err
			}
			continue`,
			New: `			if !isSentinel(c.err) {
				return nil, c.err
			}
			if a := f.u.Children; a != nil {
				w.deferring = true
				w.writeAdmit(a, &admitPlan{admit: a.Runs})
				w.deferring = false
			}
			continue`,
		}},
		Tests: []Test{sqlTest("TestAttemptEndsMerged")},
	},
	{
		Name:      "merged-end-ignores-follow-up-limit",
		Guarantee: "a follow-up run with a drop limit is admitted only below its limit, also when the end that admits it shares a statement",
		Edits: []Edit{{
			File: "store/store.go",
			Old:  "if nr.Limit > 0 || (nr.GroupKey",
			New:  "if (nr.GroupKey",
		}},
		Tests: []Test{sqlTest("TestAttemptEndsMerged")},
	},
	{
		Name:      "merged-held-end-finds-another-run",
		Guarantee: "an attempt end made in a merged statement for a run held from its claim ends that run, found by the seq its claim returned, and no other",
		Edits: []Edit{{
			File: "store/sqlitestore/finish.go",
			Old:  "\t\t\t\tb.vals[at] = k.seq\n\t\t\t\tcompletes = append(",
			New:  "\t\t\t\tb.vals[at] = k.seq + 1\n\t\t\t\tcompletes = append(",
		}},
		Tests: []Test{sqlTest("TestAttemptEndsMerged")},
	},
	{
		Name:      "merged-held-failure-finds-another-run",
		Guarantee: "a merged attempt end other than a completion (a retry, a failure) of a run held from its claim ends that run, found by its seq, and no other",
		Edits: []Edit{{
			File: "store/sqlitestore/finish.go",
			Old:  "\t\t\t\tb.vals[at] = k.seq\n\t\t\t\tknown = append(",
			New:  "\t\t\t\tb.vals[at] = k.seq + 1\n\t\t\t\tknown = append(",
		}},
		Tests: []Test{sqlTest("TestAttemptEndsMerged")},
	},
	{
		Name:      "pg-writer-plans-with-jit",
		Guarantee: "PostgreSQL: a writer's transactions plan with JIT off, so a plan its settings price high is never compiled at each execution",
		Edits: []Edit{{
			File: "store/pgstore/lazytx.go",
			Old:  ", set_config('jit', 'off', true)`}",
			New:  "`}",
		}},
		Tests: []Test{pgTest("TestWriterPlansWithoutJIT")},
	},
	{
		Name:      "pg-migration-drops-chain-links",
		Guarantee: "PostgreSQL: the chains admitted before the schema kept their links in run_ids still read back whole after it",
		Edits: []Edit{{
			File: "store/pgstore/migrations/0007_chain_links.sql",
			Old:  "WHERE r.seq = m.seq AND (r.correlation_id IS NOT NULL",
			New:  "WHERE false AND r.seq = m.seq AND (r.correlation_id IS NOT NULL",
		}},
		Tests: []Test{pgTest("TestChainLinksMigrated")},
		Needs: pgURL,
	},
	{
		Name:      "pg-follow-up-parent-not-linked",
		Guarantee: "PostgreSQL: retention keeps a run while a follow-up it admitted is kept",
		Edits: []Edit{{
			File: "store/pgstore/sql.go",
			Old:  "SELECT id, seq, correlation_id, parent_id FROM r)",
			New:  "SELECT id, seq, correlation_id, NULL FROM r)",
		}},
		Tests: []Test{pgTest("TestFollowUpLinks")},
		Needs: pgURL,
	},
	{
		Name:      "pg-held-follow-up-parent-not-linked",
		Guarantee: "PostgreSQL: retention keeps a run while a follow-up its end inserted in the end's own statement is kept",
		Edits: []Edit{{
			File: "store/pgstore/sql.go",
			Old:  "SELECT id, seq, correlation_id, parent_id FROM c)",
			New:  "SELECT id, seq, correlation_id, NULL FROM c)",
		}},
		Tests: []Test{pgTest("TestFollowUpLinks")},
		Needs: pgURL,
	},
	{
		Name:      "pg-migrates-under-live-nodes",
		Guarantee: "PostgreSQL: a schema is not migrated while nodes of an older build are live on it",
		Edits: []Edit{{
			File: "store/pgstore/migrate.go",
			Old:  "if cur > 0 && cur < len(ms) {",
			New:  "if false && cur > 0 && cur < len(ms) {",
		}},
		Tests: []Test{pgTest("TestMigrationWaitsForOlderNodes")},
		Needs: pgURL,
	},
	{
		Name:      "pg-end-from-claim-drops-stored-fields",
		Guarantee: "PostgreSQL: an attempt end answered from its run's claim returns the run exactly as stored",
		Edits: []Edit{{
			File: "store/pgstore/held.go",
			Old:  "Then: e.then, IdempotencyKey: e.idem, Version: e.version, GroupKey: e.groupKey",
			New:  "Then: e.then, IdempotencyKey: e.idem, GroupKey: e.groupKey",
		}},
		Tests: []Test{pgTest("TestAttemptEndsFromClaims")},
		Needs: pgURL,
	},
	{
		Name:      "dispatch-timer-from-stale-time",
		Guarantee: "a delayed run starts at its time, however far the clock moved between reading the time and arming the timer",
		Edits: []Edit{{
			File: "internal/dispatch/dispatch.go",
			Old:  "d.stopTmr = clock.At(d.cfg.Clock, at, d.fire)",
			New:  "d.stopTmr = d.cfg.Clock.AfterFunc(at.Sub(d.cfg.Clock.Now()), d.fire)",
		}},
		Tests: []Test{{Pkg: "./internal/dispatch", Run: "^TestDelayedItemStartsAtItsTime$"}},
	},
	{
		Name:      "end-alone-from-claim-loses-wait-key",
		Guarantee: "an attempt end made alone and answered from its run's claim returns the run exactly as stored",
		Edits: []Edit{{
			File: "store/sqlitestore/write.go",
			Old:  "r, tl = endedRun(held, u.RunID, append(append([]any{u.RunID, u.Epoch}, args...), waitKey(u, &o)))",
			New:  "r, tl = endedRun(held, u.RunID, append(append([]any{u.RunID, u.Epoch}, args...), nil))",
		}},
		Tests: []Test{sqlTest("TestAttemptEndsMerged")},
	},
	{
		Name:      "batch-reads-before-its-runs-are-written",
		Guarantee: "an admission of a batch sees the runs the batch's earlier admissions admitted (their keys), though their inserts are deferred",
		Edits: []Edit{{
			File: "store/sqlitestore/write.go",
			Old:  `if a.ParentID != "" || a.IdempotencyKey != "" {`,
			New:  `if false {`,
		}},
		Tests: []Test{sqlStore("Store/AdmitBatch/InOrder")},
	},
	{
		Name:      "batch-run-failure-names-last-admission",
		Guarantee: "a batch's run that fails when the batch's runs are inserted together names its own admission",
		Edits: []Edit{{
			File: "store/sqlitestore/batch.go",
			Old:  "failed = rf.at\n",
			New:  "failed = len(as) - 1\n",
		}},
		Tests: []Test{sqlStore("Store/AdmitBatch/AllOrNothing")},
	},
	{
		Name:      "singleton-ignored",
		Guarantee: "Singleton admits no run while one of its key is to run",
		Edits: []Edit{{
			File: "emit.go",
			Old:  "a.Runs[i].GroupKey, a.Runs[i].Group = o.group, o.policy",
			New:  "a.Runs[i].GroupKey, a.Runs[i].Group = o.group, store.GroupNone",
		}},
		Tests: []Test{memConf("Groups/Singleton"), sqlConf("Groups/Debounce")},
	},
	{
		Name:      "debounce-after-start",
		Guarantee: "Debounce never changes a run that has started",
		Edits: []Edit{{
			File: "store/sqlitestore/stmts.go",
			Old:  "'running', 'waiting') AND status = 'idle' AND attempts = 0",
			New:  "'running', 'waiting') AND status = 'idle'",
		}},
		Tests: []Test{sqlStore("Store/Groups/DebounceNotAfterStart")},
	},
	{
		Name:      "reclaim-before-dispatch",
		Guarantee: "after a crash, the first runs start while Start reclaims the dead process's runs, not after every reclaim",
		Edits: []Edit{{
			File: "engine.go",
			Old:  "\te.enqueue(pendingItems(first)...)\n\te.disp.Resume()",
			New:  "\tif err := e.reclaim(ctx, true); err != nil {\n\t\treturn fail(err)\n\t}\n\te.enqueue(pendingItems(first)...)\n\te.disp.Resume()",
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestStartDispatchesBeforeReclaiming$"}},
	},
	{
		Name:      "keyed-reclaimed-after-dispatch",
		Guarantee: "after a crash, a concurrency key's runs do not start while the store still holds the key's dead runs running",
		Edits: []Edit{{
			File: "engine.go",
			Old:  "\tif err := e.reclaimKeyed(ctx); err != nil {\n\t\treturn fail(err)\n\t}\n",
			New:  "",
		}},
		// TestCrashFlowLimits found it, but only in one run of three: not
		// named here, since a mutation must fail every test it names.
		Tests: []Test{{Pkg: ".", Run: "^TestStartReclaimsKeyedRunsFirst$"}},
	},
	{
		Name:      "sqlite-implicit-timeline-too-wide",
		Guarantee: "a run's timeline reads the same whether or not its first attempt's entries are implicit; only a plain first-attempt completion leaves them implicit",
		Edits: []Edit{{
			File: "store/sqlitestore/write.go",
			Old:  "r.Status == store.StatusCompleted && note == implicitNote &&",
			New:  "r.Status == store.StatusCompleted &&",
		}},
		Tests: []Test{sqlTest("TestImplicitCompletionTimeline")},
	},
	{
		Name:      "cap-running-off-by-one",
		Guarantee: "a capped process never executes more than its cap at once (dispatcher)",
		Edits: []Edit{{
			File: "internal/dispatch/dispatch.go",
			Old:  "return ok && d.byProc[process] >= lim",
			New:  "return ok && d.byProc[process] > lim",
		}},
		Tests: []Test{memConf("Caps/RunningNeverExceedsCap"), burst},
	},
	{
		Name:      "slot-held-until-end-written",
		Guarantee: "a handler's fleet slot is free once it returns, while its end is written (the next run's claim can share that write)",
		Edits: []Edit{{
			File: "execute.go",
			Old:  "\t\ta.e.disp.Vacate(a.item)\n",
			New:  "",
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestSlotFreedWhileEndIsWritten$"}},
	},
	{
		Name:      "vacated-run-frees-cap",
		Guarantee: "a capped process counts a run whose handler returned until its end is written",
		Edits: []Edit{{
			File: "internal/dispatch/dispatch.go",
			Old:  "\td.running--\n\td.vacated++\n",
			New:  "\td.running--\n\td.vacated++\n\td.byProc[it.Process]--\n",
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestSlotFreedWhileEndIsWritten$"}, {Pkg: "./internal/dispatch", Run: "^TestVacateReleasesOnlyTheFleetSlot$"}},
	},
	{
		Name:      "vacated-run-not-running",
		Guarantee: "a run whose handler returned counts as running until its end is written: Stop and Drain wait for the end",
		Edits: []Edit{{
			File: "internal/dispatch/dispatch.go",
			Old:  "func (d *Dispatcher) startedLocked() int { return d.running + d.vacated }",
			New:  "func (d *Dispatcher) startedLocked() int { return d.running }",
		}},
		Tests: []Test{{Pkg: "./internal/dispatch", Run: "^TestVacateReleasesOnlyTheFleetSlot$"}},
	},
	{
		Name:      "cap-admission-off-by-one",
		Guarantee: "a capped process never holds more than its bound; events beyond it are dropped (admission)",
		Edits: []Edit{{
			File: "store/sqlitestore/write.go",
			Old:  "if n+planned[nr.Process] >= nr.Limit {",
			New:  "if n+planned[nr.Process] > nr.Limit {",
		}},
		Tests: []Test{sqlConf("Caps/QueueOverflow"), burst},
	},
	{
		Name:      "chain-insert-error-ignored",
		Guarantee: "a completion and its follow-ups commit together: a follow-up that fails fails the completion",
		Edits: []Edit{{
			File: "store/sqlitestore/write.go",
			Old:  "\t\tif err := w.writeAdmit(u.Children, &plan); err != nil {\n\t\t\treturn res, err\n\t\t}\n\t\tres.Children = plan.res",
			New:  "\t\tw.writeAdmit(u.Children, &plan)\n\t\tres.Children = plan.res",
		}},
		Tests: []Test{sqlStore("Chain/FollowUpInsertFailureLeavesParent")},
	},
	{
		Name:      "chain-second-transaction",
		Guarantee: "a completion and its follow-ups commit together: no crash leaves one without the other",
		Edits: []Edit{{
			File: "lifecycle.go",
			Old:  "\treturn e.persist(\"finish\", func() error {\n\t\tif c.before != nil {\n\t\t\tif err := c.before(); err != nil {\n\t\t\t\treturn err\n\t\t\t}\n\t\t}\n\t\treturn e.update(ctx, c, res)\n\t})\n",
			New: "\tchildren := c.u.Children\n\tc.u.Children, c.u.NoChildren = nil, nil\n\tdefer func() { c.u.Children = children }()\n" +
				"\terr := e.persist(\"finish\", func() error {\n\t\treturn e.update(ctx, c, res)\n\t})\n" +
				"\tif err == nil && children != nil {\n\t\tres.Children, err = e.store.Admit(ctx, *children)\n\t}\n\treturn err\n",
		}},
		Tests: []Test{crashPoints.short()},
	},
	{
		Name:      "exclusive-lock-ignored",
		Guarantee: "a second engine process on the same file is refused",
		Edits: []Edit{{
			File: "store/sqlitestore/lock_unix.go",
			Old:  "syscall.LOCK_EX|syscall.LOCK_NB); err != nil {",
			New:  "syscall.LOCK_EX|syscall.LOCK_NB); err != nil && false {",
		}},
		Tests: []Test{sqlTest("TestOpenLocked")},
	},
	{
		Name:      "table-sql-drift",
		Guarantee: "the SQLite store's SQL does what the transition table says (here: a retry keeps its backoff)",
		Edits: []Edit{{
			File: "store/sqlitestore/stmts.go",
			Old:  "retry_at = CASE ?8 WHEN 1 THEN ?9 ELSE retry_at END,",
			New:  "retry_at = CASE ?8 WHEN 1 THEN NULL ELSE retry_at END,",
		}},
		Tests: []Test{sqlStore("TransitionTable")},
	},
	{
		Name:      "wal-limit-ignored",
		Guarantee: "the WAL stays under its limit when steady readers keep it from starting over",
		Edits: []Edit{{
			File: "store/sqlitestore/writer.go",
			Old:  "\tif b.limit == 0 || now.Sub(b.checked) < walCheckEvery",
			New:  "\tif true || b.limit == 0 || now.Sub(b.checked) < walCheckEvery",
		}},
		Tests: []Test{sqlTest("TestWALLimit")},
	},
	{
		Name:      "store-outage-completion-dropped",
		Guarantee: "a finished attempt's outcome that the store cannot take is retried with backoff until it commits: a store outage loses nothing",
		Edits: []Edit{{
			File: "execute.go",
			Old:  "\t\te.storeFailed(op, fmt.Errorf(\"%w (retrying in %s)\", err, wait))\n\t\tif !e.sleep(wait) {",
			New:  "\t\te.storeFailed(op, fmt.Errorf(\"%w (retrying in %s)\", err, wait))\n\t\tif true || !e.sleep(wait) {",
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestStoreHealth$"}},
	},
	{
		Name:      "store-outage-not-reported",
		Guarantee: "a store outage is reported: StoreHealth down, /api/health 503, yella_store_up 0, one log line",
		Edits: []Edit{{
			File: "storehealth.go",
			Old:  "\t\th.down.Store(true)\n",
			New:  "",
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestStoreHealth$"}, {Pkg: "./httpapi", Run: "^TestHealthStoreDown$"}, {Pkg: "./prommetrics", Run: "^TestStoreUp$"}},
	},
	{
		Name:      "reconcile-ignored",
		Guarantee: "an effect whose outcome a crash left unknown asks its Reconcile function before fencing the run",
		Edits: []Edit{{
			File: "effect.go",
			Old:  "if o.reconcile != nil && !idempotent && a.startedBefore(k) {",
			New:  "if false && o.reconcile != nil && !idempotent && a.startedBefore(k) {",
		}},
		Tests: []Test{memConf("Effect/ReconciledDone"), memConf("Effect/ReconciledNotDone"), {Pkg: "./store/sqlitestore", Run: "^TestCrashReconciled$", Full: true}},
	},
	{
		Name:      "fenced-preview-applies",
		Guarantee: "ResolveFenced without Apply changes nothing: it only says what it would do",
		Edits: []Edit{{
			File: "fenced.go",
			Old:  "\t\t\tif a.Apply {\n\t\t\t\tif a.Complete {",
			New:  "\t\t\tif true {\n\t\t\t\tif a.Complete {",
		}},
		Tests: []Test{memConf("Operator/ResolveFencedInBulk")},
	},
	{
		Name:      "emit-not-validated",
		Guarantee: "a payload a listener's Validate refuses is refused at Emit and EmitBatch, admitting nothing",
		Edits: []Edit{{
			File: "emit.go",
			Old:  "if verr := validatePayload(event, targets, enc); verr != nil {",
			New:  "if verr := validatePayload(event, targets, enc); verr != nil && false {",
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestValidatedAtEmit$"}},
	},
	{
		Name:      "follow-up-not-validated",
		Guarantee: "a follow-up payload a listener's Validate refuses fails the parent (Then) or keeps it deferred (Resume)",
		Edits: []Edit{{
			File: "lifecycle.go",
			Old:  `if verr := validatePayload("follow-up "+event, targets, payload); verr != nil {`,
			New:  `if verr := validatePayload("follow-up "+event, targets, payload); verr != nil && false {`,
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestFollowUpValidated$"}},
	},
}

// connectorMutations break the connectors' guarantees.
var connectorMutations = []Mutation{
	{
		Name:      "http-call-outside-effect",
		Guarantee: "an HTTP call through httpx is one durable effect: a completed call is never sent again, an unknown outcome fences the run",
		Edits: []Edit{{
			File: "connector/httpx/httpx.go",
			Old:  "\treturn yella.Effect(c, key, func(ctx context.Context) (Response, error) {\n\t\treturn o.call(ctx, req)\n\t}, eo...)",
			New:  "\t_ = eo\n\treturn o.call(c, req)",
		}},
		Tests: []Test{{Pkg: "./connector/httpx", Run: "^TestCrashMidCall$"}, {Pkg: "./connector/httpx", Run: "^TestCompletedCallNotResent$"}},
	},
	{
		Name:      "llm-chat-not-idempotent",
		Guarantee: "a chat completion cut by a crash is called again (same idempotency key), never fenced or half recorded",
		Edits: []Edit{{
			File: "connector/llm/llm.go",
			Old:  "\t}, yella.Idempotent())",
			New:  "\t})",
		}},
		Tests: []Test{{Pkg: "./connector/llm", Run: "^TestCrashMidStream$"}},
	},
	{
		Name:      "webhook-retry-admitted-again",
		Guarantee: "a provider's retry of a webhook (same event id) admits nothing new",
		Edits: []Edit{{
			File: "connector/webhook/webhook.go",
			Old:  `yella.IdempotencyKey(name+":"+d.ID)`,
			New:  `yella.IdempotencyKey(name+":"+d.ID+time.Now().String())`,
		}},
		Tests: []Test{{Pkg: "./connector/webhook", Run: "^TestRetryAdmitsOnce$"}},
	},
	{
		Name:      "browser-outlives-engine",
		Guarantee: "a Chromium started by the pool dies with its engine, even a SIGKILLed one (no orphaned browser)",
		Edits: []Edit{{
			File: "connector/browser/proc_linux.go",
			Old:  "\tcmd.SysProcAttr.Pdeathsig = syscall.SIGKILL",
			New:  "",
		}},
		Tests: []Test{{Pkg: "./connector/browser", Run: "^TestEngineKilledMidScrape$", Timeout: 3 * time.Minute}},
	},
	{
		Name:      "browser-dirs-of-dead-engines-kept",
		Guarantee: "a pool removes the browser user data directories an engine that died left, and never a live one's",
		Edits: []Edit{{
			File: "connector/browser/proc_linux.go",
			Old:  "\t\tif syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {\n\t\t\tkillMarked(d)",
			New:  "\t\tif false {\n\t\t\tkillMarked(d)",
		}},
		Tests: []Test{{Pkg: "./connector/browser", Run: "^TestStaleDirsSwept$"}},
	},
	{
		Name:      "browser-dir-swept-while-live",
		Guarantee: "a pool never removes the user data directory of a live process's browser",
		Edits: []Edit{{
			File: "connector/browser/proc_linux.go",
			Old:  "\t\tif syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {\n\t\t\tkillMarked(d)",
			New:  "\t\tif syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil || true {\n\t\t\tkillMarked(d)",
		}},
		Tests: []Test{{Pkg: "./connector/browser", Run: "^TestStaleDirsSwept$"}, {Pkg: "./connector/browser", Run: "^TestOwnDirLocks$"}},
	},
}

// pgMutations break the PostgreSQL store's guarantees: several engine
// processes on one database.
var pgMutations = []Mutation{
	{
		Name:      "pg-outage-claims-spin",
		Guarantee: "PostgreSQL: while the database is unreachable a node retries its claims with backoff, without spinning",
		Edits: []Edit{{
			File: "shared.go",
			Old:  "\t\t\tn.wakeAtTime(now.Add(wait))\n",
			New:  "\t\t\tn.wakeAtTime(now.Add(wait / 1000))\n",
		}},
		Tests: []Test{pgTest("TestConnectionCut")},
		Needs: pgURL,
	},
	{
		Name:      "pg-completion-ignores-epoch",
		Guarantee: "PostgreSQL: an attempt's end carries its lease epoch: a stale or taken-over attempt's completion changes nothing",
		Edits: []Edit{{
			File: "store/pgstore/sql.go",
			Old:  "FROM ` + from + ` r.seq = i.seq AND ` + stillRunning + ` AND r.epoch = i.epoch",
			New:  "FROM ` + from + ` r.seq = i.seq AND ` + stillRunning + ` AND i.epoch > 0",
		}},
		Tests: []Test{pgConf("Lease/StaleCompletionWhileRunning"), pgTest("TestGoneNodeRunsTakenOver")},
		Needs: pgURL,
	},
	{
		Name:      "pg-prune-never-advances",
		Guarantee: "PostgreSQL: each node's retention goes on where its last call stopped, past a backlog of runs it keeps",
		Edits: []Edit{{
			File: "store/pgstore/read.go",
			Old:  "s.pruneFrom.Store(pw.Next())",
			New:  "s.pruneFrom.Store(pw.Next() * 0)",
		}},
		Tests: []Test{{Pkg: "./store/pgstore", Run: "^TestConformance$/^Store/Prune/PassesOverKeptRuns$"}},
		Needs: pgURL,
	},
	{
		Name:      "pg-dead-node-not-reclaimed",
		Guarantee: "PostgreSQL: a node whose heartbeat is older than the timeout loses its runs to the others at once",
		Edits: []Edit{{
			File: "store/pgstore/sql.go",
			Old:  "AND r.status = 'running' AND (n.seen < now() - make_interval(secs => $4)",
			New:  "AND r.status = 'running' AND (n.seen < now() - make_interval(secs => $4) - interval '1 day'",
		}},
		Tests: []Test{pgTest("TestGoneNodeRunsTakenOver"), pgTest("TestNodesSurviveKills").full()},
		Needs: pgURL,
	},
	{
		Name:      "pg-ack-before-commit",
		Guarantee: "PostgreSQL: a write is acknowledged only after its transaction commits",
		Edits: []Edit{{
			File: "store/pgstore/writer.go",
			Old:  "\t// Tests may hold or fail the commit here (internal/commithook).\n",
			New:  "\tfor _, c := range cmds {\n\t\tselect {\n\t\tcase <-c.done:\n\t\tdefault:\n\t\t\tclose(c.done)\n\t\t}\n\t}\n\t// Tests may hold or fail the commit here (internal/commithook).\n",
		}, {
			File: "store/pgstore/writer.go",
			Old:  "\tfor _, c := range batch {\n\t\tclose(c.done)\n\t}",
			New:  "\tfor _, c := range batch {\n\t\tselect {\n\t\tcase <-c.done:\n\t\tdefault:\n\t\t\tclose(c.done)\n\t\t}\n\t}",
		}},
		Tests: []Test{pgTest("TestAdmitAnsweredAfterCommit")},
		Needs: pgURL,
	},
	{
		Name:      "pg-queued-effect-end-unordered-writers",
		Guarantee: "PostgreSQL: with several writers, a queued effect end is committed before the call returns (two writers do not keep a node's order)",
		Edits: []Edit{{
			File: "store/pgstore/effects.go",
			Old:  "\tif s.opts.Writers > 1 {\n\t\terr := s.do(ctx, c)",
			New:  "\tif s.opts.Writers > 1<<20 {\n\t\terr := s.do(ctx, c)",
		}},
		Tests: []Test{pgTest("TestQueuedEffectEndWithWriters")},
		Needs: pgURL,
	},
	{
		Name:      "pg-held-effect-start-ignores-epoch",
		Guarantee: "PostgreSQL: an effect start of a run this store claimed carries its epoch: once the run is taken over, the stale attempt cannot start an effect",
		Edits: []Edit{{
			File: "store/pgstore/sql.go",
			Old:  "SELECT i.* FROM i JOIN $S.runs r ON r.seq = i.seq AND ` + stillRunning + ` AND r.epoch = i.epoch",
			New:  "SELECT i.* FROM i JOIN $S.runs r ON r.seq = i.seq AND ` + stillRunning + ` AND i.epoch > 0",
		}},
		Tests: []Test{pgTest("TestHeldEffectStartFenced"), pgTest("TestNewEffectStarts")},
		Needs: pgURL,
	},
	{
		Name:      "pg-held-effect-upsert-ignores-epoch",
		Guarantee: "PostgreSQL: an effect start of a run this store claimed again (not its first claim) carries its epoch: once the run is taken over, the stale attempt cannot start an effect",
		Edits: []Edit{{
			File: "store/pgstore/sql.go",
			Old:  "FROM i JOIN $S.runs r ON r.seq = i.seq AND ` + stillRunning + ` AND r.epoch = i.epoch\n\t\t\tON CONFLICT",
			New:  "FROM i JOIN $S.runs r ON r.seq = i.seq AND ` + stillRunning + ` AND i.epoch > 0\n\t\t\tON CONFLICT",
		}},
		Tests: []Test{pgTest("TestNewEffectStarts")},
		Needs: pgURL,
	},
	{
		Name:      "pg-held-effect-outcome-ignores-epoch",
		Guarantee: "PostgreSQL: an effect outcome of a run this store claimed applies only to the record its attempt started: once another node's attempt started the effect again, the stale outcome is refused",
		Edits: []Edit{{
			File: "store/pgstore/sql.go",
			Old:  "AND e.status = 'started' AND e.epoch = o.epoch",
			New:  "AND e.status = 'started' AND o.epoch > 0",
		}},
		Tests: []Test{pgTest("TestHeldEffectOutcomesWithEnds")},
		Needs: pgURL,
	},
	{
		Name:      "pg-outcomes-with-ends-lost",
		Guarantee: "PostgreSQL: effect outcomes written in the statement of a batch's attempt ends are answered as written",
		Edits: []Edit{{
			File: "store/pgstore/update.go",
			Old:  "eff.done[eff.idx[-1-k]] = true",
			New:  "_ = eff",
		}},
		Tests: []Test{pgTest("TestHeldEffectOutcomesWithEnds")},
		Needs: pgURL,
	},
	{
		Name:      "pg-follow-ups-filter-rereads",
		Guarantee: "PostgreSQL: the follow-up runs of a batch's held ends are filtered by the applied ends' ords read once, not joined to them (a join read their unnest again for each applied end)",
		Edits: []Edit{{
			File: "store/pgstore/sql.go",
			Old:  "WHERE c.end_ord = ANY(ARRAY(SELECT ord FROM u))",
			New:  "WHERE c.end_ord IN (SELECT ord FROM u)",
		}},
		Tests: []Test{pgTest("TestWriterStatementsFindRowsByKey")},
		Needs: pgURL,
	},
	{
		Name:      "pg-fenced-end-admits-follow-up",
		Guarantee: "PostgreSQL: an attempt end that inserts its follow-up runs in its own statement admits them only if the end applied",
		Edits: []Edit{{
			File: "store/pgstore/sql.go",
			Old:  "\t\t\tWHERE c.end_ord = ANY(ARRAY(SELECT ord FROM u))\n",
			New:  "\n",
		}},
		Tests: []Test{pgTest("TestHeldFollowUpsWithEnds")},
		Needs: pgURL,
	},
	{
		Name:      "pg-follow-up-seq-lost",
		Guarantee: "PostgreSQL: follow-up runs inserted by their parent's end statement are answered with their seqs",
		Edits: []Edit{{
			File: "store/pgstore/update.go",
			Old:  "follow.seqs[e.then] = seq",
			New:  "_ = seq",
		}},
		Tests: []Test{pgTest("TestHeldFollowUpsWithEnds")},
		Needs: pgURL,
	},
	{
		Name:      "pg-new-effect-start-repeats-key",
		Guarantee: "PostgreSQL: an effect that failed starts again in the same attempt (its record exists: the start is an upsert, not the plain insert of a new key)",
		Edits: []Edit{{
			File: "store/pgstore/held.go",
			Old:  "if slices.Contains(r.keys, key) {",
			New:  "if slices.Contains(r.keys, key) && false {",
		}},
		Tests: []Test{pgTest("TestNewEffectStarts")},
		Needs: pgURL,
	},
	{
		Name:      "pg-claim-ignores-room",
		Guarantee: "PostgreSQL: a claim takes no more runs than its caller's room (ClaimNextRequest.Room)",
		Edits: []Edit{{
			File: "store/pgstore/claim.go",
			Old:  "\tif req.Room == nil {\n\t\treturn req.Limit\n\t}",
			New:  "\tif req.Room == nil || true {\n\t\treturn req.Limit\n\t}",
		}},
		Tests: []Test{pgTest("TestClaimTakesItsRoomWhenItRuns")},
		Needs: pgURL,
	},
	{
		Name:      "pg-claim-room-at-request",
		Guarantee: "PostgreSQL: a claim asks its caller's room when it runs, not when it is requested",
		Edits: []Edit{{
			File: "store/pgstore/claim.go",
			Old:  "\tres, err := s.claimNext(ctx, req, node)\n",
			New:  "\treq.Limit = limitNow(&req)\n\tres, err := s.claimNext(ctx, req, node)\n",
		}},
		Tests: []Test{pgTest("TestClaimTakesItsRoomWhenItRuns")},
		Needs: pgURL,
	},
	{
		Name:      "pg-running-count-reads-backlog",
		Guarantee: "PostgreSQL: a capped claim counts its process's running runs without reading the process's idle backlog",
		Edits: []Edit{{
			File: "store/pgstore/sql.go",
			Old:  "FROM $S.runs WHERE lease_node IS NOT NULL AND status = 'running' AND process = ANY($1) GROUP BY process`)",
			New:  "FROM $S.runs WHERE status = 'running' AND process = ANY($1) GROUP BY process`)",
		}},
		Tests: []Test{pgTest("TestInFlightStatementsReadTheirIndex")},
		Needs: pgURL,
	},
	{
		Name:      "pg-owner-number-not-found",
		Guarantee: "PostgreSQL: an owner that claimed before (on any node, or before a migration) keeps its number: its claims and heartbeats go on",
		Edits: []Edit{{
			File: "store/pgstore/sql.go",
			Old:  "SELECT num FROM i UNION ALL SELECT num FROM $S.owners WHERE owner = $1`)",
			New:  "SELECT num FROM i`)",
		}},
		Tests: []Test{pgTest("TestLeaseNodesMigrated"), pgTest("TestOwnerNumbersShared")},
		Needs: pgURL,
	},
	{
		Name:      "pg-recycled-end-keeps-result",
		Guarantee: "PostgreSQL: an attempt end's result stays its caller's: the recycled command of a later end shares none of its memory",
		Edits: []Edit{{
			File: "store/pgstore/update.go",
			Old:  "*fc = finishCmd{} // drops the update's and the result's references",
			New:  "fc.c = cmd{}",
		}},
		Tests: []Test{pgTest("TestEndResultsStayTheCallers")},
		Needs: pgURL,
	},
	{
		Name:      "pg-batch-failure-names-first-admission",
		Guarantee: "PostgreSQL: a batch whose statement of many plain or keyed admissions fails names the admission that failed, not the first of the statement",
		Edits: []Edit{{
			File: "store/pgstore/batch.go",
			Old:  "failed, oneByOne = i, true",
			New:  "failed = i",
		}},
		Tests: []Test{pgStore("Store/AdmitBatch/AllOrNothing")},
		Needs: pgURL,
	},
	{
		Name:      "pg-batch-keyed-admission-inserted-plain",
		Guarantee: "PostgreSQL: a batch's admissions with an idempotency key are inserted with their key, in their place in the batch, never with the plain ones",
		Edits: []Edit{{
			File: "store/pgstore/batch.go",
			Old:  `func plain(a *store.Admission) bool { return a.IdempotencyKey == "" && simple(a) }`,
			New:  `func plain(a *store.Admission) bool { return simple(a) }`,
		}},
		Tests: []Test{pgTest("TestBatchPlainAdmissionsTogether")},
		Needs: pgURL,
	},
	{
		Name:      "pg-batch-children-one-by-one",
		Guarantee: "PostgreSQL: a batch's children (plain admissions naming a parent) are inserted with the other plain admissions, not one statement and a parent lookup each",
		Edits: []Edit{{
			File: "store/pgstore/batch.go",
			Old:  `func plain(a *store.Admission) bool { return a.IdempotencyKey == "" && simple(a) }`,
			New:  `func plain(a *store.Admission) bool { return a.IdempotencyKey == "" && a.ParentID == "" && simple(a) }`,
		}},
		Tests: []Test{pgTest("TestBatchPlainAdmissionsTogether")},
		Needs: pgURL,
	},
	{
		Name:      "pg-batch-child-of-missing-parent-admitted",
		Guarantee: "PostgreSQL: a batch admission whose parent is not stored, nor admitted earlier in the batch, fails the batch with ErrNotFound naming it",
		Edits: []Edit{{
			File: "store/pgstore/batch.go",
			Old:  `if a.ParentID != "" && !stored[a.ParentID] {`,
			New:  `if a.ParentID != "" && false && !stored[a.ParentID] {`,
		}},
		Tests: []Test{pgStore("Store/AdmitBatch/AllOrNothing")},
		Needs: pgURL,
	},
	{
		Name:      "pg-batch-bound-not-counted",
		Guarantee: "PostgreSQL: a batch's admissions to a bounded process count the runs the batch admitted before them: never more active runs than the bound",
		Edits: []Edit{{
			File: "store/pgstore/batch.go",
			Old:  "\t\t\tactive[nr.Process]++\n\t\t\tstored[nr.ID] = true",
			New:  "\t\t\tstored[nr.ID] = true",
		}},
		Tests: []Test{pgTest("TestBatchPlainAdmissionsTogether")},
		Needs: pgURL,
	},
	{
		Name:      "pg-batch-keyed-admissions-one-by-one",
		Guarantee: "PostgreSQL: a batch's keyed admissions are inserted by one statement per run of them, not one (and two lookups) each",
		Edits: []Edit{{
			File: "store/pgstore/batch.go",
			Old:  "return runOf(as, i, keyed), func(",
			New:  "return i, func(",
		}},
		Tests: []Test{pgTest("TestBatchKeyedAdmissionsTogether")},
		Needs: pgURL,
	},
	{
		Name:      "pg-batch-locks-in-command-order",
		Guarantee: "PostgreSQL: a transaction of several commands takes the advisory locks they declare before its first statement, in one order, so two nodes' transactions never deadlock on them",
		Edits: []Edit{{
			File: "store/pgstore/writer.go",
			Old:  "if keys := batchLocks(cmds); keys != nil {",
			New:  "if keys := batchLocks(cmds); false && keys != nil {",
		}},
		Tests: []Test{pgTest("TestBatchLocksInOneOrder")},
		Needs: pgURL,
	},
	{
		Name:      "pg-keyed-admission-ignores-pruned-key",
		Guarantee: "PostgreSQL: a keyed admission whose key was pruned admits nothing and answers with the pruned run, alone or in a batch",
		Edits: []Edit{{
			File: "store/pgstore/sql.go",
			Old:  "WHERE NOT EXISTS (SELECT 1 FROM $S.pruned_keys k WHERE k.event = i.event AND k.key = i.idem",
			New:  "WHERE true OR NOT EXISTS (SELECT 1 FROM $S.pruned_keys k WHERE k.event = i.event AND k.key = i.idem",
		}},
		Tests: []Test{pgTest("TestBatchKeyedAdmissionsTogether")},
		Needs: pgURL,
	},
	{
		Name:      "pg-completion-form-keeps-retry-time",
		Guarantee: "PostgreSQL: the completion form of the attempt ends of held runs clears a retry time as the general form does",
		Edits: []Edit{{
			File: "store/pgstore/sql.go",
			Old:  "then_event = i.then_event, retry_at = NULL, completed_at = i.at,",
			New:  "then_event = i.then_event, completed_at = i.at,",
		}},
		Tests: []Test{pgTest("TestCompletionFormWritesAsGeneralForm")},
		Needs: pgURL,
	},
	{
		Name:      "pg-completion-form-timeline-not-implicit",
		Guarantee: "PostgreSQL: the completion form writes the timeline entries the general form writes: none for a first attempt's completion (implicit), two for a later one",
		Edits: []Edit{{
			File: "store/pgstore/sql.go",
			Old:  "i.ord, i.at, '` + implicitNote + `'::text AS note,",
			New:  "i.ord, i.at, 'done'::text AS note,",
		}},
		Tests: []Test{pgTest("TestCompletionFormWritesAsGeneralForm")},
		Needs: pgURL,
	},
	{
		Name:      "pg-completion-form-for-any-end",
		Guarantee: "PostgreSQL: only an attempt end that completes its run as the complete rule does is written by the completion form",
		Edits: []Edit{{
			File: "store/pgstore/update.go",
			Old:  "func plainCompletion(f *finish, a *sets) bool {\n\treturn ",
			New:  "func plainCompletion(f *finish, a *sets) bool {\n\treturn true || ",
		}},
		Tests: []Test{pgTest("TestPlainCompletion")},
		Needs: pgURL,
	},
	{
		Name:      "chain-stage-not-started-here",
		Guarantee: "on a shared store, the engine that ends a chain's stage runs the next stage itself (admitted already claimed), when its process runs there with no cap or flow limit",
		Edits: []Edit{{
			File: "lifecycle.go",
			Old:  "\tif e.node == nil || !a.NotBefore.IsZero() || !e.isState(stateStarted) {\n\t\treturn\n\t}",
			New:  "\treturn",
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestChainStageStartsOnItsEngine$"}},
		Needs: pgURL,
	},
	{
		Name:      "started-stage-kept-by-stopped-engine",
		Guarantee: "a next stage admitted claimed by an engine that stopped meanwhile is handed back, idle for other engines",
		Edits: []Edit{{
			File: "shared.go",
			Old:  "\tif n.stopped {\n\t\tn.mu.Unlock()\n\t\tn.handBack([]store.Run{*r})\n\t\treturn\n\t}\n",
			New:  "",
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestStartedStageHandedBackOnStop$"}},
		Needs: pgURL,
	},
	{
		Name:      "pg-started-follow-up-ignores-flow-key",
		Guarantee: "PostgreSQL: a follow-up run with a flow key (or a bound, a group key or a delay) is admitted idle even when its admission asks to start it",
		Edits: []Edit{{
			File: "store/pgstore/update.go",
			Old:  "!nr.Start || nr.Limit > 0 || nr.RateKey != \"\" ||",
			New:  "!nr.Start || nr.Limit > 0 ||",
		}},
		Tests: []Test{pgTest("TestFollowUpsStartedByTheirEnd")},
		Needs: pgURL,
	},
	{
		Name:      "pg-started-follow-up-delayed",
		Guarantee: "PostgreSQL: a delayed follow-up run is admitted idle, due at its time, even when its admission asks to start it",
		Edits: []Edit{{
			File: "store/pgstore/update.go",
			Old:  "if a.Start != nil && notBefore(a) == nil {",
			New:  "if a.Start != nil {",
		}},
		Tests: []Test{pgTest("TestFollowUpsStartedByTheirEnd")},
		Needs: pgURL,
	},
	{
		Name:      "pg-claim-not-counted",
		Guarantee: "PostgreSQL: the status counts agree with the runs: a claim counts the runs it moves from idle to running",
		Edits: []Edit{{
			File: "store/pgstore/sql.go",
			Old:  "` + countsItem(6, claimDeltas) + `",
			New:  "n AS (SELECT $6::int)",
		}},
		Tests: []Test{pgTest("TestBatchesCommitWithTheirStatements")},
		Needs: pgURL,
	},
	{
		Name:      "pg-one-trip-wake-up-lost",
		Guarantee: "PostgreSQL: an attempt end that makes its run claimable again wakes the nodes, also when its batch commits with its statements",
		Edits: []Edit{{
			File: "store/pgstore/update.go",
			Old:  "w.ready = w.ready || args[i].status == string(store.StatusIdle) || held[i].concKey != \"\"",
			New:  "w.ready = w.ready || held[i].concKey != \"\"",
		}},
		Tests: []Test{pgTest("TestBatchesCommitWithTheirStatements")},
		Needs: pgURL,
	},
	{
		Name:      "pg-one-trip-skips-plain-commands",
		Guarantee: "PostgreSQL: a batch with plain commands runs them before its COMMIT",
		Edits: []Edit{{
			File: "store/pgstore/writer.go",
			Old:  "if b.Len() > 0 && len(plain) == 0 && !w.answerCounts",
			New:  "if b.Len() > 0 && !w.answerCounts",
		}},
		Tests: []Test{pgTest("TestBatchesCommitWithTheirStatements")},
		Needs: pgURL,
	},
	{
		Name:      "pg-bulk-admissions-wait-for-writer",
		Guarantee: "PostgreSQL: an admission batch of many runs is committed apart from the group-commit writer, so it goes on while the writer's transaction waits",
		Edits: []Edit{{
			File: "store/pgstore/batch.go",
			Old:  "bulk: runs >= bulkRuns,",
			New:  "bulk: false && runs >= bulkRuns,",
		}},
		Tests: []Test{pgTest("TestBulkAdmissionsCommitApart")},
		Needs: pgURL,
	},
	{
		Name:      "pg-one-trip-failure-ignored",
		Guarantee: "PostgreSQL: a batch sent with its COMMIT whose statement fails commits nothing and answers no caller as committed: each command is tried alone",
		Edits: []Edit{{
			File: "store/pgstore/writer.go",
			Old:  "\t\ttx.withBegin(b)\n\t\tif err := sendEnd(ctx, pc.Conn(), b); err != nil {\n\t\t\treturn err\n\t\t}",
			New:  "\t\ttx.withBegin(b)\n\t\t_ = sendEnd(ctx, pc.Conn(), b)",
		}},
		Tests: []Test{pgTest("TestOneTripBatchFailsWhole")},
		Needs: pgURL,
	},
	{
		Name:      "flow-key-not-text-stored-raw",
		Guarantee: "a rate or concurrency key read from a payload may hold any string: one that is not text is stored hashed, so PostgreSQL keeps it and the chain that admits it completes",
		Edits: []Edit{{
			File: "flow.go",
			Old:  "if len(key) > maxKeyLen || !isText(key) {",
			New:  "if len(key) > maxKeyLen {",
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestTextKeptOnEveryStore$"}},
		Needs: pgURL,
	},
	{
		Name:      "idempotency-key-unchecked",
		Guarantee: "an idempotency key that no store keeps as it is (a NUL byte, invalid UTF-8, over MaxIdempotencyKeyBytes) is refused with CodeInvalidConfig on every store",
		Edits: []Edit{{
			File: "emit.go",
			Old:  "if len(o.key) > MaxIdempotencyKeyBytes || !isText(o.key) {",
			New:  "if false {",
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestTextKeptOnEveryStore$"}},
	},
	{
		Name:      "process-version-unchecked",
		Guarantee: "a process whose version is not text (a NUL byte, invalid UTF-8) is refused at registration",
		Edits: []Edit{{
			File: "process.go",
			Old:  "\tcase badName(p.Version) != \"\":\n\t\treturn bad(\"Version\", \"%s (process %q)\", badName(p.Version), p.Name)\n",
			New:  "",
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestNamesMustBeText$"}},
	},
	{
		Name:      "pg-lookup-by-non-text-fails",
		Guarantee: "PostgreSQL: a run id that is not text (a NUL byte, invalid UTF-8) names no run: Run answers ErrNotFound, as the other stores do, not a server error",
		Edits: []Edit{{
			File: "store/pgstore/read.go",
			Old:  "\tif !isText(id) {\n\t\treturn store.Run{}, store.ErrNotFound\n\t}\n",
			New:  "",
		}},
		Tests: []Test{pgStore("Store/Lookups/StringsNoStoreKeeps")},
		Needs: pgURL,
	},
	{
		Name:      "api-chain-read-whole",
		Guarantee: "GET /api/runs/{id}/chain (and a run listing) reads the store 100 runs at a time, never a whole chain at once",
		Edits: []Edit{{
			File: "httpapi/routes.go",
			Old:  "bq.Limit, bq.WithTotal = min(want-n, readBatch), q.WithTotal && n == 0",
			New:  "bq.Limit, bq.WithTotal = want-n, q.WithTotal && n == 0",
		}},
		Tests: []Test{{Pkg: "./httpapi", Run: "^TestChainReadInPages$"}},
	},
	{
		Name:      "run-page-reads-whole-chain",
		Guarantee: "a dashboard run page reads the oldest 200 runs of its chain, not the whole chain",
		Edits: []Edit{{
			File: "dashboard/pages_run.go",
			Old:  "Limit: maxChainRows, WithTotal: true",
			New:  "Limit: yella.MaxPageSize, WithTotal: true",
		}},
		Tests: []Test{{Pkg: "./dashboard", Run: "^TestRunPageReadsPartOfAWideChain$"}},
	},
	{
		Name:      "trace-reads-whole-chain",
		Guarantee: "a trace reads its chain from the store 100 runs at a time, keeping only their spans",
		Edits: []Edit{{
			File: "trace.go",
			Old:  "f.Limit = min(traceBatch, MaxTraceRuns-len(order))",
			New:  "f.Limit = MaxTraceRuns - len(order)",
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestTraceOfAWideChainIsBounded$"}},
	},
	{
		Name:      "trace-more-not-counted",
		Guarantee: "a trace of a chain wider than MaxTraceRuns says how many runs it leaves out",
		Edits: []Edit{{
			File: "trace.go",
			Old:  "tr.More = max(int(n)-MaxTraceRuns, 0)",
			New:  "tr.More = max(int(n)-MaxTraceRuns, 0) * 0",
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestTraceOfAWideChainIsBounded$"}},
	},
	{
		Name:      "emit-and-wait-reads-whole-chain",
		Guarantee: "EmitAndWait lists the chain's unfinished runs a page at a time, never reading the chain whole",
		Edits: []Edit{{
			File: "wait.go",
			Old:  "Statuses: []store.Status{store.StatusIdle, store.StatusRunning, store.StatusWaiting}, Order: store.OldestFirst, Limit: chainPage}",
			New:  "Order: store.OldestFirst, Limit: 1 << 20}",
		}},
		Tests: []Test{memConf("Engine/EmitAndWaitReadsNoWholeChain")},
	},
	{
		Name:      "node-wait-reads-whole-chain",
		Guarantee: "on a shared store, EmitAndWait counts the chain's active runs after each local event, never reading the chain whole",
		Edits: []Edit{{
			File: "shared.go",
			Old:  "active, err := n.e.store.CountRuns(ctx, store.RunFilter{CorrelationID: corr, Statuses: []store.Status{store.StatusIdle, store.StatusRunning, store.StatusWaiting}})",
			New:  "active, err := func() (int64, error) { rs, err := n.e.store.Chain(ctx, corr); var k int64; for _, r := range rs { if !r.Status.Final() { k++ } }; return k, err }()",
		}},
		Tests: []Test{pgConf("Engine/EmitAndWaitReadsNoWholeChain")},
		Needs: pgURL,
	},
	{
		Name:      "join-reads-children-at-each-look",
		Guarantee: "a join counts its children's ends at each look and reads them, outputs included, once enough have ended",
		Edits: []Edit{{
			File: "children.go",
			Old:  "exist, final, err := e.store.CountEnded(ctx, ids)",
			New:  "_, final, err := e.joinState(ctx, ids); exist := len(slices.Compact(slices.Sorted(slices.Values(ids))))",
		}},
		Tests: []Test{memConf("Children/JoinReadsChildrenOnce")},
	},
	{
		Name:      "sqlite-count-ended-misses-errored",
		Guarantee: "SQLite: CountEnded counts every final run, errored ones included",
		Edits: []Edit{{
			File: "store/sqlitestore/read.go",
			Old:  "func(st store.Status) bool { return !st.Final() })",
			New:  "func(st store.Status) bool { return st == store.StatusErrored || !st.Final() })",
		}},
		Tests: []Test{sqlStore("Store/CountEnded")},
	},
	{
		Name:      "pg-count-ended-counts-active",
		Guarantee: "PostgreSQL: CountEnded counts only final runs",
		Edits: []Edit{{
			File: "store/pgstore/sql.go",
			Old:  "count(*) FILTER (WHERE r.status = ANY($2))",
			New:  "count(*) FILTER (WHERE r.status <> 'running' OR r.status = ANY($2))",
		}},
		Tests: []Test{pgStore("Store/CountEnded")},
		Needs: pgURL,
	},
	{
		Name:      "pg-message-bytes-refused",
		Guarantee: "PostgreSQL: a run whose failure message holds a NUL byte or invalid UTF-8 still ends, its message stored with those bytes replaced",
		Edits: []Edit{{
			File: "store/pgstore/update.go",
			Old:  "\tu.Error, u.ErrorCode, u.Note = pgText(u.Error), pgText(u.ErrorCode), pgText(u.Note)\n",
			New:  "",
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestFailureMessageWithAnyBytesOnPostgres$"}},
		Needs: pgURL,
	},
	{
		Name:      "pg-migration-drops-lease-owners",
		Guarantee: "PostgreSQL: schema version 9 keeps the lease owner of every running run, as a number",
		Edits: []Edit{{
			File: "store/pgstore/migrations/0009_lease_nodes.sql",
			Old:  "UPDATE $S.runs r SET lease_node = o.num FROM $S.owners o WHERE o.owner = r.lease_owner;\n",
			New:  "",
		}},
		Tests: []Test{pgTest("TestLeaseNodesMigrated")},
		Needs: pgURL,
	},
	{
		Name:      "pg-migrated-idle-run-keeps-owner",
		Guarantee: "PostgreSQL: schema version 8 clears the lease owner of idle runs, so a cap at admission counts every idle run",
		Edits: []Edit{{
			File: "store/pgstore/migrations/0008_inflight_index.sql",
			Old:  "UPDATE $S.runs SET lease_owner = NULL WHERE status = 'idle' AND lease_owner IS NOT NULL;\n",
			New:  "",
		}},
		Tests: []Test{pgTest("TestInflightIndexMigrated")},
		Needs: pgURL,
	},
	{
		Name:      "pg-follow-ups-second-transaction",
		Guarantee: "PostgreSQL: a completion and its follow-up runs commit together",
		// Follow-ups without a key or a bound are inserted by their
		// batch's transaction (followUps): the test's are.
		Edits: []Edit{{
			File: "store/pgstore/writer.go",
			Old:  "\t\tf.queue(fb, s.q.insChildren)\n",
			New:  "\t\tpb := &pgx.Batch{}\n\t\tf.queue(pb, s.q.insChildren)\n\t\t_ = s.pool.SendBatch(ctx, pb).Close()\n",
		}},
		Tests: []Test{pgTest("TestFollowUpsCommitWithCompletion")},
		Needs: pgURL,
	},
	{
		Name:      "pg-wake-already-due-waits",
		Guarantee: "a run that falls due while the claim reporting its time is answered is claimed at once",
		Edits: []Edit{{
			File: "shared.go",
			Old:  "\t\t\tn.poke()\n\t\tdefault:\n\t\t\tn.wakeAtTime(res.NextAt)",
			New:  "\t\t\tn.wakeAtTime(res.NextAt)\n\t\tdefault:\n\t\t\tn.wakeAtTime(res.NextAt)",
		}},
		Tests: []Test{{Pkg: ".", Run: "^TestSharedWakeAlreadyDue$"}},
		Needs: pgURL,
	},
	{
		Name:      "pg-follow-ups-after-later-commands",
		Guarantee: "PostgreSQL: a batch's follow-up runs exist for the commands the batch runs after their parents' ends",
		Edits: []Edit{{
			File: "store/pgstore/writer.go",
			Old:  "\tif len(plain) > 0 {\n\t\tfb = &pgx.Batch{}",
			New:  "\tif len(plain) < 0 {\n\t\tfb = &pgx.Batch{}",
		}},
		Tests: []Test{pgTest("TestFollowUpsBeforeLaterCommands")},
		Needs: pgURL,
	},
	{
		Name:      "pg-implicit-timeline-too-wide",
		Guarantee: "PostgreSQL: a run's timeline reads the same whether its entries are written or implicit",
		// Only a first attempt that completed its run may leave its two
		// entries implicit: a later attempt's would be lost.
		Edits: []Edit{{
			File: "store/pgstore/sql.go",
			Old:  "const implicitEnd = `tl = 3 AND status = 'completed'",
			New:  "const implicitEnd = `tl >= 3 AND status = 'completed'",
		}},
		Tests: []Test{pgTest("TestImplicitCompletionTimeline")},
		Needs: pgURL,
	},
	{
		Name:      "pg-flow-keys-not-locked",
		Guarantee: "PostgreSQL: rate limits and per-key concurrency are exact across nodes claiming at once",
		Edits: []Edit{{
			File: "store/pgstore/flow.go",
			Old:  "\tif wait {\n\t\tb.Queue(q.lockKeys, ids)",
			New:  "\tif wait {\n\t\tb.Queue(\"SELECT 1\")",
		}},
		Tests: []Test{pgTest("TestFlowRateExactWhileHeld"), pgTest("TestFlowKeyConcurrencyExactWhileHeld")},
		Needs: pgURL,
	},
	{
		Name:      "pg-caps-not-locked",
		Guarantee: "PostgreSQL: a process's running cap and admission bound are exact across nodes",
		Edits: []Edit{{
			File: "store/pgstore/admit.go",
			Old:  "\tslices.Sort(keys)\n\treturn keys\n",
			New:  "\tslices.Sort(keys)\n\treturn keys[:0]\n",
		}, {
			File: "store/pgstore/admit.go",
			Old:  "keys = append(keys, lockID(s.opts.Schema, \"admit\\x00\"+nr.Process))",
			New:  "",
		}, {
			File: "store/pgstore/claim.go",
			Old:  "\tslices.Sort(keys)\n\treturn keys\n",
			New:  "\tslices.Sort(keys)\n\treturn keys[:0]\n",
		}},
		Tests: []Test{pgTest("TestRunningCapExactAcrossNodes"), pgTest("TestAdmissionBoundExactAcrossNodes")},
		Needs: pgURL,
	},
	{
		Name:      "pg-groups-not-locked",
		Guarantee: "PostgreSQL: a Singleton key has at most one run to run at a time across nodes",
		Edits: []Edit{{
			File: "store/pgstore/admit.go",
			Old:  "\tb.Queue(s.q.lockKeys, keys)",
			New:  "\tb.Queue(\"SELECT $1::bigint[]\", keys)",
		}, {
			File: "store/pgstore/admit.go",
			Old:  "keys = append(keys, s.groupLock(nr.Process, nr.GroupKey))",
			New:  "",
		}},
		Tests: []Test{pgTest("TestSingletonWaitsForAnotherNode")},
		Needs: pgURL,
	},
	{
		Name:      "pg-signal-not-locked",
		Guarantee: "PostgreSQL: a signal and a wait on its key never leave the signal kept while the run waits",
		Edits: []Edit{{
			File: "store/pgstore/signal.go",
			Old:  "\t_, err := w.tx.Exec(w.ctx, w.s.q.lockKey, w.s.signalLock(key))",
			New:  "\tvar err error",
		}, {
			File: "store/pgstore/signal.go",
			Old:  "[]int64{s.signalLock(req.Key)}",
			New:  "nil",
		}, {
			File: "store/pgstore/update.go",
			Old:  "locks = append(locks, s.signalLock(u.Wait.Signal))",
			New:  "",
		}},
		Tests: []Test{pgTest("TestSignalAndWaitRaceAcrossNodes")},
		Needs: pgURL,
	},
	{
		Name:      "node-requeue-drops-claim",
		Guarantee: "PostgreSQL: a run a node claims while the engine that woke it is still requeueing it executes",
		Edits: []Edit{{
			File: "lifecycle.go",
			Old:  "\tcase e.node != nil:\n\t\te.enqueue(itemOf(r))\n",
			New:  "\tcase e.node != nil:\n\t\te.disp.Remove(r.ID)\n\t\te.enqueue(itemOf(r))\n",
		}},
		Tests: []Test{pgConf("Shared/SignalledRunClaimedAtOnce")},
		Needs: pgURL,
	},
	{
		Name:      "settle-queues-woken-deadline",
		Guarantee: "a wait ended before the attempt that began it is settled leaves no deadline queued (EmitAndWait returns when its chain ends)",
		Edits: []Edit{{
			File: "lifecycle.go",
			Old:  "\treturn ok && ep >= r.Epoch\n",
			New:  "\treturn ok && ep >= r.Epoch && false\n",
		}},
		Tests: []Test{memConf("Waits/SignalledBeforeItsWaitSettled"), sqlConf("Waits/SignalledBeforeItsWaitSettled")},
	},
	{
		Name:      "settle-queues-cancelled-retry",
		Guarantee: "an operator's action between an attempt's end and its settle leaves no stale retry queued (EmitAndWait returns when its chain ends)",
		Edits: []Edit{{
			File: "lifecycle.go",
			Old:  "\tif c.u.Epoch == 0 {\n\t\te.supersede(r)\n",
			New:  "\tif c.u.Epoch == 0 {\n",
		}},
		Tests: []Test{memConf("Retry/CancelledBeforeItsRetrySettled"), sqlConf("Retry/CancelledBeforeItsRetrySettled")},
	},
}

// full returns the test as part of the full form only.
func (t Test) full() Test {
	t.Full = true
	return t
}

// short returns the test as part of the short form.
func (t Test) short() Test {
	t.Full = false
	return t
}
