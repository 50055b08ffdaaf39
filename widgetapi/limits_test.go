package widgetapi_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// countingTransport counts the response body bytes the client reads.
type countingTransport struct{ read atomic.Int64 }

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rsp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	rsp.Body = &countingBody{ReadCloser: rsp.Body, n: &t.read}
	return rsp, nil
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// TestResponseSizeLimits checks that the client reads no more of a response
// than the contract's largest answer to the call, and that an oversized
// answer is an error that says so without quoting it.
func TestResponseSizeLimits(t *testing.T) {
	const attackerBody = 8 << 20
	// A valid widget padded with spaces: well-formed JSON, just too long.
	padded := func(n int) string { return `{"name":"w","size":"small"` + strings.Repeat(" ", n) + `}` }
	cases := map[string]struct {
		reason        string
		status        int
		body          string
		chunked       bool
		call          func(c *widgetapi.Client) error
		wantTooLarge  bool
		wantRateLimit bool
		maxRead       int64
	}{
		"HugeWidget": {
			reason: "An 8 MiB answer to a widget read is refused after MaxObjectBytes.",
			status: http.StatusOK, body: padded(attackerBody),
			call:         func(c *widgetapi.Client) error { _, err := c.GetWidget(t.Context(), "w"); return err },
			wantTooLarge: true, maxRead: 0,
		},
		"HugeChunkedWidget": {
			reason: "Without a Content-Length the client stops reading after MaxObjectBytes.",
			status: http.StatusOK, body: padded(attackerBody), chunked: true,
			call:         func(c *widgetapi.Client) error { _, err := c.GetWidget(t.Context(), "w"); return err },
			wantTooLarge: true, maxRead: widgetapi.MaxObjectBytes + 1,
		},
		"LargestWidget": {
			reason: "A widget of MaxObjectBytes is read.",
			status: http.StatusOK, body: padded(widgetapi.MaxObjectBytes - len(padded(0))), chunked: true,
			call:    func(c *widgetapi.Client) error { _, err := c.GetWidget(t.Context(), "w"); return err },
			maxRead: widgetapi.MaxObjectBytes,
		},
		"HugeChanges": {
			reason: "A change feed page is bounded by MaxChangesBytes.",
			status: http.StatusOK, body: `{"changes":[],"latestSeq":1` + strings.Repeat(" ", attackerBody) + `}`, chunked: true,
			call: func(c *widgetapi.Client) error {
				_, err := c.Changes(t.Context(), widgetapi.ChangesOptions{After: 1})
				return err
			},
			wantTooLarge: true, maxRead: widgetapi.MaxChangesBytes + 1,
		},
		"HugeRateLimited": {
			reason: "An oversized error body is not read, and the status still counts: a 429 is a 429.",
			status: http.StatusTooManyRequests, body: `{"code":"rate_limited"` + strings.Repeat(" ", attackerBody) + `}`, chunked: true,
			call:          func(c *widgetapi.Client) error { _, err := c.GetWidget(t.Context(), "w"); return err },
			wantRateLimit: true, maxRead: widgetapi.MaxObjectBytes + 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", "1")
				if !tc.chunked {
					w.Header().Set("Content-Length", strconv.Itoa(len(tc.body)))
				}
				w.WriteHeader(tc.status)
				_, _ = io.Copy(w, strings.NewReader(tc.body))
			}))
			t.Cleanup(srv.Close)
			tr := &countingTransport{}
			c, err := widgetapi.New(srv.URL, widgetapi.WithHTTPClient(&http.Client{Transport: tr}), widgetapi.WithRetryPolicy(widgetapi.RetryPolicy{Attempts: 1}))
			if err != nil {
				t.Fatal(err)
			}
			err = tc.call(c)
			if got := errors.Is(err, widgetapi.ErrResponseTooLarge); got != tc.wantTooLarge {
				t.Errorf("%s\nerrors.Is(err, ErrResponseTooLarge): want %t, got %t (%v)", tc.reason, tc.wantTooLarge, got, err)
			}
			if _, got := widgetapi.IsRateLimited(err); got != tc.wantRateLimit {
				t.Errorf("%s\nIsRateLimited(err): want %t, got %t (%v)", tc.reason, tc.wantRateLimit, got, err)
			}
			if !tc.wantTooLarge && !tc.wantRateLimit && err != nil {
				t.Errorf("%s\nwant no error, got %v", tc.reason, err)
			}
			if err != nil && len(err.Error()) > 200 {
				t.Errorf("%s\nthe error quotes the body (%d bytes)", tc.reason, len(err.Error()))
			}
			if got := tr.read.Load(); got > tc.maxRead {
				t.Errorf("%s\nbody bytes read: want at most %d, got %d", tc.reason, tc.maxRead, got)
			}
		})
	}
}
