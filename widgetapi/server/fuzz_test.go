package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// The fuzz targets cover every parser of outside input: request bodies
// (FuzzCreateWidget, FuzzDecode, FuzzRequestBody), query parameters
// (FuzzQuery), the Authorization header (FuzzAuthorization) and what the
// access log and metrics take from a request (FuzzAccessLog). Their seeds
// run in plain go test; `go test -fuzz=FuzzX -run=^$ ./widgetapi/server`
// explores further.

// maxFuzzResponse bounds every response the fuzzed server gives; none of its
// inputs can make it larger (there are only a few small widgets).
const maxFuzzResponse = 16 << 10

const fuzzToken = "fuzz-token"

// fuzzServer is a server for in-process fuzzing, with one widget, "w", and
// no waiting: long polls are capped at a millisecond.
func fuzzServer(f *testing.F, logs io.Writer) *Server {
	f.Helper()
	if logs == nil {
		logs = io.Discard
	}
	s, err := New(Options{
		DataDir:        f.TempDir(),
		Tokens:         map[string]string{fuzzToken: "p"},
		ProvisionDelay: time.Hour,
		MaxWait:        time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Close() })
	rec := serve(s.Handler(), http.MethodPost, "/v1/widgets", "", `{"name":"w"}`, "Bearer "+fuzzToken)
	if rec.Code != http.StatusCreated {
		f.Fatalf("cannot create the fuzz widget: %d %s", rec.Code, rec.Body)
	}
	return s
}

// serve runs one request through h in-process. The request is built by hand
// so that any method, path and query reach the server as sent.
func serve(h http.Handler, method, path, rawQuery, body, auth string) *httptest.ResponseRecorder {
	r := (&http.Request{
		Method:     method,
		URL:        &url.URL{Path: path, RawQuery: rawQuery},
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     http.Header{},
		Body:       io.NopCloser(strings.NewReader(body)),
		Host:       "widgets",
		RemoteAddr: "192.0.2.1:1234",
	}).WithContext(context.Background())
	r.ContentLength = int64(len(body))
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// checkResponse asserts what holds for any answer to any input: no 5xx, a
// bounded JSON body of the right media type, and for errors a problem
// document agreeing with the status, listing at most MaxFieldErrors field
// errors, each with a path and a message.
func checkResponse(t *testing.T, rec *httptest.ResponseRecorder) *widgetapi.Problem {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("answered %d for client input: %s", rec.Code, rec.Body)
	}
	if rec.Body.Len() > maxFuzzResponse {
		t.Fatalf("answered %d bytes, want at most %d", rec.Body.Len(), maxFuzzResponse)
	}
	if rec.Code == http.StatusNoContent {
		return nil
	}
	if !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("answered %d with a body that is not JSON: %q", rec.Code, rec.Body)
	}
	if rec.Code < 400 {
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("answered %d with Content-Type %q", rec.Code, ct)
		}
		return nil
	}
	if ct := rec.Header().Get("Content-Type"); ct != widgetapi.ProblemContentType {
		t.Fatalf("error %d with Content-Type %q", rec.Code, ct)
	}
	p := &widgetapi.Problem{}
	if err := json.Unmarshal(rec.Body.Bytes(), p); err != nil {
		t.Fatalf("error %d is not a problem document: %v", rec.Code, err)
	}
	if p.Status != rec.Code || p.Code == "" {
		t.Fatalf("problem says status %d code %q, response is %d", p.Status, p.Code, rec.Code)
	}
	if len(p.Errors) > widgetapi.MaxFieldErrors {
		t.Fatalf("problem lists %d field errors", len(p.Errors))
	}
	for _, e := range p.Errors {
		if e.Field == "" || e.Message == "" || !utf8.ValidString(e.Field) {
			t.Fatalf("field error without a (valid) path or a message: %+v", e)
		}
	}
	return p
}

// FuzzCreateWidget feeds arbitrary bodies through the create decoder and
// validator. Whatever the input: no panic, and anything accepted satisfies
// the contract's constraints and survives a JSON round trip unchanged.
func FuzzCreateWidget(f *testing.F) {
	for _, seed := range []string{
		`{"name":"a"}`,
		`{"name":"web-1","size":"large","region":"eu-west-1","labels":{"team":"x"},"description":"d"}`,
		`{"name":"A"}`, `{"name":""}`, `{}`, `[]`, `null`, `{"name":"a","x":1}`,
		`{"name":"a","labels":{"":""}}`, `{"name":"a","size":7}`, `{"name":"a"} trailing`,
		`{"name":"a","description":"\u0000"}`, `{"name":"a-","region":"-1"}`,
		`{"NAME":"a"}`, `{"name":"a","name":"b"}`, "{\"name\":\"a\",\"description\":\"\xff\"}",
		`{"name":"a","description":"\ud800"}`, `{"name":"a"}}`,
	} {
		f.Add([]byte(seed))
	}
	s := &Server{opts: Options{Regions: nil}}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := widgetapi.CreateWidgetRequest{}
		ferrs, err := decode(bytes.NewReader(body), &req)
		if err != nil || len(ferrs) > 0 {
			return
		}
		if errs := s.validateCreate(&req); len(errs) > 0 {
			for _, e := range errs {
				if e.Field == "" || e.Message == "" {
					t.Fatalf("field error without path or message: %+v", e)
				}
			}
			return
		}
		if !widgetapi.ValidName(req.Name) {
			t.Fatalf("accepted invalid name %q", req.Name)
		}
		if len(req.Labels) > widgetapi.MaxLabels {
			t.Fatalf("accepted %d labels", len(req.Labels))
		}
		for k, v := range req.Labels {
			if !widgetapi.ValidLabelKey(k) || len(v) > widgetapi.MaxLabelValueLength {
				t.Fatalf("accepted label %q=%q", k, v)
			}
		}
		out, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		again := widgetapi.CreateWidgetRequest{}
		if _, err := decode(bytes.NewReader(out), &again); err != nil {
			t.Fatalf("accepted request does not round-trip: %v", err)
		}
	})
}

// FuzzDecode checks the strict decoder of every request body type against
// properties that do not reuse its logic: what it accepts is valid JSON and
// valid UTF-8, has only the type's exact field names at the top level,
// decodes as encoding/json decodes it, and survives a round trip; what it
// rejects comes with field paths and messages.
func FuzzDecode(f *testing.F) {
	for _, seed := range []struct {
		kind byte
		body string
	}{
		{0, `{"name":"a","labels":{"k":"v"}}`}, {0, `{"Name":"a"}`}, {0, `{"name":"a","name":"a"}`},
		{1, `{"size":"large","region":"us-east-1"}`}, {1, `{"labels":{"a":"1","a":"2"}}`}, {1, `{"size":null}`},
		{2, `{"labels":null}`}, {2, `{"description":"\udfff"}`}, {2, "{\"description\":\"\xed\xa0\x80\"}"},
		{3, `{"name":"k","labels":{"by":"me"}}`}, {3, `{"name":"k"} {}`}, {3, `{"name":{"deep":[[[[]]]]}}`},
	} {
		f.Add(seed.kind, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, kind byte, body []byte) {
		switch kind % 4 {
		case 0:
			checkDecode[widgetapi.CreateWidgetRequest](t, body, "name", "size", "region", "labels", "description")
		case 1:
			checkDecode[widgetapi.ReplaceWidgetRequest](t, body, "size", "region", "labels", "description")
		case 2:
			checkDecode[widgetapi.PatchWidgetRequest](t, body, "size", "region", "labels", "description")
		default:
			checkDecode[widgetapi.CreateKeyRequest](t, body, "name", "labels", "description")
		}
	})
}

// checkDecode asserts FuzzDecode's properties for body type T, whose exact
// field names are names.
func checkDecode[T any](t *testing.T, body []byte, names ...string) {
	t.Helper()
	v := new(T)
	ferrs, err := decode(bytes.NewReader(body), v)
	var bad errBadJSON
	if err != nil && !errors.As(err, &bad) {
		t.Fatalf("decode failed on the server's side: %v", err)
	}
	for _, e := range ferrs {
		if e.Field == "" || e.Message == "" {
			t.Fatalf("field error without path or message: %+v", e)
		}
	}
	if err != nil || len(ferrs) > 0 {
		return
	}
	if !utf8.Valid(body) || !json.Valid(body) {
		t.Fatalf("accepted a body that is not valid UTF-8 JSON: %q", body)
	}
	fields := map[string]json.RawMessage{}
	if err := json.Unmarshal(body, &fields); err != nil {
		t.Fatalf("accepted a body that is not a JSON object: %v", err)
	}
	for name := range fields {
		if !slices.Contains(names, name) {
			t.Fatalf("accepted field %q, which is not one of %v", name, names)
		}
	}
	plain := new(T)
	if err := json.Unmarshal(body, plain); err != nil {
		t.Fatalf("accepted a body encoding/json cannot decode: %v", err)
	}
	if diff := cmp.Diff(plain, v); diff != "" {
		t.Fatalf("strict and plain decoding disagree: -plain, +strict:\n%s", diff)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	again := new(T)
	if ferrs, err := decode(bytes.NewReader(out), again); err != nil || len(ferrs) > 0 {
		t.Fatalf("accepted body does not round-trip: %s: %v %v", out, err, ferrs)
	}
	if diff := cmp.Diff(v, again, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("accepted body changes in a round trip: -first, +again:\n%s", diff)
	}
}

// FuzzRequestBody sends arbitrary bodies (and If-Match headers) to every
// endpoint that takes a body, through the whole handler. Whatever the
// input: no 5xx and a bounded JSON answer of the contract's kind.
func FuzzRequestBody(f *testing.F) {
	for _, seed := range []struct {
		op      byte
		body    string
		ifMatch string
	}{
		{0, `{"name":"n1","labels":{"a":"b"}}`, ""}, {0, `{"name":"w"}`, ""}, {0, `{"NAME":"x"}`, ""},
		{1, `{"size":"large"}`, `"1"`}, {1, `{"size":"large"}`, `"999", W/"1"`}, {1, `{"region":"eu-west-1"}`, ""},
		{2, `{"description":"d"}`, "*"}, {2, `{"size":""}`, ""}, {2, `{"labels":{"a":"1","a":"2"}}`, ""},
		{3, `{"name":"k1"}`, ""}, {3, `{"name":"k1","labels":{"Bad Key":"v"}}`, ""}, {3, "{\"name\":\"\xff\"}", ""},
		{0, `{"name":"a"}}`, ""}, {1, ``, ""}, {2, `null`, ""}, {3, strings.Repeat(`[`, 5000), ""},
	} {
		f.Add(seed.op, []byte(seed.body), seed.ifMatch)
	}
	s := fuzzServer(f, nil)
	h := s.Handler()
	ops := []struct{ method, path string }{
		{http.MethodPost, "/v1/widgets"},
		{http.MethodPut, "/v1/widgets/w"},
		{http.MethodPatch, "/v1/widgets/w"},
		{http.MethodPost, "/v1/widgets/w/keys"},
	}
	f.Fuzz(func(t *testing.T, op byte, body []byte, ifMatch string) {
		o := ops[int(op)%len(ops)]
		r := (&http.Request{
			Method: o.method, URL: &url.URL{Path: o.path}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Authorization": {"Bearer " + fuzzToken}, "If-Match": {ifMatch}},
			Body:   io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
			Host: "widgets", RemoteAddr: "192.0.2.1:1234",
		}).WithContext(context.Background())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		checkResponse(t, rec)
		switch rec.Code {
		case http.StatusOK, http.StatusCreated, http.StatusBadRequest, http.StatusNotFound,
			http.StatusConflict, http.StatusPreconditionFailed, http.StatusUnprocessableEntity:
		default:
			t.Fatalf("%s %s answered %d, which the contract does not declare", o.method, o.path, rec.Code)
		}
		if rec.Code < 300 && !utf8.Valid(body) {
			t.Fatalf("accepted a body that is not valid UTF-8: %q", body)
		}
	})
}

// FuzzQuery sends arbitrary query strings to the endpoints that read
// parameters (list widgets, the change feed). Whatever the input: no 5xx, a
// bounded JSON answer, and every field error names a parameter the endpoint
// reads (or the query as a whole).
func FuzzQuery(f *testing.F) {
	for _, seed := range []struct {
		changes bool
		query   string
	}{
		{false, "limit=1"}, {false, "limit=0"}, {false, "limit=99999999999999999999"}, {false, "limit=%2B5"},
		{false, "pageToken=dw"}, {false, "pageToken=!!"}, {false, "labelSelector=a=b,c=d"}, {false, "labelSelector=a"},
		{false, "labelSelector=a=1,a=2"}, {false, "limit=1&limit=2"}, {false, "limit=%zz"}, {false, "a;b"},
		{true, "after=0"}, {true, "after=latest&wait=300"}, {true, "after=0&wait=9223372037"}, {true, "wait=301"},
		{true, "after=-1"}, {true, "after=9223372036854775808"}, {true, "limit=1000"}, {true, "after="},
		{true, "after=5&wait=1&limit=1"},
	} {
		f.Add(seed.changes, seed.query)
	}
	s := fuzzServer(f, nil)
	h := s.Handler()
	f.Fuzz(func(t *testing.T, changes bool, query string) {
		path, params := "/v1/widgets", []string{"limit", "pageToken", "labelSelector", "query"}
		if changes {
			path, params = "/v1/changes", []string{"after", "wait", "limit", "query"}
		}
		rec := serve(h, http.MethodGet, path, query, "", "Bearer "+fuzzToken)
		p := checkResponse(t, rec)
		switch rec.Code {
		case http.StatusOK, http.StatusUnprocessableEntity:
		case http.StatusGone:
			if !changes {
				t.Fatalf("GET %s?%s answered 410", path, query)
			}
		default:
			t.Fatalf("GET %s?%s answered %d", path, query, rec.Code)
		}
		if p == nil {
			return
		}
		for _, e := range p.Errors {
			if !slices.Contains(params, e.Field) {
				t.Fatalf("field error names %q, not a parameter of %s", e.Field, path)
			}
		}
	})
}

// FuzzAuthorization sends arbitrary Authorization headers. Whatever the
// input: 200, 401 or 429 (once the address has failed too often, with a
// Retry-After of at least a second), as a bounded JSON answer.
func FuzzAuthorization(f *testing.F) {
	for _, seed := range []string{
		"", "Bearer " + fuzzToken, "bearer " + fuzzToken, "BEARER " + fuzzToken, "Bearer", "Bearer ",
		"Basic dTpw", "Bearer " + fuzzToken + " ", "Bearer  " + fuzzToken, "Bearer \x00", strings.Repeat("Bearer ", 1000),
	} {
		f.Add(seed)
	}
	s := fuzzServer(f, nil)
	h := s.Handler()
	f.Fuzz(func(t *testing.T, auth string) {
		rec := serve(h, http.MethodGet, "/v1/widgets/w", "", "", auth)
		checkResponse(t, rec)
		switch rec.Code {
		case http.StatusOK, http.StatusUnauthorized:
		case http.StatusTooManyRequests:
			if n, err := strconv.Atoi(rec.Header().Get("Retry-After")); err != nil || n < 1 {
				t.Fatalf("429 with Retry-After %q", rec.Header().Get("Retry-After"))
			}
		default:
			t.Fatalf("Authorization %q answered %d", auth, rec.Code)
		}
	})
}

// FuzzAccessLog sends arbitrary methods, paths and User-Agents. Whatever
// the input: one bounded access log line per request, and the method label
// of the request metrics is a standard method or "other".
func FuzzAccessLog(f *testing.F) {
	for _, seed := range []struct{ method, path, ua string }{
		{"GET", "/healthz", "curl/8"}, {"get", "/metrics", ""}, {"PROPFIND", "/v1/widgets", "x"},
		{strings.Repeat("M", 5000), "/" + strings.Repeat("p", 5000), strings.Repeat("u", 5000)},
		{"GET", "/\xff\n", "a\x00b\n"}, {"", "", ""}, {"DELETE", "/v1/widgets/w/keys/k", "ua"},
	} {
		f.Add(seed.method, seed.path, seed.ua)
	}
	logs := &lockedBuffer{}
	s := fuzzServer(f, logs)
	h := s.Handler()
	standard := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "other"}
	f.Fuzz(func(t *testing.T, method, path, ua string) {
		logs.Reset()
		r := (&http.Request{
			Method: method, URL: &url.URL{Path: path}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"User-Agent": {ua}}, Body: http.NoBody, Host: "widgets", RemoteAddr: "192.0.2.1:1234",
		}).WithContext(context.Background())
		h.ServeHTTP(httptest.NewRecorder(), r)
		lines := strings.Split(strings.TrimSuffix(logs.String(), "\n"), "\n")
		if len(lines) != 1 || len(lines[0]) > 2048 {
			t.Fatalf("want one access log line of at most 2 KiB, got %d lines, first %d bytes", len(lines), len(lines[0]))
		}
		mfs, err := s.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "method" && !slices.Contains(standard, l.GetValue()) {
						t.Fatalf("method label value %q", l.GetValue())
					}
				}
			}
		}
	})
}

// lockedBuffer is a log sink the server's goroutines may share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
