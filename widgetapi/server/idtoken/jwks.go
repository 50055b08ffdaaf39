package idtoken

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
)

// RSA key sizes accepted in a JWKS: smaller keys are weak, larger ones make
// every verification expensive.
const (
	minRSABits = 2048
	maxRSABits = 8192
)

// b64 is the strict unpadded base64url of JOSE.
var b64 = base64.RawURLEncoding.Strict()

// A publicKey is one usable key of a JWKS.
type publicKey struct {
	kid string
	alg string // the key's "alg", empty when it names none
	key crypto.PublicKey
}

// keySet is a parsed JWKS.
type keySet []publicKey

// jwk is a JSON Web Key as published: only public members are read.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
	D   string `json:"d"`
}

// parseJWKS parses a JWKS document. Keys that are not for signatures, or of
// a type or curve this package does not verify with, are skipped; a key that
// claims a supported type but is malformed or weak fails the whole document,
// as does a document with no usable key or more than MaxKeys.
func parseJWKS(b []byte) (keySet, error) {
	if len(b) > MaxJWKSBytes {
		return nil, fmt.Errorf("the JWKS is larger than %d bytes", MaxJWKSBytes)
	}
	var doc struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, errors.New("the JWKS is not a JSON object with keys")
	}
	if len(doc.Keys) > MaxKeys {
		return nil, fmt.Errorf("the JWKS has %d keys, more than %d", len(doc.Keys), MaxKeys)
	}
	set := make(keySet, 0, len(doc.Keys))
	for i, k := range doc.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if k.D != "" {
			return nil, fmt.Errorf("keys[%d] holds a private key: refusing to use a JWKS that leaks one", i)
		}
		pub, err := k.publicKey()
		if errors.Is(err, errUnsupported) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
		if k.Alg != "" && !algFits(k.Alg, pub) {
			return nil, fmt.Errorf("keys[%d]: alg %.32q does not fit a key of type %s", i, k.Alg, k.Kty)
		}
		set = append(set, publicKey{kid: k.Kid, alg: k.Alg, key: pub})
	}
	if len(set) == 0 {
		return nil, errors.New("the JWKS has no usable signing key")
	}
	return set, nil
}

var errUnsupported = errors.New("unsupported key type")

func (k jwk) publicKey() (crypto.PublicKey, error) {
	switch k.Kty {
	case "RSA":
		return k.rsa()
	case "EC":
		return k.ec()
	case "OKP":
		if k.Crv != "Ed25519" {
			return nil, errUnsupported
		}
		x, err := b64.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, errors.New("an Ed25519 key's x must be 32 bytes of base64url")
		}
		return ed25519.PublicKey(x), nil
	default:
		return nil, errUnsupported
	}
}

func (k jwk) rsa() (*rsa.PublicKey, error) {
	n, err := b64.DecodeString(k.N)
	if err != nil || len(n) == 0 || n[0] == 0 {
		return nil, errors.New("an RSA key's n must be base64url without leading zeros")
	}
	e, err := b64.DecodeString(k.E)
	if err != nil || len(e) == 0 || len(e) > 4 || e[0] == 0 {
		return nil, errors.New("an RSA key's e must be base64url of at most 4 bytes without leading zeros")
	}
	pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	if bits := pub.N.BitLen(); bits < minRSABits || bits > maxRSABits {
		return nil, fmt.Errorf("an RSA key must have %d to %d bits, not %d", minRSABits, maxRSABits, bits)
	}
	if pub.E < 3 || pub.E%2 == 0 || pub.E > 1<<31-1 {
		return nil, errors.New("an RSA key's e must be odd and at least 3")
	}
	return pub, nil
}

func (k jwk) ec() (*ecdsa.PublicKey, error) {
	var c elliptic.Curve
	switch k.Crv {
	case "P-256":
		c = elliptic.P256()
	case "P-384":
		c = elliptic.P384()
	case "P-521":
		c = elliptic.P521()
	default:
		return nil, errUnsupported
	}
	size := (c.Params().BitSize + 7) / 8
	x, errX := b64.DecodeString(k.X)
	y, errY := b64.DecodeString(k.Y)
	if errX != nil || errY != nil || len(x) != size || len(y) != size {
		return nil, fmt.Errorf("an EC key's x and y must each be %d bytes of base64url", size)
	}
	point := append(append([]byte{4}, x...), y...)
	pub, err := ecdsa.ParseUncompressedPublicKey(c, point)
	if err != nil {
		return nil, errors.New("an EC key's point is not on its curve")
	}
	return pub, nil
}
