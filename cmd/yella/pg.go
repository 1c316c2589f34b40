package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/yella-go/yella/store/pgstore"
)

// A --db that starts with postgres:// or postgresql:// names a PostgreSQL
// database: serve and the CLI open the store's schema there (pgstore)
// instead of a SQLite file. Several processes share it, each engine a
// node, so there is no lock file and no server record: the CLI opens the
// database itself. The schema comes from --schema or the URL's schema=
// parameter (not both, unless they agree), else the store's default.

// defaultSchema is pgstore's default schema, named in help and messages.
const defaultSchema = "yella"

// pgOpenTimeout bounds opening the store (connecting, checking and
// migrating the schema), so that a server that accepts connections and
// never answers fails serve at once instead of hanging it.
const pgOpenTimeout = 30 * time.Second

// isPostgres reports whether db is a PostgreSQL URL.
func isPostgres(db string) bool {
	l := strings.ToLower(db)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// redactURL is db for messages: a PostgreSQL URL without its password
// (in the user part or a password= parameter); anything else as it is.
func redactURL(db string) string {
	if !isPostgres(db) {
		return db
	}
	u, err := url.Parse(db)
	if err != nil {
		return "postgres://…" // a URL that does not parse may hold a password anywhere
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// pgPassword is the password db carries, "" if none: errors are scrubbed
// of it whatever a library puts in them.
func pgPassword(db string) string {
	u, err := url.Parse(db)
	if err != nil {
		return ""
	}
	if p, ok := u.User.Password(); ok {
		return p
	}
	return u.Query().Get("password")
}

// pgTarget splits the schema from a PostgreSQL --db: the connection URL
// without a schema= parameter, and the schema to open (--schema, the
// parameter or the default).
func pgTarget(db, schemaFlag string) (connURL, schema string, err error) {
	u, err := url.Parse(db)
	if err != nil {
		return "", "", usagef("--db %s is not a valid PostgreSQL URL (postgres://USER@HOST:PORT/DATABASE?schema=NAME)", redactURL(db))
	}
	q := u.Query()
	param := q.Get("schema")
	if len(q["schema"]) > 1 {
		return "", "", usagef("--db gives schema= %d times", len(q["schema"]))
	}
	q.Del("schema")
	u.RawQuery = q.Encode()
	switch {
	case schemaFlag != "" && param != "" && schemaFlag != param:
		return "", "", usagef("--schema %s and the URL's schema=%s disagree: give one", schemaFlag, param)
	case schemaFlag != "":
		schema = schemaFlag
	case param != "":
		schema = param
	default:
		schema = defaultSchema
	}
	if !validSchema(schema) {
		return "", "", usagef("--schema must be a lower-case identifier (letters, digits, _; at most 48, not starting with a digit), got %q", schema)
	}
	return u.String(), schema, nil
}

func validSchema(s string) bool {
	if s == "" || len(s) > 48 || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// openPG opens the store of a PostgreSQL --db. mustExist refuses to create
// the schema (the CLI looks at a store; it does not make one). Its errors
// say what to do, name flags, and never show the password.
func openPG(ctx context.Context, db, schemaFlag string, mustExist bool, log *slog.Logger) (*pgstore.Store, string, error) {
	connURL, schema, err := pgTarget(db, schemaFlag)
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, pgOpenTimeout)
	defer cancel()
	opts := pgstore.Options{Schema: schema, MustExist: mustExist, Logger: log}
	st, err := pgstore.Open(ctx, connURL, opts)
	if err == nil {
		return st, schema, nil
	}
	where := redactURL(db)
	var msg string
	switch {
	case errors.Is(err, pgstore.ErrForeignSchema):
		msg = fmt.Sprintf("schema %s of %s is not a Yella schema, so yella refuses it: %v; give another schema with --schema", schema, where, err)
	case errors.Is(err, pgstore.ErrNoSchema):
		msg = fmt.Sprintf("no Yella schema %s in %s (start yella serve --db on it first, or give --schema)", schema, where)
	case errors.Is(err, pgstore.ErrNewerSchema), errors.Is(err, pgstore.ErrSchemaInUse):
		msg = fmt.Sprintf("schema %s of %s: %v", schema, where, err)
	case errors.Is(err, context.DeadlineExceeded):
		msg = fmt.Sprintf("%s did not answer within %s: %v", where, pgOpenTimeout, err)
	default:
		msg = fmt.Sprintf("open %s (schema %s): %v", where, schema, err)
	}
	if pw := pgPassword(db); pw != "" {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
	}
	return nil, "", &cliError{msg, err}
}

// nodeOwner is the owner id of serve's engine on a shared database: the
// host, the pid and a random part, so that the nodes list says which
// process each node is and two processes never share an id.
func nodeOwner() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "host"
	}
	return fmt.Sprintf("serve-%s-%d-%s", host, os.Getpid(), newSecret()[:8])
}
