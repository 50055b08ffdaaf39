package server_test

import (
	"context"
	"errors"
	"io"
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

// TestIdentityTokenLongPollsAreCapped: the long-poll cap of a static token
// applies to an identity token's mapping. ServiceAccounts under one
// namespace wildcard share it, so creating ServiceAccounts does not buy a
// namespace more; another mapping has its own.
func TestIdentityTokenLongPollsAreCapped(t *testing.T) {
	clk := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	key := idtokentest.RSA(t, "k1")
	env := identityEnv(t, clk, key, func(o *server.Options) {
		o.MaxPollsPerToken = 1
		o.MaxWait = 30 * time.Second
	})
	now := clk.Now()
	one := idtokentest.Sign(t, key, idClaims(now, "system:serviceaccount:team-b:one"))
	two := idtokentest.Sign(t, key, idClaims(now, "system:serviceaccount:team-b:two"))
	editor := idtokentest.Sign(t, key, idClaims(now, providerSA))
	poll := func(ctx context.Context, token string) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+"/v1/changes?after=0&wait=1", nil)
		if err != nil {
			t.Error(err)
			return 0
		}
		req.Header.Set("Authorization", "Bearer "+token)
		rsp, err := env.HTTP.Client().Do(req)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Error(err)
			}
			return 0
		}
		_, _ = io.Copy(io.Discard, rsp.Body)
		_ = rsp.Body.Close()
		return rsp.StatusCode
	}
	held, release := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		req, _ := http.NewRequestWithContext(held, http.MethodGet, env.URL+"/v1/changes?after=0&wait=30", nil)
		req.Header.Set("Authorization", "Bearer "+one)
		if rsp, err := env.HTTP.Client().Do(req); err == nil {
			_ = rsp.Body.Close()
		}
	})
	waitForGauge(t, env.Server, "widgetapi_long_polls", 1)
	got := []int{poll(ctx(t), two), poll(ctx(t), editor), poll(ctx(t), apitest.TokenB)}
	release()
	wg.Wait()
	want := []int{http.StatusTooManyRequests, http.StatusOK, http.StatusOK}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("long polls of team-b:two, the editor and static token B while team-b:one holds one, -want, +got:\n%s", diff)
	}
}

// TestHangingIssuerLeavesServerResponsive: while an issuer's JWKS endpoint
// hangs, static tokens and identity tokens signed by held keys are served
// at once; only a token naming a key not yet held waits, within the fetch
// timeout.
func TestHangingIssuerLeavesServerResponsive(t *testing.T) {
	clk := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	held, rotated := idtokentest.RSA(t, "held"), idtokentest.RSA(t, "rotated")
	hanging := make(chan struct{})
	var once sync.Once
	jwks := idtokentest.JWKS(held)
	env := identityEnv(t, clk, held, func(o *server.Options) {
		o.IdentityTokens.Issuers[0].Keys.FetchTimeout = idtoken.Duration(2 * time.Second)
		first := true
		var mu sync.Mutex
		o.IdentityTokenOptions.Fetchers = map[string]idtoken.Fetcher{testIssuer: idtoken.FetcherFunc(func(ctx context.Context) ([]byte, error) {
			mu.Lock()
			f := first
			first = false
			mu.Unlock()
			if f {
				return jwks, nil
			}
			once.Do(func() { close(hanging) })
			<-ctx.Done()
			return nil, ctx.Err()
		})}
	})
	now := clk.Now()
	ok := idtokentest.Sign(t, held, idClaims(now, providerSA))
	if a, _ := call(t, env, "GET", "/v1/widgets", ok, ""); a.Status != 200 {
		t.Fatalf("a token of the held key before the hang: %d", a.Status)
	}
	clk.Add(time.Minute)
	waiting := make(chan answer, 1)
	start := time.Now()
	go func() {
		a, _ := call(t, env, "GET", "/v1/widgets", idtokentest.Sign(t, rotated, idClaims(now, providerSA)), "")
		waiting <- a
	}()
	<-hanging
	for _, tok := range []string{ok, apitest.TokenA} {
		t0 := time.Now()
		if a, _ := call(t, env, "GET", "/v1/widgets", tok, ""); a.Status != 200 {
			t.Errorf("during the hang: %d", a.Status)
		}
		if d := time.Since(t0); d > time.Second {
			t.Errorf("a request during the hang took %s", d)
		}
	}
	a := <-waiting
	if diff := cmp.Diff(answer{Status: 401, Code: "unauthorized", Closes: true}, a); diff != "" {
		t.Errorf("the token waiting for the hanging fetch, -want, +got:\n%s", diff)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the waiting token was answered after %s; the fetch timeout is 2s", d)
	}
}
