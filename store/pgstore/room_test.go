package pgstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yella-go/yella/store"
	"github.com/yella-go/yella/store/pgstore"
)

// TestClaimTakesItsRoomWhenItRuns: a claim with a Room asks it for the
// caller's free slots when the claim runs, not when it is requested: a
// claim queued while the writer commits the batch before it takes the
// room its caller has once that batch is done, and says which bound it
// applied. Room bounds Limit, never raises it; for a capped process the
// same (its claim is a statement of its own).
func TestClaimTakesItsRoomWhenItRuns(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		cap  int
	}{{"uncapped", 0}, {"capped", 100}} {
		t.Run(c.name, func(t *testing.T) {
			s := openIn(t, t.TempDir(), pgstore.Options{})
			admit(t, s, "p", 20, 0)
			now := time.Now()
			var room atomic.Int64
			room.Store(2)
			req := store.ClaimNextRequest{Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute), Processes: map[string]int{"p": c.cap},
				Limit: 10, Room: func() int { return int(room.Load()) }}

			// The writer holds an admission's batch; the claim waits behind
			// it, and the room grows meanwhile.
			inCommit, release := holdFirstCommit(t, s.Schema())
			admitted := make(chan struct{})
			go func() { defer close(admitted); admit(t, s, "q", 1, 0) }()
			<-inCommit
			claimed := make(chan store.ClaimNextResult, 1)
			calling := make(chan struct{})
			go func() {
				close(calling)
				res, err := s.ClaimNext(ctx, req)
				if err != nil {
					t.Error(err)
				}
				claimed <- res
			}()
			<-calling
			time.Sleep(100 * time.Millisecond) // the claim is queued behind the held batch
			room.Store(5)
			release()
			<-admitted
			res := <-claimed
			if len(res.Runs) != 5 || res.Limit != 5 {
				t.Fatalf("claim queued at room 2, run at room 5: %d runs, limit %d; want 5 and 5", len(res.Runs), res.Limit)
			}

			room.Store(50)
			if res, err := s.ClaimNext(ctx, req); err != nil || len(res.Runs) != 10 || res.Limit != 10 {
				t.Fatalf("room 50, limit 10: %v, %d runs, limit %d; want 10 and 10", err, len(res.Runs), res.Limit)
			}
			req.Room = nil
			if res, err := s.ClaimNext(ctx, req); err != nil || len(res.Runs) != 5 || res.Limit != 10 || res.More {
				t.Fatalf("no room, limit 10, 5 runs left: %v, %d runs, limit %d, more %v; want 5, 10, false", err, len(res.Runs), res.Limit, res.More)
			}
		})
	}
}
