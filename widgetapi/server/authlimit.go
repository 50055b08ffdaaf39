package server

import (
	"container/list"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// MinUnthrottledTokenBytes is the length from which a valid static token is
// served even from a client address the failed-authentication throttle
// holds back.
//
// The throttle exists to bound guessing and the CPU that refusals cost per
// address. Checking a static token is one SHA-256 and a map read, and a
// token of 24 random characters (docs/widget-api.md asks for them) cannot
// be guessed at any request rate one address can reach; refusing it would
// only let one client's refused tokens deny every other client behind the
// same address, and the provider, serving every tenant, is one address.
// A shorter token may have been chosen by a person, so it keeps the
// throttle: a throttled guess at it learns nothing, not even whether it
// was right.
const MinUnthrottledTokenBytes = 24

// servesThrottled reports whether tok, a valid static token, is served
// from a throttled address.
func servesThrottled(tok string) bool { return len(tok) >= MinUnthrottledTokenBytes }

// throttled answers a request from an address that must wait before its
// next authentication attempt.
func (s *Server) throttled(w http.ResponseWriter, wait time.Duration) {
	s.metrics.authThrottled.Inc()
	setRetryAfter(w, wait)
	problem(w, http.StatusTooManyRequests, widgetapi.CodeRateLimited,
		"too many failed authentication attempts from this address; check the token, then retry after the Retry-After delay")
}

// authThrottle is a token bucket per client address for failed
// authentication attempts. Cheap refusals are charged after the fact
// (failed); an attempt that is expensive to refuse, an identity token's
// signature check, is charged before it is made (take) and refunded when
// it succeeds (refund), so concurrent attempts from one address cannot
// all be let in before the first failure is counted. Only failures keep a
// bucket: a refund that fills it forgets the address, so clients that
// authenticate do not stay in the table. The table holds at most
// max addresses: recording a failure for a new address when it is full
// forgets the address whose last failure is oldest, so a flood of addresses
// costs bounded memory.
//
// A nil *authThrottle throttles nothing.
type authThrottle struct {
	rate  float64 // tokens per second
	burst float64
	max   int

	mu     sync.Mutex
	lru    *list.List // of *authBucket, most recent failure at the front
	byAddr map[netip.Prefix]*list.Element
}

type authBucket struct {
	addr   netip.Prefix
	tokens float64
	at     time.Time // when tokens was computed
}

// newAuthThrottle returns a throttle, or nil when rate is not positive.
func newAuthThrottle(rate float64, burst, maxAddrs int) *authThrottle {
	if rate <= 0 {
		return nil
	}
	return &authThrottle{
		rate:   rate,
		burst:  float64(max(burst, 1)),
		max:    max(maxAddrs, 1),
		lru:    list.New(),
		byAddr: map[netip.Prefix]*list.Element{},
	}
}

// tokensAt refills b up to now.
func (a *authThrottle) tokensAt(b *authBucket, now time.Time) float64 {
	if d := now.Sub(b.at); d > 0 {
		return min(a.burst, b.tokens+d.Seconds()*a.rate)
	}
	return b.tokens
}

// wait returns how long addr must wait before its next attempt: 0 when it
// may try now. It changes nothing.
func (a *authThrottle) wait(addr netip.Prefix, now time.Time) time.Duration {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.byAddr[addr]
	if !ok {
		return 0
	}
	tokens := a.tokensAt(e.Value.(*authBucket), now) // list of *authBucket
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / a.rate * float64(time.Second))
}

// take charges addr one attempt before it is made, if it may make one
// now, and returns 0; otherwise it charges nothing and returns how long
// addr must wait. Call refund if the attempt succeeds.
func (a *authThrottle) take(addr netip.Prefix, now time.Time) time.Duration {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.byAddr[addr]
	if !ok {
		e = a.insert(addr, now)
	}
	b := e.Value.(*authBucket) // list of *authBucket
	tokens := a.tokensAt(b, now)
	if tokens < 1 {
		return time.Duration((1 - tokens) / a.rate * float64(time.Second))
	}
	b.tokens, b.at = tokens-1, now
	a.lru.MoveToFront(e)
	return 0
}

// refund gives back the attempt take charged, for an attempt that
// succeeded. An address whose bucket is full again is forgotten.
func (a *authThrottle) refund(addr netip.Prefix, now time.Time) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.byAddr[addr]
	if !ok {
		return
	}
	b := e.Value.(*authBucket) // list of *authBucket
	b.tokens, b.at = min(a.burst, a.tokensAt(b, now)+1), now
	if b.tokens >= a.burst {
		delete(a.byAddr, addr)
		a.lru.Remove(e)
	}
}

// insert adds a full bucket for addr, forgetting the address whose last
// failure is oldest when the table is full. a.mu must be held.
func (a *authThrottle) insert(addr netip.Prefix, now time.Time) *list.Element {
	if a.lru.Len() >= a.max {
		oldest := a.lru.Back()
		delete(a.byAddr, oldest.Value.(*authBucket).addr) // list of *authBucket
		a.lru.Remove(oldest)
	}
	e := a.lru.PushFront(&authBucket{addr: addr, tokens: a.burst, at: now})
	a.byAddr[addr] = e
	return e
}

// failed charges addr one failed attempt. Attempts that were let in
// concurrently may take the bucket below zero; the debt is paid back in
// waiting time, so the long-run rate stays bounded.
func (a *authThrottle) failed(addr netip.Prefix, now time.Time) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.byAddr[addr]
	if !ok {
		e = a.insert(addr, now)
	}
	b := e.Value.(*authBucket) // list of *authBucket
	b.tokens = a.tokensAt(b, now) - 1
	b.at = now
	a.lru.MoveToFront(e)
}

// addresses is how many client addresses the throttle remembers.
func (a *authThrottle) addresses() int {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lru.Len()
}

// clientAddr is the throttling key of a connection's remote address: the
// IPv4 address, or the /64 of an IPv6 address (one host's usual share).
// Forwarding headers are ignored: any client can set them. An address that
// does not parse maps to the zero prefix, one shared bucket.
func clientAddr(remote string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Prefix{}
	}
	ip := ap.Addr().Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, err := ip.Prefix(bits)
	if err != nil {
		return netip.Prefix{}
	}
	return p
}
