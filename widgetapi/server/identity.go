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
// as a 401 does. A
// caller's limits are those of its identity (idtoken.Identity.Key), as a
// static token's are of the token.
func (s *Server) authenticateIdentity(w http.ResponseWriter, r *http.Request, addr netip.Prefix, tok string, next http.Handler) {
	id, err := s.idtokens.Authenticate(r.Context(), tok)
	if err != nil {
		s.authFail.failed(addr, s.opts.Now())
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
