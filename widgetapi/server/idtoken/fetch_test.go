package idtoken_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken"
	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken/idtokentest"
)

// fetchErrors records the outcome of every fetch.
type fetchErrors struct {
	mu   sync.Mutex
	errs []error
}

func (f *fetchErrors) observe(_ string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, err)
}

func (f *fetchErrors) last() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) == 0 {
		return errors.New("no fetch")
	}
	return f.errs[len(f.errs)-1]
}

// TestJWKSEndpoints: what an issuer's endpoints answer, over real TLS on
// loopback, and whether the keys it serves verify a token. Every refusal
// leaves the server without keys: keys_unavailable.
func TestJWKSEndpoints(t *testing.T) {
	k := keys()
	good := idtokentest.JWKS(k["rsa"])
	weak := `{"keys":[{"kty":"RSA","kid":"rsa-1","n":"` + strings.Repeat("_", 168) + `","e":"AQAB"}]}`
	withPrivate := strings.Replace(string(good), `"kty"`, `"d":"c2VjcmV0","kty"`, 1)
	cases := map[string]struct {
		reason    string
		discovery bool
		serve     func(w http.ResponseWriter, r *http.Request, url string)
		hang      bool   // the endpoint never answers
		fetchErr  string // part of the fetch error; empty for success
	}{
		"JWKS": {
			reason: "A JWKS URL serving the issuer's keys.",
			serve:  func(w http.ResponseWriter, _ *http.Request, _ string) { _, _ = w.Write(good) },
		},
		"Discovery": {
			reason:    "Discovery naming the issuer and a jwks_uri on the same host.",
			discovery: true,
			serve: func(w http.ResponseWriter, r *http.Request, url string) {
				if r.URL.Path == "/.well-known/openid-configuration" {
					_ = json.NewEncoder(w).Encode(map[string]string{"issuer": url, "jwks_uri": url + "/openid/v1/jwks"})
					return
				}
				_, _ = w.Write(good)
			},
		},
		"JWKSMediaType": {
			reason: "Like kube-apiserver, a JWKS endpoint may answer only requests that accept application/jwk-set+json.",
			serve: func(w http.ResponseWriter, r *http.Request, _ string) {
				if !strings.Contains(r.Header.Get("Accept"), "application/jwk-set+json") {
					w.WriteHeader(http.StatusNotAcceptable)
					return
				}
				w.Header().Set("Content-Type", "application/jwk-set+json")
				_, _ = w.Write(good)
			},
		},
		"DiscoveryOfAnotherIssuer": {
			reason:    "A discovery document naming another issuer is refused.",
			discovery: true,
			serve: func(w http.ResponseWriter, _ *http.Request, url string) {
				_ = json.NewEncoder(w).Encode(map[string]string{"issuer": "https://evil.test", "jwks_uri": url + "/jwks"})
			},
			fetchErr: "names issuer",
		},
		"DiscoveryToPlainHTTP": {
			reason:    "A jwks_uri that is plain HTTP to another host is refused.",
			discovery: true,
			serve: func(w http.ResponseWriter, _ *http.Request, url string) {
				_ = json.NewEncoder(w).Encode(map[string]string{"issuer": url, "jwks_uri": "http://keys.example/jwks"})
			},
			fetchErr: "must be https",
		},
		"Garbage": {
			reason:   "A body that is not a JWKS.",
			serve:    func(w http.ResponseWriter, _ *http.Request, _ string) { _, _ = w.Write([]byte("<html>hello</html>")) },
			fetchErr: "not a JSON object",
		},
		"Huge": {
			reason: "A body over the bound is cut off and refused, not read to its end.",
			serve: func(w http.ResponseWriter, _ *http.Request, _ string) {
				_, _ = w.Write([]byte(`{"keys":[`))
				for range 1 << 10 {
					if _, err := w.Write([]byte(strings.Repeat(" ", 1<<10))); err != nil {
						return
					}
				}
			},
			fetchErr: "larger than",
		},
		"ServerError": {
			reason:   "A non-200 answer.",
			serve:    func(w http.ResponseWriter, _ *http.Request, _ string) { w.WriteHeader(http.StatusInternalServerError) },
			fetchErr: "HTTP 500",
		},
		"Redirect": {
			reason: "Redirects are not followed: the operator names where keys come from.",
			serve: func(w http.ResponseWriter, r *http.Request, _ string) {
				http.Redirect(w, r, "https://evil.test/jwks", http.StatusFound)
			},
			fetchErr: "HTTP 302",
		},
		"HMACKeyOnly": {
			reason: "A set with only a symmetric key has no usable key.",
			serve: func(w http.ResponseWriter, _ *http.Request, _ string) {
				_, _ = w.Write([]byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`))
			},
			fetchErr: "no usable signing key",
		},
		"WeakRSA": {
			reason:   "A 1008-bit RSA key fails the whole set.",
			serve:    func(w http.ResponseWriter, _ *http.Request, _ string) { _, _ = w.Write([]byte(weak)) },
			fetchErr: "2048 to 4096 bits",
		},
		"PrivateKey": {
			reason:   "A set that publishes a private key is refused.",
			serve:    func(w http.ResponseWriter, _ *http.Request, _ string) { _, _ = w.Write([]byte(withPrivate)) },
			fetchErr: "private key",
		},
		"Slow": {
			reason: "An endpoint that never answers is given up after the fetch timeout.",
			// The handler hangs until the test ends, not until its request's
			// context is done: returning then writes an empty 200, which a
			// busy machine once delivered to a fetch that had not given up.
			hang:     true,
			fetchErr: "context deadline exceeded",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var url string
			release := make(chan struct{})
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.hang {
					<-release
					return
				}
				tc.serve(w, r, url)
			}))
			t.Cleanup(srv.Close)
			t.Cleanup(func() { close(release) }) // before srv.Close, which waits for handlers
			url = srv.URL
			// Short only where the test waits it out: a loaded machine
			// (make test runs the e2e suite beside this) can take longer
			// than 300ms to read and refuse a 1 MiB body.
			timeout := idtoken.Duration(5 * time.Second)
			if tc.hang {
				timeout = idtoken.Duration(300 * time.Millisecond)
			}
			cfg := &idtoken.Config{Issuers: []idtoken.Issuer{{
				Issuer:   url,
				Audience: aud,
				Keys:     idtoken.Keys{JWKSURL: url + "/jwks", FetchTimeout: timeout},
				Subjects: []idtoken.Subject{{Subject: "me", Project: "p", Role: idtoken.RoleEditor}},
			}}}
			if tc.discovery {
				cfg.Issuers[0].Keys = idtoken.Keys{Discovery: true, FetchTimeout: timeout}
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			fe := &fetchErrors{}
			a, err := idtoken.New(cfg, idtoken.Options{Now: func() time.Time { return t0 }, RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, OnFetch: fe.observe})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(a.Close)
			_, aerr := a.Authenticate(context.Background(), idtokentest.Sign(t, k["rsa"], claims(with("iss", url), with("sub", "me"))))
			gotFetch := ""
			if err := fe.last(); err != nil {
				gotFetch = err.Error()
			}
			if tc.fetchErr == "" {
				if gotFetch != "" || aerr != nil {
					t.Errorf("%s\nwant success, got fetch error %q, authentication error %v", tc.reason, gotFetch, aerr)
				}
				return
			}
			if !strings.Contains(gotFetch, tc.fetchErr) {
				t.Errorf("%s\nfetch error: want one containing %q, got %q", tc.reason, tc.fetchErr, gotFetch)
			}
			if aerr == nil {
				t.Fatalf("%s\nauthentication: want keys_unavailable, got success", tc.reason)
			}
			if diff := cmp.Diff(idtoken.ReasonKeysUnavailable, aerr.Reason); diff != "" {
				t.Errorf("%s\nauthentication: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestJWKSFile: the air-gapped mode reads keys from a file, and reads it
// again for an unknown kid once the refresh interval has passed.
func TestJWKSFile(t *testing.T) {
	k := keys()
	path := t.TempDir() + "/jwks.json"
	write := func(b []byte) {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(idtokentest.JWKS(k["rsa"]))
	cfg := config()
	cfg.Issuers[0].Keys = idtoken.Keys{JWKSFile: path}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: t0}
	a, err := idtoken.New(cfg, idtoken.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if _, err := a.Authenticate(context.Background(), idtokentest.Sign(t, k["rsa"], claims())); err != nil {
		t.Fatal(err)
	}
	write(idtokentest.JWKS(k["rsa2"]))
	rotated := idtokentest.Sign(t, k["rsa2"], claims())
	if _, err := a.Authenticate(context.Background(), rotated); err == nil || err.Reason != idtoken.ReasonUnknownKey {
		t.Errorf("within the refresh interval: want unknown_key, got %v", err)
	}
	clk.Add(idtoken.DefaultMinRefreshInterval)
	if _, err := a.Authenticate(context.Background(), rotated); err != nil {
		t.Errorf("after the refresh interval: %v", err)
	}
}
