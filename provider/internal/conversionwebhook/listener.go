package conversionwebhook

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
)

// limitListener accepts at most n connections at once, and at most perAddr
// of them from one client address (see clientAddr), so that one address
// cannot hold all n.
//
// A connection from an address that holds perAddr already is not refused
// at once but parked, without holding one of the n, until one of its
// address's connections closes: a client such as kube-apiserver dials a
// connection for each of a burst of first requests and then sends them all
// over the first one that is ready, so its extra dials must not fail.
// Connections parked longer than parkFor, and those beyond 4*perAddr
// parked for one address, are closed.
func limitListener(l net.Listener, n, perAddr int, parkFor time.Duration) net.Listener {
	return &limitedListener{
		Listener:  l,
		slots:     make(chan struct{}, n),
		admitted:  make(chan admittedConn),
		errs:      make(chan error),
		closed:    make(chan struct{}),
		perAddr:   perAddr,
		maxParked: 4 * perAddr,
		parkFor:   parkFor,
		addrs:     map[netip.Prefix]*addrConns{},
	}
}

type limitedListener struct {
	net.Listener
	slots chan struct{}
	// admitted carries connections counted against their address, which
	// Accept returns once one of the slots is free.
	admitted chan admittedConn
	errs     chan error
	closed   chan struct{}

	startOnce, closeOnce sync.Once

	perAddr, maxParked int
	parkFor            time.Duration

	mu    sync.Mutex
	addrs map[netip.Prefix]*addrConns
}

type admittedConn struct {
	net.Conn
	addr netip.Prefix
}

// addrConns is what limitedListener knows of one address.
type addrConns struct {
	// open counts the address's connections admitted and not yet closed.
	open   int
	parked []*parkedConn
}

type parkedConn struct {
	conn  net.Conn
	timer *time.Timer
}

// Accept returns the next admitted connection once fewer than n are open.
func (l *limitedListener) Accept() (net.Conn, error) {
	l.startOnce.Do(func() { go l.acceptLoop() })
	select {
	case c := <-l.admitted:
		select {
		case l.slots <- struct{}{}:
		case <-l.closed:
			_ = c.Close()
			l.release(c.addr)
			return nil, net.ErrClosed
		}
		return &slotConn{Conn: c.Conn, release: func() { <-l.slots; l.release(c.addr) }}, nil
	case err := <-l.errs:
		return nil, err
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// acceptLoop accepts connections until the listener is closed, and admits,
// parks or closes each.
func (l *limitedListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			// http.Server retries temporary errors and stops on others.
			select {
			case l.errs <- err:
			case <-l.closed:
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		addr := clientAddr(c.RemoteAddr())
		if l.admitOrPark(c, addr) {
			l.send(admittedConn{Conn: c, addr: addr})
		}
	}
}

// admitOrPark counts c against addr and reports true if addr holds fewer
// than perAddr; otherwise it parks c, or closes it when addr has maxParked
// parked already.
func (l *limitedListener) admitOrPark(c net.Conn, addr netip.Prefix) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.addrs[addr]
	if a == nil {
		a = &addrConns{}
		l.addrs[addr] = a
	}
	if a.open < l.perAddr {
		a.open++
		return true
	}
	if len(a.parked) >= l.maxParked {
		_ = c.Close()
		return false
	}
	p := &parkedConn{conn: c}
	p.timer = time.AfterFunc(l.parkFor, func() { l.unpark(addr, p) })
	a.parked = append(a.parked, p)
	return false
}

// unpark closes p if it is still parked.
func (l *limitedListener) unpark(addr netip.Prefix, p *parkedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.addrs[addr]
	if a == nil {
		return
	}
	for i, q := range a.parked {
		if q == p {
			a.parked = append(a.parked[:i], a.parked[i+1:]...)
			_ = p.conn.Close()
			l.forget(addr, a)
			return
		}
	}
}

// release notes that a connection admitted for addr closed, and admits the
// address's longest parked one in its place.
func (l *limitedListener) release(addr netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.addrs[addr]
	if a == nil {
		return
	}
	a.open--
	for len(a.parked) > 0 {
		p := a.parked[0]
		a.parked = a.parked[1:]
		if !p.timer.Stop() {
			// Its time is up: unpark, waiting for l.mu, no longer finds it.
			_ = p.conn.Close()
			continue
		}
		a.open++
		// Not under l.mu: Accept may be waiting for a slot that only a
		// close, and so this lock, frees.
		go l.send(admittedConn{Conn: p.conn, addr: addr})
		return
	}
	l.forget(addr, a)
}

// forget drops a once it holds nothing. The caller holds l.mu.
func (l *limitedListener) forget(addr netip.Prefix, a *addrConns) {
	if a.open <= 0 && len(a.parked) == 0 {
		delete(l.addrs, addr)
	}
}

// send hands an admitted connection to Accept, or closes it once the
// listener is closed.
func (l *limitedListener) send(c admittedConn) {
	select {
	case l.admitted <- c:
	case <-l.closed:
		_ = c.Close()
		l.release(c.addr)
	}
}

// Close stops accepting and closes the parked connections.
func (l *limitedListener) Close() error {
	l.closeOnce.Do(func() {
		close(l.closed)
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, a := range l.addrs {
			for _, p := range a.parked {
				p.timer.Stop()
				_ = p.conn.Close()
			}
			a.parked = nil
		}
	})
	return l.Listener.Close()
}

// slotConn releases its slot when it is closed.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// clientAddr is the address a connection's client is counted under: its IP
// address, or for IPv6 the /64 it is in, as one host is usually given a
// whole /64. Connections whose address is not IP (a unix socket) share the
// zero Prefix.
func clientAddr(a net.Addr) netip.Prefix {
	ap, err := netip.ParseAddrPort(a.String())
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
