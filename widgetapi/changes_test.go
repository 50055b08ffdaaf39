package widgetapi_test

import (
	"testing"
	"time"

	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// TestChangesWaitIsClamped: a wait longer than the contract allows is sent
// as the contract's maximum (the server caps it further), not refused.
func TestChangesWaitIsClamped(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) { o.MaxWait = 100 * time.Millisecond }))
	l, err := env.Client(t, apitest.TokenA).Changes(ctx(t), widgetapi.ChangesOptions{After: 0, Wait: time.Hour})
	if err != nil {
		t.Fatalf("Changes with a one-hour wait: %v, want an (empty) answer after the server's maximum wait", err)
	}
	if len(l.Changes) != 0 {
		t.Errorf("Changes on an empty feed: %d changes, want 0", len(l.Changes))
	}
}
