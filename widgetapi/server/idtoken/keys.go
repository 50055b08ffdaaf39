package idtoken

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// A Fetcher gets an issuer's JWKS document. Implementations must honour
// ctx and bound what they read.
type Fetcher interface {
	Fetch(ctx context.Context) ([]byte, error)
}

// FetcherFunc adapts a function to a Fetcher.
type FetcherFunc func(ctx context.Context) ([]byte, error)

// Fetch calls f.
func (f FetcherFunc) Fetch(ctx context.Context) ([]byte, error) { return f(ctx) }

// issuerKeys caches one issuer's keys. Request handlers read the current
// set without a lock (an atomic pointer); a fetch runs in its own goroutine
// and only its result is published, so a JWKS endpoint that hangs delays
// only the requests that wait for a key it has not yet delivered, and those
// no longer than their own context allows.
type issuerKeys struct {
	issuer      string
	fetcher     Fetcher
	minInterval time.Duration
	maxAge      time.Duration
	timeout     time.Duration
	now         func() time.Time
	observe     func(issuer string, err error)
	base        context.Context //nolint:containedctx // cancelled by Close to stop fetches
	wg          *sync.WaitGroup

	cur atomic.Pointer[snapshot]

	mu       sync.Mutex // guards the two below; never held during a fetch
	inflight chan struct{}
	lastTry  time.Time
}

type snapshot struct {
	keys keySet
	at   time.Time
}

// candidates returns the keys that may have signed a token with this kid
// and alg: the keys of that kid (any kid, for a token without one) that
// fit alg.
func (s *snapshot) candidates(kid, alg string) keySet {
	if s == nil {
		return nil
	}
	var out keySet
	for _, k := range s.keys {
		if (kid == "" || k.kid == kid) && (k.alg == "" || k.alg == alg) && algFits(alg, k.key) {
			out = append(out, k)
		}
	}
	return out
}

// key returns the one key that may verify a token with kid and alg. When
// it has none it starts a fetch, unless one ran less than minInterval ago,
// and waits for it, or for ctx. A set older than maxAge is served as it is
// while a fetch renews it in the background. A token that more than one
// key fits is refused rather than tried against each: without the rule a
// token without a kid, or under a kid the issuer repeats, would cost one
// signature check per published key.
func (k *issuerKeys) key(ctx context.Context, kid, alg string) (publicKey, *Error) {
	return k.keyFrom(ctx, k.cur.Load(), kid, alg)
}

// keyFrom is key from snap, the set the request first read.
func (k *issuerKeys) keyFrom(ctx context.Context, snap *snapshot, kid, alg string) (publicKey, *Error) {
	c := snap.candidates(kid, alg)
	// refresh fetches under the key set's own context (k.base), not ctx:
	// every request that waits for the keys shares the one fetch, and the
	// first caller giving up must not cancel it for the others.
	if len(c) > 0 && k.now().Sub(snap.at) > k.maxAge {
		k.refresh() //nolint:contextcheck // shared fetch, see above
	}
	if len(c) == 0 {
		if done := k.refresh(); done != nil { //nolint:contextcheck // shared fetch, see above
			select {
			case <-done:
			case <-ctx.Done():
				return publicKey{}, refuse(ReasonKeysUnavailable, "the issuer's keys could not be fetched in time; retry later")
			}
		}
		// Read the set again whether or not this request waited: a
		// fetch another request started may have published keys since
		// snap was read, and refresh declines to start another within
		// minInterval.
		snap = k.cur.Load()
		c = snap.candidates(kid, alg)
	}
	switch {
	case len(c) == 1:
		return c[0], nil
	case len(c) > 1 && kid == "":
		return publicKey{}, refuse(ReasonUnknownKey, "the token names no kid and the issuer publishes more than one key for its algorithm; a token must name its key")
	case len(c) > 1:
		return publicKey{}, refuse(ReasonUnknownKey, "the issuer publishes more than one key under the token's kid and algorithm; ask the issuer to give each key its own kid")
	case snap == nil:
		return publicKey{}, refuse(ReasonKeysUnavailable, "the issuer's keys are not available; retry later")
	default:
		return publicKey{}, refuse(ReasonUnknownKey, "no key of the issuer matches the token's kid and alg")
	}
}

// verifyState carries one Authenticate call's parsed token to
// VerifySignature, which go-oidc calls with the raw token only, and brings
// back the refusal, which go-oidc would flatten into a string.
type verifyState struct {
	tok *token
	err *Error
}

type verifyStateKey struct{}

var _ oidc.KeySet = (*issuerKeys)(nil)

// VerifySignature implements go-oidc's KeySet over the keys this package
// fetches and bounds itself (size, key count, key sizes, fetch timeout,
// refetch interval): it picks the one key that fits the token's kid and alg
// and has go-jose verify the signature with it. It returns the payload
// that signature covers.
func (k *issuerKeys) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	st, _ := ctx.Value(verifyStateKey{}).(*verifyState)
	if st == nil || st.tok.raw != raw {
		t, err := parse(raw)
		if err != nil {
			return nil, err
		}
		st = &verifyState{tok: t}
	}
	key, err := k.key(ctx, st.tok.kid, st.tok.alg)
	if err != nil {
		st.err = err
		return nil, err
	}
	payload, verr := st.tok.jws.Verify(key.key)
	if verr != nil {
		st.err = refuse(ReasonSignature, "the token's signature is not valid")
		return nil, st.err
	}
	return payload, nil
}

// refresh starts a fetch unless one is running (whose done channel it
// returns) or the last started less than minInterval ago (nil).
func (k *issuerKeys) refresh() <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.inflight != nil {
		return k.inflight
	}
	if k.base.Err() != nil {
		return nil // closed: fetch no more
	}
	now := k.now()
	if !k.lastTry.IsZero() && now.Sub(k.lastTry) < k.minInterval {
		return nil
	}
	k.lastTry = now
	done := make(chan struct{})
	k.inflight = done
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		err := k.fetch()
		k.observe(k.issuer, err)
		k.mu.Lock()
		k.inflight = nil
		k.mu.Unlock()
		close(done)
	}()
	return done
}

// fetch gets and publishes the issuer's keys. On failure the keys it had
// stay in use.
func (k *issuerKeys) fetch() error {
	ctx, cancel := context.WithTimeout(k.base, k.timeout)
	defer cancel()
	b, err := k.fetcher.Fetch(ctx)
	if err != nil {
		return err
	}
	set, err := parseJWKS(b)
	if err != nil {
		return err
	}
	k.cur.Store(&snapshot{keys: set, at: k.now()})
	return nil
}

// fileFetcher reads a JWKS file.
func fileFetcher(path string) Fetcher {
	return FetcherFunc(func(context.Context) ([]byte, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("cannot open JWKS file: %w", err)
		}
		defer f.Close() //nolint:errcheck // read-only
		return readBounded(f, MaxJWKSBytes, "JWKS file")
	})
}

// httpFetcher gets a JWKS over HTTP(S), after OIDC discovery when
// discovery is set.
type httpFetcher struct {
	client    *http.Client
	issuer    string
	discovery string // the discovery document's URL, or empty
	jwksURL   string
}

// newHTTPClient returns a client that trusts caFile (or the system's CAs),
// follows no redirect and uses no proxy: the issuer's endpoints are named
// by the operator and fetched exactly there.
func newHTTPClient(caFile string, roots *x509.CertPool) (*http.Client, error) {
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("cannot read caFile: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, errors.New("caFile holds no PEM certificate")
		}
	}
	return &http.Client{
		Transport: &http.Transport{
			TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout:   DefaultFetchTimeout,
			ResponseHeaderTimeout: DefaultFetchTimeout,
			MaxIdleConns:          2,
			IdleConnTimeout:       time.Minute,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

func (f *httpFetcher) Fetch(ctx context.Context) ([]byte, error) {
	jwksURL := f.jwksURL
	if f.discovery != "" {
		b, err := f.get(ctx, f.discovery, "application/json", MaxDiscoveryBytes, "discovery document")
		if err != nil {
			return nil, err
		}
		var doc struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, errors.New("the discovery document is not JSON")
		}
		if doc.Issuer != f.issuer {
			return nil, fmt.Errorf("the discovery document names issuer %.100q, not the configured one", doc.Issuer)
		}
		if err := checkURL(doc.JWKSURI); err != nil {
			return nil, fmt.Errorf("the discovery document's jwks_uri: %w", err)
		}
		jwksURL = doc.JWKSURI
	}
	// kube-apiserver answers 406 to a JWKS request that does not accept
	// application/jwk-set+json.
	return f.get(ctx, jwksURL, "application/jwk-set+json, application/json", MaxJWKSBytes, "JWKS")
}

func (f *httpFetcher) get(ctx context.Context, url, accept string, limit int64, what string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("cannot build the %s request: %w", what, err)
	}
	req.Header.Set("Accept", accept)
	rsp, err := f.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot get the %s: %w", what, err)
	}
	defer rsp.Body.Close() //nolint:errcheck // read-only
	if rsp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("cannot get the %s: HTTP %d", what, rsp.StatusCode)
	}
	return readBounded(rsp.Body, limit, what)
}

func readBounded(r io.Reader, limit int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read the %s: %w", what, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("the %s is larger than %d bytes", what, limit)
	}
	return b, nil
}

// discoveryURL is where the discovery document of base (an issuer, or a
// configured discovery URL) is.
func discoveryURL(base string) string {
	return strings.TrimSuffix(base, "/") + "/.well-known/openid-configuration"
}
