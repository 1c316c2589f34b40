package pgstore

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"

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
// A schema of a newer version is refused.
func migrate(ctx context.Context, pool *pgxpool.Pool, name, schema string) error {
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
