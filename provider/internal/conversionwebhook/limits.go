package conversionwebhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
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

	// MaxConcurrent is how many reviews are converted at once. Converting
	// costs about ten times the body in allocations, so this and
	// MaxRequestBytes bound the memory conversions take.
	MaxConcurrent int

	// MaxWait is how long a review that has been read waits for one of the
	// MaxConcurrent slots before it is refused with 503 and a Retry-After.
	MaxWait time.Duration

	// MaxReadTime is how long reading a review's body may take. A body
	// is read before its review takes a slot, so a client that sends it
	// slowly holds a connection for at most this long, and never a slot.
	MaxReadTime time.Duration

	// MaxBufferedBytes bounds the bytes of request bodies held at once,
	// while they are read and until their review is answered. Bytes are
	// counted as they arrive, so a slow client holds only what it sent. A
	// body that would take the total over the bound is refused with 503
	// and a Retry-After. Zero: 16 times MaxRequestBytes.
	MaxBufferedBytes int64
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
// 200 MiB (TestLimitAllocations measures a refused one), plus at most
// 64 MiB of bodies read or waiting. kube-apiserver sends a body of a few
// KiB at once, so 5 seconds to read it never refuses it either.
var DefaultLimits = Limits{
	MaxRequestBytes:  4 << 20,
	MaxObjects:       1000,
	MaxConcurrent:    4,
	MaxWait:          5 * time.Second,
	MaxReadTime:      5 * time.Second,
	MaxBufferedBytes: 64 << 20,
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
	if l.MaxReadTime <= 0 {
		l.MaxReadTime = DefaultLimits.MaxReadTime
	}
	if l.MaxBufferedBytes <= 0 {
		l.MaxBufferedBytes = 16 * l.MaxRequestBytes
	}
	return &limited{next: h, limits: l, slots: make(chan struct{}, l.MaxConcurrent), buffered: &budget{max: l.MaxBufferedBytes}}
}

type limited struct {
	next     http.Handler
	limits   Limits
	slots    chan struct{}
	buffered *budget
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

	// The body is read before the review takes a slot: a slot is held
	// only while converting, which needs no more bytes from the client, so
	// a client cannot hold one by sending slowly. The servers that cannot
	// set a deadline per request (httptest's recorder) still have their
	// ReadTimeout.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(l.limits.MaxReadTime))
	held := &heldBody{r: http.MaxBytesReader(w, r.Body, l.limits.MaxRequestBytes), b: l.buffered}
	defer held.release()
	body, err := io.ReadAll(held)
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			tooLarge(w, fmt.Sprintf("the body must be at most %d bytes", l.limits.MaxRequestBytes))
			return
		}
		// The rest of the body, if it comes, is not worth reading.
		unread(w, r)
		if errors.Is(err, errBudget) {
			busy(w, "too many conversion requests are being read: retry")
			return
		}
		// Most often the read deadline.
		http.Error(w, "cannot read the body", http.StatusBadRequest)
		return
	}

	t := time.NewTimer(l.limits.MaxWait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		defer func() { <-l.slots }()
	case <-t.C:
		busy(w, "too many conversion requests: retry")
		return
	case <-r.Context().Done():
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

// busy refuses a request with 503 and a Retry-After.
func busy(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, msg, http.StatusServiceUnavailable)
}

// unread closes an HTTP/1 connection after the answer to r, whose body was
// not read to its end: the connection may still carry the rest of it. An
// HTTP/2 stream's unread body ends with the stream, and Connection: close
// would end kube-apiserver's connection, shared by all its conversions.
func unread(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
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

// errBudget is returned by a heldBody read that would take the bytes held
// over their budget.
var errBudget = errors.New("the webhook holds as many request bytes as it may")

// budget counts bytes held by all requests at once. It is safe for
// concurrent use.
type budget struct {
	max int64

	mu   sync.Mutex
	used int64
}

// take adds n bytes to those held, unless that would pass max.
func (b *budget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

func (b *budget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// heldBody reads a body and counts the bytes it returns against a budget
// until release. It counts what arrived, not what the request declares, so
// that a client cannot reserve memory it never sends.
type heldBody struct {
	r    io.Reader
	b    *budget
	held int64
}

func (h *heldBody) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if n > 0 {
		if !h.b.take(int64(n)) {
			return 0, errBudget
		}
		h.held += int64(n)
	}
	return n, err
}

// release gives back every byte the body took from its budget.
func (h *heldBody) release() {
	h.b.give(h.held)
	h.held = 0
}
