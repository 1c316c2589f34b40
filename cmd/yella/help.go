package main

// helpText is a command's usage line (after "yella ") and description,
// printed with its flags by "yella <command> -h".
type helpText struct{ use, about string }

// whereAbout is the part of every operator command's help that says where
// it acts.
const whereAbout = `Where it acts: with --server, that server. Otherwise the database named
by --db: through the yella server that holds it (found in <db>.server and
checked before anything is sent to it), or the file itself when no process
holds it. A database held by another program without a recorded server is
an error that names the process; --read-only reads the file anyway and
changes nothing. The token (--token-file or YELLA_TOKEN) is sent only to
a checked server or to --server, and never over plain http to a host that
is not loopback unless --allow-http says so. A PostgreSQL --db
(postgres://…) is opened directly, since several processes share it: its
schema (--schema) must exist, and --read-only refuses every change.`

var helps = map[string]helpText{
	"serve": {"serve [flags]", `Serve runs an engine on the database with the dashboard, the JSON API and /metrics.

The built-in demo automations run on a database created for them: a new
file, or one that holds only the demo's runs. On a database that holds runs
of other processes (an application's) the demo stays off unless --demo asks
for it, and so does the default retention (72h): an explicit --retention
applies anywhere. Runs of processes this server does not have are never
claimed or ended; they stay exactly as they are.

--read-only looks at any database without running anything, even while
another process holds it: no engine, no claims, no reclaims, no retention,
no demo; every mutation is refused.

With a PostgreSQL --db (postgres://… or postgresql://…) serve opens the
schema named by --schema or the URL's schema= parameter (default yella),
created if missing; a schema that holds anything else is refused and left
untouched, and the password never appears in its output. Several servers
share one database: each whose engine runs is a node (yella nodes lists
them), and a node whose heartbeat stops loses its runs to the others.
--sync, --replicate and --read-only are for SQLite and refused.

While it runs, serve records where it listens in <db>.server (mode 0600),
so that the yella CLI given --db finds it and checks its identity before it
sends a token. The first lines printed say what runs: the database, the
engine, the demo and the retention (each with why), TLS and replication.`},
	"runs": {"runs list|show", `Runs lists runs with filters and cursor pages (runs list), or shows one run with
its timeline and effects (runs show ID).

` + whereAbout},
	"runs list": {"runs list [flags]", "List runs, newest first, with filters; --cursor pages on.\n\n" + whereAbout},
	"runs show": {"runs show ID [flags]", "Show one run: its fields, timeline and effects.\n\n" + whereAbout},
	"emit": {"emit EVENT [JSON payload] [flags]", `Emit admits one run per process that listens to EVENT, atomically. With no
server (direct mode) the processes must be named with --process: this
command does not know which ones listen, and runs none of them.

` + whereAbout},
	"retry":  {"retry ID [flags]", "Retry moves an errored, dead-letter or fenced run back to idle (its attempts are kept).\n\n" + whereAbout},
	"cancel": {"cancel ID [flags]", "Cancel stops an idle, running or waiting run: it becomes errored with CANCELLED.\n\n" + whereAbout},
	"requeue": {"requeue ID [flags] | yella requeue --all [--process NAME] [flags]",
		"Requeue moves a dead-letter run back to idle with a fresh retry budget; --all requeues every one.\n\n" + whereAbout},
	"resume": {"resume ID [JSON payload] [flags]", `Resume releases the follow-up event a deferred run holds: one run per process
that listens to it, in the same chain. The payload, if given, is merged
into the held one. With no server (direct mode) the processes must be
named with --process: this command does not know which ones listen.

` + whereAbout},
	"signal": {"signal KEY [JSON payload] [flags] | yella signal --run ID [JSON payload] [flags]",
		`Signal sends a signal: of the runs waiting for KEY (WaitFor in the
handler), the one admitted first receives the payload (null without one)
and runs again. With no run waiting, the signal is kept for the next wait
on KEY, for the engine's SignalRetention (7 days by default). --run ID
sends it to that run only, which must be waiting for a signal; nothing is
kept. runs list --status waiting lists the waiting runs and their keys.

` + whereAbout},
	"end-wait": {"end-wait ID [flags]", `End-wait ends the wait of a waiting run now, without a signal: it runs
again at once, its sleep returning as if its time had come, its wait for a
signal as if it had timed out.

` + whereAbout},
	"fenced": {"fenced (--retry | --complete JSON) [--process NAME] [--effect KEY] [--apply] [--limit N] [flags]",
		`Fenced resolves fenced runs in bulk, oldest first: --retry runs each
run's started effect again, --complete records it as done with the given
result. Without --apply it prints what it would do and changes nothing.

` + whereAbout},
	"nodes": {"nodes [flags]", `Nodes lists the engine processes (nodes) that share a PostgreSQL database:
each yella serve running the demo, and each application engine on it.
For each: live or gone (its heartbeat, on the database's clock, is older
than the store's bound, so the live nodes take over its runs), when it
joined, and the runs it holds, by process. A SQLite database is
single-node: the command says so.

` + whereAbout},
	"limits": {"limits [flags]", `Limits lists the flow limits the processes of a running engine declare:
each rate limit (starts per period, burst) and each per-key concurrency
bound (running runs per key), the processes that share it, and the keys
holding runs back, the most waiting first (--top per limit): for a rate
limit, the runs waiting and when the key next lets one start; for a
concurrency bound, the runs running and waiting. On a shared store
(PostgreSQL) the store holds runs back when a node claims, so no key is
listed. Limits are declared in code, so the command asks a server: a
database opened directly has no engine running its processes.

` + whereAbout},
	"schedules": {"schedules [list] [flags] | yella schedules pause NAME [flags] | yella schedules resume NAME [flags]",
		`Schedules lists the cron schedules of a running engine, one a line: the
name, the cron spec, the time zone its fields are read in, the event each
tick emits, how old a missed tick may be and still run at start
(catch-up), since when it is paused, the next tick, the last tick this
engine emitted with its runs, and the error of the last tick if it
failed. Times are local. Odd names are quoted.

schedules pause NAME pauses a schedule: its ticks are skipped by every
engine of the database, across restarts, until schedules resume NAME;
the ticks skipped meanwhile are not caught up. Pausing a paused schedule
keeps the time of its first pause; resuming one that runs changes
nothing.

Schedules are declared in code by the program that embeds the engine
(Engine.AddSchedule), so the command asks a server: a database opened
directly has no engine running its schedules.

` + whereAbout},
	"restore": {"restore --from URL --to PATH [flags]", `Restore rebuilds a database from its replica (see serve --replicate). It
refuses to overwrite an existing database unless --force is given, and
refuses while an engine has the destination open.`},
	"version": {"version", "Version prints the version of yella, of Go, and the platform."},
}
