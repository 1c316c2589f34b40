package replicate_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yella-go/yella/replicate"
	"github.com/yella-go/yella/store/sqlitestore"
)

// An S3 endpoint with nothing listening: Start succeeds (the engine must not
// depend on the replica to serve), the failures are logged clearly and
// retried, emits keep succeeding and runs keep completing, and Status shows
// the growing lag and error count. Close reports that the replica is not in
// sync.
func TestUnreachableS3(t *testing.T) {
	target := unreachableS3(t)
	checkCABundleRefused(t, target)

	to := filepath.Join(t.TempDir(), "restored.db")
	restored := make(chan error, 1)
	go func() { restored <- replicate.Restore(t.Context(), target, to, replicate.RestoreOptions{}) }()

	var logs logBuffer
	si := 100 * time.Millisecond
	n := openNode(t, filepath.Join(t.TempDir(), "app.db"), &target, replicate.Options{SyncInterval: si, Logger: logs.logger()})

	first := n.rep.Status()
	if !first.LastSync.IsZero() || first.ConsecutiveErrors != 0 {
		t.Errorf("status at start: %+v", first)
	}
	// Work while the replica is down: every emit succeeds, every run completes.
	total := 0
	waitFor(t, 60*time.Second, "two failed replica operations", func() bool {
		n.emit(t, fmt.Sprintf("k%d", total), 0, 20)
		total += 20
		return n.rep.Status().ConsecutiveErrors >= 2
	})
	if err := n.eng.Drain(t.Context()); err != nil {
		t.Fatalf("the engine stopped working while the replica was down: %v", err)
	}
	runs, _ := dbRuns(t, n.path)
	done := 0
	for _, s := range runs {
		if s == "completed" {
			done++
		}
	}
	if done != total {
		t.Errorf("%d of %d runs completed while the replica was down", done, total)
	}

	checkStatusWhileDown(t, first, n.rep.Status(), si)
	checkLogsWhileDown(t, logs.String())

	// Restoring from it fails with the cause and creates nothing (it ran
	// meanwhile: the SDK retries for seconds).
	if err := <-restored; err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Restore from the unreachable replica: %v, want the cause", err)
	}
	if _, err := os.Stat(to); !os.IsNotExist(err) {
		t.Errorf("a failed restore created %s: %v", to, err)
	}

	// Close tries a last sync; ctx bounds it (the SDK alone retries for
	// about 7 s).
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	t0 := time.Now()
	err := n.closeCtx(t, ctx) // engine, store, then replicator

	t.Logf("Close after %v: %v", time.Since(t0).Round(time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), "not in sync") {
		t.Errorf("Close with the replica down: %v, want an error saying the replica is not in sync", err)
	}
}

// unreachableS3 is an S3 target on a local port where nothing listens,
// with static credentials: the SDK's default chain would probe instance
// metadata endpoints.
func unreachableS3(t *testing.T) replicate.Target {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now
	target, err := replicate.ParseURL(fmt.Sprintf("s3://yella-test/app?endpoint=http://127.0.0.1:%d&region=us-east-1", port))
	if err != nil {
		t.Fatal(err)
	}
	target.AccessKeyID, target.SecretAccessKey = "AKIATEST", "test-secret"
	return target
}

// checkCABundleRefused: with AWS_CA_BUNDLE set, Litestream's S3 client
// cannot start: Start says so and how to fix it.
func checkCABundleRefused(t *testing.T, target replicate.Target) {
	t.Helper()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, []byte("not used"), 0o644)
	t.Setenv("AWS_CA_BUNDLE", ca)
	db := filepath.Join(t.TempDir(), "ca.db")
	st, err := sqlitestore.Open(db, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := replicate.Start(t.Context(), db, target, replicate.Options{}); err == nil || !strings.Contains(err.Error(), "unset it") {
		t.Errorf("Start with AWS_CA_BUNDLE set: %v, want an error explaining it", err)
		if rep != nil {
			rep.Close(t.Context())
		}
	}
	st.Close()
	t.Setenv("AWS_CA_BUNDLE", "")
}

// checkStatusWhileDown: Status shows no sync, a lag that grew since
// first, the errors counted with their cause, and the target without its
// secret.
func checkStatusWhileDown(t *testing.T, first, s replicate.Status, si time.Duration) {
	t.Helper()
	t.Logf("status: %+v", s)
	if !s.LastSync.IsZero() {
		t.Errorf("LastSync %v, but nothing can have reached the replica", s.LastSync)
	}
	if s.Lag < 2*si || s.Lag <= first.Lag {
		t.Errorf("lag %v did not grow (was %v at start)", s.Lag, first.Lag)
	}
	if s.ConsecutiveErrors < 2 || s.TotalErrors < int64(s.ConsecutiveErrors) {
		t.Errorf("error counts %d consecutive, %d total; want at least 2", s.ConsecutiveErrors, s.TotalErrors)
	}
	if !strings.Contains(s.LastError, "connection refused") || s.LastErrorAt.IsZero() {
		t.Errorf("last error %q at %v: want the cause (connection refused)", s.LastError, s.LastErrorAt)
	}
	if strings.Contains(s.Target, "test-secret") || !strings.Contains(s.Target, "s3://yella-test/app") {
		t.Errorf("status target %q", s.Target)
	}
}

// checkLogsWhileDown: every failure is logged with its cause, the count and
// the retry, and the logs never show the secret.
func checkLogsWhileDown(t *testing.T, out string) {
	t.Helper()
	t.Logf("logs:\n%s", out)
	if c := strings.Count(out, "replication failed"); c < 2 || !strings.Contains(out, "connection refused") ||
		!strings.Contains(out, "consecutive_errors=2") || !strings.Contains(out, "retries with backoff") {
		t.Errorf("want at least two clear error logs with the cause, the count and the retry; got %d:\n%s", c, out)
	}
	if strings.Contains(out, "test-secret") {
		t.Error("the logs show the secret key")
	}
}
