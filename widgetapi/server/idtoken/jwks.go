package idtoken

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	jose "github.com/go-jose/go-jose/v4"
)

// RSA keys accepted in a JWKS. Smaller keys are weak; larger ones, or a
// larger public exponent, make every verification more expensive without
// making a key safer (RSA verification costs grow with the modulus and
// with the exponent's bits), and e = 65537 is what every issuer uses.
const (
	MinRSABits  = 2048
	MaxRSABits  = 4096
	RSAExponent = 65537
)

// A publicKey is one usable key of a JWKS.
type publicKey struct {
	kid string
	alg string // the key's "alg", empty when it names none
	key crypto.PublicKey
}

// keySet is a parsed JWKS.
type keySet []publicKey

// parseJWKS parses a JWKS document as a stream, one key at a time, and stops
// at the first key past MaxKeys: a document of many small entries costs
// MaxKeys+1 of them, not one allocation per entry. go-jose parses each key.
// Keys that are not for signatures, or of a type or curve this package does
// not verify with, are skipped; a key that claims a supported type but is
// malformed, weak or too expensive fails the whole document, as does a
// document with no usable key or more than MaxKeys.
func parseJWKS(b []byte) (keySet, error) {
	if len(b) > MaxJWKSBytes {
		return nil, fmt.Errorf("the JWKS is larger than %d bytes", MaxJWKSBytes)
	}
	errShape := errors.New("the JWKS is not a JSON object with keys")
	d := json.NewDecoder(bytes.NewReader(b))
	if !isDelim(d, '{') {
		return nil, errShape
	}
	var set keySet
	seenKeys := false
	for d.More() {
		name, err := d.Token()
		if err != nil {
			return nil, errShape
		}
		if name != "keys" {
			// Another member: skip its value, whatever it is.
			if err := d.Decode(&json.RawMessage{}); err != nil {
				return nil, errShape
			}
			continue
		}
		if seenKeys || !isDelim(d, '[') {
			return nil, errShape
		}
		seenKeys = true
		if set, err = parseKeys(d, errShape); err != nil {
			return nil, err
		}
	}
	if !isDelim(d, '}') {
		return nil, errShape
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, errShape
	}
	if len(set) == 0 {
		return nil, errors.New("the JWKS has no usable signing key")
	}
	return set, nil
}

// parseKeys reads the keys array of a JWKS, whose '[' d has read, through
// its ']', and returns the keys to use. errShape is the error of a
// malformed document.
func parseKeys(d *json.Decoder, errShape error) (keySet, error) {
	var set keySet
	for i := 0; d.More(); i++ {
		if i == MaxKeys {
			return nil, fmt.Errorf("the JWKS has more than %d keys", MaxKeys)
		}
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return nil, errShape
		}
		k, err := parseJWK(raw)
		if err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
		if k != nil {
			set = append(set, *k)
		}
	}
	if !isDelim(d, ']') {
		return nil, errShape
	}
	return set, nil
}

// isDelim reads the next token and reports whether it is delim.
func isDelim(d *json.Decoder, delim json.Delim) bool {
	t, err := d.Token()
	return err == nil && t == delim
}

// parseJWK parses one key: nil for a key to skip.
func parseJWK(raw json.RawMessage) (*publicKey, error) {
	// What decides whether go-jose sees the key at all.
	var head struct {
		Kty string          `json:"kty"`
		Use string          `json:"use"`
		D   json.RawMessage `json:"d"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, errors.New("not a JSON object with string kty and use")
	}
	if head.Use != "" && head.Use != "sig" {
		return nil, nil //nolint:nilnil // skipped, not an error
	}
	if head.D != nil {
		return nil, errors.New("holds a private key: refusing to use a JWKS that leaks one")
	}
	switch head.Kty {
	case "RSA", "EC", "OKP":
	default:
		return nil, nil //nolint:nilnil // symmetric or unknown types are skipped (RFC 7517 section 5)
	}
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON(raw); err != nil {
		// go-jose answers ErrUnsupportedKeyType for curves it does not
		// know, which are skipped, and for RSA moduli over its
		// MaxRSAModulusBits (4096, MaxRSABits), which are refused with
		// this package's reason (TestRSABounds pins it).
		if errors.Is(err, jose.ErrUnsupportedKeyType) {
			if head.Kty == "RSA" {
				return nil, fmt.Errorf("an RSA key must have %d to %d bits", MinRSABits, MaxRSABits)
			}
			return nil, nil //nolint:nilnil // an unknown curve is skipped
		}
		return nil, fmt.Errorf("not a valid %s key: %w", head.Kty, err)
	}
	if !k.IsPublic() {
		return nil, errors.New("holds a private key: refusing to use a JWKS that leaks one")
	}
	switch pub := k.Key.(type) {
	case *rsa.PublicKey:
		if bits := pub.N.BitLen(); bits < MinRSABits || bits > MaxRSABits {
			return nil, fmt.Errorf("an RSA key must have %d to %d bits, not %d", MinRSABits, MaxRSABits, bits)
		}
		if pub.E != RSAExponent {
			return nil, fmt.Errorf("an RSA key's exponent e must be %d", RSAExponent)
		}
	case *ecdsa.PublicKey, ed25519.PublicKey:
	default:
		return nil, nil //nolint:nilnil // a type this package does not verify with
	}
	if k.Algorithm != "" && !algFits(k.Algorithm, k.Key) {
		return nil, fmt.Errorf("alg %.32q does not fit a key of type %s", k.Algorithm, head.Kty)
	}
	return &publicKey{kid: k.KeyID, alg: k.Algorithm, key: k.Key}, nil
}
