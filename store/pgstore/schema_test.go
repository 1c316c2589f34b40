package pgstore_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yella-go/yella/store/pgstore"
)

// TestForeignSchemaUntouched: a schema that holds tables of something else
// (an application's, another tool's version table) is refused with a clear
// error and left exactly as it was; an empty schema made for the store is
// filled; with MustExist an absent schema is an error and is not created.
func TestForeignSchemaUntouched(t *testing.T) {
	url := pgURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	base := schemaFor(t.TempDir())
	drop := func(names ...string) {
		for _, n := range names {
			conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+n+" CASCADE")
		}
	}
	app, tool, fn, empty, absent := base+"_app", base+"_tool", base+"_fn", base+"_empty", base+"_absent"
	t.Cleanup(func() { drop(app, tool, fn, empty, absent) })
	for _, sql := range []string{
		"CREATE SCHEMA " + app, "CREATE TABLE " + app + ".customers (id int)", "INSERT INTO " + app + ".customers VALUES (1), (2)",
		"CREATE SCHEMA " + tool, "CREATE TABLE " + tool + ".schema_version (installed_rank int, version text)",
		"CREATE SCHEMA " + fn, "CREATE FUNCTION " + fn + ".answer() RETURNS int LANGUAGE sql AS 'SELECT 42'",
		"CREATE SCHEMA " + empty,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(sql, err)
		}
	}
	tables := func(schema string) string {
		var names []string
		rows, _ := conn.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1", schema)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(names, ",")
	}
	for _, c := range []struct{ schema, names, mention string }{
		{app, "customers", "table customers"},
		{tool, "schema_version", "not Yella's"},
		{fn, "", "function answer"},
	} {
		s, err := pgstore.Open(ctx, url, pgstore.Options{Schema: c.schema})
		if err == nil {
			s.Close()
			t.Fatalf("%s opened: a foreign schema must be refused", c.schema)
		}
		if !errors.Is(err, pgstore.ErrForeignSchema) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: %v; want ErrForeignSchema naming %q", c.schema, err, c.mention)
		}
		if got := tables(c.schema); got != c.names {
			t.Errorf("%s after the refused open holds %q, want %q", c.schema, got, c.names)
		}
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+app+".customers").Scan(&n); err != nil || n != 2 {
		t.Errorf("the application's rows: %d, %v", n, err)
	}
	s, err := pgstore.Open(ctx, url, pgstore.Options{Schema: empty, MustExist: true})
	if !errors.Is(err, pgstore.ErrNoSchema) {
		if err == nil {
			s.Close()
		}
		t.Errorf("MustExist on an empty schema: %v, want ErrNoSchema", err)
	}
	s, err = pgstore.Open(ctx, url, pgstore.Options{Schema: empty})
	if err != nil {
		t.Fatalf("an empty schema made for the store: %v", err)
	}
	s.Close()
	if s, err = pgstore.Open(ctx, url, pgstore.Options{Schema: empty, MustExist: true}); err != nil {
		t.Errorf("MustExist on a Yella schema: %v", err)
	} else {
		s.Close()
	}
	if s, err = pgstore.Open(ctx, url, pgstore.Options{Schema: absent, MustExist: true}); !errors.Is(err, pgstore.ErrNoSchema) {
		if err == nil {
			s.Close()
		}
		t.Errorf("MustExist on an absent schema: %v, want ErrNoSchema", err)
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", absent).Scan(&exists); err != nil || exists {
		t.Errorf("MustExist created the absent schema: %v %v", exists, err)
	}
}

// TestUnreachableServerFailsFast: a server that accepts the connection
// and never answers fails Open within the connect timeout instead of
// hanging it, and the error does not show the password.
func TestUnreachableServerFailsFast(t *testing.T) {
	pgURL(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		<-done
		for _, c := range held {
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = pgstore.Open(ctx, "postgres://u:secretpw@"+ln.Addr().String()+"/db?sslmode=disable", pgstore.Options{ConnectTimeout: 300 * time.Millisecond})
	if err == nil || ctx.Err() != nil {
		t.Fatalf("open of a server that never answers: %v (context %v)", err, ctx.Err())
	}
	if strings.Contains(err.Error(), "secretpw") {
		t.Errorf("the error shows the password: %v", err)
	}
}
