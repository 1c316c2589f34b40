package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in order. File names start
// with their version: 0001_init.sql is version 1. Tables are written
// $S.name; the schema is filled in when they run.
func migrations() ([]migration, error) {
	entries, err := migrationFS.ReadDir("migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		v, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: name must start with its version", e.Name())
		}
		b, err := migrationFS.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{v, e.Name(), string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: versions must be 1, 2, 3… without gaps", m.name)
		}
	}
	return out, nil
}

// SchemaVersion is the schema version this build creates and understands.
func SchemaVersion() int {
	ms, _ := migrations()
	return len(ms)
}

// lockID is the advisory lock key of a name within a schema: a hash, so
// that every store of the database agrees on it without a registry.
func lockID(schema, name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("yella\x00" + schema + "\x00" + name))
	return int64(h.Sum64())
}

// migrate brings the schema to SchemaVersion. It holds a session advisory
// lock of the schema meanwhile, so nodes starting together migrate once:
// the others wait, then find the schema current. Each migration commits
// with its version bump, so a crash leaves the schema at a whole version.
// A schema of a newer version is refused, so is an older one that nodes
// (live within nodeTimeout) are using, and so is a schema that holds
// tables but is not a Yella schema: each is left exactly as it was.
func migrate(ctx context.Context, pool *pgxpool.Pool, name, schema string, mustExist bool, nodeTimeout time.Duration) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	lock := lockID(name, "migrate")
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lock); err != nil {
		return err
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", lock)
	switch kind, found, err := schemaKind(ctx, conn, name); {
	case err != nil:
		return err
	case kind == schemaForeign:
		return fmt.Errorf("%w: it holds %s; nothing was changed in it", ErrForeignSchema, strings.Join(found, ", "))
	case kind == schemaAbsent && mustExist:
		return fmt.Errorf("%w: it does not exist (a server opening it for the first time creates it)", ErrNoSchema)
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+schema+".schema_version (version integer NOT NULL)"); err != nil {
		return err
	}
	var cur int
	err = conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+schema+".schema_version").Scan(&cur)
	if err != nil {
		return err
	}
	if cur > len(ms) {
		return fmt.Errorf("%w: schema version %d is newer than this build supports (%d); upgrade yella", ErrNewerSchema, cur, len(ms))
	}
	if cur > 0 && cur < len(ms) {
		// Nodes only join a schema their build migrated to its version, so
		// a live node on an older schema runs an older build.
		live, err := liveNodes(ctx, conn, schema, nodeTimeout)
		if err != nil {
			return err
		}
		if len(live) > 0 {
			return fmt.Errorf("%w: schema version %d is used by %s (a heartbeat within %s); this build would migrate it to version %d, "+
				"which they do not write as it reads: stop them, then start this build", ErrSchemaInUse, cur, strings.Join(live, ", "), nodeTimeout, len(ms))
		}
	}
	for _, m := range ms[cur:] {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, strings.ReplaceAll(m.sql, "$S.", schema+".")); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "DELETE FROM "+schema+".schema_version; INSERT INTO "+schema+".schema_version VALUES ("+strconv.Itoa(m.version)+")")
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return nil
}

// ErrForeignSchema: the schema holds tables that are not a Yella store's.
var ErrForeignSchema = errors.New("the schema is not a Yella schema")

// ErrNoSchema: Options.MustExist was set and the schema does not exist.
var ErrNoSchema = errors.New("no Yella schema")

type schemaState uint8

const (
	schemaAbsent  schemaState = iota // no such schema, or an empty one: created or filled
	schemaYella                      // written by this store (some version)
	schemaForeign                    // tables of something else: never touched
)

// schemaKind tells a Yella schema from an absent or empty one and from one
// that holds other tables (it lists up to five of those). A Yella schema
// has its version table, of one integer column, and from version 1 on its
// runs and nodes tables; before version 1 (a first migration that did not
// commit) the version table alone.
func schemaKind(ctx context.Context, conn *pgxpool.Conn, name string) (schemaState, []string, error) {
	rows, err := conn.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY c.relname`, name)
	if err != nil {
		return 0, nil, err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, nil, err
	}
	if len(tables) == 0 {
		// No table: absent, or made empty for the store (by an
		// administrator, for a role that may not create schemas), unless
		// it holds other objects of something else.
		var others []string
		rows, err := conn.Query(ctx, `SELECT kind || ' ' || name FROM (
			SELECT 'sequence' AS kind, c.relname::text AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname = $1 AND c.relkind = 'S'
			UNION ALL SELECT 'function', p.proname::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1
			UNION ALL SELECT 'type', t.typname::text FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
				WHERE n.nspname = $1 AND t.typtype IN ('c', 'd', 'e', 'r') AND t.typrelid = 0) o ORDER BY 1 LIMIT 6`, name)
		if err != nil {
			return 0, nil, err
		}
		if others, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return 0, nil, err
		}
		if len(others) == 0 {
			return schemaAbsent, nil, nil
		}
		if len(others) == 6 {
			others[5] = "…"
		}
		return schemaForeign, others, nil
	}
	has := map[string]bool{}
	for _, t := range tables {
		has[t] = true
	}
	var cols []string
	if has["schema_version"] {
		// The catalogs are read by the table's oid: a view such as
		// information_schema.columns may check other schemas' tables
		// before filtering, and fails if one is dropped meanwhile.
		rows, err := conn.Query(ctx, `SELECT a.attname::text || ' ' || format_type(a.atttypid, NULL) FROM pg_attribute a
			WHERE a.attrelid = to_regclass(quote_ident($1) || '.schema_version') AND a.attnum > 0 AND NOT a.attisdropped
			ORDER BY a.attnum`, name)
		if err != nil {
			return 0, nil, err
		}
		if cols, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return 0, nil, err
		}
	}
	versioned := len(cols) == 1 && cols[0] == "version integer"
	if versioned && (len(tables) == 1 || has["runs"] && has["nodes"]) {
		return schemaYella, nil, nil
	}
	var found []string
	for _, t := range tables {
		if len(found) == 5 {
			found = append(found, "…")
			break
		}
		found = append(found, "table "+t)
	}
	if has["schema_version"] && !versioned {
		found = append(found, "a schema_version table that is not Yella's")
	}
	return schemaForeign, found, nil
}

// liveNodes names the nodes of the schema whose heartbeat is within
// timeout on the database's clock (up to 10, then how many more).
func liveNodes(ctx context.Context, conn *pgxpool.Conn, schema string, timeout time.Duration) ([]string, error) {
	rows, err := conn.Query(ctx, "SELECT owner FROM "+schema+".nodes WHERE NOT gone AND seen >= now() - make_interval(secs => $1) ORDER BY owner",
		timeout.Seconds())
	if err != nil {
		return nil, err
	}
	owners, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	if len(owners) > 10 {
		owners = append(owners[:10], fmt.Sprintf("%d more", len(owners)-10))
	}
	for i, o := range owners[:min(len(owners), 10)] {
		owners[i] = "node " + strconv.Quote(o)
	}
	return owners, nil
}
