package server

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// logBudget bounds the log lines of one class of events that clients can
// cause at will (refused requests): at most perSec lines a second, with a
// burst of as many. Events over the budget are only counted; take hands the
// count to a periodic summary line, so the log says how much it left out.
//
// A nil *logBudget allows every line.
type logBudget struct {
	lim        *rate.Limiter
	suppressed atomic.Int64
}

// newLogBudget returns a budget of perSec lines a second, or nil (no bound)
// when perSec is not positive.
func newLogBudget(perSec float64) *logBudget {
	if perSec <= 0 {
		return nil
	}
	return &logBudget{lim: rate.NewLimiter(rate.Limit(perSec), max(int(perSec), 1))}
}

// allow reports whether an event at now may be logged, counting it as
// suppressed when not.
func (b *logBudget) allow(now time.Time) bool {
	if b == nil || b.lim.AllowN(now, 1) {
		return true
	}
	b.suppressed.Add(1)
	return false
}

// take returns how many events were suppressed since the last take.
func (b *logBudget) take() int64 {
	if b == nil {
		return 0
	}
	return b.suppressed.Swap(0)
}

// refused reports whether an answer refuses a request without serving it:
// its access log line counts against Options.RefusedLogRate.
func refused(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusTooManyRequests
}

// closeAfter makes the answer w is about to write one that refuses its
// request although its status is not a refused one (a 403 to a valid
// identity token that maps to no project): it closes the connection and its
// log line counts against Options.RefusedLogRate.
func closeAfter(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	if lw, ok := w.(*logWriter); ok {
		lw.refused = true
	}
}

// refusedConn logs a connection closed by the per-address cap, within the
// refused-request log budget.
func (s *Server) refusedConn(remote string) {
	s.metrics.connsRefused.Inc()
	if s.refusedLog.allow(s.opts.Now()) {
		s.log.Info("connection refused: too many connections from this address", "remote", clip(remote, maxLogged))
	}
}

// summarizeRefused writes, every RefusedLogInterval until the server stops
// (and once more then), how many refused requests and connections were not
// logged.
func (s *Server) summarizeRefused() {
	if s.refusedLog == nil {
		return
	}
	t := time.NewTicker(s.opts.RefusedLogInterval)
	defer t.Stop()
	report := func() {
		if n := s.refusedLog.take(); n > 0 {
			s.log.Warn("refused requests not logged", "count", n, "interval", s.opts.RefusedLogInterval.String(),
				"detail", "401 and 429 answers, connections over the per-address cap and connection errors beyond the log budget")
		}
	}
	for {
		select {
		case <-t.C:
			report()
		case <-s.stop:
			report()
			return
		}
	}
}

// budgetHandler passes records to its Handler within a budget. It carries
// http.Server's ErrorLog, whose lines (a failed TLS handshake, a malformed
// request) any client can cause once per connection.
type budgetHandler struct {
	slog.Handler
	budget *logBudget
	now    func() time.Time
}

func (h budgetHandler) Handle(ctx context.Context, r slog.Record) error {
	if !h.budget.allow(h.now()) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h budgetHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return budgetHandler{Handler: h.Handler.WithAttrs(as), budget: h.budget, now: h.now}
}

func (h budgetHandler) WithGroup(name string) slog.Handler {
	return budgetHandler{Handler: h.Handler.WithGroup(name), budget: h.budget, now: h.now}
}
