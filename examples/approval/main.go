// Approval: a human approval with a reminder and a deadline, on a local
// SQLite file.
//
//	go run ./examples/approval -approve-after 3s
//
// An order is placed (order:placed); the "approve" process asks for an
// approval, waits for the signal "order:<id>:approval" for -remind
// (default 24h), sends a reminder, and waits again until -deadline
// (default 48h) has passed since the request; then it completes with the
// decision, or "expired". While it waits the run holds no slot and no
// goroutine, and a restart or a crash changes nothing: the request and the
// reminder are each sent once, and the wait resumes where it was.
//
// Send the approval from the program itself (-approve-after D), or from
// another terminal while the program runs, through the HTTP API of
// `yella serve` on the same file once the program stopped, or by running
// the program again with -approve ID: the signal is kept until a wait
// takes it (Config.SignalRetention), so it may even come first.
//
// To watch the reminder and the deadline without waiting two days:
//
//	go run ./examples/approval -remind 2s -deadline 4s
//
// Flags: -db PATH (default approval.db in the user's cache directory,
// yella/ in it), -order ID, -remind D, -deadline D, -approve-after D,
// -approve ID (send the approval of order ID and exit).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/sqlitestore"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "approval:", err)
		os.Exit(1)
	}
}

// Order is the placed order.
type Order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// Decision is the approval signal's payload.
type Decision struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

// signalKey is the business key the approval is sent with.
func signalKey(order string) string { return "order:" + order + ":approval" }

// approve is the process: request, wait, remind, wait, decide.
func approve(out io.Writer, remind, deadline time.Duration) yella.Process {
	return yella.Process{Name: "approve", On: "order:placed", Run: yella.Handle(func(c *yella.Ctx, o Order) yella.Result {
		if _, err := yella.Effect(c, "request", func(context.Context) (bool, error) {
			fmt.Fprintf(out, "approval requested for order %s (%d €)\n", o.ID, o.Amount)
			return true, nil
		}); err != nil {
			return c.Error(err)
		}
		d, ok, err := yella.WaitFor[Decision](c, "first-wait", signalKey(o.ID), remind)
		if err != nil {
			return c.Error(err)
		}
		if !ok {
			if _, err := yella.Effect(c, "reminder", func(context.Context) (bool, error) {
				fmt.Fprintf(out, "reminder: order %s still waits for approval\n", o.ID)
				return true, nil
			}); err != nil {
				return c.Error(err)
			}
			if d, ok, err = yella.WaitFor[Decision](c, "second-wait", signalKey(o.ID), deadline-remind); err != nil {
				return c.Error(err)
			}
		}
		switch {
		case !ok:
			fmt.Fprintf(out, "order %s: no decision within %s, expired\n", o.ID, deadline)
			return c.OK("expired")
		case d.Approved:
			fmt.Fprintf(out, "order %s approved by %s\n", o.ID, d.By)
			return c.OK("approved")
		}
		fmt.Fprintf(out, "order %s rejected by %s\n", o.ID, d.By)
		return c.OK("rejected")
	})}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("approval", flag.ContinueOnError)
	db := fs.String("db", defaultDB(), "the SQLite file")
	order := fs.String("order", "A-1001", "the order id")
	remind := fs.Duration("remind", 24*time.Hour, "send a reminder after this long without a decision")
	deadline := fs.Duration("deadline", 48*time.Hour, "expire the request after this long without a decision")
	approveAfter := fs.Duration("approve-after", 0, "approve the order from this program after this long (0: never)")
	approveID := fs.String("approve", "", "send the approval of this order and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *remind <= 0 || *deadline <= *remind {
		return errors.New("-remind must be positive and shorter than -deadline")
	}
	if err := os.MkdirAll(filepath.Dir(*db), 0o755); err != nil {
		return err
	}
	st, err := sqlitestore.Open(*db, sqlitestore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		return err
	}
	if err := eng.Register(approve(out, *remind, *deadline)); err != nil {
		return err
	}
	ctx := context.Background()
	if err := eng.Start(ctx); err != nil {
		return err
	}
	defer eng.Stop(ctx)
	if *approveID != "" {
		res, err := eng.Signal(ctx, signalKey(*approveID), Decision{Approved: true, By: "the command line"})
		if err != nil {
			return err
		}
		if res.Kept {
			fmt.Fprintf(out, "no run waits for order %s yet: the approval is kept for its wait\n", *approveID)
		} else {
			fmt.Fprintf(out, "approval delivered to run %s\n", res.RunID)
		}
		return nil
	}
	if *approveAfter > 0 {
		time.AfterFunc(*approveAfter, func() {
			if _, err := eng.Signal(ctx, signalKey(*order), Decision{Approved: true, By: "a manager"}); err != nil {
				fmt.Fprintln(os.Stderr, "approval:", err)
			}
		})
	}
	// The order's id is its idempotency key: running the program again
	// resumes the same order's wait rather than placing another.
	runs, err := eng.EmitAndWait(ctx, "order:placed", Order{ID: *order, Amount: 1250}, yella.IdempotencyKey(*order))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "run %s: %s, %s\n", runs[0].ID, runs[0].Status, runs[0].Output)
	return nil
}

func defaultDB() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "yella", "approval.db")
}
