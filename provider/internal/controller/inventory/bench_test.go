package inventory

import (
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// BenchmarkObserve10k is one WidgetInventory observation of a project of
// 10,000 widgets on the reference Widget API server (its own process's
// HTTP server, no contract checker): 20 list calls of 500 and the sorting
// that decides what the namespace may see. Half the widgets are another
// namespace's.
func BenchmarkObserve10k(b *testing.B) {
	s, err := server.New(server.Options{DataDir: b.TempDir(), Tokens: map[string]string{apitest.TokenA: apitest.ProjectA}})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	b.Cleanup(func() { s.Shutdown(); hs.Close(); _ = s.Close() })
	c, err := widgetapi.New(hs.URL, widgetapi.WithToken(apitest.TokenA))
	if err != nil {
		b.Fatal(err)
	}
	const n = 10000
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				labels := map[string]string{"app": "legacy"}
				if i%2 == 1 {
					labels["widgetco.io/owner"] = "n_team-b.w"
				}
				if _, err := c.CreateWidget(b.Context(), widgetapi.CreateWidgetRequest{Name: fmt.Sprintf("w-%05d", i), Size: "small", Region: "us-east-1", Labels: labels}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	e := &external{api: c}
	mg := inv(nil)
	for b.Loop() {
		if _, err := e.Observe(b.Context(), mg); err != nil {
			b.Fatal(err)
		}
	}
	a := mg.Status.AtProvider
	if a.Matched != n || a.Unowned != n/2 || a.OutOfReach != n/2 || a.Truncated {
		b.Fatalf("want %d matched, half unowned, half out of reach; got %+v", n, a)
	}
}
