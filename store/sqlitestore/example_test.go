package sqlitestore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/store/sqlitestore"
)

// Open creates the database file (WAL mode) and holds it for one engine
// process; what the engine stores there outlives the process. Here a second
// store opened on the same file after the first closed finds the run as the
// first engine left it.
func ExampleOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "yella-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "app.db")

	st, err := sqlitestore.Open(path, sqlitestore.Options{Synchronous: sqlitestore.Full}) // Full: survives power loss too
	if err != nil {
		log.Fatal(err)
	}
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	err = eng.Register(yella.Process{Name: "greet", On: "user:joined", Run: yella.Handle(func(c *yella.Ctx, u struct{ Name string }) yella.Result {
		return c.OK("hello " + u.Name)
	})})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	runs, err := eng.EmitAndWait(ctx, "user:joined", map[string]string{"Name": "Ada"})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Stop(ctx); err != nil { // stop the engine, then close the store
		log.Fatal(err)
	}
	if err := st.Close(); err != nil {
		log.Fatal(err)
	}

	st, err = sqlitestore.Open(path, sqlitestore.Options{}) // the next process
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
	// Output: greet completed "hello Ada"
}
