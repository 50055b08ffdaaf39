// Package apitest runs the reference Widget API server in-process for tests,
// with every request and response checked against the OpenAPI contract.
package apitest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// Tokens of the projects every test server knows.
const (
	TokenA   = "token-project-a"
	TokenB   = "token-project-b"
	ProjectA = "project-a"
	ProjectB = "project-b"
)

// Env is a running test server.
type Env struct {
	// Server is the reference server.
	Server *server.Server
	// HTTP is the httptest server in front of it.
	HTTP *httptest.Server
	// URL is the base URL to give widgetapi.New.
	URL string
}

// An Option adjusts the server options of Start.
type Option func(*server.Options)

// WithOptions lets a test change any server option. A nil fn changes
// nothing, so a table test can pass its case's optional setting as is.
func WithOptions(fn func(*server.Options)) Option { return Option(fn) }

// Start runs a reference server with a fresh data directory (or opts'
// DataDir) and no provisioning delays unless options say otherwise. Every
// exchange is validated against widgetapi/openapi.yaml: a response that
// breaks the contract, or a request the contract rejects that the server
// accepted, fails the test. The server stops when the test ends.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	o := server.Options{
		DataDir: t.TempDir(),
		Tokens:  map[string]string{TokenA: ProjectA, TokenB: ProjectB},
	}
	for _, fn := range opts {
		if fn != nil {
			fn(&o)
		}
	}
	s, err := server.New(o)
	if err != nil {
		t.Fatalf("cannot start reference Widget API server: %v", err)
	}
	hs := httptest.NewServer(ContractChecker(t, s.Handler()))
	t.Cleanup(func() {
		s.Shutdown()
		hs.Close()
		if err := s.Close(); err != nil {
			t.Errorf("cannot close reference server: %v", err)
		}
	})
	return &Env{Server: s, HTTP: hs, URL: hs.URL}
}

// Client returns a client for the env authenticated with token.
func (e *Env) Client(t testing.TB, token string, opts ...widgetapi.Option) *widgetapi.Client {
	t.Helper()
	c, err := widgetapi.New(e.URL, append([]widgetapi.Option{widgetapi.WithToken(token), widgetapi.WithHTTPClient(e.HTTP.Client())}, opts...)...)
	if err != nil {
		t.Fatalf("cannot create client: %v", err)
	}
	return c
}

// Contract loads and validates widgetapi/openapi.yaml.
func Contract(t testing.TB) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(widgetapi.OpenAPI)
	if err != nil {
		t.Fatalf("cannot load OpenAPI contract: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("OpenAPI contract is invalid: %v", err)
	}
	return doc
}

// ContractChecker wraps an API handler and checks each /v1 exchange against
// the contract.
func ContractChecker(t testing.TB, next http.Handler) http.Handler {
	t.Helper()
	doc := Contract(t)
	doc.Servers = nil // match any host
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("cannot build OpenAPI router: %v", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !bytes.HasPrefix([]byte(r.URL.Path), []byte("/v1/")) {
			next.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))

		route, params, rerr := router.FindRoute(r)
		var reqErr error
		var in *openapi3filter.RequestValidationInput
		if rerr == nil {
			vr := r.Clone(r.Context())
			vr.Body = io.NopCloser(bytes.NewReader(body))
			in = &openapi3filter.RequestValidationInput{
				Request: vr, PathParams: params, Route: route,
				Options: &openapi3filter.Options{AuthenticationFunc: func(context.Context, *openapi3filter.AuthenticationInput) error { return nil }},
			}
			reqErr = openapi3filter.ValidateRequest(r.Context(), in)
		}

		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		if r.Context().Err() != nil {
			return // the client went away; there is no response to check
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())

		if rerr != nil {
			if rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed {
				t.Errorf("contract: %s %s is not in the contract but the server answered %d", r.Method, r.URL.Path, rec.Code)
			}
			return
		}
		if reqErr != nil && rec.Code < 400 {
			t.Errorf("contract: server accepted (%d) %s %s that the contract rejects: %v", rec.Code, r.Method, r.URL.Path, reqErr)
		}
		out := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in,
			Status:                 rec.Code,
			Header:                 rec.Header(),
			Body:                   io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
			Options:                &openapi3filter.Options{IncludeResponseStatus: true},
		}
		if err := openapi3filter.ValidateResponse(r.Context(), out); err != nil {
			t.Errorf("contract: response %d to %s %s breaks the contract: %v\nbody: %s", rec.Code, r.Method, r.URL.String(), err, rec.Body.String())
		}
	})
}
