package yella_test

import (
	"strings"
	"testing"
)

// baseGraph is a small import graph shaped like the real tree, which obeys
// every rule.
func baseGraph() importGraph {
	return importGraph{
		"yella":                          {"context", "yella/store", "yella/internal/clock", "yella/internal/dispatch", "yella/internal/obs"},
		"yella/store":                    {"context", "time"},
		"yella/store/memstore":           {"sync", "yella/store"},
		"yella/store/sqlitestore":        {"database/sql", "modernc.org/sqlite", "yella/store", "yella/internal/commithook"},
		"yella/store/storetest":          {"testing", "yella/store"},
		"yella/internal/clock":           {"time"},
		"yella/internal/dispatch":        {"yella/internal/clock"},
		"yella/internal/obs":             {"yella/store"},
		"yella/internal/commithook":      {},
		"yella/httpguard":                {"net/http"},
		"yella/internal/tools/crashtest": {"yella", "yella/store/sqlitestore"},
		"yella/httpapi":                  {"net/http", "yella", "yella/httpguard"},
		"yella/dashboard":                {"html/template", "yella", "yella/httpguard"},
		"yella/prommetrics":              {"github.com/prometheus/client_golang/prometheus", "yella"},
		"yella/internal/tools/report":    {"encoding/json"},
		"yella/internal/tools/bench":     {"yella", "yella/internal/tools/report", "yella/store"},
		"yella/yellatest":                {"testing", "yella", "yella/store/memstore"},
		"yella/replicate":                {"yella/store/sqlitestore"},
		"yella/cmd/yella":                {"flag", "yella", "yella/internal/tools/bench", "yella/dashboard", "yella/httpapi", "yella/prommetrics", "yella/replicate", "yella/store/sqlitestore"},
		"yella/examples/quickstart":      {"flag", "yella", "yella/store/sqlitestore"},
		"testing":                        {"flag", "fmt"},
		"github.com/prometheus/client_golang/prometheus": {"net/http"},
		"github.com/example/assert":                      {"testing"},
		"yella/connector":                                {"net/http", "yella"},
		"yella/connector/httpx":                          {"net/http", "yella", "yella/connector"},
		"yella/connector/stripe":                         {"yella/connector", "yella/connector/httpx"},
	}
}

// Each forbidden import, added to a graph that passes, is reported: with
// its chain when it is reached through other packages.
func TestImportRulesCatchEachViolation(t *testing.T) {
	if msgs := checkImports(baseGraph()); len(msgs) != 0 {
		t.Fatalf("the base graph breaks rules:\n%s", strings.Join(msgs, "\n"))
	}
	for _, tc := range []struct {
		name string
		add  [][2]string // from, to
		want string
	}{
		{"a store imports an operator edge", [][2]string{{"yella/store/memstore", "yella/httpapi"}},
			"yella/store/memstore reaches yella (yella/store/memstore → yella/httpapi → yella): a store never reaches the engine"},
		{"a store reaches the engine through an internal package", [][2]string{{"yella/internal/commithook", "yella/internal/obs"}, {"yella/internal/obs", "yella"}},
			"yella/store/sqlitestore reaches yella (yella/store/sqlitestore → yella/internal/commithook → yella/internal/obs → yella): a store never reaches the engine"},
		{"a store imports tooling", [][2]string{{"yella/store/sqlitestore", "yella/internal/tools/report"}},
			"yella/store/sqlitestore reaches yella/internal/tools/report (yella/store/sqlitestore → yella/internal/tools/report): a store depends only on store packages"},
		{"the API imports the dashboard", [][2]string{{"yella/httpapi", "yella/dashboard"}},
			"yella/httpapi reaches yella/dashboard (yella/httpapi → yella/dashboard): operator edges never reach each other"},
		{"the dashboard imports the API", [][2]string{{"yella/dashboard", "yella/httpapi"}},
			"yella/dashboard reaches yella/httpapi (yella/dashboard → yella/httpapi): operator edges never reach each other"},
		{"an edge reaches another through a helper", [][2]string{{"yella/httpguard", "yella/prommetrics"}},
			"yella/httpapi reaches yella/prommetrics (yella/httpapi → yella/httpguard → yella/prommetrics): operator edges never reach each other"},
		{"the guard imports the engine", [][2]string{{"yella/httpguard", "yella"}},
			"yella/httpguard reaches yella (yella/httpguard → yella): the guard in front of the operator edges is plain net/http"},
		{"the dashboard imports the SQLite store", [][2]string{{"yella/dashboard", "yella/store/sqlitestore"}},
			"yella/dashboard reaches yella/store/sqlitestore (yella/dashboard → yella/store/sqlitestore): operator edges never reach a concrete store"},
		{"the report imports the engine", [][2]string{{"yella/internal/tools/report", "yella"}},
			"yella/internal/tools/report reaches yella (yella/internal/tools/report → yella): the benchmark report renders result files"},
		{"an edge imports testing", [][2]string{{"yella/httpapi", "testing"}},
			"yella/httpapi reaches testing (yella/httpapi → testing): only the test kits use package testing"},
		{"the engine reaches testing through a library", [][2]string{{"yella", "github.com/example/assert"}},
			"yella reaches testing (yella → github.com/example/assert → testing): only the test kits use package testing"},
		{"a command imports a test kit", [][2]string{{"yella/cmd/yella", "yella/yellatest"}},
			"yella/cmd/yella reaches testing (yella/cmd/yella → yella/yellatest → testing): only the test kits use package testing"},
		{"the engine imports a concrete store", [][2]string{{"yella", "yella/store/memstore"}},
			"yella reaches yella/store/memstore (yella → yella/store/memstore): the engine depends only on store and internal helpers"},
		{"an internal helper imports the engine", [][2]string{{"yella/internal/dispatch", "yella"}},
			"yella/internal/dispatch reaches yella (yella/internal/dispatch → yella): internal helpers never reach the engine"},
		{"the conformance suite imports the engine", [][2]string{{"yella/store/storetest", "yella"}},
			"yella/store/storetest reaches yella (yella/store/storetest → yella): the conformance suite uses store and the standard library only"},
		{"the conformance suite imports a third-party package", [][2]string{{"yella/store/storetest", "github.com/google/uuid"}},
			"yella/store/storetest reaches github.com/google/uuid (yella/store/storetest → github.com/google/uuid): the conformance suite uses store and the standard library only"},
		{"a test kit wires an operator edge", [][2]string{{"yella/yellatest", "yella/httpapi"}},
			"yella/yellatest reaches yella/httpapi (yella/yellatest → yella/httpapi): only commands wire the operator edges and replication"},
		{"the engine wires replication", [][2]string{{"yella", "yella/replicate"}},
			"yella reaches yella/replicate (yella → yella/replicate): only commands wire"},
		{"a library reaches tooling", [][2]string{{"yella/internal/obs", "yella/internal/tools/crashtest"}},
			"yella/internal/obs reaches yella/internal/tools/crashtest (yella/internal/obs → yella/internal/tools/crashtest): libraries never reach tooling"},
		{"the API imports a connector", [][2]string{{"yella/httpapi", "yella/connector/stripe"}},
			"yella/httpapi reaches yella/connector/stripe (yella/httpapi → yella/connector/stripe): operator edges never reach each other"},
		{"the engine imports a connector", [][2]string{{"yella", "yella/connector/httpx"}},
			"yella reaches yella/connector/httpx (yella → yella/connector/httpx): the engine depends only on store and internal helpers"},
		{"a connector imports a concrete store", [][2]string{{"yella/connector/httpx", "yella/store/sqlitestore"}},
			"yella/connector/httpx reaches yella/store/sqlitestore (yella/connector/httpx → yella/store/sqlitestore): operator edges never reach a concrete store"},
		{"a library parses flags", [][2]string{{"yella/internal/obs", "flag"}},
			"yella/internal/obs reaches flag (yella/internal/obs → flag): only commands and tooling parse flags"},
	} {
		g := baseGraph()
		for _, e := range tc.add {
			g[e[0]] = append(g[e[0]], e[1])
		}
		msgs := checkImports(g)
		found := false
		for _, m := range msgs {
			found = found || strings.Contains(m, tc.want)
		}
		if !found {
			t.Errorf("%s: no message contains %q; got:\n%s", tc.name, tc.want, strings.Join(msgs, "\n"))
		}
	}
}
