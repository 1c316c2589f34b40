package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/yella-go/yella/httpapi"
	"github.com/yella-go/yella/store/pgstore"
)

// testPassword is the password the PostgreSQL tests put in their URLs: the
// test server trusts local connections whatever the password, and no
// output may ever show it.
const testPassword = "pw-Secr3t-never-shown"

// pgTestURL is the test database with the password and schema set, and a
// connection to it for setup and checks; the schema is dropped at the end.
// It skips the test without YELLA_PG_URL.
func pgTestURL(t *testing.T) (dbURL, schema string, conn *pgx.Conn) {
	t.Helper()
	raw := os.Getenv("YELLA_PG_URL")
	if raw == "" {
		t.Skip(`YELLA_PG_URL is not set: the PostgreSQL tests skip (start a throwaway server with eval "$(.ci/postgres)")`)
	}
	b := make([]byte, 6)
	rand.Read(b)
	schema = "cli_" + hex.EncodeToString(b)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if conn, err = pgx.Connect(ctx, raw); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		conn.Close(context.Background())
	})
	u.User = url.UserPassword(u.User.Username(), testPassword)
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	return u.String(), schema, conn
}

// TestServePostgresFlagErrors: the SQLite flags are refused with a
// PostgreSQL --db and --schema without one, naming the flag; a bad schema
// name or two that disagree are refused; the password is never shown.
func TestServePostgresFlagErrors(t *testing.T) {
	t.Setenv("YELLA_TOKEN", "")
	t.Setenv("YELLA_REPLICATE", "")
	pg := "postgres://app:" + testPassword + "@127.0.0.1:1/db"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--db", pg, "--sync", "full"}, "--sync is for a SQLite --db, not PostgreSQL"},
		{[]string{"--db", pg, "--replicate", "file:///tmp/x"}, "--replicate is for a SQLite --db"},
		{[]string{"--db", pg, "--replicate-interval", "1s"}, "--replicate-interval is for a SQLite --db"},
		{[]string{"--db", pg, "--read-only"}, "--read-only is for a SQLite --db"},
		{[]string{"--db", "x.db", "--schema", "s"}, "--schema goes with a PostgreSQL --db"},
		{[]string{"--db", pg, "--schema", "Bad-Name"}, "--schema must be a lower-case identifier"},
		{[]string{"--db", pg + "?schema=a", "--schema", "b"}, "--schema b and the URL's schema=a disagree"},
		{[]string{"--db", "postgresql://app:" + testPassword + "@[::1/db"}, "not a valid PostgreSQL URL"},
		{[]string{"--db", pg + "?sslmode=disable&connect_timeout=5"}, "postgres://app:xxxxx@127.0.0.1:1/db"},
	} {
		err := Run(context.Background(), append([]string{"serve", "--addr", "127.0.0.1:0"}, tc.args...), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), testPassword) {
			t.Errorf("serve %s: %v, want …%s… without the password", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	t.Setenv("YELLA_REPLICATE", "file:///tmp/replica")
	if err := Run(context.Background(), []string{"serve", "--db", pg}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "YELLA_REPLICATE is set") {
		t.Errorf("serve with YELLA_REPLICATE on PostgreSQL: %v", err)
	}
}

// TestServePostgresRefusesWhatIsNotItsOwn: serve refuses a schema that
// holds an application's tables, leaving them untouched, and a schema of
// a newer version, each with an error that says what to do and does not
// show the password; the CLI does not create a schema it does not find.
func TestServePostgresRefusesWhatIsNotItsOwn(t *testing.T) {
	t.Setenv("YELLA_TOKEN", "")
	db, schema, conn := pgTestURL(t)
	ctx := context.Background()
	for _, sql := range []string{"CREATE SCHEMA " + schema, "CREATE TABLE " + schema + ".orders (id int)", "INSERT INTO " + schema + ".orders VALUES (7)"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	err := Run(ctx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "is not a Yella schema") || !strings.Contains(err.Error(), "table orders") ||
		!strings.Contains(err.Error(), "--schema") || strings.Contains(err.Error()+out.String(), testPassword) {
		t.Fatalf("serve on an application's schema: %v\n%s", err, out.String())
	}
	var tables []string
	rows, _ := conn.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema)
	if tables, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(tables) != 1 || tables[0] != "orders" {
		t.Errorf("the application's schema after the refusal: %v %v", tables, err)
	}

	// The CLI looks for a schema; it never makes one.
	other := strings.Replace(db, "schema="+schema, "schema="+schema+"_none", 1)
	if text, err := cli(t, nil, "runs", "list", "--db", other); err == nil || !strings.Contains(text, "no Yella schema "+schema+"_none") || strings.Contains(text, testPassword) {
		t.Errorf("runs list on an absent schema: %v %s", err, text)
	}
	var exists bool
	conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema+"_none").Scan(&exists)
	if exists {
		conn.Exec(ctx, "DROP SCHEMA "+schema+"_none CASCADE")
		t.Errorf("the CLI created the schema it did not find")
	}

	// A schema of a newer version.
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
		t.Fatal(err)
	}
	st, err := pgstore.Open(ctx, os.Getenv("YELLA_PG_URL"), pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := conn.Exec(ctx, "UPDATE "+schema+".schema_version SET version = 99"); err != nil {
		t.Fatal(err)
	}
	err = Run(ctx, []string{"serve", "--db", db, "--addr", "127.0.0.1:0"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "upgrade yella") || strings.Contains(err.Error(), testPassword) {
		t.Errorf("serve on a newer schema: %v", err)
	}
}

// TestServersShareAPostgresDatabase: two "yella serve" processes on one
// schema are two nodes. Runs admitted through one server's API are
// visible through the other's; every attempt is executed once across both
// (one running entry per attempt in the timeline); a run of a process
// neither has is never claimed or touched; both list the two live nodes
// (API, CLI, dashboard, /metrics); the password never appears in their
// output; and after SIGTERM both exit 0 and leave the node list.
func TestServersShareAPostgresDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two servers")
	}
	db, schema, conn := pgTestURL(t)
	ctx := context.Background()
	a, baseA := serveProc(t, nil, "--db", db, "--addr", "127.0.0.1:0", "--demo", "--demo-rate", "0.001")
	if baseA == "" {
		t.Fatalf("server A did not start: %s", a.out.text())
	}
	b, baseB := serveProc(t, nil, "--db", db, "--addr", "127.0.0.1:0", "--demo", "--demo-rate", "0.001")
	if baseB == "" {
		t.Fatalf("server B did not start: %s", b.out.text())
	}
	get := func(base, path string, out any) string {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s%s: %d %s", base, path, resp.StatusCode, body)
		}
		if out != nil {
			if err := json.Unmarshal(body, out); err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
		}
		return string(body)
	}

	// A run of a process neither server has, admitted by the CLI directly.
	text, err := cli(t, nil, "emit", "ledger:closed", `{}`, "--process", "ledger-close", "--db", db)
	if err != nil || strings.Contains(text, testPassword) {
		t.Fatalf("emit of another program's process: %v %s", err, text)
	}
	var ids []string
	for i := range 30 {
		var em httpapi.Emitted
		resp, err := http.Post(baseA+"/api/emit", "application/json",
			strings.NewReader(`{"event":"webhook:received","payload":{"tenantId":"ten_1"},"idempotencyKey":"k`+string(rune('a'+i%26))+string(rune('a'+i/26))+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(resp.Body).Decode(&em)
		resp.Body.Close()
		if resp.StatusCode != 201 || len(em.Runs) == 0 {
			t.Fatalf("emit through A: %d %+v", resp.StatusCode, em)
		}
		for _, r := range em.Runs {
			ids = append(ids, r.ID)
		}
	}
	// Every run admitted through A is visible through B.
	for _, id := range ids {
		get(baseB, "/api/runs/"+url.PathEscape(id), nil)
	}
	// Wait until nothing of the demo is idle or running (approvals defer).
	deadline := time.Now().Add(90 * time.Second)
	for {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+schema+".runs WHERE status IN ('idle', 'running') AND process <> 'ledger-close'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d demo runs still idle or running after 90s", n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var twice, mismatched, finished int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM (SELECT run_seq, attempt FROM "+schema+".timeline WHERE status = 'running' GROUP BY 1, 2 HAVING count(*) > 1) d").Scan(&twice); err != nil {
		t.Fatal(err)
	}
	// A run completed by its first attempt has that attempt's running
	// entry implicit: no timeline row (tl = 3 and none written).
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE r.attempts <> (SELECT count(*) FROM `+schema+`.timeline tl WHERE tl.run_seq = r.seq AND tl.status = 'running')
			+ CASE WHEN r.status = 'completed' AND r.tl = 3 AND NOT EXISTS (SELECT 1 FROM `+schema+`.timeline tl WHERE tl.run_seq = r.seq) THEN 1 ELSE 0 END), count(*)
		FROM `+schema+`.runs r WHERE r.status NOT IN ('idle', 'running')`).Scan(&mismatched, &finished); err != nil {
		t.Fatal(err)
	}
	if twice != 0 || mismatched != 0 || finished < len(ids) {
		t.Errorf("executions: %d attempts run twice, %d runs whose attempts and running entries differ, %d finished runs (want at least %d)",
			twice, mismatched, finished, len(ids))
	}
	var ledger struct {
		Runs []httpapi.Run `json:"runs"`
	}
	get(baseB, "/api/runs?process=ledger-close", &ledger)
	if len(ledger.Runs) != 1 || ledger.Runs[0].Status != "idle" || ledger.Runs[0].Attempts != 0 || ledger.Runs[0].Epoch != 0 ||
		ledger.Runs[0].LeaseOwner != "" || !ledger.Runs[0].NoHandler {
		t.Errorf("the run of a process neither server has: %+v; want idle, never claimed", ledger.Runs)
	}

	// Both list both nodes.
	var na, nb httpapi.Nodes
	get(baseA, "/api/nodes", &na)
	get(baseB, "/api/nodes", &nb)
	if !na.Shared || len(na.Nodes) != 2 || na.Self == nb.Self || len(nb.Nodes) != 2 {
		t.Fatalf("nodes: A %+v, B %+v", na, nb)
	}
	for _, n := range na.Nodes {
		if n.State != "live" || n.Self != (n.Owner == na.Self) {
			t.Errorf("node %+v seen by A (self %s)", n, na.Self)
		}
	}
	text, err = cli(t, nil, "nodes", "--db", db)
	if err != nil || !strings.Contains(text, na.Self) || !strings.Contains(text, nb.Self) || !strings.Contains(text, "2 live, 0 gone") || strings.Contains(text, testPassword) {
		t.Errorf("yella nodes: %v\n%s", err, text)
	}
	if page := get(baseB, "/nodes", nil); !strings.Contains(page, na.Self) || !strings.Contains(page, nb.Self) || !strings.Contains(page, "2 live, 0 gone") {
		t.Errorf("the dashboard's nodes page does not list both nodes")
	}
	m := get(baseA, "/metrics", nil)
	if !strings.Contains(m, `yella_nodes{state="live"} 2`) {
		t.Errorf("/metrics lacks yella_nodes{state=\"live\"} 2")
	}
	// A's writer committed the runs emitted through it: its commit time
	// is counted, and its deadlocks (none) reported.
	var commits, commitSecs float64
	for _, line := range strings.Split(m, "\n") {
		fmt.Sscanf(line, "yella_store_commits_total %g", &commits)
		fmt.Sscanf(line, "yella_store_commit_seconds_total %g", &commitSecs)
	}
	if commits == 0 || commitSecs <= 0 || !strings.Contains(m, "\nyella_store_deadlocks_total 0\n") {
		t.Errorf("/metrics: %v commits in %v s, deadlocks_total 0 %v", commits, commitSecs, strings.Contains(m, "yella_store_deadlocks_total 0"))
	}

	for name, c := range map[string]*child{"A": a, "B": b} {
		if err := c.stop(t, syscall.SIGTERM); err != nil {
			t.Errorf("server %s: %v\n%s", name, err, c.out.text())
		}
		if out := c.out.text(); strings.Contains(out, testPassword) || !strings.Contains(out, ":xxxxx@") {
			t.Errorf("server %s's output shows the password or no redacted URL:\n%s", name, out)
		}
	}
	var left int
	conn.QueryRow(ctx, "SELECT count(*) FROM "+schema+".nodes").Scan(&left)
	if left != 0 {
		t.Errorf("%d nodes left after both servers stopped", left)
	}
}
