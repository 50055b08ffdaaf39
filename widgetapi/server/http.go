package server

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// HTTPServer returns an http.Server for Handler() with the connection
// timeouts and per-address limits of Options, whose Shutdown also releases
// the change feed's long polls. Serve it on LimitListener(ln) so the
// connection limit holds too.
// The http.Server's own errors (TLS handshakes and the like) go to the
// server's Logger at warning level, within the refused-request log budget
// (Options.RefusedLogRate): a client can cause one per connection.
func (s *Server) HTTPServer() *http.Server {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: positive(s.opts.ReadHeaderTimeout),
		ReadTimeout:       positive(s.opts.ReadTimeout),
		WriteTimeout:      positive(s.opts.WriteTimeout),
		IdleTimeout:       positive(s.opts.IdleTimeout),
		ErrorLog:          slog.NewLogLogger(budgetHandler{Handler: s.log.Handler(), budget: s.refusedLog, now: s.opts.Now}, slog.LevelWarn),
		ConnContext:       s.conns.connContext,
		ConnState:         s.conns.connState,
	}
	hs.RegisterOnShutdown(s.Shutdown)
	return hs
}

func positive(d time.Duration) time.Duration { return max(d, 0) }

// LimitListener returns ln limited to Options.MaxConns open connections.
// While the limit is reached Accept waits for a connection to close, so
// further clients queue in the kernel's listen backlog (and are refused by
// the kernel once it is full) rather than being served. Closing the returned
// listener closes ln and releases a waiting Accept.
func (s *Server) LimitListener(ln net.Listener) net.Listener {
	if s.opts.MaxConns <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, slots: make(chan struct{}, s.opts.MaxConns), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	once  sync.Once
}

// Accept takes a slot, then a connection; the slot is returned when the
// connection closes.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close closes the listener and releases an Accept waiting for a slot.
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// extendWriteDeadline gives a request that deliberately holds its response
// (a long poll, injected latency) d on top of the write timeout from now.
// Writers that cannot set deadlines (a test recorder) are left alone.
func (s *Server) extendWriteDeadline(w http.ResponseWriter, d time.Duration) {
	if s.opts.WriteTimeout <= 0 {
		return
	}
	err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d + s.opts.WriteTimeout))
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.log.Debug("cannot extend the write deadline", "error", err)
	}
}
