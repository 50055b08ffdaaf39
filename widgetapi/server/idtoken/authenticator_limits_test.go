package idtoken_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/widgetco/crossplane-widget/test/lib/wait"
	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken"
	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken/idtokentest"
)

// TestOneKeyPerToken: a token is verified with at most one key. When more
// than one published key fits its kid and alg it is refused, whichever key
// signed it, rather than tried against each (a forged token without a kid
// once cost one signature check per published key).
func TestOneKeyPerToken(t *testing.T) {
	k := keys()
	twin := k["other"] // an RSA key published under rsa-1's kid
	cases := map[string]struct {
		reason string
		jwks   []idtokentest.Key
		signer idtokentest.Key
		header map[string]any
		want   idtoken.Reason
	}{
		"KidSelectsOne": {
			reason: "A kid that selects one of several RSA keys verifies.",
			jwks:   []idtokentest.Key{k["rsa"], k["rsa2"]},
			signer: k["rsa2"],
			header: map[string]any{"alg": "RS256", "kid": "rsa-2"},
		},
		"NoKidOneKey": {
			reason: "Without a kid, the one published key verifies.",
			jwks:   []idtokentest.Key{k["rsa"]},
			signer: k["rsa"],
			header: map[string]any{"alg": "RS256"},
		},
		"NoKidOneKeyOfItsType": {
			reason: "Without a kid, the one key that fits the algorithm verifies, whatever other types are published.",
			jwks:   []idtokentest.Key{k["rsa"], k["ec"], k["ed"]},
			signer: k["ed"],
			header: map[string]any{"alg": "EdDSA"},
		},
		"NoKidTwoKeys": {
			reason: "Without a kid, two fitting keys make the token ambiguous.",
			jwks:   []idtokentest.Key{k["rsa"], k["rsa2"]},
			signer: k["rsa"],
			header: map[string]any{"alg": "RS256"},
			want:   idtoken.ReasonUnknownKey,
		},
		"SharedKid": {
			reason: "A kid the issuer publishes twice for one key type is ambiguous too.",
			jwks:   []idtokentest.Key{k["rsa"], twin},
			signer: k["rsa"],
			header: map[string]any{"alg": "RS256", "kid": "rsa-1"},
			want:   idtoken.ReasonUnknownKey,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := newAuth(t, &clock{now: t0}, &countingFetcher{jwks: idtokentest.JWKS(tc.jwks...)})
			_, err := a.Authenticate(context.Background(), idtokentest.SignHeader(t, tc.signer, tc.header, claims()))
			var got idtoken.Reason
			if err != nil {
				got = err.Reason
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nAuthenticate(...) reason: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestSeen: a token is Seen once it verified, and stays Seen past
// CachedTokenTTL (when Authenticate verifies it again) until it expires or
// fails verification; a token that never verified is never Seen.
func TestSeen(t *testing.T) {
	k := keys()
	clk := &clock{now: t0}
	f := &countingFetcher{jwks: idtokentest.JWKS(k["rsa"])}
	a := newAuth(t, clk, f)
	valid := idtokentest.Sign(t, k["rsa"], claims(with("exp", t0.Add(5*time.Hour).Unix())))
	forged := idtokentest.Sign(t, k["other"], claims())
	type state struct{ Valid, Forged bool }
	var got []state
	observe := func() { got = append(got, state{Valid: a.Seen(valid), Forged: a.Seen(forged)}) }
	authenticate := func(raw string) {
		_, _ = a.Authenticate(context.Background(), raw)
	}

	observe() // nothing verified yet
	authenticate(valid)
	authenticate(forged)
	observe() // the valid token verified
	clk.Add(idtoken.CachedTokenTTL + time.Second)
	observe() // past the cache's trust, still seen
	authenticate(valid)
	observe() // verified again
	f.set(idtokentest.JWKS(k["rsa2"]), nil)
	clk.Add(idtoken.DefaultMaxKeyAge) // the held key is refetched: rsa-1 is gone
	authenticate(valid)               // starts the background fetch
	wait.ForTrue(t, 5*time.Second, "two requests to the fetcher", func() bool { return f.n.Load() >= 2 })
	for i := 0; i < 100 && a.Seen(valid); i++ {
		clk.Add(idtoken.CachedTokenTTL)
		authenticate(valid) // refused once the new keys are in use
		time.Sleep(10 * time.Millisecond)
	}
	observe() // refused since: forgotten

	want := []state{{}, {Valid: true}, {Valid: true}, {Valid: true}, {}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Seen over time, -want, +got:\n%s", diff)
	}
}
