package idtoken_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken"
	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken/idtokentest"
)

const (
	iss = "https://issuer.test"
	aud = "widget-api"
)

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// keys are generated once per test binary: RSA generation is slow.
var keys = sync.OnceValue(func() map[string]idtokentest.Key {
	t := &testing.T{}
	return map[string]idtokentest.Key{
		"rsa":   idtokentest.RSA(t, "rsa-1"),
		"rsa2":  idtokentest.RSA(t, "rsa-2"),
		"ec":    idtokentest.EC(t, "ec-1"),
		"ed":    idtokentest.Ed25519(t, "ed-1"),
		"other": idtokentest.RSA(t, "rsa-1"), // same kid, not published
	}
})

func config() *idtoken.Config {
	c := &idtoken.Config{Issuers: []idtoken.Issuer{{
		Issuer:   iss,
		Audience: aud,
		Keys:     idtoken.Keys{JWKSURL: "https://issuer.test/keys"},
		Subjects: []idtoken.Subject{
			{Subject: "system:serviceaccount:crossplane-system:provider-widget", Project: "platform", Role: idtoken.RoleEditor},
			{Subject: "system:serviceaccount:team-a:*", Project: "team-a", Role: idtoken.RoleViewer},
		},
	}}}
	if err := c.Validate(); err != nil {
		panic(err)
	}
	return c
}

// countingFetcher serves a JWKS and counts fetches.
type countingFetcher struct {
	n    atomic.Int32
	mu   sync.Mutex
	jwks []byte
	err  error
}

func (f *countingFetcher) Fetch(context.Context) ([]byte, error) {
	f.n.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.jwks, f.err
}

func (f *countingFetcher) set(jwks []byte, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jwks, f.err = jwks, err
}

func newAuth(t testing.TB, clk *clock, f idtoken.Fetcher) *idtoken.Authenticator {
	t.Helper()
	a, err := idtoken.New(config(), idtoken.Options{Now: clk.Now, Fetchers: map[string]idtoken.Fetcher{iss: f}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// claims are valid claims for the provider's ServiceAccount, changed by mods.
func claims(mods ...func(map[string]any)) map[string]any {
	c := map[string]any{
		"iss": iss,
		"sub": "system:serviceaccount:crossplane-system:provider-widget",
		"aud": []string{aud},
		"iat": t0.Add(-time.Minute).Unix(),
		"nbf": t0.Add(-time.Minute).Unix(),
		"exp": t0.Add(time.Hour).Unix(),
	}
	for _, m := range mods {
		m(c)
	}
	return c
}

func with(k string, v any) func(map[string]any) { return func(c map[string]any) { c[k] = v } }
func without(k string) func(map[string]any)     { return func(c map[string]any) { delete(c, k) } }

type result struct {
	Project string
	Role    idtoken.Role
	Reason  idtoken.Reason
}

func TestAuthenticate(t *testing.T) {
	k := keys()
	cases := map[string]struct {
		reason string
		token  func(t *testing.T) string
		want   result
	}{
		"RS256": {
			reason: "A token signed by a published RSA key, for our audience, in time, of a mapped subject is accepted.",
			token:  func(t *testing.T) string { return idtokentest.Sign(t, k["rsa"], claims()) },
			want:   result{Project: "platform", Role: idtoken.RoleEditor},
		},
		"ES256": {
			reason: "ECDSA keys verify too.",
			token:  func(t *testing.T) string { return idtokentest.Sign(t, k["ec"], claims()) },
			want:   result{Project: "platform", Role: idtoken.RoleEditor},
		},
		"EdDSA": {
			reason: "Ed25519 keys verify too.",
			token:  func(t *testing.T) string { return idtokentest.Sign(t, k["ed"], claims()) },
			want:   result{Project: "platform", Role: idtoken.RoleEditor},
		},
		"AudienceString": {
			reason: "aud may be a single string.",
			token:  func(t *testing.T) string { return idtokentest.Sign(t, k["rsa"], claims(with("aud", aud))) },
			want:   result{Project: "platform", Role: idtoken.RoleEditor},
		},
		"NamespaceWildcard": {
			reason: "Any ServiceAccount of team-a maps to team-a's wildcard.",
			token: func(t *testing.T) string {
				return idtokentest.Sign(t, k["rsa"], claims(with("sub", "system:serviceaccount:team-a:anything")))
			},
			want: result{Project: "team-a", Role: idtoken.RoleViewer},
		},
		"ExpiredWithinSkew": {
			reason: "A token that expired less than the clock skew ago is still accepted.",
			token: func(t *testing.T) string {
				return idtokentest.Sign(t, k["rsa"], claims(with("exp", t0.Add(-10*time.Second).Unix())))
			},
			want: result{Project: "platform", Role: idtoken.RoleEditor},
		},
		"UntrustedIssuer": {
			reason: "A token from an issuer the configuration does not name is refused, however it is signed.",
			token: func(t *testing.T) string {
				return idtokentest.Sign(t, k["rsa"], claims(with("iss", "https://evil.test")))
			},
			want: result{Reason: idtoken.ReasonIssuer},
		},
		"IssuerTrailingSlash": {
			reason: "Issuers compare exactly.",
			token:  func(t *testing.T) string { return idtokentest.Sign(t, k["rsa"], claims(with("iss", iss+"/"))) },
			want:   result{Reason: idtoken.ReasonIssuer},
		},
		"WrongAudience": {
			reason: "A token minted for another service (kube-apiserver's default audience) is refused.",
			token: func(t *testing.T) string {
				return idtokentest.Sign(t, k["rsa"], claims(with("aud", []string{"https://kubernetes.default.svc"})))
			},
			want: result{Reason: idtoken.ReasonAudience},
		},
		"NoAudience": {
			reason: "A token without aud is refused.",
			token:  func(t *testing.T) string { return idtokentest.Sign(t, k["rsa"], claims(without("aud"))) },
			want:   result{Reason: idtoken.ReasonAudience},
		},
		"Expired": {
			reason: "A token that expired longer than the skew ago is refused.",
			token: func(t *testing.T) string {
				return idtokentest.Sign(t, k["rsa"], claims(with("exp", t0.Add(-31*time.Second).Unix())))
			},
			want: result{Reason: idtoken.ReasonExpired},
		},
		"NoExpiry": {
			reason: "A token that never expires is refused.",
			token:  func(t *testing.T) string { return idtokentest.Sign(t, k["rsa"], claims(without("exp"))) },
			want:   result{Reason: idtoken.ReasonMalformed},
		},
		"NotYetValid": {
			reason: "A token whose nbf is further ahead than the skew is refused.",
			token: func(t *testing.T) string {
				return idtokentest.Sign(t, k["rsa"], claims(with("nbf", t0.Add(time.Minute).Unix())))
			},
			want: result{Reason: idtoken.ReasonNotYetValid},
		},
		"IssuedInTheFuture": {
			reason: "A token issued further ahead than the skew is refused.",
			token: func(t *testing.T) string {
				return idtokentest.Sign(t, k["rsa"], claims(with("iat", t0.Add(time.Minute).Unix())))
			},
			want: result{Reason: idtoken.ReasonNotYetValid},
		},
		"AlgNone": {
			reason: "An unsigned token is refused before any key is looked at.",
			token:  func(*testing.T) string { return idtokentest.Unsigned(claims()) },
			want:   result{Reason: idtoken.ReasonAlgorithm},
		},
		"HS256WithPublicKey": {
			reason: "HMAC keyed with the issuer's public key is refused: the token does not choose how it is verified.",
			token:  func(*testing.T) string { return idtokentest.HS256WithPublicKey(k["rsa"], claims()) },
			want:   result{Reason: idtoken.ReasonAlgorithm},
		},
		"UnpublishedKeySameKid": {
			reason: "A token signed by a key the issuer did not publish, under a published kid, fails its signature.",
			token:  func(t *testing.T) string { return idtokentest.Sign(t, k["other"], claims()) },
			want:   result{Reason: idtoken.ReasonSignature},
		},
		"Tampered": {
			reason: "Changing the claims of a signed token breaks its signature.",
			token: func(t *testing.T) string {
				return idtokentest.Tamper(idtokentest.Sign(t, k["rsa"], claims()), claims(with("sub", "system:serviceaccount:team-a:x")))
			},
			want: result{Reason: idtoken.ReasonSignature},
		},
		"AlgOfAnotherKeyType": {
			reason: "ES256 under the kid of an RSA key matches no key.",
			token: func(t *testing.T) string {
				return idtokentest.SignHeader(t, k["ec"], map[string]any{"alg": "ES256", "kid": "rsa-1"}, claims())
			},
			want: result{Reason: idtoken.ReasonUnknownKey},
		},
		"UnknownKid": {
			reason: "A kid the issuer does not publish is refused.",
			token: func(t *testing.T) string {
				return idtokentest.SignHeader(t, k["rsa"], map[string]any{"alg": "RS256", "kid": "nope"}, claims())
			},
			want: result{Reason: idtoken.ReasonUnknownKey},
		},
		"NoKidOneFittingKey": {
			reason: "A token without a kid is verified with the one published key that fits its algorithm.",
			token: func(t *testing.T) string {
				return idtokentest.SignHeader(t, k["ec"], map[string]any{"alg": "ES256"}, claims())
			},
			want: result{Project: "platform", Role: idtoken.RoleEditor},
		},
		"NoKidTwoFittingKeys": {
			reason: "A token without a kid is refused when more than one published key fits its algorithm, rather than tried against each.",
			token: func(t *testing.T) string {
				return idtokentest.SignHeader(t, k["rsa2"], map[string]any{"alg": "RS256"}, claims())
			},
			want: result{Reason: idtoken.ReasonUnknownKey},
		},
		"CriticalHeader": {
			reason: "A header with crit extensions is refused.",
			token: func(t *testing.T) string {
				return idtokentest.SignHeader(t, k["rsa"], map[string]any{"alg": "RS256", "kid": "rsa-1", "crit": []string{"exp"}}, claims())
			},
			want: result{Reason: idtoken.ReasonMalformed},
		},
		"SubjectOfAnotherNamespace": {
			reason: "A valid token of a ServiceAccount in a namespace nothing maps is refused (403).",
			token: func(t *testing.T) string {
				return idtokentest.Sign(t, k["rsa"], claims(with("sub", "system:serviceaccount:team-b:provider-widget")))
			},
			want: result{Reason: idtoken.ReasonUnmapped},
		},
		"WildcardNeedsAName": {
			reason: "The namespace wildcard matches ServiceAccount subjects only, not the namespace itself.",
			token: func(t *testing.T) string {
				return idtokentest.Sign(t, k["rsa"], claims(with("sub", "system:serviceaccount:team-a")))
			},
			want: result{Reason: idtoken.ReasonUnmapped},
		},
		"WildcardOneSegment": {
			reason: "The namespace wildcard does not match deeper subjects.",
			token: func(t *testing.T) string {
				return idtokentest.Sign(t, k["rsa"], claims(with("sub", "system:serviceaccount:team-a:x:y")))
			},
			want: result{Reason: idtoken.ReasonUnmapped},
		},
		"NotAJWT": {
			reason: "A string that is not a JWS is refused as malformed.",
			token:  func(*testing.T) string { return "a.b" },
			want:   result{Reason: idtoken.ReasonMalformed},
		},
		"TooLong": {
			reason: "A token over the size bound is refused before it is decoded.",
			token:  func(*testing.T) string { return strings.Repeat("a", idtoken.MaxTokenBytes+1) },
			want:   result{Reason: idtoken.ReasonMalformed},
		},
		"ClaimOfWrongType": {
			reason: "A string exp is malformed.",
			token:  func(t *testing.T) string { return idtokentest.Sign(t, k["rsa"], claims(with("exp", "tomorrow"))) },
			want:   result{Reason: idtoken.ReasonMalformed},
		},
	}
	clk := &clock{now: t0}
	f := &countingFetcher{jwks: idtokentest.JWKS(k["rsa"], k["rsa2"], k["ec"], k["ed"])}
	a := newAuth(t, clk, f)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			raw := tc.token(t)
			id, err := a.Authenticate(context.Background(), raw)
			got := result{Project: id.Project, Role: id.Role}
			if err != nil {
				got.Reason = err.Reason
				if strings.Contains(err.Error(), raw) || strings.Contains(err.Error(), "provider-widget") {
					t.Errorf("the error repeats the token or a claim: %q", err)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nAuthenticate(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestIdentityKeyIsPerMapping: every subject a wildcard matches shares one
// limits key; exact subjects have their own.
func TestIdentityKeyIsPerMapping(t *testing.T) {
	k := keys()
	a := newAuth(t, &clock{now: t0}, &countingFetcher{jwks: idtokentest.JWKS(k["rsa"])})
	key := func(sub string) [32]byte {
		id, err := a.Authenticate(context.Background(), idtokentest.Sign(t, k["rsa"], claims(with("sub", sub))))
		if err != nil {
			t.Fatal(err)
		}
		return id.Key
	}
	x, y := key("system:serviceaccount:team-a:x"), key("system:serviceaccount:team-a:y")
	p := key("system:serviceaccount:crossplane-system:provider-widget")
	if x != y {
		t.Error("two ServiceAccounts of one namespace wildcard have different limit keys")
	}
	if x == p {
		t.Error("a wildcard and an exact subject share a limit key")
	}
}

// TestUnknownKidRefetchIsBounded: a flood of tokens naming made-up kids
// makes at most one fetch per MinRefreshInterval.
func TestUnknownKidRefetchIsBounded(t *testing.T) {
	k := keys()
	clk := &clock{now: t0}
	f := &countingFetcher{jwks: idtokentest.JWKS(k["rsa"])}
	a := newAuth(t, clk, f)
	tokens := make([]string, 26)
	for i := range tokens {
		h := map[string]any{"alg": "RS256", "kid": "made-up-" + string(rune('a'+i))}
		tokens[i] = idtokentest.SignHeader(t, k["rsa"], h, claims())
	}
	flood := func(n int) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, err := a.Authenticate(context.Background(), tokens[i%len(tokens)])
				if err == nil || err.Reason != idtoken.ReasonUnknownKey {
					t.Errorf("want unknown_key, got %v", err)
				}
			})
		}
		wg.Wait()
	}
	flood(200)
	if got := f.n.Load(); got != 1 {
		t.Errorf("fetches after 200 unknown kids at one instant: want 1, got %d", got)
	}
	clk.Add(idtoken.DefaultMinRefreshInterval - time.Second)
	flood(50)
	if got := f.n.Load(); got != 1 {
		t.Errorf("fetches within the refresh interval: want 1, got %d", got)
	}
	clk.Add(time.Second)
	flood(50)
	if got := f.n.Load(); got != 2 {
		t.Errorf("fetches once the interval passed: want 2, got %d", got)
	}
}

// TestRotatedKeyIsFetched: a token signed by a key the issuer published
// after the last fetch is accepted once a fetch is due; a failed fetch keeps
// the keys already held.
func TestRotatedKeyIsFetched(t *testing.T) {
	k := keys()
	clk := &clock{now: t0}
	f := &countingFetcher{jwks: idtokentest.JWKS(k["rsa"])}
	a := newAuth(t, clk, f)
	old, rotated := idtokentest.Sign(t, k["rsa"], claims()), idtokentest.Sign(t, k["rsa2"], claims())
	if _, err := a.Authenticate(context.Background(), old); err != nil {
		t.Fatalf("first key: %v", err)
	}
	f.set(idtokentest.JWKS(k["rsa"], k["rsa2"]), nil)
	clk.Add(idtoken.DefaultMinRefreshInterval)
	if _, err := a.Authenticate(context.Background(), rotated); err != nil {
		t.Fatalf("rotated key after the interval: %v", err)
	}
	f.set([]byte("garbage"), nil)
	clk.Add(idtoken.DefaultMaxKeyAge + time.Second) // stale: a background refetch, which fails
	if _, err := a.Authenticate(context.Background(), old); err != nil {
		t.Fatalf("after a failed fetch the held keys must stay: %v", err)
	}
}

// hangingFetcher serves its first fetch and hangs in every later one
// until its context ends.
type hangingFetcher struct {
	jwks    []byte
	n       atomic.Int32
	started chan struct{}
}

func (f *hangingFetcher) Fetch(ctx context.Context) ([]byte, error) {
	if f.n.Add(1) == 1 {
		return f.jwks, nil
	}
	close(f.started)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestHangingJWKSEndpoint: while a fetch hangs, tokens signed by held keys
// are verified at once, a token waiting for an unknown key gives up with
// its own context, and Close ends the fetch.
func TestHangingJWKSEndpoint(t *testing.T) {
	k := keys()
	clk := &clock{now: t0}
	f := &hangingFetcher{jwks: idtokentest.JWKS(k["rsa"]), started: make(chan struct{})}
	a, err := idtoken.New(config(), idtoken.Options{Now: clk.Now, Fetchers: map[string]idtoken.Fetcher{iss: f}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(context.Background(), idtokentest.Sign(t, k["rsa"], claims())); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Minute)
	unknown := make(chan *idtoken.Error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := a.Authenticate(ctx, idtokentest.Sign(t, k["rsa2"], claims()))
		unknown <- err
	}()
	// Distinct tokens, so each is verified with the held key rather than
	// answered from the cache of verified tokens.
	held := make([]string, 5)
	for i := range held {
		held[i] = idtokentest.Sign(t, k["rsa"], claims(with("jti", i)))
	}
	<-f.started
	for _, tok := range held {
		if _, err := a.Authenticate(context.Background(), tok); err != nil {
			t.Fatalf("a held key during a hanging fetch: %v", err)
		}
	}
	if err := <-unknown; err == nil || err.Reason != idtoken.ReasonKeysUnavailable {
		t.Errorf("a token waiting for the hanging fetch: want keys_unavailable, got %v", err)
	}
	closed := make(chan struct{})
	go func() { a.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the hanging fetch")
	}
}

// TestCachedTokenExpires: a token verified (and so cached) is refused once
// it expires, though it was verified less than CachedTokenTTL before.
func TestCachedTokenExpires(t *testing.T) {
	k := keys()
	clk := &clock{now: t0}
	a := newAuth(t, clk, &countingFetcher{jwks: idtokentest.JWKS(k["rsa"])})
	raw := idtokentest.Sign(t, k["rsa"], claims(with("exp", t0.Add(10*time.Second).Unix())))
	if _, err := a.Authenticate(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	// NumericDates are whole seconds, and a token is valid up to and
	// including exp plus the skew.
	clk.Add(10*time.Second + idtoken.DefaultClockSkew + time.Second)
	if _, err := a.Authenticate(context.Background(), raw); err == nil || err.Reason != idtoken.ReasonExpired {
		t.Errorf("a cached token past its exp and the skew: want expired, got %v", err)
	}
}

// TestNoKeysYet: an issuer whose keys were never fetched answers
// keys_unavailable, not unknown_key.
func TestNoKeysYet(t *testing.T) {
	k := keys()
	f := &countingFetcher{err: errors.New("connection refused")}
	a := newAuth(t, &clock{now: t0}, f)
	_, err := a.Authenticate(context.Background(), idtokentest.Sign(t, k["rsa"], claims()))
	if err == nil || err.Reason != idtoken.ReasonKeysUnavailable {
		t.Errorf("want keys_unavailable, got %v", err)
	}
}
