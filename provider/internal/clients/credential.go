package clients

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// credentialKey identifies a credential for Pauses: the endpoint, the token
// and the CA bundle, each written in one canonical form, so that a variant
// that sends the same token to the same server (`host` or `host:443`, an
// upper-case host, a trailing slash, a query the client drops, a comment or
// a reordering in the CA bundle) is the same credential, and its refusal
// the same refusal. It is an HMAC like connectionKey, and reveals nothing
// about the token.
func credentialKey(endpoint, token, caBundle string) string {
	return connectionKey(canonicalEndpoint(endpoint), token, canonicalCAs(endpoint, caBundle), "credential")
}

// canonicalEndpoint is endpoint as the Widget API client uses it (see
// widgetapi.New), with what does not change where a request goes, or which
// token it carries, left out: the scheme and host in lower case, the host's
// trailing dot and the scheme's default port dropped, an IP address in its
// canonical form, one trailing slash, the query and fragment (the client
// replaces them) and any user info (the bearer token takes precedence over
// it). An endpoint that does not parse is returned as it is: it is never
// sent.
func canonicalEndpoint(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return endpoint
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.String()
	}
	port := u.Port()
	if scheme == "https" && port == "443" || scheme == "http" && port == "80" {
		port = ""
	}
	if port != "" || strings.Contains(host, ":") {
		host = net.JoinHostPort(host, port)
		host = strings.TrimSuffix(host, ":")
	}
	return scheme + "://" + host + strings.TrimSuffix(u.EscapedPath(), "/")
}

// maxCAIdentities bounds canonical CA bundles remembered (see canonicalCAs).
const maxCAIdentities = 128

// caIdentities remembers canonical CA bundles by the bundle's SHA-256, so
// that a bundle is parsed once, not on every reconcile.
var caIdentities = struct {
	sync.Mutex
	m map[[sha256.Size]byte]string
}{m: map[[sha256.Size]byte]string{}}

// canonicalCAs is the trust a CA bundle gives an endpoint's client: empty
// for an http endpoint, which uses none; else the sorted SHA-256s of the
// certificates the client's pool gets from it, which are those of
// x509.CertPool.AppendCertsFromPEM (CERTIFICATE blocks without headers that
// parse; text outside blocks, other blocks, line wrapping, order and
// repeats make no difference).
func canonicalCAs(endpoint, caBundle string) string {
	if caBundle == "" || strings.HasPrefix(strings.ToLower(endpoint), "http://") {
		return ""
	}
	sum := sha256.Sum256([]byte(caBundle))
	caIdentities.Lock()
	defer caIdentities.Unlock()
	if id, ok := caIdentities.m[sum]; ok {
		return id
	}
	var certs [][sha256.Size]byte
	rest := []byte(caBundle)
	for len(rest) > 0 {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" || len(b.Headers) != 0 {
			continue
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			continue
		}
		certs = append(certs, sha256.Sum256(b.Bytes))
	}
	slices.SortFunc(certs, func(a, b [sha256.Size]byte) int { return strings.Compare(string(a[:]), string(b[:])) })
	certs = slices.Compact(certs)
	var id strings.Builder
	for _, c := range certs {
		id.WriteString(hex.EncodeToString(c[:]))
	}
	if len(caIdentities.m) >= maxCAIdentities {
		clear(caIdentities.m)
	}
	caIdentities.m[sum] = id.String()
	return id.String()
}
