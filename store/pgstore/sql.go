package pgstore

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/yella-go/yella/store"
)

// The column lists, with %[1]s for a table alias ("" or "r."): runCols
// are a whole run, in scanRun's order; claimCols the columns a claim
// returns (the ones it does not set); updCols those an update returns
// (all but the payload and context, which an update never changes).
// A claimed run waits for nothing: claims leave its wait key out.
const (
	runColsT = `%[1]sseq, %[1]sid, %[1]sprocess, %[1]sevent, coalesce(%[1]scorrelation_id, %[1]sid) AS correlation_id, %[1]sparent_id, %[1]sdepth,
	%[1]sstatus, %[1]spayload, %[1]scontext, %[1]soutput, %[1]serror, %[1]serror_code, %[1]sthen_event, %[1]sidem_key,
	%[1]sattempts, %[1]sepoch, %[1]sretry_at, (SELECT owner FROM $S.owners WHERE num = %[1]slease_node) AS lease_owner, %[1]slease_expires,
	%[1]screated_at, %[1]sstarted_at, %[1]scompleted_at, %[1]sversion, %[1]stl` + flowColsT + waitColT + groupColT
	claimColsT = `%[1]sseq, %[1]sid, %[1]sprocess, %[1]sevent, coalesce(%[1]scorrelation_id, %[1]sid) AS correlation_id, %[1]sparent_id, %[1]sdepth,
	%[1]spayload, %[1]scontext, %[1]sattempts, %[1]sepoch, %[1]screated_at` + flowColsT
	updColsT = `%[1]sseq, %[1]sid, %[1]sprocess, %[1]sevent, coalesce(%[1]scorrelation_id, %[1]sid) AS correlation_id, %[1]sparent_id, %[1]sdepth,
	%[1]sstatus, %[1]soutput, %[1]serror, %[1]serror_code, %[1]sthen_event, %[1]sidem_key, %[1]sattempts, %[1]sepoch,
	%[1]sretry_at, %[1]screated_at, %[1]sstarted_at, %[1]scompleted_at, %[1]sversion, %[1]stl` + flowColsT + waitColT + groupColT
	// flowColsT are a run's flow control, fixed at admission: its
	// priority (NULL for 0) and its keys (NULL for none).
	flowColsT = `, coalesce(%[1]spriority, 0) AS priority, coalesce(%[1]srate_key, '') AS rate_key, coalesce(%[1]sconc_key, '') AS conc_key`
	// waitColT is the signal key a waiting run waits for (NULL for
	// none).
	waitColT = `, coalesce(%[1]swait_key, '') AS wait_key`
	// groupColT is the run's group key (NULL for none).
	groupColT = `, coalesce(%[1]sgroup_key, '') AS group_key`
)

// rankExpr is a run's rank (store.Rank) computed from its row: the
// admission time moved earlier by store.PriorityStep (one minute, in
// nanoseconds) per level of priority. It is the key of the runs_idle
// index (migration 0004), which claims read in order: every statement
// ordering idle runs by rank must spell it exactly so.
const rankExpr = `(created_at - coalesce(priority, 0)::bigint * 60000000000)`

var (
	runCols, runColsR = fmt.Sprintf(runColsT, ""), fmt.Sprintf(runColsT, "r.")
	claimColsR        = fmt.Sprintf(claimColsT, "r.")
	updCols, updColsR = fmt.Sprintf(updColsT, ""), fmt.Sprintf(updColsT, "r.")
)

// stillRunning is the status test of a batch's attempt ends and effect
// starts on the run r, found by its primary key (seq = ANY). It is
// spelled IS TRUE so that the planner cannot prove from it the predicate
// of runs_inflight and read that index instead: on a table whose
// statistics lag behind (a new one has none) the estimate of that
// index's scan depends on the row width it guesses, and a wider row
// makes it look cheaper than a batch's lookups by key, while the index
// holds an entry for every run that ran since the last vacuum.
const stillRunning = `(r.status = 'running') IS TRUE`

// implicitEnd, on a row of an attempt end's RETURNING (with the end's
// time, at, and timeline note), says that the attempt's two timeline
// entries are implicit: the first attempt (entries 2 and 3, after the
// implicit admission) of a run it completed, with the completion's note,
// at the run's completed_at. Completed is final: such a run never gets
// another entry, and its timeline is read from its row (Timeline).
const implicitEnd = `tl = 3 AND status = 'completed' AND note = '` + implicitNote + `' AND completed_at IS NOT DISTINCT FROM at`

// implicitNote is the note of an implicit completion entry: the complete
// rule's own.
const implicitNote = "completed"

// finishRows are the rows of a batch's attempt ends, as a FROM item
// named i: $1 each row's ord, $2 its run (named run: an id or a seq),
// then the end's writes.
func finishRows(run, runType string) string {
	return `unnest($1::int[], $2::` + runType + `[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::bool[], $8::bytea[],
				$9::bool[], $10::text[], $11::bool[], $12::bigint[], $13::bigint[], $14::text[], $15::bigint[], $16::text[])
			AS i(ord, ` + run + `, epoch, status, error, code, out_set, output, then_set, then_event, retry_set, retry_at, completed_at, version, at, note)`
}

// finishEnd is an attempt-end statement after its WITH: the update of
// the runs in the rows i (from: the FROM item i and the WHERE clause's
// start, which finds the runs by their primary key) with the SET list
// set, each applied only to its run still running at its epoch (the
// fencing token), returning ret (which holds what the timeline entries
// need); the attempts' timeline entries; more WITH items, if any (more,
// each led by a comma), which may read u; and the rows out it answers.
func finishEnd(from, set, ret, more, out string) string {
	return `u AS (
			UPDATE $S.runs r SET ` + set + `
			FROM ` + from + ` r.seq = i.seq AND ` + stillRunning + ` AND r.epoch = i.epoch
			RETURNING ` + ret + `),
		x AS (SELECT * FROM u WHERE NOT (` + implicitEnd + `)),
		t AS (
			INSERT INTO $S.timeline (run_seq, n, at, status, attempt, error, code, note)
			SELECT seq, tl - 1, started_at, 'running', attempts, '', '', 'claimed' FROM x
			UNION ALL
			SELECT seq, tl, at, status, attempts, error, error_code, note FROM x)` + more + `
		SELECT ` + out + ` FROM u`
}

// finishSet is the SET list of an attempt end whose every write comes
// from its row of finishRows.
const finishSet = `status = i.status, error = i.error, error_code = i.code, lease_node = NULL, lease_expires = NULL,
				output = CASE WHEN i.out_set THEN i.output ELSE r.output END,
				then_event = CASE WHEN i.then_set THEN i.then_event ELSE r.then_event END,
				retry_at = CASE WHEN i.retry_set THEN i.retry_at ELSE r.retry_at END,
				completed_at = i.completed_at,
				version = CASE WHEN i.version = '' THEN r.version ELSE i.version END,
				tl = r.tl + 2`

// The completion form of the ends of held runs, for a batch whose every
// end completes its run as the complete rule does (plainCompletion): the
// rule's constant writes (no error, no retry time, the rule's note) are
// in the statement, and a row carries only what varies, 7 columns
// instead of 16. Each parameter array costs the server a decode per
// element, and the batch's attempt ends are most of what a node writes:
// one engine process on no-op runs did 12% more runs/s with it, its end
// statement 2.8 µs of execution a run cheaper (8 alternating drains).
// completeRows are the rows, as finishRows's FROM item i; completeSet
// the update's SET list (finishSet's writes for those rows); completeRet
// heldEndRet's columns for them.
const (
	completeRows = `unnest($1::int[], $2::bigint[], $3::bigint[], $4::bytea[], $5::text[], $6::bigint[], $7::text[])
			AS i(ord, seq, epoch, output, then_event, at, version)`
	completeSet = `status = 'completed', error = '', error_code = '', lease_node = NULL, lease_expires = NULL,
				output = i.output, then_event = i.then_event, retry_at = NULL, completed_at = i.at,
				version = CASE WHEN i.version = '' THEN r.version ELSE i.version END,
				tl = r.tl + 2`
	completeRet = `i.ord, i.at, '` + implicitNote + `'::text AS note, r.seq, r.status, r.error, r.error_code, r.attempts, r.started_at,
				r.completed_at, r.tl, r.then_event, r.idem_key, r.version, r.group_key, r.wait_key`
)

// The statements of a form of the ends of held runs (heldEnds) are
// indexed by what else they write: effect outcomes of held runs
// (heldWithEffects) and follow-up runs (heldWithFollowUps).
const (
	heldWithEffects = 1 << iota
	heldWithFollowUps
)

// countsItem is a WITH item named n that adds to the status counts the
// changes a statement's other items made: deltas is a query of (status,
// change) rows, summed per status, and the shard is parameter p (the
// writer's row, see shardOf). A statement that counts its own changes
// needs no count from its answer, so a transaction whose every statement
// does sends its COMMIT with them (see tryBatch). The writers of two
// stores rarely share a shard; when they do, their transactions may take
// the rows' locks in different orders, and a deadlock between them fails
// one, which is then tried again as any is (runBatch).
func countsItem(p int, deltas string) string {
	return `n AS (
			INSERT INTO $S.counts (shard, status, n)
			SELECT $` + strconv.Itoa(p) + `::int, st, sum(d) FROM (` + deltas + `) AS d(st, d) GROUP BY st HAVING sum(d) <> 0
			ON CONFLICT (shard, status) DO UPDATE SET n = $S.counts.n + excluded.n)`
}

// endDeltas are the count changes of the attempt ends u (running to each
// end's status), followUpDeltas those of the follow-up runs c (new runs,
// idle or started), and claimDeltas those of the claimed runs u (idle to
// running).
const (
	endDeltas      = `SELECT status, 1 FROM u UNION ALL SELECT 'running', -1 FROM u`
	followUpDeltas = ` UNION ALL SELECT status, 1 FROM c`
	claimDeltas    = `SELECT 'idle', -1 FROM u UNION ALL SELECT 'running', 1 FROM u`
)

// heldEnds are the statements that end attempts of runs this store holds
// from their claims (heldRuns), named by seq ($2) instead of id: no
// lookup, and only what the claim did not return comes back. The rows
// (the FROM item i, of params parameters; the update's SET list set and
// RETURNING ret) are materialized and joined on seq alone, so each run
// is found by one primary-key probe (seq = i.seq): filtering the runs by
// seq = ANY first and then matching each to its row cost a third more
// per run under load, and more as batches grew.
//
// With heldWithEffects the statement also writes effect outcomes of held
// runs (effFinishHeld's rows, after the ends' parameters): one statement
// where a batch has both, as a run's effect and its attempt's end
// usually are (a queued effect outcome rides with the handler's next
// write); the outcomes' ordinals come back after the ends', as -1 - ord.
// With heldWithFollowUps it inserts the follow-up runs of the ends
// (heldFollowUps, after the effect outcomes' parameters, if any): a
// chain's next stage is inserted by the statement that ends the stage
// before it, and every row then has a seventh column, a follow-up's seq.
func heldEnds(rows string, params int, set, ret string) [4]string {
	var q [4]string
	for k := range q {
		next, effects, more, out, tail := params+1, "", "", heldEndOut, ""
		if k&heldWithEffects != 0 {
			effects, next = `
		f AS (`+effFinishHeld(next)+`),`, next+8
		}
		deltas := endDeltas
		if k&heldWithFollowUps != 0 {
			more, out, deltas = heldFollowUps(next), heldEndOut+`, 0::bigint`, endDeltas+followUpDeltas
			next += 17
		}
		more += `,
		` + countsItem(next, deltas)
		if k&heldWithEffects != 0 {
			tail = `
		UNION ALL SELECT -1 - ord, '', '', '', '', ''` + strings.Repeat(`, 0`, k/heldWithFollowUps) + ` FROM f`
		}
		if k&heldWithFollowUps != 0 {
			tail += heldFollowUpOut
		}
		q[k] = `WITH i AS MATERIALIZED (SELECT * FROM ` + rows + `),` + effects + `
		` + finishEnd(`i WHERE`, set, ret, more, out) + tail
	}
	return q
}

// heldFollowUps are the WITH items that insert the follow-up runs of a
// batch's ends of held runs, in the ends' statement, its parameters
// numbered from first: each row's end (the ord of the attempt end that
// admits it), then the run's columns, then its claim if its admission
// starts it (starts: the lease owner's number and the lease's expiry,
// NULL for a run admitted idle). A row is inserted only if its end
// applied (its ord is among u's): a fenced end admits nothing. The ords
// of u are read once, into an array that each row is tested against: as
// a join (IN (SELECT ...)), the planner, which cannot estimate an
// unnest's rows, read the whole unnest of the follow-ups again for every
// applied end, a cost that grew with the square of the batch (1.2 ms of
// a 2.3 ms statement ending 61 runs). The follow-ups' rows come back
// after the others, as heldFollowUpRow with the run's id and seq
// (heldFollowUpOut).
func heldFollowUps(first int) string {
	p := func(k int, typ string) string { return "$" + strconv.Itoa(first+k) + "::" + typ + "[]" }
	return `,
		c AS (
			INSERT INTO $S.runs (id, process, event, correlation_id, parent_id, depth, status, payload, context, created_at,
				priority, rate_key, conc_key, retry_at, group_key, epoch, attempts, lease_node, lease_expires, started_at)
			SELECT c.id, c.process, c.event, c.corr, c.parent, c.depth, CASE WHEN c.node IS NULL THEN 'idle' ELSE 'running' END,
				c.payload, c.context, c.created, c.priority, c.rate_key, c.conc_key, c.retry_at, c.group_key,
				(c.node IS NOT NULL)::int, (c.node IS NOT NULL)::int, c.node, c.lease, CASE WHEN c.node IS NOT NULL THEN c.created END
			FROM unnest(` + p(0, "int") + `, ` + p(1, "text") + `, ` + p(2, "text") + `, ` + p(3, "text") + `, ` + p(4, "text") + `, ` +
		p(5, "text") + `, ` + p(6, "int") + `, ` + p(7, "bytea") + `, ` + p(8, "bytea") + `, ` + p(9, "bigint") + `, ` + p(10, "int") + `, ` +
		p(11, "text") + `, ` + p(12, "text") + `, ` + p(13, "bigint") + `, ` + p(14, "text") + `, ` + p(15, "int") + `, ` + p(16, "bigint") + `)
				WITH ORDINALITY AS c(end_ord, id, process, event, corr, parent, depth, payload, context, created, priority, rate_key, conc_key,
					retry_at, group_key, node, lease, ord)
			WHERE c.end_ord = ANY(ARRAY(SELECT ord FROM u))
			ORDER BY c.ord
			RETURNING seq, id, correlation_id, parent_id, status),
		m AS (INSERT INTO $S.run_ids (id, seq, correlation_id, parent_id) SELECT id, seq, correlation_id, parent_id FROM c)`
}

// heldFollowUpRow is the ord of a follow-up run's row in the results of
// an attempt-end statement with heldFollowUps (below every end's and
// effect outcome's), and heldFollowUpOut that row.
const heldFollowUpRow = -1 << 31

var heldFollowUpOut = `
		UNION ALL SELECT ` + strconv.Itoa(heldFollowUpRow) + `, id, '', '', '', '', seq FROM c`

// heldEndRet and heldEndOut are what finishEnd returns for the ends of
// held runs: only what their claims did not return (heldEnd).
const (
	heldEndRet = `i.ord, i.at, i.note, r.seq, r.status, r.error, r.error_code, r.attempts, r.started_at, r.completed_at, r.tl,
				r.then_event, r.idem_key, r.version, r.group_key, r.wait_key`
	heldEndOut = `ord, then_event, coalesce(idem_key, ''), version, coalesce(group_key, ''), coalesce(wait_key, '')`
)

// effFinishHeld is the statement of the outcomes of effects of held runs,
// its parameters numbered from first: ordinals, run seqs, epochs, keys,
// statuses, outputs, errors, times. Each applies only to its record still
// started at its epoch, and returns its ordinal.
func effFinishHeld(first int) string {
	p := func(k int, typ string) string { return "$" + strconv.Itoa(first+k) + "::" + typ + "[]" }
	return `UPDATE $S.effects e SET status = o.status, output = o.output, error = o.error, completed_at = o.at
		FROM unnest(` + p(0, "int") + `, ` + p(1, "bigint") + `, ` + p(2, "bigint") + `, ` + p(3, "text") + `, ` + p(4, "text") + `, ` +
		p(5, "bytea") + `, ` + p(6, "text") + `, ` + p(7, "bigint") + `) AS o(ord, seq, epoch, key, status, output, error, at)
		WHERE e.run_seq = o.seq AND e.key = o.key AND e.status = 'started' AND e.epoch = o.epoch
		RETURNING o.ord`
}

// claimSet is the SET list of a claim: $1 the owner's number (owners), $2
// lease expiry, $3 now.
const claimSet = `status = 'running', epoch = r.epoch + 1, attempts = r.attempts + 1, lease_node = $1, lease_expires = $2,
	started_at = $3, retry_at = NULL, output = NULL`

// queries are the store's SQL with its schema filled in: every table is
// named with its schema, so statements also run on a caller's connection
// (Tx) whatever its search_path.
type queries struct {
	schema  string // the quoted schema name
	runCols string // runCols with the schema filled in

	insRuns, insChildren, parentExists, lockKey, activeCounts, runningCounts                           string
	insKeyed, selIdemKeys, selKeptKeys                                                                 string
	groupSingleton, groupDebounce, pause, resume, selPaused                                            string
	claimIDs, claimNext, claimMore, promoteIDs, promoteDue                                             string
	flowConcAll, flowRatesAll, flowConc, flowRates, flowCands, flowClaim, flowWaiting, selRates        string
	lockKeys, tryLockKeys                                                                              string
	selForUpdate, update, finishMany, insTL, insTL2                                                    string
	effStartMany, effStartHeld, effFinishMany, effClear, effDone, effWait, setCtx, holdRate, heartbeat string
	sigRun, sigFirst, sigFirstWait, sigWake, sigKeep, sigTake, pruneSignals                            string
	addCounts, idsExist, insRollup, insError, countEnded                                               string
	selRun, selRunsByID, selChain, selTimeline, selRunTL, selEffects, selPending                       string
	selCounts, selAbandoned, selRollups, selErrors                                                     string
	prune, pruneScan, pruneRollups, pruneErrors, pruneKeys, compactRollups                             string
	nodeJoin, nodeAbandon, nodeBeat, nodeGone, nodeLeave, nodeForget                                   string
	nodeList, nodeHeld, ownerNum                                                                       string
	notify                                                                                             string
	effStartNew, effFinishHeld                                                                         string
	// The ends of held runs (heldEnds), in the general form and in the
	// completion form (completeRows).
	finishHeld, completeHeld [4]string
}

// chainSeqs is a query of the seqs of the runs of the chain whose
// correlation id is the parameter p: the follow-ups, whose correlation
// id run_ids indexes, and the root, whose correlation id is its own id
// and stored as NULL. schema is the schema's prefix ("name.").
func chainSeqs(schema, p string) string {
	return `SELECT seq FROM ` + schema + `run_ids WHERE correlation_id = ` + p + ` OR (id = ` + p + ` AND correlation_id IS NULL)`
}

// arrayRows is a FROM item of the rows of parallel arrays, as
// unnest(arrays) AS alias(names) is: row k holds element k of each array
// (NULL past the end of a shorter one). With one name more than arrays,
// the last is the row's position from 1, as WITH ORDINALITY gives it.
// arrays and names are comma-separated lists.
//
// Each array is unnested in a select list, where PostgreSQL steps through
// them together, row by row: a multi-argument unnest in FROM first copies
// each array into a tuple store of its own. For the admission of 500 runs
// (14 arrays) that copy was a sixth of the statement: 10.6-12.9 µs of
// execution a run against 8.7-10.6 (300 admissions each way, alternating,
// three rounds on a local server). For the few dozen rows of a batch's
// attempt ends no difference was measured, and the statements of a few
// rows keep unnest.
func arrayRows(alias, names, arrays string) string {
	ns := splitList(names)
	as := splitList(arrays)
	if len(ns) != len(as) && len(ns) != len(as)+1 {
		panic("pgstore: arrayRows: " + strconv.Itoa(len(ns)) + " names for " + strconv.Itoa(len(as)) + " arrays")
	}
	var b strings.Builder
	b.WriteString("(SELECT ")
	for k, a := range as {
		if k > 0 {
			b.WriteString(", ")
		}
		b.WriteString("unnest(" + a + ") AS " + ns[k])
	}
	if len(ns) > len(as) {
		b.WriteString(", generate_series(1, cardinality(" + as[0] + ")) AS " + ns[len(as)])
	}
	b.WriteString(") AS " + alias)
	return b.String()
}

// splitList splits a comma-separated list, trimming each item.
func splitList(l string) []string {
	items := strings.Split(l, ",")
	for k := range items {
		items[k] = strings.TrimSpace(items[k])
	}
	return items
}

// insRunRows is the statement that inserts runs from parallel arrays, one
// row each, in order, with their run_ids rows, and returns each inserted
// run's seq and id: $1 to $14 the runs' columns (runRows.args). Keyed, $15
// holds each run's idempotency key, and a run whose key was pruned or is
// held by a run is left out (ON CONFLICT DO NOTHING: never an error, so
// the caller reads who holds the keys of the runs missing from its
// answer). Without keys there is no conflict to arbitrate, and no
// speculative insertion for each row to pay for one.
func insRunRows(keyed bool) string {
	idemCol, idemVal, idemArg, idemName, where, conflict := "", "", "", "", "", ""
	if keyed {
		idemCol, idemVal, idemArg, idemName = "idem_key, ", "i.idem, ", ", $15::text[]", ", idem"
		where = `
			WHERE NOT EXISTS (SELECT 1 FROM $S.pruned_keys k WHERE k.event = i.event AND k.key = i.idem AND k.process = i.process)`
		conflict = `
			ON CONFLICT (event, idem_key, process) WHERE idem_key IS NOT NULL DO NOTHING`
	}
	return `WITH r AS (
			INSERT INTO $S.runs (id, process, event, correlation_id, parent_id, depth, status, payload, context, ` + idemCol + `created_at,
				priority, rate_key, conc_key, retry_at, group_key)
			SELECT i.id, i.process, i.event, i.corr, i.parent, i.depth, 'idle', i.payload, i.context, ` + idemVal + `i.created, i.priority,
				i.rate_key, i.conc_key, i.retry_at, i.group_key
			FROM ` + arrayRows("i", `id, process, event, corr, parent, depth, payload, context, created, priority, rate_key, conc_key, retry_at,
					group_key`+idemName+`, ord`, `$1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::bytea[], $8::bytea[],
				$9::bigint[], $10::int[], $11::text[], $12::text[], $13::bigint[], $14::text[]`+idemArg) + where + `
			ORDER BY i.ord` + conflict + `
			RETURNING seq, id, correlation_id, parent_id),
		m AS (INSERT INTO $S.run_ids (id, seq, correlation_id, parent_id) SELECT id, seq, correlation_id, parent_id FROM r)
		SELECT seq, id FROM r`
}

func newQueries(schema string) queries {
	q := queries{schema: schema}
	s := func(sql string) string { return strings.ReplaceAll(sql, "$S.", schema+".") }
	q.runCols = s(runCols)
	q.insRuns = s(`WITH r AS (
			INSERT INTO $S.runs (id, process, event, correlation_id, parent_id, depth, status, payload, context, idem_key, created_at,
				priority, rate_key, conc_key, retry_at, group_key)
			SELECT i.id, i.process, $3, $4, $5, $6, 'idle', $7, $8, $9, $10, i.priority, i.rate_key, i.conc_key, $14::bigint, i.group_key
			FROM unnest($1::text[], $2::text[], $11::int[], $12::text[], $13::text[], $15::text[])
				WITH ORDINALITY AS i(id, process, priority, rate_key, conc_key, group_key, ord)
			ORDER BY i.ord
			ON CONFLICT (event, idem_key, process) WHERE idem_key IS NOT NULL DO NOTHING
			RETURNING seq, id),
		m AS (INSERT INTO $S.run_ids (id, seq, correlation_id, parent_id) SELECT id, seq, $4, $5 FROM r)
		SELECT seq, id FROM r`)
	// The follow-up runs of a batch's attempt ends (no idempotency key, no
	// bound, no group policy): one row each, in order.
	q.insChildren = s(insRunRows(false))
	// The runs of keyed admissions (admitKeyed): insChildren's rows with
	// each run's idempotency key ($15). A run is not inserted when its
	// key was pruned (pruned_keys) or a run holds it (the unique index:
	// an earlier run, of this statement too, or a concurrent admission's,
	// which the insert waits for).
	q.insKeyed = s(insRunRows(true))
	// The runs that hold keys, and the pruned keys, of the (event, key,
	// process) rows of $1, $2 and $3.
	q.selIdemKeys = s(`SELECT ` + runColsR + ` FROM unnest($1::text[], $2::text[], $3::text[]) AS k(event, key, process)
		JOIN $S.runs r ON r.event = k.event AND r.idem_key = k.key AND r.process = k.process AND r.idem_key IS NOT NULL`)
	q.selKeptKeys = s(`SELECT p.event, p.key, p.process, p.run_id, p.created_at FROM unnest($1::text[], $2::text[], $3::text[]) AS k(event, key, process)
		JOIN $S.pruned_keys p ON p.event = k.event AND p.key = k.key AND p.process = k.process`)
	q.parentExists = s(`SELECT EXISTS (SELECT 1 FROM $S.run_ids WHERE id = $1)`)
	q.lockKey = `SELECT pg_advisory_xact_lock($1)`
	// The locks of several keys ($1), taken in the array's order; or only
	// tried, returning the keys another transaction holds.
	q.lockKeys = `SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) WITH ORDINALITY AS l(k, ord) ORDER BY ord`
	q.tryLockKeys = `SELECT k FROM unnest($1::bigint[]) AS l(k) WHERE NOT pg_try_advisory_xact_lock(k)`
	// The idle and running runs of the processes ($1), and their running
	// runs, from runs_inflight: the entries with no lease owner are idle
	// runs (an idle run holds no lease: every transition out of running
	// clears it), those with one are running runs (a claim sets it), so
	// that counting the running runs reads none of a backlog. The idle
	// runs are counted per process, each an equality on both of the
	// index's columns: a list of processes on its second column would let
	// the planner read every idle run and filter them.
	q.activeCounts = s(`SELECT p.name,
			(SELECT count(*) FROM $S.runs WHERE lease_node IS NULL AND status = 'idle' AND process = p.name) +
			(SELECT count(*) FROM $S.runs WHERE lease_node IS NOT NULL AND status = 'running' AND process = p.name)
		FROM unnest($1::text[]) AS p(name)`)
	q.runningCounts = s(`SELECT process, count(*) FROM $S.runs WHERE lease_node IS NOT NULL AND status = 'running' AND process = ANY($1) GROUP BY process`)

	// Groups (see admitGroups), under the group's lock. The run of
	// process $1 and group key $2 that stands in for a Singleton
	// admission: the latest one idle, running or waiting (runs_group,
	// read backwards).
	q.groupSingleton = s(`SELECT ` + updCols + ` FROM $S.runs
		WHERE process = $1 AND group_key = $2 AND status IN ('idle', 'running', 'waiting') ORDER BY seq DESC LIMIT 1`)
	// A Debounce admission: the latest run of the group that is idle and
	// never started, locked (a claim committed meanwhile makes it fail the
	// recheck, and the one before it is taken), takes the admission's
	// payload ($3), context ($4) and start ($5, NULL: at once), with one
	// timeline entry at $6; moved says whether its start changed. The
	// run's status is tested as runs_group's predicate, and the test that
	// it is idle spelled IS TRUE, so that the planner cannot read
	// runs_inflight (or runs_idle) instead: every active run of the process,
	// sorted.
	q.groupDebounce = s(`WITH g AS (
			SELECT seq, retry_at FROM $S.runs
			WHERE process = $1 AND group_key = $2 AND status IN ('idle', 'running', 'waiting') AND (status = 'idle' AND attempts = 0) IS TRUE
			ORDER BY seq DESC LIMIT 1 FOR UPDATE),
		u AS (
			UPDATE $S.runs r SET payload = $3, context = $4, retry_at = $5::bigint, tl = r.tl + 1 FROM g WHERE r.seq = g.seq
			RETURNING g.retry_at IS DISTINCT FROM r.retry_at AS moved, ` + updColsR + `),
		t AS (
			INSERT INTO $S.timeline (run_seq, n, at, status, attempt, error, code, note)
			SELECT seq, tl, $6, 'idle', attempts, '', '', 'debounced' FROM u)
		SELECT * FROM u`)
	// Paused schedules: a pause keeps its first time.
	q.pause = s(`INSERT INTO $S.paused_schedules (name, paused_at) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`)
	q.resume = s(`DELETE FROM $S.paused_schedules WHERE name = $1`)
	q.selPaused = s(`SELECT name, paused_at FROM $S.paused_schedules`)

	// A claim by id keeps the rate key's new theoretical arrival time
	// ($5, per id; NULL for none) on the run, if it has a rate key.
	q.claimIDs = s(`UPDATE $S.runs r SET ` + claimSet + `,
			rate_tat = CASE WHEN r.rate_key IS NULL THEN r.rate_tat ELSE coalesce(i.tat, r.rate_tat) END
		FROM unnest($4::text[], $5::bigint[]) WITH ORDINALITY AS i(id, tat, ord) JOIN $S.run_ids m ON m.id = i.id
		WHERE r.seq = m.seq AND r.status = 'idle' AND (r.retry_at IS NULL OR r.retry_at <= $3)
		RETURNING i.ord, ` + claimColsR)
	// The first due idle runs of the given processes in rank order, skipping those
	// another transaction is claiming: no node waits for another's rows.
	// The runs are picked into an array, which the update reads by primary
	// key: a join would let the statement's generic plan (its LIMIT is a
	// parameter) hash the whole table. ClaimNext runs it with sorting and
	// bitmap scans off (claimPlan), so that the runs are read in claim order
	// from runs_idle and nothing else: with statistics that lag behind a
	// growing backlog (a new table has none), the planner would otherwise
	// read every idle run of the processes (a bitmap of runs_idle) and
	// sort them, at every claim.
	q.claimNext = s(`WITH u AS (UPDATE $S.runs r SET ` + claimSet + `
		WHERE r.seq = ANY(ARRAY(
			SELECT seq FROM $S.runs WHERE status = 'idle' AND (retry_at IS NULL OR retry_at <= $3) AND process = ANY($4)
			ORDER BY ` + rankExpr + `, seq LIMIT $5 FOR UPDATE SKIP LOCKED))
		RETURNING 0::bigint, ` + claimColsR + `),
		` + countsItem(6, claimDeltas) + `
		SELECT * FROM u`)
	// Whether the processes ($1) have idle runs (the entries of
	// runs_inflight with no lease owner, looked up per process as
	// activeCounts does: a LIMIT keeps each lookup its own, which a join
	// would turn into one read of every idle run), and the earliest time
	// after $2 at which one is due, read from runs_delayed in time order
	// (the processes' test spelled IS TRUE, so that it cannot make
	// runs_inflight look cheaper).
	q.claimMore = s(`SELECT EXISTS (SELECT 1 FROM unnest($1::text[]) AS p(name),
			LATERAL (SELECT 1 FROM $S.runs WHERE lease_node IS NULL AND status = 'idle' AND process = p.name LIMIT 1) r),
		(SELECT retry_at FROM $S.runs WHERE status = 'idle' AND retry_at > $2 AND (process = ANY($1)) IS TRUE ORDER BY retry_at LIMIT 1)`)
	// A waiting run whose deadline has passed is claimable as a due idle
	// run is: a claim first makes it idle (its wait key cleared, its
	// retry_at, not after now, kept), in its own transaction, and then
	// claims it with the idle runs, in rank order. No timeline entry is
	// written: the claim's is the run's next. promoteIDs does so for the
	// runs a claim names ($1) at now ($2). promoteDue does so for up to $3
	// runs of the processes ($2) due at $1, read from runs_wait_due by
	// deadline, skipping those another transaction holds, and returns how
	// many it made idle and the earliest deadline after now of the
	// others, read from the same index in order (the waits to come may be
	// many: long sleeps), which the claim reports as a NextAt. With no
	// wait due it reads an empty range of the index and writes nothing:
	// one statement, sent in the claim's round trip, and no more for the
	// claim's report (claimMore) of what it left, which runs whenever a
	// claim falls short of its limit. (Measured on 10,000 idle runs: 20
	// to 40 µs of server time a claim; the two subqueries claimMore would
	// need for the deadlines cost it 200 µs more, mostly in planning,
	// which it does at each call.)
	q.promoteIDs = s(`UPDATE $S.runs r SET status = 'idle', wait_key = NULL
		FROM $S.run_ids m WHERE m.id = ANY($1) AND r.seq = m.seq AND r.status = 'waiting' AND r.retry_at <= $2`)
	q.promoteDue = s(`WITH p AS (
			UPDATE $S.runs r SET status = 'idle', wait_key = NULL
			WHERE r.seq = ANY(ARRAY(
				SELECT seq FROM $S.runs WHERE status = 'waiting' AND retry_at IS NOT NULL AND retry_at <= $1 AND process = ANY($2)
				ORDER BY retry_at LIMIT $3 FOR UPDATE SKIP LOCKED)) AND r.status = 'waiting'
			RETURNING 1),
		` + countsItem(4, `SELECT 'idle', 1 FROM p UNION ALL SELECT 'waiting', -1 FROM p`) + `
		SELECT (SELECT count(*) FROM p),
			(SELECT retry_at FROM $S.runs WHERE status = 'waiting' AND retry_at > $1 AND process = ANY($2) ORDER BY retry_at LIMIT 1)`)

	// Flow control (see claimFlows). The keys' states: running runs per
	// concurrency key (runs_conc), and per rate key the largest
	// theoretical arrival time after now, $1 (runs_rate_tat); of every key,
	// or of the keys given.
	q.flowConcAll = s(`SELECT conc_key, count(*) FROM $S.runs WHERE status = 'running' AND conc_key IS NOT NULL GROUP BY conc_key`)
	q.flowRatesAll = s(`SELECT rate_key, max(rate_tat) FROM $S.runs WHERE rate_tat > $1 AND rate_key IS NOT NULL GROUP BY rate_key`)
	q.flowConc = s(`SELECT conc_key, count(*) FROM $S.runs WHERE status = 'running' AND conc_key = ANY($1) GROUP BY conc_key`)
	q.flowRates = s(`SELECT rate_key, max(rate_tat) FROM $S.runs WHERE rate_tat > $1 AND rate_key = ANY($2) GROUP BY rate_key`)
	q.selRates = q.flowRatesAll
	// Up to $6 due idle runs of process $2 in rank order, but those of
	// the keys that are full ($3: concurrency keys, $4: rate keys) and
	// those already looked at ($5), locked; rows another node is claiming
	// are skipped.
	q.flowCands = s(`SELECT seq, created_at, coalesce(priority, 0), coalesce(rate_key, ''), coalesce(conc_key, '') FROM $S.runs
		WHERE status = 'idle' AND (retry_at IS NULL OR retry_at <= $1) AND process = $2
			AND (conc_key IS NULL OR conc_key <> ALL($3)) AND (rate_key IS NULL OR rate_key <> ALL($4)) AND seq <> ALL($5)
		ORDER BY ` + rankExpr + `, seq LIMIT $6 FOR UPDATE SKIP LOCKED`)
	// The claim of the runs picked ($4, locked by this transaction), each
	// with its rate key's new theoretical arrival time ($5; NULL for none).
	q.flowClaim = s(`UPDATE $S.runs r SET ` + claimSet + `, rate_tat = coalesce(i.tat, r.rate_tat)
		FROM unnest($4::bigint[], $5::bigint[]) AS i(seq, tat)
		WHERE r.seq = ANY($4) AND r.seq = i.seq AND r.status = 'idle'
		RETURNING 0::bigint, ` + claimColsR)
	// The earliest of the times ($2) at which rate keys ($1) allow a
	// start, among the keys an idle run of the processes ($3) waits for.
	q.flowWaiting = s(`SELECT min(k.at) FROM unnest($1::text[], $2::bigint[]) AS k(key, at)
		WHERE EXISTS (SELECT 1 FROM $S.runs WHERE status = 'idle' AND rate_key = k.key AND process = ANY($3))`)

	// The run to update, locked, and whether its lease owner is a node
	// whose heartbeat is older than the timeout ($2 seconds) on the
	// database's clock.
	q.selForUpdate = s(`SELECT ` + runColsR + `,
		EXISTS (SELECT 1 FROM $S.owners o JOIN $S.nodes n ON n.owner = o.owner WHERE o.num = r.lease_node AND n.seen < now() - make_interval(secs => $2))
		FROM $S.runs r WHERE r.seq = (SELECT seq FROM $S.run_ids WHERE id = $1) FOR UPDATE OF r`)
	// The SET list of every transition, the field writes of its rule of
	// the transition table (see setArgs); $15 is the run's seq.
	q.update = s(`UPDATE $S.runs SET status = $1, error = $2, error_code = $3, lease_node = NULL, lease_expires = NULL,
		output = CASE WHEN $4 THEN $5 ELSE output END,
		then_event = CASE WHEN $6 THEN $7 ELSE then_event END,
		retry_at = CASE WHEN $8 THEN $9 ELSE retry_at END,
		completed_at = $10,
		attempts = CASE WHEN $11 THEN 0 ELSE greatest(attempts - $13::int, 0) END,
		version = CASE WHEN $12 = '' THEN version ELSE $12 END,
		wait_key = $14,
		tl = tl + CASE status WHEN 'running' THEN 2 ELSE 1 END
		WHERE seq = $15 RETURNING ` + updCols)
	// The end of many attempts in one statement: each row applies only if
	// its run is still running at its epoch (the fencing token), and the
	// attempt's two timeline entries are written with it, unless they are
	// implicit: a run completed by its first attempt with the rule's note
	// at its completed_at has a timeline the run's row alone gives (see
	// Timeline), and writes none.
	// The runs' seqs are looked up first (materialized), so that each run
	// is then found by its primary key (seq = ANY: never through
	// runs_inflight, whose entries of finished runs stay until a vacuum).
	q.finishMany = s(`WITH i AS MATERIALIZED (
			SELECT i.*, m.seq FROM ` + finishRows("id", "text") + `
			JOIN $S.run_ids m ON m.id = i.id),
		` + finishEnd(`i WHERE r.seq = ANY(ARRAY(SELECT seq FROM i)) AND`, finishSet, `i.ord, i.at, i.note, `+updColsR, "", `ord, `+updCols))
	// The same for runs this store holds from their claims (heldEnds).
	for k, sql := range heldEnds(finishRows("seq", "bigint"), 16, finishSet, heldEndRet) {
		q.finishHeld[k] = s(sql)
	}
	for k, sql := range heldEnds(completeRows, 7, completeSet, completeRet) {
		q.completeHeld[k] = s(sql)
	}
	q.insTL = s(`INSERT INTO $S.timeline (run_seq, n, at, status, attempt, error, code, note) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`)
	// The two entries of an attempt's end: its claim ($4: the attempt
	// it started) and its end ($10: the run's attempts after it, fewer
	// when the end refunds the attempt).
	q.insTL2 = s(`INSERT INTO $S.timeline (run_seq, n, at, status, attempt, error, code, note)
		VALUES ($1, $2 - 1, $3, 'running', $4, '', '', 'claimed'), ($1, $2, $5, $6, $10, $7, $8, $9)`)

	q.effStartMany = s(`WITH m AS MATERIALIZED (
			SELECT i.ord, i.key, i.epoch, i.at, m.seq
			FROM unnest($1::int[], $2::text[], $3::bigint[], $4::text[], $5::bigint[]) AS i(ord, id, epoch, key, at)
			JOIN $S.run_ids m ON m.id = i.id),
		i AS (
			SELECT m.ord, r.seq, m.key, r.epoch, m.at
			FROM m JOIN $S.runs r ON r.seq = m.seq AND ` + stillRunning + ` AND r.epoch = m.epoch
			WHERE r.seq = ANY(ARRAY(SELECT seq FROM m))),
		w AS (
			INSERT INTO $S.effects (run_seq, key, status, epoch, output, error, started_at, completed_at)
			SELECT seq, key, 'started', epoch, NULL, '', at, NULL FROM i
			ON CONFLICT (run_seq, key) DO UPDATE SET status = 'started', epoch = excluded.epoch, output = NULL, error = '',
				started_at = excluded.started_at, completed_at = NULL
			WHERE $S.effects.status <> 'completed'
			RETURNING run_seq, key)
		SELECT i.ord FROM i JOIN w ON w.run_seq = i.seq AND w.key = i.key`)
	// The same for runs this store holds from their claims (heldRuns),
	// named by seq ($2) instead of id: no lookup, and each run found by
	// one primary-key probe (seq = i.seq), as heldEnds find theirs.
	q.effStartHeld = s(`WITH i AS MATERIALIZED (
			SELECT i.ord, i.seq, i.key, i.epoch, i.at
			FROM unnest($1::int[], $2::bigint[], $3::bigint[], $4::text[], $5::bigint[]) AS i(ord, seq, epoch, key, at)),
		w AS (
			INSERT INTO $S.effects (run_seq, key, status, epoch, output, error, started_at, completed_at)
			SELECT i.seq, i.key, 'started', i.epoch, NULL, '', i.at, NULL
			FROM i JOIN $S.runs r ON r.seq = i.seq AND ` + stillRunning + ` AND r.epoch = i.epoch
			ON CONFLICT (run_seq, key) DO UPDATE SET status = 'started', epoch = excluded.epoch, output = NULL, error = '',
				started_at = excluded.started_at, completed_at = NULL
			WHERE $S.effects.status <> 'completed'
			RETURNING run_seq, key)
		SELECT i.ord FROM i JOIN w ON w.run_seq = i.seq AND w.key = i.key`)
	// The same for keys that have no record (heldRuns.newEffect): a
	// plain insert of the starts whose runs are still running at their
	// epochs, which are the starts that apply (an insert that met a
	// record would fail the statement), without the conflict check of an
	// upsert, which cost twice as much a row (3.5-4.7 against 7.3-8.0 µs,
	// measured on batches of 64).
	q.effStartNew = s(`WITH i AS MATERIALIZED (
			SELECT i.ord, i.seq, i.key, i.epoch, i.at
			FROM unnest($1::int[], $2::bigint[], $3::bigint[], $4::text[], $5::bigint[]) AS i(ord, seq, epoch, key, at)),
		a AS MATERIALIZED (SELECT i.* FROM i JOIN $S.runs r ON r.seq = i.seq AND ` + stillRunning + ` AND r.epoch = i.epoch),
		w AS (
			INSERT INTO $S.effects (run_seq, key, status, epoch, output, error, started_at, completed_at)
			SELECT seq, key, 'started', epoch, NULL, '', at, NULL FROM a)
		SELECT ord FROM a`)
	// The runs' seqs are looked up first (materialized), so that each
	// effect is then found by its whole primary key.
	q.effFinishMany = s(`WITH i AS MATERIALIZED (
			SELECT i.*, r.seq FROM unnest($1::int[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::bytea[], $7::text[], $8::bigint[])
				AS i(ord, id, epoch, key, status, output, error, at)
			JOIN $S.run_ids r ON r.id = i.id)
		UPDATE $S.effects e SET status = i.status, output = i.output, error = i.error, completed_at = i.at
		FROM i WHERE e.run_seq = i.seq AND e.key = i.key AND e.status = 'started' AND e.epoch = i.epoch
		RETURNING i.ord`)
	// The same for runs this store holds from their claims (heldRuns),
	// named by seq ($2) instead of id: each effect found by its whole
	// primary key, no lookup.
	q.effFinishHeld = s(effFinishHeld(1))
	// The effects left started and the waits that no signal ended.
	q.effClear = s(`DELETE FROM $S.effects WHERE run_seq = $1 AND status IN ('started', 'waiting')`)
	q.effDone = s(`INSERT INTO $S.effects (run_seq, key, status, epoch, output, error, started_at, completed_at)
		VALUES ($1, $2, 'completed', $3, $4, '', $5, $5)
		ON CONFLICT (run_seq, key) DO UPDATE SET status = 'completed', output = excluded.output, error = '', completed_at = excluded.completed_at`)
	// A wait's record ($2) at the run's epoch ($3), begun at $4; a record
	// of the key already there only changes status.
	q.effWait = s(`INSERT INTO $S.effects (run_seq, key, status, epoch, output, error, started_at, completed_at)
		VALUES ($1, $2, 'waiting', $3, NULL, '', $4, NULL)
		ON CONFLICT (run_seq, key) DO UPDATE SET status = 'waiting'`)

	// Signals (see Signal). The run a signal names ($1), locked; the
	// waiting run of a key ($1) admitted first, locked, skipping rows
	// another transaction holds, or waiting for them.
	q.sigRun = s(`SELECT seq, status, coalesce(wait_key, '') FROM $S.runs WHERE seq = (SELECT seq FROM $S.run_ids WHERE id = $1) FOR UPDATE`)
	q.sigFirst = s(`SELECT seq FROM $S.runs WHERE status = 'waiting' AND wait_key = $1 ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED`)
	q.sigFirstWait = s(`SELECT seq FROM $S.runs WHERE status = 'waiting' AND wait_key = $1 ORDER BY seq LIMIT 1 FOR UPDATE`)
	// The wake of a waiting run ($1, locked) at $2: its wait records
	// completed with the payload ($3), the run idle and due, one timeline
	// entry.
	q.sigWake = s(`WITH e AS (
			UPDATE $S.effects SET status = 'completed', output = $3, error = '', completed_at = $2 WHERE run_seq = $1 AND status = 'waiting'),
		u AS (
			UPDATE $S.runs SET status = 'idle', retry_at = NULL, wait_key = NULL, tl = tl + 1 WHERE seq = $1 AND status = 'waiting'
			RETURNING ` + updCols + `),
		t AS (
			INSERT INTO $S.timeline (run_seq, n, at, status, attempt, error, code, note)
			SELECT seq, tl, $2, 'idle', attempts, '', '', 'signalled' FROM u)
		SELECT * FROM u`)
	q.sigKeep = s(`INSERT INTO $S.signals (key, payload, keep_until) VALUES ($1, $2, $3)`)
	// The oldest signal kept for a key ($1) still kept at $2, taken.
	q.sigTake = s(`DELETE FROM $S.signals WHERE seq = (
			SELECT seq FROM $S.signals WHERE key = $1 AND keep_until > $2 ORDER BY seq LIMIT 1 FOR UPDATE)
		RETURNING payload`)
	q.setCtx = s(`UPDATE $S.runs SET context = $1 WHERE seq = (SELECT seq FROM $S.run_ids WHERE id = $2) AND status = 'running' AND epoch = $3`)
	q.holdRate = s(`UPDATE $S.runs SET rate_tat = greatest(rate_tat, $1) WHERE seq = (SELECT seq FROM $S.run_ids WHERE id = $2)
		AND status = 'running' AND epoch = $3`)
	q.heartbeat = s(`UPDATE $S.runs SET lease_expires = $1 WHERE status = 'running'
		AND lease_node = (SELECT num FROM $S.owners WHERE owner = $2) RETURNING id, epoch`)
	q.addCounts = s(`INSERT INTO $S.counts (shard, status, n) SELECT $1, st, d FROM unnest($2::text[], $3::bigint[]) AS c(st, d)
		ON CONFLICT (shard, status) DO UPDATE SET n = $S.counts.n + excluded.n`)
	q.idsExist = s(`SELECT id FROM $S.run_ids WHERE id = ANY($1)`)
	q.insRollup = s(`INSERT INTO $S.rollups (bucket, process, counts, hists) SELECT * FROM unnest($1::bigint[], $2::text[], $3::bytea[], $4::bytea[])`)
	q.insError = s(`INSERT INTO $S.errors (at, kind, process, run_id, effect_key, context, message)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])`)

	q.selRun = s(`SELECT ` + runCols + ` FROM $S.runs WHERE seq = (SELECT seq FROM $S.run_ids WHERE id = $1)`)
	// Each run once: run_ids has one row per id, whatever $1 repeats.
	q.countEnded = s(`SELECT count(*), count(*) FILTER (WHERE r.status = ANY($2)) FROM $S.run_ids i JOIN $S.runs r ON r.seq = i.seq WHERE i.id = ANY($1)`)
	q.selRunsByID = s(`SELECT ` + runCols + ` FROM $S.runs WHERE seq = ANY(ARRAY(SELECT seq FROM $S.run_ids WHERE id = ANY($1)))`)
	// A root's correlation id is stored as NULL (it is its own id):
	// id = $1 alone would also match a child named by its own id.
	q.selChain = s(`SELECT ` + runCols + ` FROM $S.runs WHERE seq IN (` + chainSeqs("$S.", "$1") + `) ORDER BY depth, seq`)
	q.selTimeline = s(`SELECT n, at, status, attempt, error, code, note FROM $S.timeline WHERE run_seq = $1 ORDER BY n`)
	q.selRunTL = s(`SELECT seq, status, attempts, created_at, started_at, completed_at, error, error_code, tl FROM $S.runs WHERE seq = (SELECT seq FROM $S.run_ids WHERE id = $1)`)
	q.selEffects = s(`SELECT e.key, e.status, e.epoch, e.output, e.error, e.started_at, e.completed_at
		FROM $S.effects e WHERE e.run_seq = (SELECT seq FROM $S.run_ids WHERE id = $1) ORDER BY e.key`)
	q.selPending = s(`SELECT id, seq, process, coalesce(correlation_id, id), retry_at, created_at` + fmt.Sprintf(flowColsT, "") + `,
		status = 'waiting' FROM $S.runs
		WHERE (status = 'idle' OR (status = 'waiting' AND retry_at IS NOT NULL)) AND seq > $1 ORDER BY seq LIMIT $2`)
	q.selCounts = s(`SELECT status, sum(n)::bigint FROM $S.counts GROUP BY status`)
	// Abandoned runs: those of a node whose heartbeat is older than the
	// timeout ($4 seconds) on the database's clock, whatever their leases
	// say; and those whose lease expired at the caller's now ($2), if the
	// caller holds them or their owner is no node (a live node's lease is
	// never judged on another node's clock).
	q.selAbandoned = s(`SELECT ` + runColsR + ` FROM $S.runs r
		LEFT JOIN $S.owners o ON o.num = r.lease_node
		LEFT JOIN $S.nodes n ON n.owner = o.owner
		WHERE r.lease_node IS NOT NULL AND r.status = 'running' AND (n.seen < now() - make_interval(secs => $4)
			OR (r.lease_expires <= $2 AND (o.owner = $1 OR n.owner IS NULL)))
		ORDER BY r.seq LIMIT $3`)
	q.selRollups = s(`SELECT bucket, process, counts, hists FROM $S.rollups WHERE bucket >= $1 AND bucket < $2 ORDER BY bucket, process, id`)
	q.selErrors = s(`SELECT id, at, kind, process, run_id, effect_key, context, message FROM $S.errors
		WHERE at >= $1 AND at <= $2 ORDER BY at DESC, id DESC LIMIT $3`)

	// Retention's window: at most $3 runs in seq order after $2, each
	// with whether it was admitted at or after the cut $1 (then it cannot
	// have completed before it: the pass is over) and whether it is to be
	// pruned (see prune; the child lookup is made for those runs only).
	q.pruneScan = s(`SELECT seq, created_at >= $1,
		CASE WHEN status = 'completed' AND completed_at < $1 AND (rate_tat IS NULL OR rate_tat < $1)
			THEN NOT EXISTS (SELECT 1 FROM $S.run_ids c WHERE c.parent_id = r.id) ELSE false END
		FROM $S.runs r WHERE seq > $2 ORDER BY seq LIMIT $3`)
	// One bounded batch of retention, the runs $2 found by pruneScan,
	// checked again under their locks, leaves first: a run with a child
	// left is kept. The keys of the deleted runs are kept with them. A run
	// whose rate_tat is not before the cut is kept too: it may hold its
	// rate key's state (RateStates), which must outlive its run.
	q.prune = s(`WITH v AS (
			SELECT seq FROM $S.runs r WHERE seq = ANY($2::bigint[])
			AND status = 'completed' AND completed_at < $1 AND (rate_tat IS NULL OR rate_tat < $1)
			AND NOT EXISTS (SELECT 1 FROM $S.run_ids c WHERE c.parent_id = r.id)
			FOR UPDATE SKIP LOCKED),
		k AS (
			INSERT INTO $S.pruned_keys (event, key, process, run_id, created_at)
			SELECT event, idem_key, process, id, created_at FROM $S.runs WHERE seq IN (SELECT seq FROM v) AND idem_key IS NOT NULL
			ON CONFLICT (event, key, process) DO UPDATE SET run_id = excluded.run_id, created_at = excluded.created_at),
		t AS (DELETE FROM $S.timeline WHERE run_seq IN (SELECT seq FROM v)),
		e AS (DELETE FROM $S.effects WHERE run_seq IN (SELECT seq FROM v)),
		d AS (DELETE FROM $S.runs WHERE seq IN (SELECT seq FROM v) RETURNING seq, id),
		m AS (DELETE FROM $S.run_ids WHERE id IN (SELECT id FROM d))
		SELECT seq FROM d`)
	q.pruneRollups = s(`DELETE FROM $S.rollups WHERE id IN (SELECT id FROM $S.rollups WHERE bucket < $1 LIMIT $2)`)
	// Up to $2 groups (process and bucket) of several rollup rows before
	// $1, their rows taken out to be merged; rows another node is
	// compacting are skipped.
	q.compactRollups = s(`DELETE FROM $S.rollups WHERE id IN (
			SELECT id FROM $S.rollups WHERE (bucket, process) IN (
				SELECT bucket, process FROM $S.rollups WHERE bucket < $1
				GROUP BY bucket, process HAVING count(*) > 1 ORDER BY bucket LIMIT $2)
			FOR UPDATE SKIP LOCKED)
		RETURNING bucket, process, counts, hists`)
	q.pruneSignals = s(`DELETE FROM $S.signals WHERE seq IN (SELECT seq FROM $S.signals WHERE keep_until < $1 ORDER BY keep_until LIMIT $2)`)
	q.pruneErrors = s(`DELETE FROM $S.errors WHERE id IN (SELECT id FROM $S.errors WHERE at < $1 LIMIT $2)`)
	q.pruneKeys = s(`DELETE FROM $S.pruned_keys WHERE (event, key, process) IN
		(SELECT event, key, process FROM $S.pruned_keys WHERE created_at < $1 ORDER BY created_at LIMIT $2)`)

	// A node joins unless a live node (heartbeat younger than the timeout,
	// $2 seconds) has its id; rejoined says it replaced a gone one.
	q.nodeJoin = s(`INSERT INTO $S.nodes (owner) VALUES ($1)
		ON CONFLICT (owner) DO UPDATE SET joined_at = now(), seen = now(), gone = false
		WHERE $S.nodes.seen < now() - make_interval(secs => $2)
		RETURNING (xmax <> 0) AS rejoined`)
	// The runs an earlier process left under a rejoining id are abandoned:
	// their leases end now.
	q.nodeAbandon = s(`UPDATE $S.runs SET lease_expires = 0 WHERE status = 'running'
		AND lease_node = (SELECT num FROM $S.owners WHERE owner = $1)`)
	q.nodeBeat = s(`UPDATE $S.nodes SET seen = now(), gone = false WHERE owner = ANY($1)`)
	q.nodeGone = s(`UPDATE $S.nodes SET gone = true WHERE NOT gone AND seen < now() - make_interval(secs => $1) RETURNING owner`)
	q.nodeLeave = s(`DELETE FROM $S.nodes WHERE owner = ANY($1)`)
	// Gone nodes that hold nothing are forgotten after a day (each node's
	// owner number read as an array: as a join, the planner read all of
	// runs_inflight).
	q.nodeForget = s(`DELETE FROM $S.nodes n WHERE gone AND seen < now() - interval '1 day'
		AND NOT EXISTS (SELECT 1 FROM $S.runs r WHERE r.status = 'running'
			AND r.lease_node = ANY(ARRAY(SELECT num FROM $S.owners o WHERE o.owner = n.owner)))`)
	// The nodes for operators, live first ($1: the timeout in seconds),
	// and the runs the listed ones hold (runs_inflight).
	q.nodeList = s(`SELECT owner, joined_at, seen, extract(epoch FROM now() - seen)::float8,
		gone OR seen < now() - make_interval(secs => $1) AS lost
		FROM $S.nodes ORDER BY lost, owner LIMIT $2`)
	q.nodeHeld = s(`SELECT o.owner, r.process, count(*) FROM $S.owners o JOIN $S.runs r ON r.lease_node = o.num AND r.status = 'running'
		WHERE o.owner = ANY($1) GROUP BY o.owner, r.process`)
	// An owner's number, given on its first claim (ownerNum). Rows
	// another transaction inserted are not in this statement's snapshot:
	// a concurrent first claim of the owner elsewhere returns no row.
	q.ownerNum = s(`WITH i AS (INSERT INTO $S.owners (owner) VALUES ($1) ON CONFLICT (owner) DO NOTHING RETURNING num)
		SELECT num FROM i UNION ALL SELECT num FROM $S.owners WHERE owner = $1`)
	q.notify = `SELECT pg_notify($1, $2)`
	return q
}

type scanner interface{ Scan(...any) error }

// scanRun reads one row of runCols (and then extra columns).
func scanRun(sc scanner, extra ...any) (store.Run, int, error) {
	var r store.Run
	var corr, status string
	var parent, idem, owner *string
	var retry, expires, started, completed *int64
	var created int64
	var tl int
	dest := []any{&r.Seq, &r.ID, &r.Process, &r.Event, &corr, &parent, &r.Depth, &status,
		(*[]byte)(&r.Payload), (*[]byte)(&r.Context), (*[]byte)(&r.Output), &r.Error, &r.ErrorCode, &r.Then, &idem,
		&r.Attempts, &r.Epoch, &retry, &owner, &expires, &created, &started, &completed, &r.Version, &tl,
		&r.Priority, &r.RateKey, &r.ConcurrencyKey, &r.WaitKey, &r.GroupKey}
	if err := sc.Scan(append(dest, extra...)...); err != nil {
		return r, 0, err
	}
	r.CorrelationID, r.Status = corr, store.Status(status)
	r.ParentID, r.IdempotencyKey, r.LeaseOwner = str(parent), str(idem), str(owner)
	r.RetryAt, r.LeaseExpires = fromNS(retry), fromNS(expires)
	r.CreatedAt, r.StartedAt, r.CompletedAt = time.Unix(0, created), fromNS(started), fromNS(completed)
	return r, tl, nil
}

// scanClaimed reads one row of an ordinal and claimCols into r, a run
// claimed for owner, in place: a claim's runs are scanned into their
// result's slice, not each into a copy of its own on the heap.
func scanClaimed(sc scanner, owner string, now, until time.Time, r *store.Run) (ord int64, err error) {
	*r = store.Run{Status: store.StatusRunning, LeaseOwner: owner, LeaseExpires: until, StartedAt: now}
	var parent *string
	var created int64
	err = sc.Scan(&ord, &r.Seq, &r.ID, &r.Process, &r.Event, &r.CorrelationID, &parent, &r.Depth,
		(*[]byte)(&r.Payload), (*[]byte)(&r.Context), &r.Attempts, &r.Epoch, &created, &r.Priority, &r.RateKey, &r.ConcurrencyKey)
	r.ParentID, r.CreatedAt = str(parent), time.Unix(0, created)
	return ord, err
}

// appendClaimed scans the next row of a claim for req (scanClaimed) onto
// runs.
func appendClaimed(runs []store.Run, sc scanner, req *store.ClaimNextRequest) ([]store.Run, error) {
	runs = append(runs, store.Run{})
	if _, err := scanClaimed(sc, req.Owner, req.Now, req.LeaseUntil, &runs[len(runs)-1]); err != nil {
		return runs[:len(runs)-1], err
	}
	return runs, nil
}

// scanUpdated reads one row of updCols (after the leading columns in
// lead).
func scanUpdated(sc scanner, lead ...any) (store.Run, int, error) {
	var r store.Run
	var status string
	var parent, idem *string
	var retry, started, completed *int64
	var created int64
	var tl int
	dest := append(lead, &r.Seq, &r.ID, &r.Process, &r.Event, &r.CorrelationID, &parent, &r.Depth, &status,
		(*[]byte)(&r.Output), &r.Error, &r.ErrorCode, &r.Then, &idem, &r.Attempts, &r.Epoch, &retry,
		&created, &started, &completed, &r.Version, &tl, &r.Priority, &r.RateKey, &r.ConcurrencyKey, &r.WaitKey, &r.GroupKey)
	err := sc.Scan(dest...)
	r.Status = store.Status(status)
	r.ParentID, r.IdempotencyKey = str(parent), str(idem)
	r.RetryAt, r.CreatedAt, r.StartedAt, r.CompletedAt = fromNS(retry), time.Unix(0, created), fromNS(started), fromNS(completed)
	return r, tl, err
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func fromNS(p *int64) time.Time {
	if p == nil {
		return time.Time{}
	}
	return time.Unix(0, *p)
}

// ns stores a time as Unix nanoseconds, the zero time as NULL.
func ns(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	v := t.UnixNano()
	return &v
}

// blob stores a JSON value, nil as NULL.
func blob(b json.RawMessage) []byte {
	if b == nil {
		return nil
	}
	return []byte(b)
}

// nullInt stores an int, 0 as NULL.
func nullInt(v int) *int32 {
	if v == 0 {
		return nil
	}
	i := int32(v)
	return &i
}

// pgText returns s as PostgreSQL's text can hold it: s itself when it is
// valid UTF-8 without a NUL byte, as nearly every message is, else with
// each NUL byte and each invalid sequence replaced by U+FFFD. The
// free-form messages a store is given (a run's error, code and note, an
// effect's error, an error record's message and context) pass through
// it: a handler's error may quote any bytes (a response body, say), and
// a statement that refused one would fail the run's end again at every
// retry, leaving the run running and its engine unable to stop.
func pgText(s string) string {
	if isText(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// isText reports whether PostgreSQL's text keeps s as it is: valid UTF-8
// without a NUL byte. A run id, process, event or chain id that is not
// text names no stored run, so a lookup by one (an operator's request
// may hold any bytes) finds nothing and a write to its run fails
// ErrNotFound, as on the other stores, where the statement would have
// failed as if the server were down.
func isText(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

func nullStr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ident quotes an identifier.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }
