package conversionwebhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Limits bound what one ConversionReview may cost the provider. The webhook
// port is reachable by whatever the cluster's network lets through, and
// kube-apiserver presents no credentials to conversion webhooks, so the
// limits apply to every caller. Each default leaves a wide margin over what
// kube-apiserver sends (see DefaultLimits).
type Limits struct {
	// MaxRequestBytes is the largest request body read. A larger one is
	// refused with 413 before its body is read (when it declares its
	// length) or as soon as the limit is passed (when it does not).
	MaxRequestBytes int64

	// MaxObjects is the largest number of objects in one ConversionReview.
	// A review with more is refused with 413 before any is decoded.
	MaxObjects int

	// MaxConcurrent is how many reviews are read and converted at once.
	// Converting costs about ten times the body in allocations, so this
	// and MaxRequestBytes bound the webhook's memory.
	MaxConcurrent int

	// MaxWait is how long a review waits for one of the MaxConcurrent
	// slots before it is refused with 503 and a Retry-After.
	MaxWait time.Duration
}

// DefaultLimits are the limits Setup applies unless told otherwise.
//
// kube-apiserver sends one object per ConversionReview whether it fills its
// watch cache, serves a get, a list (from the cache or paginated from etcd)
// or a watch, or converts a write: its storage decodes and converts each
// object on its own (TestAPIServer/ReviewSize in package apis pins this).
// etcd refuses to store an object over 1.5 MiB by default
// (--max-request-bytes) and kube-apiserver refuses a request body over
// 3 MiB. 4 MiB and 1000 objects therefore never refuse kube-apiserver, and
// bound one review to about 50 MiB of allocations, four at once to about
// 200 MiB (TestLimitAllocations measures a refused one).
var DefaultLimits = Limits{
	MaxRequestBytes: 4 << 20,
	MaxObjects:      1000,
	MaxConcurrent:   4,
	MaxWait:         5 * time.Second,
}

// Limit wraps a ConversionReview handler, such as controller-runtime's
// conversion webhook (which reads any body whole), so that it serves only
// POSTs within l. Zero fields of l take DefaultLimits' values.
func Limit(h http.Handler, l Limits) http.Handler {
	if l.MaxRequestBytes <= 0 {
		l.MaxRequestBytes = DefaultLimits.MaxRequestBytes
	}
	if l.MaxObjects <= 0 {
		l.MaxObjects = DefaultLimits.MaxObjects
	}
	if l.MaxConcurrent <= 0 {
		l.MaxConcurrent = DefaultLimits.MaxConcurrent
	}
	if l.MaxWait <= 0 {
		l.MaxWait = DefaultLimits.MaxWait
	}
	return &limited{next: h, limits: l, slots: make(chan struct{}, l.MaxConcurrent)}
}

type limited struct {
	next   http.Handler
	limits Limits
	slots  chan struct{}
}

func (l *limited) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "a ConversionReview must be POSTed", http.StatusMethodNotAllowed)
		return
	}
	if r.ContentLength > l.limits.MaxRequestBytes {
		tooLarge(w, fmt.Sprintf("the body must be at most %d bytes", l.limits.MaxRequestBytes))
		return
	}

	// The slot is taken before the body is read: the body counts against
	// the memory the slots bound.
	t := time.NewTimer(l.limits.MaxWait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		defer func() { <-l.slots }()
	case <-t.C:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many conversion requests: retry", http.StatusServiceUnavailable)
		return
	case <-r.Context().Done():
		return
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, l.limits.MaxRequestBytes))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			tooLarge(w, fmt.Sprintf("the body must be at most %d bytes", l.limits.MaxRequestBytes))
			return
		}
		http.Error(w, "cannot read the body", http.StatusBadRequest)
		return
	}
	n, err := countObjects(body)
	if err != nil {
		http.Error(w, "the body is not a ConversionReview", http.StatusBadRequest)
		return
	}
	if n > l.limits.MaxObjects {
		tooLarge(w, "a ConversionReview may hold at most "+strconv.Itoa(l.limits.MaxObjects)+" objects")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	l.next.ServeHTTP(w, r)
}

func tooLarge(w http.ResponseWriter, msg string) {
	// The connection may still carry the rest of an unread body: close it
	// rather than read it.
	w.Header().Set("Connection", "close")
	http.Error(w, msg, http.StatusRequestEntityTooLarge)
}

// skip decodes any JSON value into nothing: counting objects must not
// allocate them.
type skip struct{}

func (*skip) UnmarshalJSON([]byte) error { return nil }

// countObjects returns how many objects the ConversionReview in body holds.
func countObjects(body []byte) (int, error) {
	var review struct {
		Request *struct {
			Objects []skip `json:"objects"`
		} `json:"request"`
	}
	if err := json.Unmarshal(body, &review); err != nil {
		return 0, err
	}
	if review.Request == nil {
		return 0, nil
	}
	return len(review.Request.Objects), nil
}
