package idtoken

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// Reason is why a token was refused: a small fixed set, fit for a metric
// label.
type Reason string

// Reasons a token is refused. All but ReasonUnmapped are authentication
// failures (401); ReasonUnmapped is a valid token whose subject no mapping
// names (403).
const (
	ReasonMalformed       Reason = "malformed"
	ReasonAlgorithm       Reason = "algorithm"
	ReasonIssuer          Reason = "issuer"
	ReasonUnknownKey      Reason = "unknown_key"
	ReasonKeysUnavailable Reason = "keys_unavailable"
	ReasonSignature       Reason = "signature"
	ReasonAudience        Reason = "audience"
	ReasonExpired         Reason = "expired"
	ReasonNotYetValid     Reason = "not_yet_valid"
	ReasonUnmapped        Reason = "unmapped"
)

// Reasons lists every Reason, e.g. to initialise metric series.
var Reasons = []Reason{
	ReasonMalformed, ReasonAlgorithm, ReasonIssuer, ReasonUnknownKey, ReasonKeysUnavailable,
	ReasonSignature, ReasonAudience, ReasonExpired, ReasonNotYetValid, ReasonUnmapped,
}

// An Error refuses a token. Its message says what is wrong and what to do,
// and never repeats the token or a claim from it.
type Error struct {
	Reason Reason
	msg    string
}

func (e *Error) Error() string { return e.msg }

func refuse(r Reason, format string, args ...any) *Error {
	return &Error{Reason: r, msg: fmt.Sprintf(format, args...)}
}

// Identity is who a verified token speaks for.
type Identity struct {
	Issuer  string
	Subject string
	Project string
	Role    Role
	// Key identifies the identity for per-caller limits (rate, long
	// polls): the issuer and the mapping that matched. Every subject a
	// namespace wildcard matches shares one Key, so creating
	// ServiceAccounts does not multiply a namespace's limits, and the
	// number of keys is bounded by the configuration.
	Key [32]byte
}

// Options are an Authenticator's collaborators; the zero value is usable.
type Options struct {
	// Now is the clock (default time.Now).
	Now func() time.Time
	// OnFetch is called after every fetch of an issuer's keys, with its
	// error (nil on success).
	OnFetch func(issuer string, err error)
	// RootCAs are trusted for issuers without a caFile (default the
	// system's); tests set it.
	RootCAs *x509.CertPool
	// Fetchers replace the configured key source of the issuers they name;
	// tests set them.
	Fetchers map[string]Fetcher
}

// An Authenticator verifies identity tokens against a Config.
type Authenticator struct {
	skew    time.Duration
	now     func() time.Time
	issuers map[string]*issuer
	cache   *verifiedCache
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

type issuer struct {
	cfg      Issuer
	keys     *issuerKeys
	verifier *oidc.IDTokenVerifier
	exact    map[string]Subject
	byNS     map[string]Subject // namespace wildcards, by namespace
}

// New validates cfg (filling in its defaults) and returns an Authenticator
// for it. Close it to stop its fetches.
func New(cfg *Config, o Options) (*Authenticator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.OnFetch == nil {
		o.OnFetch = func(string, error) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &Authenticator{skew: time.Duration(cfg.ClockSkew), now: o.Now, issuers: map[string]*issuer{}, cache: newVerifiedCache(MaxCachedTokens), cancel: cancel}
	for _, ic := range cfg.Issuers {
		f, err := fetcherFor(ic, o)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("issuer %q: %w", ic.Issuer, err)
		}
		is := &issuer{cfg: ic, exact: map[string]Subject{}, byNS: map[string]Subject{}}
		is.keys = &issuerKeys{
			issuer:      ic.Issuer,
			fetcher:     f,
			minInterval: time.Duration(ic.Keys.MinRefreshInterval),
			maxAge:      time.Duration(ic.Keys.MaxKeyAge),
			timeout:     time.Duration(ic.Keys.FetchTimeout),
			now:         o.Now,
			observe:     o.OnFetch,
			base:        ctx,
			wg:          &a.wg,
		}
		// go-oidc checks the issuer, the audience and the expiry once
		// the signature verified. Its clock runs the skew behind ours, so
		// its exp check allows the skew too; checkClaims has already
		// applied the skew to nbf and iat (go-oidc allows nbf five
		// minutes) and required exp.
		is.verifier = oidc.NewVerifier(ic.Issuer, is.keys, &oidc.Config{
			ClientID:             ic.Audience,
			SupportedSigningAlgs: algorithmNames(),
			Now:                  func() time.Time { return o.Now().Add(-time.Duration(cfg.ClockSkew)) },
		})
		for _, s := range ic.Subjects {
			if ns, ok := namespaceWildcard(s.Subject); ok {
				is.byNS[ns] = s
				continue
			}
			is.exact[s.Subject] = s
		}
		a.issuers[ic.Issuer] = is
	}
	return a, nil
}

func fetcherFor(ic Issuer, o Options) (Fetcher, error) {
	if f, ok := o.Fetchers[ic.Issuer]; ok {
		return f, nil
	}
	k := ic.Keys
	if k.JWKSFile != "" {
		return fileFetcher(k.JWKSFile), nil
	}
	c, err := newHTTPClient(k.CAFile, o.RootCAs)
	if err != nil {
		return nil, err
	}
	f := &httpFetcher{client: c, issuer: ic.Issuer, jwksURL: k.JWKSURL}
	if k.Discovery {
		base := k.DiscoveryURL
		if base == "" {
			base = ic.Issuer
		}
		f.discovery = discoveryURL(base)
	}
	return f, nil
}

// Start fetches every issuer's keys in the background, so the first
// tokens need not wait for them.
func (a *Authenticator) Start() {
	for _, is := range a.issuers {
		is.keys.refresh()
	}
}

// Close stops fetches and waits for them to end.
func (a *Authenticator) Close() {
	a.cancel()
	a.wg.Wait()
}

// Authenticate verifies raw and maps it to an identity. It waits for an
// issuer's keys only when the token names a key the cache does not hold,
// and no longer than ctx allows. It checks a token's signature at most
// once, with the one key its kid and alg select, and only after the
// cheap checks (size, form, algorithm, issuer, audience, time claims)
// passed.
func (a *Authenticator) Authenticate(ctx context.Context, raw string) (Identity, *Error) {
	now := a.now()
	if id, ok := a.cache.get(raw, now, a.skew); ok {
		return id, nil
	}
	id, err := a.verify(ctx, raw, now)
	if err != nil {
		// A remembered token that no longer verifies (its key was
		// removed) is no longer Seen.
		a.cache.forget(raw)
		return Identity{}, err
	}
	return id, nil
}

func (a *Authenticator) verify(ctx context.Context, raw string, now time.Time) (Identity, *Error) {
	t, err := parse(raw)
	if err != nil {
		return Identity{}, err
	}
	is, ok := a.issuers[t.claims.Issuer]
	if !ok {
		return Identity{}, refuse(ReasonIssuer, "the token's issuer is not trusted by this Widget API")
	}
	if err := t.checkClaims(is.cfg.Audience, now, a.skew); err != nil {
		return Identity{}, err
	}
	st := &verifyState{tok: t}
	if _, verr := is.verifier.Verify(context.WithValue(ctx, verifyStateKey{}, st), raw); verr != nil {
		if st.err != nil {
			return Identity{}, st.err
		}
		var expired *oidc.TokenExpiredError
		if errors.As(verr, &expired) {
			return Identity{}, refuse(ReasonExpired, "the token has expired; get a new one")
		}
		// checkClaims passed, so go-oidc refused something it checks
		// beyond them, such as a malformed distributed claim.
		return Identity{}, refuse(ReasonMalformed, "the token's claims are not valid")
	}
	m, ok := is.subject(t.claims.Subject)
	if !ok {
		return Identity{}, refuse(ReasonUnmapped, "the token's subject is not mapped to a project; ask the Widget API's operator to map it")
	}
	id := Identity{
		Issuer:  is.cfg.Issuer,
		Subject: t.claims.Subject,
		Project: m.Project,
		Role:    m.Role,
		Key:     sha256.Sum256([]byte("idtoken\x00" + is.cfg.Issuer + "\x00" + m.Subject)),
	}
	e := cachedIdentity{id: id, until: now.Add(CachedTokenTTL), exp: t.claims.Expiry.Time()}
	if t.claims.NotBefore != nil {
		e.nbf = t.claims.NotBefore.Time()
	}
	a.cache.put(raw, e)
	return id, nil
}

// Seen reports whether raw verified and mapped before and is still
// remembered (among the last MaxCachedTokens, not past its exp and the
// skew, and not refused since). Only its issuer can have signed such a
// token, so presenting it is not a guess: a caller may let it skip a
// throttle meant for guessers. Authenticate answers it from memory within
// CachedTokenTTL of its last verification and verifies it again after
// that, so each remembered token costs at most one signature check per
// CachedTokenTTL, or one that fails, after which it is forgotten.
func (a *Authenticator) Seen(raw string) bool {
	return a.cache.seen(raw, a.now(), a.skew)
}

func algorithmNames() []string {
	out := make([]string, len(algorithms))
	for i, alg := range algorithms {
		out[i] = string(alg)
	}
	return out
}

// subject returns the mapping of sub: its exact mapping, else the wildcard
// of its ServiceAccount namespace.
func (is *issuer) subject(sub string) (Subject, bool) {
	if sub == "" {
		return Subject{}, false
	}
	if s, ok := is.exact[sub]; ok {
		return s, true
	}
	rest, ok := strings.CutPrefix(sub, saPrefix)
	if !ok {
		return Subject{}, false
	}
	ns, name, ok := strings.Cut(rest, ":")
	if !ok || name == "" || strings.Contains(name, ":") {
		return Subject{}, false
	}
	s, ok := is.byNS[ns]
	return s, ok
}
