package server

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// connGuard holds the per-connection limits that http.Server's own settings
// cannot express: a cap on the connections one client address holds at
// once, and a short idle timeout for connections that have not yet
// authenticated a request. HTTPServer installs it through ConnContext and
// ConnState, so it holds on whatever listener the server is given.
//
// Together with closing the connection of every 401 and 429 answer
// (writeProblem), this means a client without a valid token holds at most
// perAddr connections, each for at most unauthIdle between requests, so it
// cannot keep the server's MaxConns slots from projects that have one.
type connGuard struct {
	// perAddr is the most connections one client address (clientAddr) may
	// hold; further ones are closed as soon as they are accepted. <= 0: no
	// cap.
	perAddr int
	// limitLoopback subjects loopback addresses to perAddr. Off, loopback
	// clients (a sidecar, a local control plane, tests) are not counted.
	limitLoopback bool
	// unauthIdle is how long a connection that has not authenticated a
	// request may wait for its next request's headers, its first included.
	// <= 0: only the server's own timeouts apply.
	unauthIdle time.Duration
	// refused is told of each connection closed by the per-address cap.
	refused func(remote string)

	mu     sync.Mutex
	byAddr map[netip.Prefix]int
	conns  map[net.Conn]*guardedConn
}

// guardedConn is what connGuard knows of one connection.
type guardedConn struct {
	conn net.Conn
	addr netip.Prefix
	// authed is set once a request on the connection authenticated.
	authed atomic.Bool

	// Guarded by connGuard.mu.
	counted bool
	idle    bool
	timer   *time.Timer
}

func newConnGuard(perAddr int, limitLoopback bool, unauthIdle time.Duration, refused func(string)) *connGuard {
	return &connGuard{
		perAddr:       perAddr,
		limitLoopback: limitLoopback,
		unauthIdle:    unauthIdle,
		refused:       refused,
		byAddr:        map[netip.Prefix]int{},
		conns:         map[net.Conn]*guardedConn{},
	}
}

type connKey struct{}

// connContext is an http.Server ConnContext: it registers c and makes it
// reachable from its requests (see markAuthenticated). http.Server calls it
// before the StateNew hook, with the same net.Conn.
func (g *connGuard) connContext(ctx context.Context, c net.Conn) context.Context {
	gc := &guardedConn{conn: c, addr: clientAddr(c.RemoteAddr().String())}
	g.mu.Lock()
	g.conns[c] = gc
	g.mu.Unlock()
	return context.WithValue(ctx, connKey{}, gc)
}

// connState is an http.Server ConnState hook.
func (g *connGuard) connState(c net.Conn, st http.ConnState) {
	g.mu.Lock()
	gc, ok := g.conns[c]
	if !ok {
		g.mu.Unlock()
		return
	}
	switch st {
	case http.StateNew:
		if g.overCap(gc) {
			g.mu.Unlock()
			_ = c.Close()
			if g.refused != nil {
				g.refused(c.RemoteAddr().String())
			}
			return
		}
		g.waiting(gc)
	case http.StateIdle:
		g.waiting(gc)
	case http.StateActive:
		gc.idle = false
		g.stopTimer(gc)
	case http.StateClosed, http.StateHijacked:
		gc.idle = false
		g.stopTimer(gc)
		if gc.counted {
			if g.byAddr[gc.addr]--; g.byAddr[gc.addr] <= 0 {
				delete(g.byAddr, gc.addr)
			}
		}
		delete(g.conns, c)
	}
	g.mu.Unlock()
}

// overCap counts gc against its address and reports whether that takes the
// address over the cap (in which case it is not counted). The caller holds
// g.mu.
func (g *connGuard) overCap(gc *guardedConn) bool {
	if g.perAddr <= 0 || (!g.limitLoopback && gc.addr.Addr().IsLoopback()) {
		return false
	}
	if g.byAddr[gc.addr] >= g.perAddr {
		return true
	}
	g.byAddr[gc.addr]++
	gc.counted = true
	return false
}

// waiting notes that gc waits for a request and, unless it has
// authenticated, closes it when that takes longer than unauthIdle. The
// caller holds g.mu.
func (g *connGuard) waiting(gc *guardedConn) {
	gc.idle = true
	if g.unauthIdle <= 0 || gc.authed.Load() {
		return
	}
	g.stopTimer(gc)
	var t *time.Timer
	t = time.AfterFunc(g.unauthIdle, func() {
		g.mu.Lock()
		// Still waiting, and not re-armed since: a request that arrived in
		// the meantime stopped (or replaced) this timer.
		still := gc.idle && gc.timer == t
		g.mu.Unlock()
		if still {
			_ = gc.conn.Close()
		}
	})
	gc.timer = t
}

func (g *connGuard) stopTimer(gc *guardedConn) {
	if gc.timer != nil {
		gc.timer.Stop()
		gc.timer = nil
	}
}

// markAuthenticated notes that the connection serving r authenticated a
// request: from now on only the server's IdleTimeout applies to it.
// Requests served without connGuard (Handler behind httptest) are ignored.
func markAuthenticated(r *http.Request) {
	if gc, ok := r.Context().Value(connKey{}).(*guardedConn); ok {
		gc.authed.Store(true)
	}
}
