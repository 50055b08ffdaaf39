package widgetapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Stable, machine-readable error codes carried in Problem.Code.
const (
	CodeMalformed          = "malformed_request"
	CodeInvalid            = "invalid"
	CodeUnauthorized       = "unauthorized"
	CodeForbidden          = "forbidden"
	CodeNotFound           = "not_found"
	CodeAlreadyExists      = "already_exists"
	CodeConflict           = "conflict"
	CodePreconditionFailed = "precondition_failed"
	CodeFeedExpired        = "feed_expired"
	CodeRateLimited        = "rate_limited"
	CodeInternal           = "internal"
	CodeUnavailable        = "unavailable"
)

// ProblemContentType is the media type of every error response (RFC 9457).
const ProblemContentType = "application/problem+json"

// MaxFieldErrors is the most field problems one error response lists; the
// rest are counted in Problem.ErrorsOmitted.
const MaxFieldErrors = 20

// FieldError is one problem with one field of a request.
type FieldError struct {
	// Field is the path of the offending field, e.g. "labels[team]".
	Field string `json:"field"`
	// Message says what is wrong and what is allowed.
	Message string `json:"message"`
}

// Problem is the body of an error response.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail,omitempty"`
	// Errors lists field problems, at most MaxFieldErrors of them.
	Errors []FieldError `json:"errors,omitempty"`
	// ErrorsOmitted counts the field problems left out of Errors.
	ErrorsOmitted int `json:"errorsOmitted,omitempty"`
	// LatestSeq accompanies feed_expired: resume from here after a resync.
	LatestSeq int64 `json:"latestSeq,omitempty"`
}

// Error is a request the API answered with an error status.
type Error struct {
	// Op is the client operation, e.g. "get widget".
	Op string
	// Method is the HTTP method of the request.
	Method string
	// StatusCode is the HTTP status.
	StatusCode int
	// Problem is the decoded problem document.
	Problem Problem
	// RetryAfter is the server's Retry-After for 429 and 503 answers.
	RetryAfter time.Duration
}

// Error describes the failure. It never contains credentials or key secrets:
// the API does not echo them and the client never adds them.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "widget API %s: %d %s", e.Op, e.StatusCode, e.Problem.Code)
	if e.Problem.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Problem.Detail)
	}
	for i, fe := range e.Problem.Errors {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(fe.Field + ": " + fe.Message)
	}
	if e.Problem.ErrorsOmitted > 0 {
		fmt.Fprintf(&b, "; and %d more", e.Problem.ErrorsOmitted)
	}
	return b.String()
}

// ErrResponseTooLarge is wrapped by the error of a call whose answer was
// longer than the contract allows for it (see MaxObjectBytes). Check it with
// errors.Is. An error status with an oversized body is still an *Error with
// that status; its Detail says the body was too large.
var ErrResponseTooLarge = errors.New("response body too large")

func asError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// IsNotFound reports whether the widget or key does not exist (or belongs to
// another project, which the API does not distinguish).
func IsNotFound(err error) bool {
	e, ok := asError(err)
	return ok && e.StatusCode == http.StatusNotFound
}

// IsConflict reports whether the request conflicts with the current state:
// a name already taken, or a change the widget's state does not allow.
func IsConflict(err error) bool {
	e, ok := asError(err)
	return ok && e.StatusCode == http.StatusConflict
}

// IsAlreadyExists reports whether a create failed because the name is taken.
func IsAlreadyExists(err error) bool {
	e, ok := asError(err)
	return ok && e.StatusCode == http.StatusConflict && e.Problem.Code == CodeAlreadyExists
}

// IsPreconditionFailed reports whether an If-Match precondition failed: the
// widget changed since the generation the caller read.
func IsPreconditionFailed(err error) bool {
	e, ok := asError(err)
	return ok && e.StatusCode == http.StatusPreconditionFailed
}

// IsRateLimited reports whether the API throttled the request, and how long
// the server asked the caller to wait before trying again.
func IsRateLimited(err error) (time.Duration, bool) {
	e, ok := asError(err)
	if !ok || e.StatusCode != http.StatusTooManyRequests {
		return 0, false
	}
	return e.RetryAfter, true
}

// IsInvalid reports whether the API rejected the request's content, and the
// field-level problems it found.
func IsInvalid(err error) ([]FieldError, bool) {
	e, ok := asError(err)
	if !ok || (e.StatusCode != http.StatusUnprocessableEntity && e.StatusCode != http.StatusBadRequest) {
		return nil, false
	}
	return e.Problem.Errors, true
}

// IsUnauthorized reports whether the token was missing or not accepted.
func IsUnauthorized(err error) bool {
	e, ok := asError(err)
	return ok && e.StatusCode == http.StatusUnauthorized
}

// IsCredentialRefused reports whether the API refused the request's
// credential itself: a 401 (the token is missing, unknown, expired or
// otherwise not valid), or the 403 of an identity token whose subject maps
// to no project. The contract gives a viewer every read, so a 403 to a read
// (GET, HEAD) is always the latter; a viewer's refused write is not a
// refused credential. The server counts each such refusal against the
// client address's failed-authentication budget.
func IsCredentialRefused(err error) bool {
	e, ok := asError(err)
	if !ok {
		return false
	}
	read := e.Method == http.MethodGet || e.Method == http.MethodHead
	return e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden && read
}

// IsForbidden reports whether the caller authenticated but may not do what
// it asked: an identity token whose subject maps to no project, or a viewer
// that tried to write.
func IsForbidden(err error) bool {
	e, ok := asError(err)
	return ok && e.StatusCode == http.StatusForbidden
}

// IsFeedExpired reports whether a change feed position is older than the
// server retains; the caller must resynchronise and resume from the returned
// sequence.
func IsFeedExpired(err error) (int64, bool) {
	e, ok := asError(err)
	if !ok || e.StatusCode != http.StatusGone {
		return 0, false
	}
	return e.Problem.LatestSeq, true
}

// IsServerError reports whether the API failed on its side (5xx).
func IsServerError(err error) bool {
	e, ok := asError(err)
	return ok && e.StatusCode >= 500
}
