package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeReportsStalledReplication: "yella serve --replicate" surfaces a
// stalled replication. While it is healthy, /api/health says "ok",
// /metrics has yella_replication_stalled 0 and the dashboard says healthy.
// Once the WAL is removed under the server (the damage another process
// does when it deletes the WAL of a database this one writes), health says
// "degraded" with the reason, the gauge is 1 and the dashboard says
// stalled, though the lag stays small.
func TestServeReportsStalledReplication(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")
	base := startServe(t, "--db", db, "--replicate", "file://"+filepath.Join(dir, "replica"), "--replicate-interval", "100ms", "--demo-rate", "0.001")
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	type health struct {
		Status      string
		Replication *struct {
			LastSync   *time.Time
			LagSeconds float64
			Stalled    string
		}
	}
	healthNow := func() health {
		var h health
		if err := json.Unmarshal([]byte(get("/api/health")), &h); err != nil || h.Replication == nil {
			t.Fatalf("health: %v %+v", err, h)
		}
		return h
	}
	emit := func(key string) {
		resp, err := http.Post(base+"/api/emit", "application/json", strings.NewReader(`{"event":"export:requested","idempotencyKey":"`+key+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 30s", what)
			}
		}
	}

	emit("before")
	wait("a first sync", func() bool { return healthNow().Replication.LastSync != nil })
	if h := healthNow(); h.Status != "ok" || h.Replication.Stalled != "" {
		t.Fatalf("healthy replication: %+v %+v", h, h.Replication)
	}
	if m := get("/metrics"); !strings.Contains(m, "\nyella_replication_stalled 0\n") {
		t.Error("/metrics lacks yella_replication_stalled 0")
	}
	if d := get("/"); !strings.Contains(d, ">healthy<") {
		t.Error("the dashboard does not say replication is healthy")
	}

	if err := os.Remove(db + "-wal"); err != nil {
		t.Fatal(err)
	}
	emit("after")
	wait("health degraded", func() bool { return healthNow().Status == "degraded" })
	h := healthNow()
	t.Logf("health: %s, lag %.2fs: %s", h.Status, h.Replication.LagSeconds, h.Replication.Stalled)
	if !strings.Contains(h.Replication.Stalled, "WAL file "+db+"-wal was ") { // removed, or replaced by another
		t.Errorf("health does not give the reason: %q", h.Replication.Stalled)
	}
	if m := get("/metrics"); !strings.Contains(m, "\nyella_replication_stalled 1\n") {
		t.Error("/metrics lacks yella_replication_stalled 1")
	}
	if d := get("/"); !strings.Contains(d, ">stalled<") || !strings.Contains(d, "-wal was re") {
		i := strings.Index(d, `id="replication"`)
		t.Errorf("the dashboard does not say replication is stalled, and why: %.600s", d[max(i, 0):])
	}
}
