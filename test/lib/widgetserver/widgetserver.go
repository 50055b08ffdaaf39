// Package widgetserver runs the reference Widget API server in a test's
// process, as the widget-api command serves it, and makes it trust a
// cluster's ServiceAccount tokens.
package widgetserver

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// A Server is the reference Widget API server run in-process (Start).
type Server struct {
	// URL is the server's base URL (http://<address>:PORT).
	URL string
	// DataDir holds the server's database.
	DataDir string
	// Server is the server itself, e.g. for SetFaults.
	Server *server.Server

	hs   *http.Server
	logf *os.File
}

// Start serves the reference Widget API in-process on listen
// (host:port; port 0 picks one), as the widget-api command serves it, with
// its data under dir/widgetapi and its log in dir/logs/widget-api.log unless
// o says otherwise. Close stops it.
func Start(o server.Options, dir, listen string) (*Server, error) {
	if o.DataDir == "" {
		o.DataDir = filepath.Join(dir, "widgetapi")
	}
	var logf *os.File
	if o.Logger == nil {
		f, err := os.OpenFile(filepath.Join(dir, "logs", "widget-api.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, errors.Wrap(err, "cannot open Widget API log")
		}
		logf = f
		o.Logger = slog.New(slog.NewTextHandler(f, nil))
	}
	closeLog := func() {
		if logf != nil {
			_ = logf.Close()
		}
	}
	s, err := server.New(o)
	if err != nil {
		closeLog()
		return nil, errors.Wrap(err, "cannot start the Widget API server")
	}
	l, err := net.Listen("tcp", listen) //nolint:noctx // ctx-free by design: Listen's context only bounds resolving the address, and callers pass a literal IP
	if err != nil {
		_ = s.Close()
		closeLog()
		return nil, errors.Wrap(err, "cannot listen for the Widget API server")
	}
	// Served as the widget-api command serves it: with its timeouts,
	// connection limit and failed-auth throttle.
	hs := s.HTTPServer()
	go func() { _ = hs.Serve(s.LimitListener(l)) }()
	return &Server{URL: "http://" + l.Addr().String(), DataDir: o.DataDir, Server: s, hs: hs, logf: logf}, nil
}

// Close stops the server and closes its database.
func (w *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w.Server.Shutdown()
	_ = w.hs.Shutdown(ctx)
	err := w.Server.Close()
	if w.logf != nil {
		_ = w.logf.Close()
	}
	return errors.Wrap(err, "cannot stop the Widget API server")
}
