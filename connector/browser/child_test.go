package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/store/sqlitestore"
)

// crashChildEnv turns the test binary into an engine process for
// TestEngineKilledMidScrape; its value is a crashChild in JSON.
const crashChildEnv = "YELLA_BROWSER_CRASH_CHILD"

type crashChild struct {
	DB, Dir, URL     string
	Emit, AtMostOnce bool
}

// childReport is what the second engine process prints once the run has
// ended.
type childReport struct {
	Status  yella.Status
	Output  Result
	Effects []yella.EffectRecord
}

func TestMain(m *testing.M) {
	if raw := os.Getenv(crashChildEnv); raw != "" {
		if err := runCrashChild(raw); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// runCrashChild is an engine on SQLite whose process "scrape" reads the
// page of its event with Scrape. With Emit it emits that event; then it
// waits for the run to end and prints a childReport.
func runCrashChild(raw string) error {
	var spec crashChild
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return err
	}
	ctx := context.Background()
	st, err := sqlitestore.Open(spec.DB, sqlitestore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	pool, err := New(Config{TempDir: spec.Dir, PageTimeout: time.Minute})
	if err != nil {
		return err
	}
	defer pool.Close()
	eng, err := yella.New(yella.Config{Store: st})
	if err != nil {
		return err
	}
	ended := make(chan string, 1)
	eng.Subscribe(func(ev yella.Event) {
		switch ev.Type {
		case yella.RunCompleted, yella.RunFailed, yella.RunDeadLettered, yella.RunFenced:
			select {
			case ended <- ev.RunID:
			default:
			}
		}
	})
	err = eng.Register(yella.Process{Name: "scrape", On: "page:requested",
		Run: yella.Handle(func(c *yella.Ctx, in struct{ URL string }) yella.Result {
			var opts []ScrapeOption
			if spec.AtMostOnce {
				opts = append(opts, AtMostOnce())
			}
			r, err := Scrape(c, pool, "read", Request{URL: in.URL}, opts...)
			if err != nil {
				return connector.Outcome(c, err)
			}
			return c.OK(r)
		})})
	if err != nil {
		return err
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}
	if spec.Emit {
		if _, err := eng.Emit(ctx, "page:requested", map[string]string{"URL": spec.URL}, yella.IdempotencyKey("page-1")); err != nil {
			return err
		}
		fmt.Println("emitted")
	}
	var id string
	select {
	case id = <-ended:
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("the run did not end")
	}
	run, err := eng.Run(ctx, id)
	if err != nil {
		return err
	}
	rep := childReport{Status: run.Status}
	json.Unmarshal(run.Output, &rep.Output)
	if rep.Effects, err = eng.Effects(ctx, id); err != nil {
		return err
	}
	if err := eng.Stop(ctx); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(rep)
}
