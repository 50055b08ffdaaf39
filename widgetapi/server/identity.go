package server

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken"
)

// reasonRole is the refusal reason of a viewer that tried to write.
const reasonRole = "role"

// looksLikeJWT reports whether a bearer token has the shape of a compact
// JWS: three dot-separated parts. Anything else is a static token.
func looksLikeJWT(tok string) bool { return strings.Count(tok, ".") == 2 }

// authenticateIdentity serves r for a verified identity token, or refuses
// it: 401 for a token that is not valid (the detail says why, never with a
// claim or the token), 403 for a valid token whose subject maps to no
// project or whose role may not do what r asks. A token that is not valid or
// maps to nothing counts as a failed authentication of the client address,
// closes the connection and counts against the refused-request log budget,
// as a 401 does. A caller's limits are those of its identity
// (idtoken.Identity.Key), as a static token's are of the token.
//
// Verifying a signature is the expensive part of authentication, so a token
// the authenticator has not seen verify is charged to the address's
// failed-authentication budget before it is verified and refunded when it
// verifies: concurrent forged tokens from one address beyond its burst are
// answered 429 without being verified. A token seen to verify before
// (idtoken.Authenticator.Seen) skips the budget, as a long static token
// does: only its issuer can have signed it, and answering it costs a cache
// lookup, or one signature check per idtoken.CachedTokenTTL.
func (s *Server) authenticateIdentity(w http.ResponseWriter, r *http.Request, addr netip.Prefix, tok string, next http.Handler) {
	seen := s.idtokens.Seen(tok)
	if !seen {
		if wait := s.authFail.take(addr, s.opts.Now()); wait > 0 {
			s.throttled(w, wait)
			return
		}
	}
	id, err := s.idtokens.Authenticate(r.Context(), tok)
	if err != nil {
		if seen {
			s.authFail.failed(addr, s.opts.Now())
		}
		s.metrics.tokensRefused.WithLabelValues(string(err.Reason)).Inc()
		if err.Reason == idtoken.ReasonUnmapped {
			// Refused like an invalid token, not like a caller that may not
			// do one thing: a client that can obtain valid tokens of many
			// subjects (any ServiceAccount it can create) must not try them
			// one after another on a kept connection to find one that maps
			// to a project. A viewer's refused write (below) keeps its
			// connection: that caller is authenticated.
			closeAfter(w)
			problem(w, http.StatusForbidden, widgetapi.CodeForbidden, err.Error())
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="widget-api", error="invalid_token"`)
		problem(w, http.StatusUnauthorized, widgetapi.CodeUnauthorized, err.Error())
		return
	}
	if !seen {
		s.authFail.refund(addr, s.opts.Now())
	}
	if lw, ok := w.(*logWriter); ok {
		lw.subject = clip(id.Subject, maxLogged)
	}
	if id.Role != idtoken.RoleEditor && r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.metrics.tokensRefused.WithLabelValues(reasonRole).Inc()
		markAuthenticated(r)
		if lw, ok := w.(*logWriter); ok {
			lw.project = id.Project
		}
		problem(w, http.StatusForbidden, widgetapi.CodeForbidden, "this identity has the viewer role in its project: it may only read")
		return
	}
	s.metrics.tokensOK.WithLabelValues(id.Issuer).Inc()
	s.serveAs(w, r, id.Project, id.Key, next)
}

// keysFetched counts a fetch of an issuer's keys and logs a failure.
func (s *Server) keysFetched(issuer string, err error) {
	if err != nil {
		s.metrics.keyFetches.WithLabelValues(issuer, "error").Inc()
		s.log.Warn("cannot fetch an identity token issuer's keys", "issuer", clip(issuer, maxLogged), "error", clip(err.Error(), maxLogged))
		return
	}
	s.metrics.keyFetches.WithLabelValues(issuer, "ok").Inc()
}
