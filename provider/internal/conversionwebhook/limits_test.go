package conversionwebhook

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/widgetco/crossplane-widget/apis"
)

// webhookMux returns the mux of a webhook server on which Setup registered
// the conversion webhook.
func webhookMux(t testing.TB, opts ...Option) *http.ServeMux {
	t.Helper()
	s := k8sruntime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	srv := webhook.NewServer(webhook.Options{})
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{Scheme: s, WebhookServer: srv, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Setup(mgr, opts...); err != nil {
		t.Fatalf("Setup(): %v", err)
	}
	return srv.WebhookMux()
}

// reviewBody is a ConversionReview of v1beta1 Widgets to v1alpha1, with as
// many small Widgets as fit in size bytes. It is generated as it is read.
type reviewBody struct {
	r    io.Reader
	read atomic.Int64
}

const (
	reviewHead = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"1","desiredAPIVersion":"widget.m.widgetco.io/v1alpha1","objects":[`
	reviewItem = `{"apiVersion":"widget.m.widgetco.io/v1beta1","kind":"Widget","metadata":{"name":"w","namespace":"a"}},`
	reviewTail = `{"apiVersion":"widget.m.widgetco.io/v1beta1","kind":"Widget","metadata":{"name":"w","namespace":"a"}}]}}`
)

func newReviewBody(objects int) *reviewBody {
	items := io.MultiReader(strings.NewReader(reviewHead), &repeat{s: reviewItem, n: objects - 1}, strings.NewReader(reviewTail))
	return &reviewBody{r: items}
}

func (b *reviewBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func reviewSize(objects int) int64 {
	return int64(len(reviewHead) + (objects-1)*len(reviewItem) + len(reviewTail))
}

type repeat struct {
	s   string
	n   int
	off int
}

func (r *repeat) Read(p []byte) (int, error) {
	w := 0
	for w < len(p) && r.n > 0 {
		c := copy(p[w:], r.s[r.off:])
		w += c
		r.off += c
		if r.off == len(r.s) {
			r.off = 0
			r.n--
		}
	}
	if w == 0 {
		return 0, io.EOF
	}
	return w, nil
}

// TestLimit sends what no kube-apiserver sends, and what one does, to the
// handler Setup registers: a request beyond the limits must be refused with
// a 4xx before its body is read (or as soon as it passes the limit), and
// without converting anything.
func TestLimit(t *testing.T) {
	mux := webhookMux(t)
	// 8 MiB of Widgets: about 80,000, which controller-runtime's handler
	// alone reads and converts whole (gigabytes of allocations).
	const big = 80000
	cases := map[string]struct {
		reason string
		method string
		body   *reviewBody
		// length is the Content-Length sent; -1 sends none (chunked).
		length     int64
		wantStatus int
		// wantMaxRead bounds the bytes of the body the handler read.
		wantMaxRead int64
	}{
		"OversizedWithLength": {
			reason:      "A body longer than 4 MiB that says so should be refused before any of it is read.",
			method:      http.MethodPost,
			body:        newReviewBody(big),
			length:      reviewSize(big),
			wantStatus:  http.StatusRequestEntityTooLarge,
			wantMaxRead: 0,
		},
		"OversizedChunked": {
			reason:      "A body longer than 4 MiB that does not say so should be refused once 4 MiB are read.",
			method:      http.MethodPost,
			body:        newReviewBody(big),
			length:      -1,
			wantStatus:  http.StatusRequestEntityTooLarge,
			wantMaxRead: DefaultLimits.MaxRequestBytes + 64<<10,
		},
		"TooManyObjects": {
			reason:      "A review of 1001 objects, under 4 MiB, should be refused before any object is converted.",
			method:      http.MethodPost,
			body:        newReviewBody(1001),
			length:      reviewSize(1001),
			wantStatus:  http.StatusRequestEntityTooLarge,
			wantMaxRead: reviewSize(1001),
		},
		"WithinLimits": {
			reason:      "A review of 1000 objects, kube-apiserver's at most a thousand times over, should be converted.",
			method:      http.MethodPost,
			body:        newReviewBody(1000),
			length:      reviewSize(1000),
			wantStatus:  http.StatusOK,
			wantMaxRead: reviewSize(1000),
		},
		"NotPOST": {
			reason:      "Only POST should be served.",
			method:      http.MethodPut,
			body:        newReviewBody(1),
			length:      reviewSize(1),
			wantStatus:  http.StatusMethodNotAllowed,
			wantMaxRead: 0,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "/convert", tc.body)
			r.ContentLength = tc.length
			rec := httptest.NewRecorder()
			start := time.Now()
			mux.ServeHTTP(rec, r)
			if diff := cmp.Diff(tc.wantStatus, rec.Code); diff != "" {
				t.Errorf("%s\nstatus: -want, +got:\n%s\nbody: %.200s", tc.reason, diff, rec.Body.String())
			}
			if got := tc.body.read.Load(); got > tc.wantMaxRead {
				t.Errorf("%s\nread %d bytes of the body, want at most %d", tc.reason, got, tc.wantMaxRead)
			}
			t.Logf("%s: status %d after %v, %d bytes read", name, rec.Code, time.Since(start), tc.body.read.Load())
		})
	}
}

// TestLimitAllocations checks that a refused review costs about its body,
// not its conversion: a 4 MiB review of 41,118 objects, which
// controller-runtime's handler alone converts whole (890 MiB of
// allocations), must be refused within 32 MiB.
func TestLimitAllocations(t *testing.T) {
	mux := webhookMux(t)
	objects := int((DefaultLimits.MaxRequestBytes - int64(len(reviewHead)+len(reviewTail))) / int64(len(reviewItem)))
	body, err := io.ReadAll(newReviewBody(objects))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body)))
	runtime.ReadMemStats(&after)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a review of %d objects: status %d, want %d", objects, rec.Code, http.StatusRequestEntityTooLarge)
	}
	const maxAlloc = 32 << 20
	if got := after.TotalAlloc - before.TotalAlloc; got > maxAlloc {
		t.Errorf("a refused review of %d objects (%d bytes) allocated %d MiB, want at most %d MiB", objects, len(body), got>>20, maxAlloc>>20)
	}
	t.Logf("%d objects, %d bytes: status %d, %d MiB allocated", objects, len(body), rec.Code, (after.TotalAlloc-before.TotalAlloc)>>20)
}

// TestLimitConcurrency holds the only slot and sends a second review: it
// must be refused with 503 and a Retry-After once it has waited MaxWait.
func TestLimitConcurrency(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	h := Limit(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
	}), Limits{MaxConcurrent: 1, MaxWait: 50 * time.Millisecond})

	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(reviewHead+reviewTail)))
	}()
	<-entered
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(reviewHead+reviewTail)))
	close(release)
	<-done

	got := fmt.Sprintf("%d Retry-After=%q", rec.Code, rec.Header().Get("Retry-After"))
	if diff := cmp.Diff(`503 Retry-After="1"`, got); diff != "" {
		t.Errorf("a review while the only slot is busy: -want, +got:\n%s", diff)
	}
}

// TestLimitBufferedBytes holds a review that has been read, and sends a
// second one that would take the bodies held over MaxBufferedBytes: it must
// be refused with 503 and a Retry-After, and served once the first is done.
func TestLimitBufferedBytes(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	first := true
	h := Limit(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if first {
			first = false
			close(entered)
			<-release
		}
	}), Limits{MaxRequestBytes: 1000, MaxBufferedBytes: 1000})
	body := reviewHead + strings.Repeat(" ", 400) + reviewTail

	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body)))
	}()
	<-entered
	held := httptest.NewRecorder()
	h.ServeHTTP(held, httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body)))
	close(release)
	<-done
	after := httptest.NewRecorder()
	h.ServeHTTP(after, httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body)))

	got := fmt.Sprintf("while held: %d Retry-After=%q; after: %d", held.Code, held.Header().Get("Retry-After"), after.Code)
	if diff := cmp.Diff(`while held: 503 Retry-After="1"; after: 200`, got); diff != "" {
		t.Errorf("a %d-byte review while another holds %d of 1000 bytes: -want, +got:\n%s", len(body), len(body), diff)
	}
}
