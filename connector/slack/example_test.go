package slack_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/yella-go/yella"
	"github.com/yella-go/yella/connector"
	"github.com/yella-go/yella/connector/slack"
	"github.com/yella-go/yella/yellatest"
)

// A handler posts an alert with chat.postMessage. Slack answers most
// failures with HTTP 200 and {"ok":false}: channel_not_found fails the run
// for good, ratelimited or internal_error is retried.
func Example() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"ok":true,"channel":"C024BE91L","ts":"1700000000.000100"}`)
	}))
	defer api.Close()
	cl := &slack.Client{Token: "xoxb-example", BaseURL: api.URL} // BaseURL: only for the local fake

	k, err := yellatest.New(yella.Config{}, yella.Process{Name: "alert", On: "disk:full",
		Run: func(c *yella.Ctx) yella.Result {
			p, err := slack.PostMessage(c, cl, "post-alert", slack.Message{Channel: "#ops", Text: "disk full on *db-1*"})
			if err != nil {
				return connector.Outcome(c, err)
			}
			return c.OK(p.TS)
		}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer k.Close()
	ctx := context.Background()
	em, _ := k.Engine.Emit(ctx, "disk:full", nil)
	k.RunUntilIdle(ctx)
	r, _ := k.Engine.Run(ctx, em.Runs[0])
	fmt.Println(r.Status, string(r.Output))
	// Output:
	// completed "1700000000.000100"
}
