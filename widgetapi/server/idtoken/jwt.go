package idtoken

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"hash"
	"math"
	"math/big"
	"strings"
	"time"
)

// header is a JWS protected header.
type header struct {
	Alg  string          `json:"alg"`
	Kid  string          `json:"kid"`
	Crit json.RawMessage `json:"crit"`
}

// claims are the registered claims this package checks.
type claims struct {
	Iss string   `json:"iss"`
	Sub string   `json:"sub"`
	Aud audience `json:"aud"`
	Exp *numeric `json:"exp"`
	Nbf *numeric `json:"nbf"`
	Iat *numeric `json:"iat"`
}

// audience is "aud": one string or an array of strings.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("aud is neither a string nor an array of strings")
	}
	*a = many
	return nil
}

// numeric is a NumericDate: seconds since the epoch, maybe fractional.
type numeric float64

func (n numeric) time() time.Time {
	f := float64(n)
	if f > math.MaxInt64/2 || f < -math.MaxInt64/2 || math.IsNaN(f) {
		return time.Unix(math.MaxInt64/2, 0)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9))
}

// token is a compact JWS split and decoded, its signature not yet checked.
type token struct {
	header header
	claims claims
	signed []byte // "<header>.<payload>", what the signature covers
	sig    []byte
}

// parse splits and decodes a compact JWS. It checks the form and the
// algorithm, nothing else: the claims are untrusted until verify.
func parse(raw string) (*token, *Error) {
	if len(raw) > MaxTokenBytes {
		return nil, refuse(ReasonMalformed, "the token is longer than %d bytes", MaxTokenBytes)
	}
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return nil, refuse(ReasonMalformed, "the token is not a signed JWT (three base64url parts)")
	}
	hb, err1 := b64.DecodeString(parts[0])
	pb, err2 := b64.DecodeString(parts[1])
	sig, err3 := b64.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, refuse(ReasonMalformed, "the token's parts are not base64url")
	}
	t := &token{signed: []byte(parts[0] + "." + parts[1]), sig: sig}
	if err := strictJSON(hb, &t.header); err != nil {
		return nil, refuse(ReasonMalformed, "the token's header is not a JSON object")
	}
	if t.header.Crit != nil {
		return nil, refuse(ReasonMalformed, "the token's header has critical extensions; none are supported")
	}
	if _, ok := algs[t.header.Alg]; !ok {
		return nil, refuse(ReasonAlgorithm, "the token's algorithm is not accepted; use RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512 or EdDSA")
	}
	if err := strictJSON(pb, &t.claims); err != nil {
		return nil, refuse(ReasonMalformed, "the token's claims are not a JSON object with string iss, sub and aud and numeric exp, nbf and iat")
	}
	return t, nil
}

// strictJSON decodes one JSON object, and nothing after it.
func strictJSON(b []byte, v any) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return errors.New("not an object")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data")
	}
	return nil
}

// alg is how one JWS algorithm verifies.
type alg struct {
	hash crypto.Hash
	kind string // "rsa", "pss", "ecdsa", "eddsa"
	// curveBits is the curve of an ECDSA algorithm.
	curveBits int
}

// algs are the accepted algorithms: asymmetric only. "none" and the HMAC
// algorithms are absent, so a token using them is refused before any key is
// looked at.
var algs = map[string]alg{
	"RS256": {crypto.SHA256, "rsa", 0},
	"RS384": {crypto.SHA384, "rsa", 0},
	"RS512": {crypto.SHA512, "rsa", 0},
	"PS256": {crypto.SHA256, "pss", 0},
	"PS384": {crypto.SHA384, "pss", 0},
	"PS512": {crypto.SHA512, "pss", 0},
	"ES256": {crypto.SHA256, "ecdsa", 256},
	"ES384": {crypto.SHA384, "ecdsa", 384},
	"ES512": {crypto.SHA512, "ecdsa", 521},
	"EdDSA": {0, "eddsa", 0},
}

// algFits reports whether a key of pub's type may verify name.
func algFits(name string, pub crypto.PublicKey) bool {
	a, ok := algs[name]
	if !ok {
		return false
	}
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return a.kind == "rsa" || a.kind == "pss"
	case *ecdsa.PublicKey:
		return a.kind == "ecdsa" && k.Curve.Params().BitSize == a.curveBits
	case ed25519.PublicKey:
		return a.kind == "eddsa"
	default:
		return false
	}
}

// verifySignature checks t's signature with pub, which must fit t's
// algorithm (and the key's own "alg", when it names one).
func (t *token) verifySignature(k publicKey) bool {
	name := t.header.Alg
	if k.alg != "" && k.alg != name {
		return false
	}
	if !algFits(name, k.key) {
		return false
	}
	a := algs[name]
	if a.kind == "eddsa" {
		return ed25519.Verify(k.key.(ed25519.PublicKey), t.signed, t.sig) //nolint:forcetypeassert // algFits checked the type
	}
	var h hash.Hash
	switch a.hash {
	case crypto.SHA256:
		h = sha256.New()
	case crypto.SHA384:
		h = sha512.New384()
	default:
		h = sha512.New()
	}
	h.Write(t.signed)
	digest := h.Sum(nil)
	switch key := k.key.(type) {
	case *rsa.PublicKey:
		if a.kind == "pss" {
			return rsa.VerifyPSS(key, a.hash, digest, t.sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}) == nil
		}
		return rsa.VerifyPKCS1v15(key, a.hash, digest, t.sig) == nil
	case *ecdsa.PublicKey:
		size := (a.curveBits + 7) / 8
		if len(t.sig) != 2*size {
			return false
		}
		r := new(big.Int).SetBytes(t.sig[:size])
		s := new(big.Int).SetBytes(t.sig[size:])
		return ecdsa.Verify(key, digest, r, s)
	default:
		return false
	}
}

// checkClaims checks the time claims and the audience of a token whose
// signature is valid.
func (t *token) checkClaims(aud string, now time.Time, skew time.Duration) *Error {
	c := t.claims
	if c.Exp == nil {
		return refuse(ReasonMalformed, "the token has no exp; only tokens that expire are accepted")
	}
	if !now.Before(c.Exp.time().Add(skew)) {
		return refuse(ReasonExpired, "the token has expired; get a new one")
	}
	if c.Nbf != nil && now.Add(skew).Before(c.Nbf.time()) {
		return refuse(ReasonNotYetValid, "the token is not valid yet (nbf); check the clocks")
	}
	if c.Iat != nil && now.Add(skew).Before(c.Iat.time()) {
		return refuse(ReasonNotYetValid, "the token was issued in the future (iat); check the clocks")
	}
	for _, a := range c.Aud {
		if a == aud {
			return nil
		}
	}
	return refuse(ReasonAudience, "the token's audience does not name this Widget API; request a token for its audience")
}
