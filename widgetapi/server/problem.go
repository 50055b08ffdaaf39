package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/widgetco/crossplane-widget/widgetapi"
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

func writeProblem(w http.ResponseWriter, p widgetapi.Problem) {
	w.Header().Set("Content-Type", widgetapi.ProblemContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

func invalid(w http.ResponseWriter, errs []widgetapi.FieldError) {
	problem(w, http.StatusUnprocessableEntity, widgetapi.CodeInvalid, "the request has invalid fields; see errors", errs...)
}

func rateLimited(w http.ResponseWriter, wait time.Duration) {
	secs := int((wait + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
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
