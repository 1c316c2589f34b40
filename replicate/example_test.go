package replicate_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/replicate"
	"github.com/yella-go/yella/store/sqlitestore"
)

// Replicating an engine's database to a directory (a mounted disk of
// another machine, here a temporary one), then restoring it elsewhere after
// the first machine is gone: the restored file holds the runs the engine
// committed, and a new engine can start on it.
func ExampleStart() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "yella-replicate-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "app.db")
	target, err := replicate.ParseURL("file://" + filepath.Join(dir, "replica"))
	if err != nil {
		log.Fatal(err)
	}

	// Open the store first (it creates the file in WAL mode), with the
	// checkpoints left to Litestream, then replicate it.
	st, err := sqlitestore.Open(path, sqlitestore.Options{AutoCheckpoint: replicate.AutoCheckpoint})
	if err != nil {
		log.Fatal(err)
	}
	rep, err := replicate.Start(ctx, path, target, replicate.Options{})
	if err != nil {
		log.Fatal(err)
	}
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	err = eng.Register(yella.Process{Name: "invoice", On: "order:shipped", Run: func(c *yella.Ctx) yella.Result {
		return c.OK("INV-7")
	}})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	runs, err := eng.EmitAndWait(ctx, "order:shipped", nil)
	if err != nil {
		log.Fatal(err)
	}
	// Shut down in this order: the engine, the store, then the replicator,
	// whose Close makes a final sync of every commit.
	if err := eng.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	if err := st.Close(); err != nil {
		log.Fatal(err)
	}
	if err := rep.Close(ctx); err != nil {
		log.Fatal(err)
	}

	// On the new machine: restore, then open as usual.
	restored := filepath.Join(dir, "restored.db")
	if err := replicate.Restore(ctx, target, restored, replicate.RestoreOptions{}); err != nil {
		log.Fatal(err)
	}
	st, err = sqlitestore.Open(restored, sqlitestore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	eng, err = yella.New(yella.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	r, err := eng.Run(ctx, runs[0].ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Process, r.Status, string(r.Output))
	// Output: invoice completed "INV-7"
}
