package apitest

import (
	"context"
	"testing"

	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// RateLimited makes a server allow each token a burst of 20 calls and then
// one call per 1000 seconds: a test that needs a 429 uses up the burst with
// Exhaust. Pass it to WithOptions.
func RateLimited(o *server.Options) { o.RateLimit = 0.001; o.RateBurst = 20 }

// Exhaust calls the API with c until it answers 429, failing t when it
// answers anything else or never rate limits within 1000 calls.
func Exhaust(t *testing.T, c *widgetapi.Client) {
	t.Helper()
	for range 1000 {
		_, err := c.ListWidgets(context.Background(), widgetapi.ListWidgetsOptions{})
		if _, limited := widgetapi.IsRateLimited(err); limited {
			return
		}
		if err != nil {
			t.Fatalf("cannot list widgets: %v", err)
		}
	}
	t.Fatal("the Widget API is not rate limiting after 1000 calls")
}
