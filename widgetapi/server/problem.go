package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// Bounds of an error response, in bytes: field paths and details may repeat
// what a client sent.
const (
	maxProblemField   = 96
	maxProblemMessage = 256
	maxProblemDetail  = 512
)

// problem writes an application/problem+json error response.
func problem(w http.ResponseWriter, status int, code, detail string, errs ...widgetapi.FieldError) {
	writeProblem(w, widgetapi.Problem{
		Type:   "https://widgetco.io/problems/" + code,
		Title:  http.StatusText(status),
		Status: status,
		Code:   code,
		Detail: detail,
		Errors: errs,
	})
}

// writeProblem writes p, bounded whatever the request was: at most
// widgetapi.MaxFieldErrors field errors (the rest counted in ErrorsOmitted),
// and each string clipped. Every error response goes through here.
//
// A refused request (401, 429; and a 403 to an identity that maps to no
// project, see closeAfter) also closes its connection (Connection: close;
// HTTP/2 sends GOAWAY), so a client without a valid token, or over its
// limits, cannot hold a connection slot by sending nothing more, nor try
// token after token on one connection.
func writeProblem(w http.ResponseWriter, p widgetapi.Problem) {
	p.Detail = clip(p.Detail, maxProblemDetail)
	if n := len(p.Errors); n > widgetapi.MaxFieldErrors {
		p.ErrorsOmitted += n - widgetapi.MaxFieldErrors
		p.Errors = p.Errors[:widgetapi.MaxFieldErrors]
	}
	errs := make([]widgetapi.FieldError, len(p.Errors))
	for i, e := range p.Errors {
		errs[i] = widgetapi.FieldError{Field: clip(e.Field, maxProblemField), Message: clip(e.Message, maxProblemMessage)}
	}
	p.Errors = errs
	w.Header().Set("Content-Type", widgetapi.ProblemContentType)
	w.Header().Set("Cache-Control", "no-store")
	if refused(p.Status) {
		w.Header().Set("Connection", "close")
	}
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

func invalid(w http.ResponseWriter, errs []widgetapi.FieldError) {
	problem(w, http.StatusUnprocessableEntity, widgetapi.CodeInvalid, "the request has invalid fields; see errors", errs...)
}

// setRetryAfter sets Retry-After to wait in whole seconds, at least 1.
func setRetryAfter(w http.ResponseWriter, wait time.Duration) {
	secs := int((wait + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
}

func rateLimited(w http.ResponseWriter, wait time.Duration) {
	setRetryAfter(w, wait)
	problem(w, http.StatusTooManyRequests, widgetapi.CodeRateLimited, "too many requests for this token; retry after the Retry-After delay")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeWidget(w http.ResponseWriter, status int, wd *widgetapi.Widget) {
	w.Header().Set("ETag", widgetapi.ETag(wd.Generation))
	writeJSON(w, status, wd)
}
