package idtoken

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"slices"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// FuzzParse feeds arbitrary tokens to the parser: it never panics, and a
// token it accepts names an accepted algorithm; a refusal has a known
// reason and a short fixed message (TestAuthenticate checks it repeats
// nothing of the token).
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", ".", "..", "a.b.c", "eyJhbGciOiJub25lIn0.e30.",
		"eyJhbGciOiJSUzI1NiIsImtpZCI6IngifQ.eyJpc3MiOiJpIiwiZXhwIjoxfQ.c2ln",
		"eyJhbGciOiJIUzI1NiJ9.e30.c2ln", "eyJhbGciOiJFUzI1NiIsImNyaXQiOlsiYiJdfQ.e30.c2ln",
		"eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOjF9.c2ln", "eyJhbGciOiJSUzI1NiJ9.eyJleHAiOiJ4In0.c2ln",
		"eyJhbGciOiJSUzI1NiJ9.W10.c2ln", "eyJhbGciOiJSUzI1NiJ9.e30gMQ.c2ln", strings.Repeat("a", MaxTokenBytes+1),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		tok, err := parse(raw)
		if err != nil {
			if !slices.Contains(Reasons, err.Reason) {
				t.Fatalf("unknown reason %q", err.Reason)
			}
			if len(err.Error()) > 200 {
				t.Fatalf("a long refusal message: %q", err)
			}
			return
		}
		if !slices.Contains(algorithms, jose.SignatureAlgorithm(tok.alg)) {
			t.Fatalf("accepted algorithm %q", tok.alg)
		}
	})
}

// FuzzParseJWKS feeds arbitrary documents to the JWKS parser: it never
// panics, and every key it returns is a public key of a supported type
// within the size and exponent bounds.
func FuzzParseJWKS(f *testing.F) {
	for _, seed := range []string{
		"", "{}", `{"keys":[]}`, `{"keys":null}`, `{"keys":[{}]}`,
		`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`,
		`{"keys":[{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}`,
		`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`,
		`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`, `{"keys":[{"kty":"RSA","d":"x"}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		set, err := parseJWKS(b)
		if err != nil {
			return
		}
		if len(set) == 0 || len(set) > MaxKeys {
			t.Fatalf("%d keys", len(set))
		}
		for _, k := range set {
			switch pub := k.key.(type) {
			case *rsa.PublicKey:
				if n := pub.N.BitLen(); n < MinRSABits || n > MaxRSABits || pub.E != RSAExponent {
					t.Fatalf("RSA key of %d bits, e = %d", n, pub.E)
				}
			case *ecdsa.PublicKey, ed25519.PublicKey:
			default:
				t.Fatalf("key of type %T", pub)
			}
		}
	})
}
