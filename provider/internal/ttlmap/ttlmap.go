// Package ttlmap is a map whose entries expire: the provider's memories of
// recent answers (widgets it read, connection Secrets it read or wrote) are
// used for a short while and then asked for again.
package ttlmap

import (
	"sync"
	"time"
)

// A Map holds each value for TTL after it was put. Expired entries are not
// returned, and are dropped each time the map has doubled since they were
// last dropped, so a map whose keys keep changing stays near the number put
// in one TTL. It is safe for concurrent use. Values are returned as they
// were put: a caller that changes what it put or got must copy.
type Map[K comparable, V any] struct {
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	m  map[K]entry[V]
	// swept is the number of entries after the last sweep.
	swept int
}

type entry[V any] struct {
	v  V
	at time.Time
}

// New returns an empty map whose entries expire after ttl. With a ttl of
// zero or less nothing is kept.
func New[K comparable, V any](ttl time.Duration) *Map[K, V] {
	return &Map[K, V]{ttl: ttl, now: time.Now, m: map[K]entry[V]{}}
}

// TTL is how long an entry is kept.
func (m *Map[K, V]) TTL() time.Duration { return m.ttl }

// SetClock makes the map read the time from now (for tests).
func (m *Map[K, V]) SetClock(now func() time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = now
}

// Get returns the value of k if it was put less than TTL ago.
func (m *Map[K, V]) Get(k K) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[k]
	if !ok || m.now().Sub(e.at) >= m.ttl {
		var zero V
		return zero, false
	}
	return e.v, true
}

// Put keeps v for k from now on.
func (m *Map[K, V]) Put(k K, v V) {
	if m.ttl <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.m[k] = entry[V]{v: v, at: now}
	if len(m.m) > 2*m.swept+64 {
		for k, e := range m.m {
			if now.Sub(e.at) >= m.ttl {
				delete(m.m, k)
			}
		}
		m.swept = len(m.m)
	}
}

// Delete drops k.
func (m *Map[K, V]) Delete(k K) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, k)
}

// DeleteFunc drops every key for which del returns true.
func (m *Map[K, V]) DeleteFunc(del func(K) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.m {
		if del(k) {
			delete(m.m, k)
		}
	}
}

// Len is the number of entries held, expired or not.
func (m *Map[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}
