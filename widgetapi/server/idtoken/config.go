// Package idtoken authenticates callers of the Widget API by OIDC identity
// tokens (signed JWTs) from issuers the operator trusts, such as
// Kubernetes ServiceAccount tokens: it verifies a token's signature with
// the issuer's published keys (OIDC discovery and JWKS, a JWKS URL, or a
// static JWKS file), its issuer, audience, expiry and not-before, and maps
// its subject to a project and a role.
//
// The JOSE work is the libraries': go-jose parses tokens and keys and
// verifies signatures, and go-oidc's IDTokenVerifier checks the verified
// token's issuer, audience and expiry. What this package adds are the
// bounds around them: fetching keys (sizes, timeouts, redirects, how often),
// which keys a JWKS may hold (count, types, RSA sizes and exponent), which
// one key may verify a token (kid and alg select exactly one), the checks
// go-oidc leaves out (exp required, nbf and iat within the skew), and the
// cache of verified tokens.
//
// Only asymmetric algorithms are accepted (RS*, PS*, ES*, EdDSA), and each
// only with a key of its own type, so neither "alg": "none" nor HS256 keyed
// with a public key can pass. Keys are cached per issuer and refetched when
// a token names an unknown key, at most once per MinRefreshInterval, never
// while a request handler holds a lock.
package idtoken

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// Role is what a mapped subject may do in its project.
type Role string

// Roles.
const (
	// RoleEditor may do everything a static token may.
	RoleEditor Role = "editor"
	// RoleViewer may only read (GET): widgets, keys (never a secret) and
	// the change feed.
	RoleViewer Role = "viewer"
)

// Bounds of the configuration and of what an issuer may make the server
// hold.
const (
	// MaxClockSkew is the most ClockSkew may be.
	MaxClockSkew = 5 * time.Minute
	// DefaultClockSkew is the ClockSkew of a configuration that sets none.
	DefaultClockSkew = 30 * time.Second
	// DefaultMinRefreshInterval is how often, at most, an issuer's keys are
	// fetched again by default.
	DefaultMinRefreshInterval = 10 * time.Second
	// DefaultMaxKeyAge is how long fetched keys are used before they are
	// refetched in the background.
	DefaultMaxKeyAge = time.Hour
	// DefaultFetchTimeout bounds one fetch of an issuer's keys, discovery
	// included.
	DefaultFetchTimeout = 5 * time.Second
	// MaxJWKSBytes bounds a JWKS document; MaxDiscoveryBytes the discovery
	// document.
	MaxJWKSBytes      = 256 << 10
	MaxDiscoveryBytes = 64 << 10
	// MaxKeys bounds the keys of one JWKS; parsing stops at the first key
	// past it.
	MaxKeys = 64
	// MaxTokenBytes bounds a token.
	MaxTokenBytes = 16 << 10
)

// Config is the identity token configuration: the trusted issuers.
type Config struct {
	// ClockSkew is how far the server's clock and an issuer's may disagree
	// about exp, nbf and iat (default 30s, at most 5m).
	ClockSkew Duration `json:"clockSkew,omitempty"`
	// Issuers are the trusted issuers, each at most once.
	Issuers []Issuer `json:"issuers"`
}

// Issuer is one trusted issuer.
type Issuer struct {
	// Issuer is the exact "iss" of its tokens, e.g. a Kubernetes cluster's
	// --service-account-issuer.
	Issuer string `json:"issuer"`
	// Audience must be among the token's "aud".
	Audience string `json:"audience"`
	// Keys say where the issuer's signing keys come from.
	Keys Keys `json:"keys"`
	// Subjects map the token's "sub" to a project and a role.
	Subjects []Subject `json:"subjects"`
}

// Keys name exactly one source of an issuer's public keys.
type Keys struct {
	// Discovery fetches <DiscoveryURL or Issuer>/.well-known/openid-configuration,
	// checks its issuer, then fetches its jwks_uri.
	Discovery bool `json:"discovery,omitempty"`
	// DiscoveryURL, with Discovery, is where the discovery document is
	// fetched from when that is not the issuer itself (a cluster's issuer
	// name is often not reachable from outside it).
	DiscoveryURL string `json:"discoveryURL,omitempty"`
	// JWKSURL fetches the JWKS from this URL.
	JWKSURL string `json:"jwksURL,omitempty"`
	// JWKSFile reads the JWKS from this file (air-gapped use). It is read
	// again, within MinRefreshInterval, when a token names an unknown key.
	JWKSFile string `json:"jwksFile,omitempty"`
	// CAFile is a PEM bundle of the CAs that sign the issuer's TLS
	// certificates; default the system's.
	CAFile string `json:"caFile,omitempty"`
	// MinRefreshInterval is the shortest time between two fetches of the
	// keys (default 10s): a token naming an unknown key causes at most one
	// fetch per interval, however many such tokens arrive.
	MinRefreshInterval Duration `json:"minRefreshInterval,omitempty"`
	// MaxKeyAge is how long fetched keys are trusted before they are
	// fetched again in the background (default 1h), so a key the issuer
	// removed stops being accepted.
	MaxKeyAge Duration `json:"maxKeyAge,omitempty"`
	// FetchTimeout bounds one fetch, discovery included (default 5s).
	FetchTimeout Duration `json:"fetchTimeout,omitempty"`
}

// Subject maps token subjects to a project and a role.
type Subject struct {
	// Subject is a token's exact "sub", or, for Kubernetes ServiceAccounts,
	// "system:serviceaccount:<namespace>:*": every ServiceAccount of that
	// one namespace. No other wildcard is accepted.
	Subject string `json:"subject"`
	// Project is the Widget API project the subject acts in.
	Project string `json:"project"`
	// Role is "editor" or "viewer".
	Role Role `json:"role"`
}

// Duration is a time.Duration written as "30s" in the configuration file.
type Duration time.Duration

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("a duration is a string such as \"30s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// LoadConfig reads and validates a YAML (or JSON) configuration file.
// Unknown fields are errors, so a misspelt field cannot silently weaken a
// check.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read identity configuration: %w", err)
	}
	c := &Config{}
	if err := yaml.UnmarshalStrict(b, c); err != nil {
		return nil, fmt.Errorf("cannot parse identity configuration %s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("identity configuration %s: %w", path, err)
	}
	return c, nil
}

// Validate checks c and fills in defaults.
func (c *Config) Validate() error {
	if c.ClockSkew == 0 {
		c.ClockSkew = Duration(DefaultClockSkew)
	}
	if c.ClockSkew < 0 || time.Duration(c.ClockSkew) > MaxClockSkew {
		return fmt.Errorf("clockSkew must be between 0 and %s", MaxClockSkew)
	}
	if len(c.Issuers) == 0 {
		return errors.New("no issuers")
	}
	seen := map[string]bool{}
	for i := range c.Issuers {
		is := &c.Issuers[i]
		if err := is.validate(); err != nil {
			return fmt.Errorf("issuers[%d]: %w", i, err)
		}
		if seen[is.Issuer] {
			return fmt.Errorf("issuers[%d]: issuer %q repeated", i, is.Issuer)
		}
		seen[is.Issuer] = true
	}
	return nil
}

func (is *Issuer) validate() error {
	if is.Issuer == "" {
		return errors.New("issuer is required")
	}
	if is.Audience == "" {
		return errors.New("audience is required: a token minted for another service must not be accepted here")
	}
	if err := is.Keys.validate(is.Issuer); err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	if len(is.Subjects) == 0 {
		return errors.New("no subjects: tokens of this issuer would map to nothing")
	}
	seen := map[string]bool{}
	for i, s := range is.Subjects {
		if err := s.validate(); err != nil {
			return fmt.Errorf("subjects[%d]: %w", i, err)
		}
		if seen[s.Subject] {
			return fmt.Errorf("subjects[%d]: subject %q repeated", i, s.Subject)
		}
		seen[s.Subject] = true
	}
	return nil
}

func (k *Keys) validate(issuer string) error {
	n := 0
	for _, set := range []bool{k.Discovery, k.JWKSURL != "", k.JWKSFile != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return errors.New("set exactly one of discovery, jwksURL and jwksFile")
	}
	if k.DiscoveryURL != "" && !k.Discovery {
		return errors.New("discoveryURL needs discovery: true")
	}
	if k.Discovery {
		base := k.DiscoveryURL
		if base == "" {
			base = issuer
		}
		if err := checkURL(base); err != nil {
			return fmt.Errorf("discovery: %w", err)
		}
	}
	if k.JWKSURL != "" {
		if err := checkURL(k.JWKSURL); err != nil {
			return fmt.Errorf("jwksURL: %w", err)
		}
	}
	k.MinRefreshInterval = Duration(orDefault(time.Duration(k.MinRefreshInterval), DefaultMinRefreshInterval))
	k.MaxKeyAge = Duration(orDefault(time.Duration(k.MaxKeyAge), DefaultMaxKeyAge))
	k.FetchTimeout = Duration(orDefault(time.Duration(k.FetchTimeout), DefaultFetchTimeout))
	if k.MinRefreshInterval < 0 || k.MaxKeyAge < k.MinRefreshInterval || k.FetchTimeout < 0 {
		return errors.New("minRefreshInterval and fetchTimeout must be positive, maxKeyAge at least minRefreshInterval")
	}
	return nil
}

// checkURL accepts https URLs, and http ones only to a loopback host.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", s)
	}
	if u.Scheme == "https" {
		return nil
	}
	if u.Scheme == "http" && isLoopback(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("%q must be https (http only to a loopback host)", s)
}

// isLoopback reports whether host is the name "localhost" or a loopback
// IP address (127.0.0.0/8, ::1). The host is parsed as an address, not
// matched as text: "127.0.0.1.nip.io" is a DNS name anyone can point
// anywhere.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.IsLoopback()
}

const saPrefix = "system:serviceaccount:"

func (s Subject) validate() error {
	if s.Subject == "" || s.Project == "" {
		return errors.New("subject and project are required")
	}
	if s.Role != RoleEditor && s.Role != RoleViewer {
		return fmt.Errorf("role must be %q or %q", RoleEditor, RoleViewer)
	}
	if !strings.Contains(s.Subject, "*") {
		return nil
	}
	ns, ok := namespaceWildcard(s.Subject)
	if !ok {
		return fmt.Errorf("subject %q: the only wildcard is \"system:serviceaccount:<namespace>:*\"", s.Subject)
	}
	if !widgetapi.ValidName(ns) {
		return fmt.Errorf("subject %q: the namespace is not a DNS-1123 label", s.Subject)
	}
	return nil
}

// namespaceWildcard returns <namespace> of "system:serviceaccount:<namespace>:*".
func namespaceWildcard(sub string) (string, bool) {
	rest, ok := strings.CutPrefix(sub, saPrefix)
	if !ok {
		return "", false
	}
	ns, ok := strings.CutSuffix(rest, ":*")
	if !ok || ns == "" || strings.ContainsAny(ns, ":*") {
		return "", false
	}
	return ns, true
}

func orDefault(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}
