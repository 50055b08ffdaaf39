package idtoken

import (
	"crypto/sha256"
	"sync"
	"time"
)

// Bounds of the cache of verified tokens.
const (
	// MaxCachedTokens bounds the verified tokens remembered at once.
	MaxCachedTokens = 4096
	// CachedTokenTTL is how long a verified token is trusted without
	// verifying its signature again, within its own validity: a key the
	// issuer removes stops being accepted within MaxKeyAge plus this.
	CachedTokenTTL = time.Minute
)

// verifiedCache remembers tokens that verified and mapped, by the SHA-256
// of the whole token, so a caller that sends the same token with every
// request (the provider does, for up to an hour) pays for one signature
// verification a minute rather than one per request. Only successes are
// remembered, each with the token's own exp and nbf, which are checked
// again on every hit. It holds at most max entries, forgetting the oldest
// first.
type verifiedCache struct {
	max int

	mu    sync.Mutex
	m     map[[32]byte]cachedIdentity
	order [][32]byte // insertion order, oldest first
}

type cachedIdentity struct {
	id       Identity
	until    time.Time // when the cache stops trusting it
	exp, nbf time.Time // the token's; nbf zero when it has none
	// refused is set when the token failed verification after it was
	// remembered: it is neither trusted nor seen until it verifies again.
	refused bool
}

func newVerifiedCache(maxEntries int) *verifiedCache {
	return &verifiedCache{max: maxEntries, m: map[[32]byte]cachedIdentity{}}
}

func (c *verifiedCache) get(raw string, now time.Time, skew time.Duration) (Identity, bool) {
	k := sha256.Sum256([]byte(raw))
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if !ok || e.refused || !now.Before(e.until) || !now.Before(e.exp.Add(skew)) || (!e.nbf.IsZero() && now.Add(skew).Before(e.nbf)) {
		return Identity{}, false
	}
	return e.id, true
}

// seen reports whether raw is remembered, not refused since, and not past
// its exp and the skew, however long ago it was verified.
func (c *verifiedCache) seen(raw string, now time.Time, skew time.Duration) bool {
	k := sha256.Sum256([]byte(raw))
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	return ok && !e.refused && now.Before(e.exp.Add(skew))
}

// forget marks raw refused, if it is remembered. The entry keeps its place
// in the eviction order.
func (c *verifiedCache) forget(raw string) {
	k := sha256.Sum256([]byte(raw))
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok {
		e.refused = true
		c.m[k] = e
	}
}

func (c *verifiedCache) put(raw string, e cachedIdentity) {
	k := sha256.Sum256([]byte(raw))
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok {
		for len(c.order) >= c.max {
			delete(c.m, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, k)
	}
	c.m[k] = e
}
