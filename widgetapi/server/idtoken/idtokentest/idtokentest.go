// Package idtokentest makes signing keys, JWKS documents and signed (or
// deliberately broken) tokens for tests of identity token authentication.
package idtokentest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
)

var b64 = base64.RawURLEncoding

// Key is a signing key and the kid it is published under.
type Key struct {
	Kid string
	Alg string // the JWS algorithm it signs with
	// JWKAlg, when set, is published as the key's "alg".
	JWKAlg string
	Signer crypto.Signer
}

// RSA returns a 2048-bit RSA key that signs RS256.
func RSA(t testing.TB, kid string) Key {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return Key{Kid: kid, Alg: "RS256", Signer: k}
}

// EC returns a P-256 key that signs ES256.
func EC(t testing.TB, kid string) Key {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return Key{Kid: kid, Alg: "ES256", Signer: k}
}

// Ed25519 returns an Ed25519 key that signs EdDSA.
func Ed25519(t testing.TB, kid string) Key {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return Key{Kid: kid, Alg: "EdDSA", Signer: k}
}

// JWK returns k's public key as a JWK.
func (k Key) JWK() map[string]any {
	m := map[string]any{"use": "sig"}
	if k.Kid != "" {
		m["kid"] = k.Kid
	}
	if k.JWKAlg != "" {
		m["alg"] = k.JWKAlg
	}
	switch pub := k.Signer.Public().(type) {
	case *rsa.PublicKey:
		m["kty"] = "RSA"
		m["n"] = b64.EncodeToString(pub.N.Bytes())
		m["e"] = b64.EncodeToString(big.NewInt(int64(pub.E)).Bytes())
	case *ecdsa.PublicKey:
		b, err := pub.Bytes()
		if err != nil {
			panic(err)
		}
		size := (len(b) - 1) / 2
		m["kty"], m["crv"] = "EC", pub.Curve.Params().Name
		m["x"], m["y"] = b64.EncodeToString(b[1:1+size]), b64.EncodeToString(b[1+size:])
	case ed25519.PublicKey:
		m["kty"], m["crv"], m["x"] = "OKP", "Ed25519", b64.EncodeToString(pub)
	}
	return m
}

// JWKS returns a JWKS document of keys.
func JWKS(keys ...Key) []byte {
	ks := make([]map[string]any, 0, len(keys))
	for _, k := range keys {
		ks = append(ks, k.JWK())
	}
	b, err := json.Marshal(map[string]any{"keys": ks})
	if err != nil {
		panic(err)
	}
	return b
}

// Sign returns a compact JWS of claims signed by k with k.Alg.
func Sign(t testing.TB, k Key, claims map[string]any) string {
	t.Helper()
	return SignHeader(t, k, map[string]any{"alg": k.Alg, "kid": k.Kid}, claims)
}

// SignHeader signs claims under an arbitrary header with k's own
// algorithm, whatever the header says.
func SignHeader(t testing.TB, k Key, header, claims map[string]any) string {
	t.Helper()
	in := encode(header) + "." + encode(claims)
	var sig []byte
	var err error
	switch s := k.Signer.(type) {
	case *rsa.PrivateKey:
		d := sha256.Sum256([]byte(in))
		sig, err = rsa.SignPKCS1v15(rand.Reader, s, crypto.SHA256, d[:])
	case *ecdsa.PrivateKey:
		d := sha256.Sum256([]byte(in))
		var r, ss *big.Int
		r, ss, err = ecdsa.Sign(rand.Reader, s, d[:])
		if err == nil {
			sig = make([]byte, 64)
			r.FillBytes(sig[:32])
			ss.FillBytes(sig[32:])
		}
	case ed25519.PrivateKey:
		sig = ed25519.Sign(s, []byte(in))
	}
	if err != nil {
		t.Fatal(err)
	}
	return in + "." + b64.EncodeToString(sig)
}

// Unsigned returns a token with "alg": "none" and an empty signature.
func Unsigned(claims map[string]any) string {
	return encode(map[string]any{"alg": "none"}) + "." + encode(claims) + "."
}

// HS256WithPublicKey returns a token "signed" with HMAC-SHA256 keyed by
// the PEM of k's public key: the classic key-confusion attack on verifiers
// that let the token choose the algorithm.
func HS256WithPublicKey(k Key, claims map[string]any) string {
	der, err := x509.MarshalPKIXPublicKey(k.Signer.Public())
	if err != nil {
		panic(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	in := encode(map[string]any{"alg": "HS256", "kid": k.Kid}) + "." + encode(claims)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(in))
	return in + "." + b64.EncodeToString(m.Sum(nil))
}

// Tamper replaces a token's claims, keeping its header and signature.
func Tamper(token string, claims map[string]any) string {
	parts := strings.Split(token, ".")
	return parts[0] + "." + encode(claims) + "." + parts[2]
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b64.EncodeToString(b)
}
