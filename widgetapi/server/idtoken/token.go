package idtoken

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// algorithms are the accepted JWS algorithms: asymmetric only. "none" and
// the HMAC algorithms are absent, so go-jose refuses a token using them
// while parsing it, before any key is looked at.
var algorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// algFits reports whether a key of pub's type may verify alg. go-jose
// checks the same when it verifies; choosing keys by it means a token
// cannot make the server try a key of another type or curve at all.
func algFits(alg string, pub crypto.PublicKey) bool {
	switch jose.SignatureAlgorithm(alg) {
	case jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512:
		_, ok := pub.(*rsa.PublicKey)
		return ok
	case jose.ES256:
		return onCurve(pub, 256)
	case jose.ES384:
		return onCurve(pub, 384)
	case jose.ES512:
		return onCurve(pub, 521)
	case jose.EdDSA:
		_, ok := pub.(ed25519.PublicKey)
		return ok
	default:
		return false
	}
}

func onCurve(pub crypto.PublicKey, bits int) bool {
	k, ok := pub.(*ecdsa.PublicKey)
	return ok && k.Curve.Params().BitSize == bits
}

// token is a compact JWS parsed by go-jose, its signature not yet checked.
type token struct {
	raw    string
	jws    *jose.JSONWebSignature
	kid    string
	alg    string
	claims claims
}

// claims are the registered claims this package checks, in go-jose's
// types. Other claims are not read, so a token is not refused for the type
// of a claim nothing uses (such as a numeric jti).
type claims struct {
	Issuer    string           `json:"iss"`
	Subject   string           `json:"sub"`
	Audience  jwt.Audience     `json:"aud"`
	Expiry    *jwt.NumericDate `json:"exp"`
	NotBefore *jwt.NumericDate `json:"nbf"`
	IssuedAt  *jwt.NumericDate `json:"iat"`
}

// parse parses a compact JWS with go-jose and decodes its registered
// claims. It checks the form, the algorithm and the claims' types, nothing
// else: the claims are untrusted until the signature is verified.
func parse(raw string) (*token, *Error) {
	if len(raw) > MaxTokenBytes {
		return nil, refuse(ReasonMalformed, "the token is longer than %d bytes", MaxTokenBytes)
	}
	jws, err := jose.ParseSignedCompact(raw, algorithms)
	if err != nil {
		var unexpected *jose.ErrUnexpectedSignatureAlgorithm
		if errors.As(err, &unexpected) {
			return nil, refuse(ReasonAlgorithm, "the token's algorithm is not accepted; use RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512 or EdDSA")
		}
		return nil, refuse(ReasonMalformed, "the token is not a signed JWT (three base64url parts, a JSON header)")
	}
	h := jws.Signatures[0].Protected
	// go-jose honours "b64" and refuses unknown "crit" names only when it
	// verifies; no extension is supported here, so refuse both before any
	// key is looked at.
	if _, ok := h.ExtraHeaders["crit"]; ok {
		return nil, refuse(ReasonMalformed, "the token's header has critical extensions; none are supported")
	}
	if _, ok := h.ExtraHeaders["b64"]; ok {
		return nil, refuse(ReasonMalformed, "the token's header has critical extensions; none are supported")
	}
	t := &token{raw: raw, jws: jws, kid: h.KeyID, alg: h.Algorithm}
	if err := json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &t.claims); err != nil {
		return nil, refuse(ReasonMalformed, "the token's claims are not a JSON object with string iss, sub and aud and numeric exp, nbf and iat")
	}
	return t, nil
}

// checkClaims checks the time claims and the audience with go-jose's
// validation. It runs before the signature is verified, because it is
// cheap: a token that would be refused anyway costs no signature check.
// go-oidc checks the issuer, audience and expiry again after verifying
// (see Authenticate); this check adds what it does not: exp required, and
// nbf and iat within the configured skew.
func (t *token) checkClaims(aud string, now time.Time, skew time.Duration) *Error {
	if t.claims.Expiry == nil {
		return refuse(ReasonMalformed, "the token has no exp; only tokens that expire are accepted")
	}
	c := jwt.Claims{Audience: t.claims.Audience, Expiry: t.claims.Expiry, NotBefore: t.claims.NotBefore, IssuedAt: t.claims.IssuedAt}
	err := c.ValidateWithLeeway(jwt.Expected{AnyAudience: jwt.Audience{aud}, Time: now}, skew)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jwt.ErrExpired):
		return refuse(ReasonExpired, "the token has expired; get a new one")
	case errors.Is(err, jwt.ErrNotValidYet):
		return refuse(ReasonNotYetValid, "the token is not valid yet (nbf); check the clocks")
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return refuse(ReasonNotYetValid, "the token was issued in the future (iat); check the clocks")
	case errors.Is(err, jwt.ErrInvalidAudience):
		return refuse(ReasonAudience, "the token's audience does not name this Widget API; request a token for its audience")
	default:
		return refuse(ReasonMalformed, "the token's claims are not valid")
	}
}
