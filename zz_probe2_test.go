package yella_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/memstore"
	"github.com/yella-go/yella/store/sqlitestore"
)

func TestZZReads(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) store.Store{
		"mem": func(*testing.T) store.Store { return memstore.New() },
		"sqlite": func(t *testing.T) store.Store {
			s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "y.db"), sqlitestore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		"pg": func(t *testing.T) store.Store { return pgFactory().Open(t, t.TempDir()) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			bad := "a\x00\xff"
			_, err := s.Run(ctx, bad)
			t.Logf("Run: %v", err)
			_, err = s.RunsByID(ctx, []string{bad})
			t.Logf("RunsByID: %v", err)
			_, err = s.Runs(ctx, store.RunFilter{Process: bad, Limit: 10})
			t.Logf("Runs process: %v", err)
			_, err = s.Runs(ctx, store.RunFilter{Event: bad, Limit: 10})
			t.Logf("Runs event: %v", err)
			_, err = s.Runs(ctx, store.RunFilter{CorrelationID: bad, Limit: 10})
			t.Logf("Runs corr: %v", err)
			_, err = s.CountRuns(ctx, store.RunFilter{Process: bad})
			t.Logf("CountRuns: %v", err)
			_, err = s.Chain(ctx, bad)
			t.Logf("Chain: %v", err)
			_, err = s.Timeline(ctx, bad)
			t.Logf("Timeline: %v", err)
			_, err = s.Effects(ctx, bad)
			t.Logf("Effects: %v", err)
			_, err = s.Signal(ctx, store.SignalRequest{Key: bad, Now: time.Now()})
			t.Logf("Signal: %v", err)
			err = s.PauseSchedule(ctx, bad, true, time.Now())
			t.Logf("PauseSchedule: %v", err)
			_, err = s.Update(ctx, store.Update{RunID: bad, Epoch: 1, Action: store.ActionComplete, Now: time.Now()})
			t.Logf("Update: %v", err)
			err = s.StartEffect(ctx, bad, 1, "k", time.Now())
			t.Logf("StartEffect: %v", err)
		})
	}
}
