package idtoken_test

import (
	"context"
	"testing"
	"time"

	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken"
	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken/idtokentest"
)

// BenchmarkAuthenticate measures what an identity-token request costs on
// top of a static token's: verifying a valid token with cached keys
// (Verify: the clock moves past CachedTokenTTL between calls), and
// answering it again from the cache of verified tokens (Cached).
func BenchmarkAuthenticate(b *testing.B) {
	k := keys()
	for _, name := range []string{"rsa", "ec", "ed"} {
		for _, cached := range []bool{false, true} {
			mode := "Verify"
			if cached {
				mode = "Cached"
			}
			b.Run(k[name].Alg+"/"+mode, func(b *testing.B) {
				clk := &clock{now: t0}
				a := newAuth(b, clk, &countingFetcher{jwks: idtokentest.JWKS(k["rsa"], k["ec"], k["ed"])})
				raw := idtokentest.Sign(b, k[name], claims(with("exp", t0.Add(10*365*24*time.Hour).Unix())))
				b.ReportAllocs()
				for b.Loop() {
					if !cached {
						clk.Add(idtoken.CachedTokenTTL)
					}
					if _, err := a.Authenticate(context.Background(), raw); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
