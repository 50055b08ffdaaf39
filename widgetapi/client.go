package widgetapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultUserAgent identifies this client when no WithUserAgent is given.
const DefaultUserAgent = "widgetapi-go/v1"

// ObserveFunc is called once per HTTP attempt with the operation name, the
// response status (0 when no response arrived) and the attempt's duration.
// It must be safe for concurrent use.
type ObserveFunc func(op string, status int, d time.Duration)

// RetryPolicy bounds the client's retries of idempotent requests.
type RetryPolicy struct {
	// Attempts is the total number of tries, including the first. 1 disables
	// retries.
	Attempts int
	// BaseDelay is the first backoff; each retry doubles it, with jitter.
	BaseDelay time.Duration
	// MaxDelay caps every backoff, including a server's Retry-After.
	MaxDelay time.Duration
}

// DefaultRetryPolicy retries idempotent requests up to three times within
// roughly three seconds.
var DefaultRetryPolicy = RetryPolicy{Attempts: 4, BaseDelay: 100 * time.Millisecond, MaxDelay: 2 * time.Second}

// Response size limits: the most the client reads of one response body.
// A server - possibly one a tenant runs - cannot make it buffer more than
// the contract's largest answer to the call. A larger body is an error
// (ErrResponseTooLarge) that does not quote it.
const (
	// MaxObjectBytes bounds the answer about one widget or key, and every
	// error (problem) body. At the contract's limits - 32 labels of 63-byte
	// keys and values, a 256-character description, every character
	// escaped as JSON's six-byte \u003c - a widget is about 16 KiB; the
	// rest leaves room for the server-set id, message and endpoint, which
	// the contract does not bound.
	MaxObjectBytes = 64 << 10
	// MaxChangesBytes bounds a change feed page: at most 1,000 changes
	// (the contract's largest limit) of about 300 bytes each at the
	// contract's limits, with room to spare.
	MaxChangesBytes = 1 << 20
	// MaxListBytes bounds a page of widgets or a widget's keys (list
	// calls, which the provider does not make).
	MaxListBytes = 8 << 20
)

// Client calls the Widget API. Create one with New.
type Client struct {
	base    *url.URL
	token   string
	hc      *http.Client
	ua      string
	retry   RetryPolicy
	observe ObserveFunc
	guard   Guard
}

// A Guard admits every attempt of a call before it is sent and learns how
// each attempt ended, so a caller can stop sending a credential the server
// refused (see IsCredentialRefused) without relying on every call site to
// check. Its methods must be safe for concurrent use.
type Guard interface {
	// Admit returns nil to send the attempt, or the error the call then
	// fails with, unsent and not retried. It may wait, within ctx.
	Admit(ctx context.Context) error
	// Done is told the result of every attempt that was sent: nil for a
	// success, an *Error for an error status, or a transport error.
	Done(err error)
}

// An Option configures a Client.
type Option func(*Client)

// WithToken authenticates every request with the bearer token. The client
// never includes the token in errors or observations.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient sets the HTTP client, e.g. one that trusts a private CA.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.ua = ua } }

// WithRetryPolicy replaces DefaultRetryPolicy.
func WithRetryPolicy(p RetryPolicy) Option { return func(c *Client) { c.retry = p } }

// WithObserver reports every HTTP attempt, e.g. to metrics.
func WithObserver(fn ObserveFunc) Option { return func(c *Client) { c.observe = fn } }

// WithGuard makes g admit every attempt of every call (see Guard).
func WithGuard(g Guard) Option { return func(c *Client) { c.guard = g } }

// New returns a client for the API served at endpoint (scheme and host, and an
// optional path prefix; the client adds /v1).
func New(endpoint string, opts ...Option) (*Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("cannot parse Widget API endpoint: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("widget API endpoint %q must be an absolute http(s) URL such as https://widgets.example.com", endpoint)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	c := &Client{
		base:    u,
		hc:      http.DefaultClient,
		ua:      DefaultUserAgent,
		retry:   DefaultRetryPolicy,
		observe: func(string, int, time.Duration) {},
	}
	for _, o := range opts {
		o(c)
	}
	if c.retry.Attempts < 1 {
		c.retry.Attempts = 1
	}
	return c, nil
}

// A RequestOption adjusts one call.
type RequestOption func(*http.Request)

// IfGeneration makes an update or delete conditional: the API answers 412
// (IsPreconditionFailed) when the widget's generation is no longer g.
func IfGeneration(g int64) RequestOption {
	return func(r *http.Request) { r.Header.Set("If-Match", ETag(g)) }
}

// ETag formats a generation as the API's entity tag.
func ETag(g int64) string { return `"` + strconv.FormatInt(g, 10) + `"` }

// CreateWidget creates a widget. Creates are not retried: if the outcome is
// unknown (a transport error), GetWidget tells whether it happened.
func (c *Client) CreateWidget(ctx context.Context, req CreateWidgetRequest) (*Widget, error) {
	w := &Widget{}
	return w, c.do(ctx, "create widget", MaxObjectBytes, http.MethodPost, "/v1/widgets", nil, req, w)
}

// GetWidget returns the named widget.
func (c *Client) GetWidget(ctx context.Context, name string) (*Widget, error) {
	w := &Widget{}
	return w, c.do(ctx, "get widget", MaxObjectBytes, http.MethodGet, "/v1/widgets/"+url.PathEscape(name), nil, nil, w)
}

// ListWidgets returns one page of widgets.
func (c *Client) ListWidgets(ctx context.Context, o ListWidgetsOptions) (*WidgetList, error) {
	q := url.Values{}
	if len(o.Labels) > 0 {
		q.Set("labelSelector", FormatLabelSelector(o.Labels))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.PageToken != "" {
		q.Set("pageToken", o.PageToken)
	}
	l := &WidgetList{}
	return l, c.do(ctx, "list widgets", MaxListBytes, http.MethodGet, "/v1/widgets", q, nil, l)
}

// ReplaceWidget replaces the widget's mutable fields (PUT). It is idempotent
// and retried on server errors.
func (c *Client) ReplaceWidget(ctx context.Context, name string, req ReplaceWidgetRequest, opts ...RequestOption) (*Widget, error) {
	w := &Widget{}
	return w, c.do(ctx, "replace widget", MaxObjectBytes, http.MethodPut, "/v1/widgets/"+url.PathEscape(name), nil, req, w, opts...)
}

// PatchWidget changes only the fields set in req. It is not retried.
func (c *Client) PatchWidget(ctx context.Context, name string, req PatchWidgetRequest, opts ...RequestOption) (*Widget, error) {
	w := &Widget{}
	return w, c.do(ctx, "patch widget", MaxObjectBytes, http.MethodPatch, "/v1/widgets/"+url.PathEscape(name), nil, req, w, opts...)
}

// DeleteWidget starts deleting a widget and returns it in state Deleting. The
// widget disappears (GetWidget returns IsNotFound) once deletion completes.
// Deleting a widget that is already being deleted succeeds.
func (c *Client) DeleteWidget(ctx context.Context, name string, opts ...RequestOption) (*Widget, error) {
	w := &Widget{}
	return w, c.do(ctx, "delete widget", MaxObjectBytes, http.MethodDelete, "/v1/widgets/"+url.PathEscape(name), nil, nil, w, opts...)
}

// CreateKey creates an access key. The returned secret is never available
// again. Creates are not retried.
func (c *Client) CreateKey(ctx context.Context, widget string, req CreateKeyRequest) (*KeyWithSecret, error) {
	k := &KeyWithSecret{}
	return k, c.do(ctx, "create key", MaxObjectBytes, http.MethodPost, "/v1/widgets/"+url.PathEscape(widget)+"/keys", nil, req, k)
}

// GetKey returns a key without its secret.
func (c *Client) GetKey(ctx context.Context, widget, key string) (*Key, error) {
	k := &Key{}
	return k, c.do(ctx, "get key", MaxObjectBytes, http.MethodGet, "/v1/widgets/"+url.PathEscape(widget)+"/keys/"+url.PathEscape(key), nil, nil, k)
}

// ListKeys returns all keys of a widget, without secrets.
func (c *Client) ListKeys(ctx context.Context, widget string) (*KeyList, error) {
	l := &KeyList{}
	return l, c.do(ctx, "list keys", MaxListBytes, http.MethodGet, "/v1/widgets/"+url.PathEscape(widget)+"/keys", nil, nil, l)
}

// VerifyKey returns the key of widget whose secret is secret, as a client of
// the widget that presents it would be let in; IsNotFound when the widget
// has no valid key with that secret (never created, or revoked).
func (c *Client) VerifyKey(ctx context.Context, widget, secret string) (*Key, error) {
	k := &Key{}
	return k, c.do(ctx, "verify key", MaxObjectBytes, http.MethodPost, "/v1/widgets/"+url.PathEscape(widget)+"/verify-key", nil, VerifyKeyRequest{Secret: secret}, k)
}

// DeleteKey revokes a key.
func (c *Client) DeleteKey(ctx context.Context, widget, key string) error {
	return c.do(ctx, "delete key", MaxObjectBytes, http.MethodDelete, "/v1/widgets/"+url.PathEscape(widget)+"/keys/"+url.PathEscape(key), nil, nil, nil)
}

// ChangesOptions selects a window of the change feed.
type ChangesOptions struct {
	// After returns changes with a greater sequence number. FromLatest asks
	// only for the latest sequence number.
	After int64
	// Wait holds the request open up to this long until a change arrives
	// (long poll). 0 answers at once. Longer than MaxChangesWait is sent as
	// MaxChangesWait; a server may cap it further.
	Wait time.Duration
	// Limit caps the number of changes; 0 means the server default.
	Limit int
}

// MaxChangesWait is the longest change feed wait the contract allows a
// client to ask for.
const MaxChangesWait = 300 * time.Second

// FromLatest is a ChangesOptions.After that returns no changes and the current
// LatestSeq: the position to follow from when history does not matter.
const FromLatest int64 = -1

// Changes reads the project's change feed. IsFeedExpired reports a position
// older than the server retains.
func (c *Client) Changes(ctx context.Context, o ChangesOptions) (*ChangeList, error) {
	q := url.Values{}
	if o.After == FromLatest {
		q.Set("after", "latest")
	} else {
		q.Set("after", strconv.FormatInt(o.After, 10))
	}
	if o.Wait > 0 {
		wait := min(o.Wait, MaxChangesWait)
		q.Set("wait", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	l := &ChangeList{}
	return l, c.do(ctx, "list changes", MaxChangesBytes, http.MethodGet, "/v1/changes", q, nil, l)
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

func retryableStatus(code int) bool {
	switch code {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// do sends a request, retrying idempotent ones on server and transport
// errors, and decodes a 2xx body into out (when out is not nil).
func (c *Client) do(ctx context.Context, op string, limit int64, method, path string, q url.Values, in, out any, opts ...RequestOption) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("cannot encode %s request: %w", op, err)
		}
	}
	u := *c.base
	u.Path += path
	u.RawQuery = q.Encode()

	attempts := 1
	if idempotent(method) {
		attempts = c.retry.Attempts
	}
	var err error
	for i := 0; i < attempts; i++ {
		if i > 0 {
			if werr := sleep(ctx, c.backoff(i, err)); werr != nil {
				return err
			}
		}
		if c.guard != nil {
			if gerr := c.guard.Admit(ctx); gerr != nil {
				return gerr
			}
		}
		var retry bool
		retry, err = c.once(ctx, op, limit, method, u.String(), body, out, opts)
		if c.guard != nil {
			c.guard.Done(err)
		}
		if err == nil || !retry {
			return err
		}
	}
	return err
}

// once performs one attempt, reading at most limit bytes of the response
// body. It reports whether a failure may be retried.
func (c *Client) once(ctx context.Context, op string, limit int64, method, u string, body []byte, out any, opts []RequestOption) (bool, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return false, fmt.Errorf("cannot build %s request: %w", op, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.ua)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for _, o := range opts {
		o(req)
	}

	start := time.Now()
	rsp, err := c.hc.Do(req)
	if err != nil {
		c.observe(op, 0, time.Since(start))
		// A cancelled context is final; anything else (refused, reset,
		// timeout) may be retried.
		return ctx.Err() == nil, fmt.Errorf("widget API %s: %w", op, err)
	}
	// Closing a body that was not read to the end closes the connection:
	// the rest of an oversized body is never read.
	defer rsp.Body.Close() //nolint:errcheck // read-only body
	data, tooLarge, err := readBody(rsp, limit)
	c.observe(op, rsp.StatusCode, time.Since(start))
	if err != nil {
		return ctx.Err() == nil, fmt.Errorf("widget API %s: cannot read response: %w", op, err)
	}
	if rsp.StatusCode >= 300 {
		e := &Error{Op: op, Method: method, StatusCode: rsp.StatusCode, RetryAfter: retryAfter(rsp.Header.Get("Retry-After"))}
		if tooLarge {
			// The status still says what happened; the body is not read.
			e.Problem = Problem{Status: rsp.StatusCode, Code: codeForStatus(rsp.StatusCode), Title: http.StatusText(rsp.StatusCode), Detail: fmt.Sprintf("%v: more than %d bytes", ErrResponseTooLarge, limit)}
			return retryableStatus(rsp.StatusCode), e
		}
		if jerr := json.Unmarshal(data, &e.Problem); jerr != nil || e.Problem.Code == "" {
			e.Problem = Problem{Status: rsp.StatusCode, Code: codeForStatus(rsp.StatusCode), Title: http.StatusText(rsp.StatusCode)}
		}
		return retryableStatus(rsp.StatusCode), e
	}
	if tooLarge {
		return false, fmt.Errorf("widget API %s: %w: more than %d bytes", op, ErrResponseTooLarge, limit)
	}
	if out == nil || len(data) == 0 {
		return false, nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return false, fmt.Errorf("widget API %s: cannot decode response: %w", op, err)
	}
	return false, nil
}

// readBody reads rsp's body if it is at most limit bytes long, and reports
// whether it is longer (then it reads at most limit+1 bytes of it, or none
// when Content-Length says so).
func readBody(rsp *http.Response, limit int64) ([]byte, bool, error) {
	if rsp.ContentLength > limit {
		return nil, true, nil
	}
	data, err := io.ReadAll(io.LimitReader(rsp.Body, limit+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(data)) > limit {
		return nil, true, nil
	}
	return data, false, nil
}

// backoff returns the wait before retry i (1-based): exponential with full
// jitter, at least the server's Retry-After, never more than MaxDelay.
func (c *Client) backoff(i int, last error) time.Duration {
	d := c.retry.BaseDelay << (i - 1)
	if d <= 0 || d > c.retry.MaxDelay {
		d = c.retry.MaxDelay
	}
	d = d/2 + rand.N(d/2+1) //nolint:gosec // jitter needs no cryptographic randomness
	if e, ok := asError(last); ok && e.RetryAfter > d {
		d = e.RetryAfter
	}
	return min(d, c.retry.MaxDelay)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryAfter parses a Retry-After header in seconds or as an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

func codeForStatus(s int) string {
	switch s {
	case http.StatusBadRequest:
		return CodeMalformed
	case http.StatusUnauthorized:
		return CodeUnauthorized
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusConflict:
		return CodeConflict
	case http.StatusPreconditionFailed:
		return CodePreconditionFailed
	case http.StatusUnprocessableEntity:
		return CodeInvalid
	case http.StatusTooManyRequests:
		return CodeRateLimited
	case http.StatusServiceUnavailable:
		return CodeUnavailable
	default:
		return CodeInternal
	}
}

// FormatLabelSelector renders labels as the API's labelSelector query value
// ("k1=v1,k2=v2", keys sorted).
func FormatLabelSelector(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

// ParseLabelSelector is the inverse of FormatLabelSelector.
func ParseLabelSelector(s string) (map[string]string, error) {
	out := map[string]string{}
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" {
			return nil, errors.New("labelSelector must be a comma-separated list of key=value pairs")
		}
		out[k] = v
	}
	return out, nil
}
