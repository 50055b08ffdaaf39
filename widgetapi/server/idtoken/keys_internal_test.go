package idtoken

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestKeyAfterAFetchItDidNotWait: a request that read the key set before
// another request's fetch published it, and looks for its key once that
// fetch is done (within the refresh interval, so it starts none of its
// own), gets the key rather than "the issuer's keys are not available".
// Under load, requests of the first instant interleave this way.
func TestKeyAfterAFetchItDidNotWait(t *testing.T) {
	jwks := []byte(`{"keys":[` + rsaJWK(t, 2048, 65537) + `]}`)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	k := &issuerKeys{
		issuer:      "https://issuer.example",
		fetcher:     FetcherFunc(func(context.Context) ([]byte, error) { return jwks, nil }),
		minInterval: 10 * time.Second,
		maxAge:      time.Hour,
		timeout:     5 * time.Second,
		now:         func() time.Time { return now },
		observe:     func(string, error) {},
		base:        context.Background(),
		wg:          &sync.WaitGroup{},
	}
	stale := k.cur.Load() // before any fetch: no keys
	done := k.refresh()   // another request's fetch
	if done == nil {
		t.Fatal("the first refresh started no fetch")
	}
	<-done
	got, err := k.keyFrom(context.Background(), stale, "k", "RS256")
	if err != nil {
		t.Fatalf("key after another request's fetch: %v, want the fetched key", err)
	}
	if got.kid != "k" {
		t.Errorf("key after another request's fetch: kid %q, want k", got.kid)
	}
	k.wg.Wait()
}
