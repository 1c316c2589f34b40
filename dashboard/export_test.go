package dashboard

import (
	"net/http"
	"time"

	"github.com/yella-go/yella"
)

// NewAt is New with the dashboard's clock replaced, so tests on a fake
// engine clock render stable times (exported to dashboard_test only).
func NewAt(eng *yella.Engine, opts Options, now func() time.Time) (http.Handler, error) {
	return newHandler(eng, opts, now)
}
