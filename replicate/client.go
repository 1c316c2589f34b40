package replicate

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/superfly/ltx"
)

// trackedClient wraps the replica client Litestream uses to watch every
// remote operation: Litestream counts its failed syncs only in a local
// variable and logs them at most every 30 s, so this is how Status learns
// about errors as they happen.
type trackedClient struct {
	litestream.ReplicaClient
	lastSync func() time.Time // Litestream's last successful replica sync
	log      *slog.Logger

	mu          sync.Mutex
	consecutive int
	lastErr     string
	lastErrAt   time.Time
	total       int64
}

// record notes the outcome of one remote operation. Errors caused by the
// caller's context ending (shutdown) are not failures of the replica.
func (c *trackedClient) record(ctx context.Context, op string, err error) {
	if err == nil || (ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))) {
		return
	}
	now := time.Now()
	c.mu.Lock()
	if c.lastSync().After(c.lastErrAt) {
		c.consecutive = 0 // a sync succeeded since the last failure
	}
	c.consecutive++
	c.total++
	c.lastErr, c.lastErrAt = op+": "+err.Error(), now
	n := c.consecutive
	c.mu.Unlock()
	last := c.lastSync()
	attrs := []any{"op", op, "error", err, "consecutive_errors", n}
	if last.IsZero() {
		attrs = append(attrs, "last_successful_sync", "never")
	} else {
		attrs = append(attrs, "last_successful_sync", last.UTC().Format(time.RFC3339), "lag", now.Sub(last).Round(time.Millisecond).String())
	}
	c.log.Error("replication failed; Litestream retries with backoff (up to 5m between attempts) while the engine keeps running", attrs...)
}

// errorsSnapshot returns the error counters, the consecutive count reset
// if a sync succeeded after the last failure.
func (c *trackedClient) errorsSnapshot(lastSync time.Time) (consecutive int, total int64, lastErr string, lastErrAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	consecutive = c.consecutive
	if lastSync.After(c.lastErrAt) {
		consecutive = 0
	}
	return consecutive, c.total, c.lastErr, c.lastErrAt
}

// Init initializes the wrapped client, recording a failure.
func (c *trackedClient) Init(ctx context.Context) error {
	err := c.ReplicaClient.Init(ctx)
	c.record(ctx, "init", err)
	return err
}

// LTXFiles lists the replica, recording a failure (also one met while iterating).
func (c *trackedClient) LTXFiles(ctx context.Context, level int, seek ltx.TXID, useMetadata bool) (ltx.FileIterator, error) {
	itr, err := c.ReplicaClient.LTXFiles(ctx, level, seek, useMetadata)
	if err != nil {
		c.record(ctx, "list", err)
		return nil, err
	}
	return &trackedIterator{FileIterator: itr, c: c, ctx: ctx}, nil
}

// OpenLTXFile opens a replica file, recording a failure.
func (c *trackedClient) OpenLTXFile(ctx context.Context, level int, minTXID, maxTXID ltx.TXID, offset, size int64) (io.ReadCloser, error) {
	rc, err := c.ReplicaClient.OpenLTXFile(ctx, level, minTXID, maxTXID, offset, size)
	c.record(ctx, "read", err)
	return rc, err
}

// WriteLTXFile uploads a file, recording a failure.
func (c *trackedClient) WriteLTXFile(ctx context.Context, level int, minTXID, maxTXID ltx.TXID, r io.Reader) (*ltx.FileInfo, error) {
	info, err := c.ReplicaClient.WriteLTXFile(ctx, level, minTXID, maxTXID, r)
	c.record(ctx, "upload", err)
	return info, err
}

// DeleteLTXFiles deletes replica files, recording a failure.
func (c *trackedClient) DeleteLTXFiles(ctx context.Context, a []*ltx.FileInfo) error {
	err := c.ReplicaClient.DeleteLTXFiles(ctx, a)
	c.record(ctx, "delete", err)
	return err
}

// DeleteAll deletes the replica, recording a failure.
func (c *trackedClient) DeleteAll(ctx context.Context) error {
	err := c.ReplicaClient.DeleteAll(ctx)
	c.record(ctx, "delete", err)
	return err
}

// trackedIterator reports listing errors that surface while iterating
// (S3 lists lazily, page by page).
type trackedIterator struct {
	ltx.FileIterator
	c        *trackedClient
	ctx      context.Context
	reported bool
}

// Next advances, recording the iteration error at the end.
func (it *trackedIterator) Next() bool {
	ok := it.FileIterator.Next()
	if !ok {
		it.report(it.FileIterator.Err())
	}
	return ok
}

// Close closes the iterator, recording its error.
func (it *trackedIterator) Close() error {
	err := it.FileIterator.Close()
	it.report(err)
	return err
}

func (it *trackedIterator) report(err error) {
	if err != nil && !it.reported {
		it.reported = true
		it.c.record(it.ctx, "list", err)
	}
}
