package idtoken

import (
	"crypto/rand"
	"encoding/base64"
	"math/big"
	"runtime"
	"strings"
	"testing"
)

// TestJWKSOfEmptyEntriesAllocatesLittle: a JWKS at the size bound made of
// empty entries is refused at the first entry past MaxKeys, not after
// decoding every entry (once 73.6 MiB for a 256 KiB document).
func TestJWKSOfEmptyEntriesAllocatesLittle(t *testing.T) {
	const prefix, suffix = `{"keys":[`, `]}`
	n := (MaxJWKSBytes - len(prefix) - len(suffix) + 1) / 3 // "{}," each
	doc := []byte(prefix + strings.TrimSuffix(strings.Repeat("{},", n), ",") + suffix)
	if len(doc) > MaxJWKSBytes {
		t.Fatalf("the document is %d bytes, over the bound", len(doc))
	}
	const limit = 1 << 20 // bytes; a stream that stops at MaxKeys needs a few KiB
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := parseJWKS(doc)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatalf("a JWKS of %d entries was accepted", n)
	}
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("parsing a %d-byte JWKS of %d empty entries allocated %d bytes", len(doc), n, got)
	if got > limit {
		t.Errorf("parsing a %d-byte JWKS of %d empty entries allocated %d bytes, want at most %d", len(doc), n, got, limit)
	}
}

// rsaJWK is the JWK of an RSA public key with an n of bits bits (not a
// real modulus: nothing here signs with it) and exponent e.
func rsaJWK(t *testing.T, bits int, e int64) string {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), uint(bits-1)))
	if err != nil {
		t.Fatal(err)
	}
	n.SetBit(n, bits-1, 1).SetBit(n, 0, 1)
	b64 := base64.RawURLEncoding.EncodeToString
	return `{"kty":"RSA","kid":"k","n":"` + b64(n.Bytes()) + `","e":"` + b64(big.NewInt(e).Bytes()) + `"}`
}

// TestRSABounds: RSA keys in a JWKS have 2048 to 4096 bits and e = 65537;
// anything else fails the document with a reason that says so, so that no
// token makes the server verify with an expensive key. The 8192-bit case
// also pins go-jose's MaxRSAModulusBits, which parseJWK relies on.
func TestRSABounds(t *testing.T) {
	cases := map[string]struct {
		reason string
		bits   int
		e      int64
		err    string // part of the error; empty for none
	}{
		"2048":          {reason: "The smallest accepted key.", bits: 2048, e: 65537},
		"4096":          {reason: "The largest accepted key.", bits: 4096, e: 65537},
		"1024":          {reason: "A weak key.", bits: 1024, e: 65537, err: "2048 to 4096 bits"},
		"8192":          {reason: "A key that makes every verification expensive.", bits: 8192, e: 65537, err: "2048 to 4096 bits"},
		"SmallExponent": {reason: "e = 3 is valid RSA but not what issuers publish.", bits: 2048, e: 3, err: "must be 65537"},
		"LargeExponent": {reason: "A 31-bit e makes every verification slower than 65537 does.", bits: 4096, e: 1<<31 - 1, err: "must be 65537"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := parseJWKS([]byte(`{"keys":[` + rsaJWK(t, tc.bits, tc.e) + `]}`))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if (tc.err == "") != (got == "") || !strings.Contains(got, tc.err) {
				t.Errorf("%s\nparseJWKS: want error containing %q, got %q", tc.reason, tc.err, got)
			}
		})
	}
}
