package server_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken"
	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken/idtokentest"
)

// longToken is a static token long enough to be served from a throttled
// address (server.MinUnthrottledTokenBytes).
const longToken = "tok-4f3c9a1e7b2d8c6a0e5f9b3d7a1c"

// TestThrottledAddressServesKnownCredentials: one address serves many
// clients (provider-widget serves every tenant). Once refused tokens have
// spent that address's failed-authentication budget, the credentials that
// are cheap to check and cannot be guessed are still served: a long static
// token, and an identity token that verified before. Everything else from
// the address, which is what a guesser sends, is still 429 and is not
// checked: no forged token is verified.
func TestThrottledAddressServesKnownCredentials(t *testing.T) {
	clk := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	key, unpublished := idtokentest.RSA(t, "k1"), idtokentest.RSA(t, "k1")
	env := identityEnv(t, clk, key, func(o *server.Options) {
		o.Tokens[longToken] = apitest.ProjectB
		o.FailedAuthRate = 0.5 // one attempt back every 2s
		o.FailedAuthBurst = 3
	})
	now := clk.Now()
	verified := idtokentest.Sign(t, key, idClaims(now, providerSA))
	fresh := idtokentest.Sign(t, key, idClaims(now, "system:serviceaccount:team-b:fresh"))
	forged := idtokentest.Sign(t, unpublished, idClaims(now, providerSA))

	type step struct {
		reason  string
		token   string
		advance time.Duration // of the clock, before the request
		want    int
	}
	steps := []step{
		{reason: "A tenant's identity token verifies before the address is throttled.", token: verified, want: 200},
		{reason: "Another tenant's refused token spends the budget (1/3).", token: "wrong", want: 401},
		{reason: "Refused (2/3).", token: "wrong", want: 401},
		{reason: "Refused (3/3).", token: "wrong", want: 401},
		{reason: "The address is throttled now.", token: "wrong", want: 429},
		{reason: "A long static token is served from the throttled address.", token: longToken, want: 200},
		{reason: "An identity token that verified before is served from it.", token: verified, want: 200},
		{reason: "A short static token may have been chosen by a person: it keeps the throttle.", token: apitest.TokenA, want: 429},
		{reason: "A forged identity token is not verified.", token: forged, want: 429},
		{reason: "Nor is a valid identity token never seen before: verifying it is the expensive path.", token: fresh, want: 429},
		{reason: "A request without a token.", token: "", want: 429},
		{reason: "Two seconds earn one attempt back, which the fresh token spends and, verified, refunds.", token: fresh, advance: 2 * time.Second, want: 200},
		{reason: "The forged token gets the same attempt, and spends it.", token: forged, want: 401},
		{reason: "After which the address is throttled again.", token: forged, want: 429},
		{reason: "The long static token is still served.", token: longToken, want: 200},
		{reason: "A minute later the budget is full again, and refused tokens spend it (1/3).", token: "wrong", advance: idtoken.CachedTokenTTL, want: 401},
		{reason: "Refused (2/3).", token: "wrong", want: 401},
		{reason: "Refused (3/3).", token: "wrong", want: 401},
		{reason: "Throttled again.", token: "wrong", want: 429},
		{reason: "The cache's trust in the first identity token has lapsed: it is verified again, outside the budget.", token: verified, want: 200},
		{reason: "As is the token the refilled budget let in.", token: fresh, want: 200},
	}
	reg := env.Server.Registry()
	before := refusedCount(t, reg, string(idtoken.ReasonSignature))
	got := make([]int, 0, len(steps))
	want := make([]int, 0, len(steps))
	for _, s := range steps {
		clk.Add(s.advance)
		a, _ := call(t, env, http.MethodGet, "/v1/widgets", s.token, "")
		got = append(got, a.Status)
		want = append(want, s.want)
		if a.Status != s.want {
			t.Errorf("%s\nstatus: want %d, got %d", s.reason, s.want, a.Status)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statuses -want, +got:\n%s", diff)
	}
	if n := refusedCount(t, reg, string(idtoken.ReasonSignature)) - before; n != 1 {
		t.Errorf("forged tokens verified: want 1 (the one let in by the refilled budget), got %v", n)
	}
}

// TestConcurrentForgedTokensAreChargedBeforeVerifying: an address sending
// many forged identity tokens at once has each charged to its
// failed-authentication budget before it is verified, so only its burst is
// verified and the rest are 429 at once, however many are in flight.
// The issuer's first key fetch is held until the answers are in, so every
// token is in flight at the same time.
func TestConcurrentForgedTokensAreChargedBeforeVerifying(t *testing.T) {
	const (
		burst  = 3
		forged = 40
	)
	clk := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	key, unpublished := idtokentest.RSA(t, "k1"), idtokentest.RSA(t, "k1")
	gate := make(chan struct{})
	env := identityEnv(t, clk, key, func(o *server.Options) {
		o.FailedAuthRate = 0.001 // no attempt back during the test
		o.FailedAuthBurst = burst
		o.IdentityTokens.Issuers[0].Keys.FetchTimeout = idtoken.Duration(time.Minute)
		jwks := idtokentest.JWKS(key)
		o.IdentityTokenOptions.Fetchers = map[string]idtoken.Fetcher{testIssuer: idtoken.FetcherFunc(func(ctx context.Context) ([]byte, error) {
			select {
			case <-gate:
				return jwks, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})}
	})
	now := clk.Now()
	statuses := make(chan int, forged)
	var wg sync.WaitGroup
	for i := range forged {
		tok := idtokentest.Sign(t, unpublished, idClaims(now, providerSA, func(c map[string]any) { c["jti"] = i }))
		wg.Go(func() {
			a, _ := call(t, env, http.MethodGet, "/v1/widgets", tok, "")
			statuses <- a.Status
		})
	}
	// Those refused before verifying answer at once; the others wait for
	// the keys. Without the charge before verifying all wait, so give up
	// waiting for the answers after a while and open the gate anyway.
	count := map[int]int{}
	deadline := time.After(5 * time.Second)
collect:
	for range forged - burst {
		select {
		case s := <-statuses:
			count[s]++
		case <-deadline:
			break collect
		}
	}
	close(gate)
	wg.Wait()
	close(statuses)
	for s := range statuses {
		count[s]++
	}
	want := map[int]int{http.StatusUnauthorized: burst, http.StatusTooManyRequests: forged - burst}
	if diff := cmp.Diff(want, count); diff != "" {
		t.Errorf("answers to %d concurrent forged tokens from one address with a burst of %d, -want, +got:\n%s", forged, burst, diff)
	}
	if n := refusedCount(t, env.Server.Registry(), string(idtoken.ReasonSignature)); n != burst {
		t.Errorf("forged tokens verified: want %d, got %v", burst, n)
	}
}
