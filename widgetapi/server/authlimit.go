package server

import (
	"container/list"
	"net/netip"
	"sync"
	"time"
)

// authThrottle is a token bucket per client address for failed
// authentication attempts. Only failures create or drain a bucket, so
// clients that authenticate never enter the table. The table holds at most
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
		if a.lru.Len() >= a.max {
			oldest := a.lru.Back()
			delete(a.byAddr, oldest.Value.(*authBucket).addr) // list of *authBucket
			a.lru.Remove(oldest)
		}
		e = a.lru.PushFront(&authBucket{addr: addr, tokens: a.burst, at: now})
		a.byAddr[addr] = e
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
