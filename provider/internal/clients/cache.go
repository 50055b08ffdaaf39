package clients

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Bounds of the Resolver's caches. Every cache that stands for a credential
// or a trust decision is keyed by the full value (or a full-length hash of
// it): a key that a tenant could make collide with another tenant's would
// hand it the other's trust store, rate limits, change feed or memory of
// widgets.
const (
	// MaxTokenBytes is the longest token the provider reads from a Secret.
	// A JWT fits; a larger value is refused rather than kept in memory
	// and sent with every request.
	MaxTokenBytes = 4096

	// MaxHTTPClients bounds the HTTP clients cached per distinct caBundle
	// (each holds a parsed certificate pool and a connection pool). When
	// full, the least recently used is dropped.
	MaxHTTPClients = 128

	// HTTPClientIdle is how long an HTTP client no ProviderConfig has used
	// is kept; its idle connections are closed when it is dropped.
	HTTPClientIdle = 30 * time.Minute
)

// keyMAC is the key of connection keys' HMAC, drawn when the process
// starts: keys are compared only within one process.
var keyMAC = func() []byte {
	k := make([]byte, sha256.Size)
	_, _ = rand.Read(k) // never fails (crypto/rand, Go 1.24+)
	return k
}()

// connectionKey identifies an endpoint, a token and a CA bundle, each
// compared in full: it is an HMAC-SHA256 of all three (length-prefixed, so
// no two different triples are ever written alike) under a key drawn at
// start-up. It is as hard to make collide as SHA-256, and reveals nothing
// about the token, even a guessable one, to whoever reads it in a heap dump
// or a log line that should not have held it.
//
// more, when given, are further parts of the identity (a token file's
// marker): the length-prefixed encoding of a longer list never equals that
// of a shorter one.
func connectionKey(endpoint, token, caBundle string, more ...string) string {
	h := hmac.New(sha256.New, keyMAC)
	for _, s := range append([]string{endpoint, token, caBundle}, more...) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		_, _ = h.Write(n[:])
		_, _ = h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// httpClients caches one HTTP client per CA bundle, keyed by the bundle's
// full SHA-256, so connections are pooled across reconciles. It holds at
// most max clients and drops those unused for idle.
type httpClients struct {
	max  int
	idle time.Duration
	now  func() time.Time

	mu sync.Mutex
	m  map[[sha256.Size]byte]*cachedClient
}

type cachedClient struct {
	hc   *http.Client
	tr   *http.Transport
	used time.Time
}

func newHTTPClients(maxClients int, idle time.Duration) *httpClients {
	return &httpClients{max: maxClients, idle: idle, now: time.Now, m: map[[sha256.Size]byte]*cachedClient{}}
}

// get returns the client that trusts caBundle (the system's CAs when it is
// empty).
func (c *httpClients) get(caBundle string) (*http.Client, error) {
	sum := sha256.Sum256([]byte(caBundle))
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if e, ok := c.m[sum]; ok {
		e.used = now
		return e.hc, nil
	}
	tr, err := newTransport(caBundle)
	if err != nil {
		return nil, err
	}
	c.evict(now)
	e := &cachedClient{hc: &http.Client{Transport: tr}, tr: tr, used: now}
	c.m[sum] = e
	return e.hc, nil
}

// evict drops clients unused for idle, and the least recently used one
// while the cache is full. The caller holds c.mu.
func (c *httpClients) evict(now time.Time) {
	for k, e := range c.m {
		if now.Sub(e.used) >= c.idle {
			e.tr.CloseIdleConnections()
			delete(c.m, k)
		}
	}
	for len(c.m) >= c.max && len(c.m) > 0 {
		var oldest [sha256.Size]byte
		first := true
		for k, e := range c.m {
			if first || e.used.Before(c.m[oldest].used) {
				oldest, first = k, false
			}
		}
		// Calls in flight on a dropped client finish; only its idle
		// connections go.
		c.m[oldest].tr.CloseIdleConnections()
		delete(c.m, oldest)
	}
}

// len is the number of clients cached.
func (c *httpClients) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

func newTransport(caBundle string) (*http.Transport, error) {
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConns:        100,
		MaxIdleConnsPerHost: MaxConnsPerEndpoint,
		// At most this many requests in flight to one Widget API host,
		// however many reconciles run: a slow API gets a bounded load,
		// the rest wait for a connection (within their reconcile's
		// timeout). 429s are handled separately, by the Throttle.
		MaxConnsPerHost:       MaxConnsPerEndpoint,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}
	if caBundle != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(caBundle)) {
			return nil, errors.New("caBundle holds no PEM certificate")
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	return tr, nil
}

// knownStatus is the status an observer is told of: the status if the
// Widget API's contract uses it, else its class (418 is told as 400, 299
// as 200), and 0 for none. A server - possibly one a tenant runs - cannot
// add a metric series per status code it makes up.
func knownStatus(status int) int {
	switch status {
	case http.StatusOK, http.StatusCreated, http.StatusNoContent,
		http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusConflict,
		http.StatusGone, http.StatusPreconditionFailed, http.StatusUnprocessableEntity, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return status
	}
	if status >= 100 && status < 600 {
		return status / 100 * 100
	}
	return 0
}
