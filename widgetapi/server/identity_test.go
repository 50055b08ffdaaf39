package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken"
	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken/idtokentest"
)

const (
	testIssuer   = "https://issuer.test"
	testAudience = "widget-api"
	providerSA   = "system:serviceaccount:crossplane-system:provider-widget"
)

// identityEnv starts a server that trusts testIssuer, whose keys are key's.
// The provider's ServiceAccount edits project-a; every ServiceAccount of
// team-b views project-b.
func identityEnv(t *testing.T, clk *clock, key idtokentest.Key, mod func(*server.Options)) *apitest.Env {
	t.Helper()
	cfg := &idtoken.Config{Issuers: []idtoken.Issuer{{
		Issuer:   testIssuer,
		Audience: testAudience,
		Keys:     idtoken.Keys{JWKSURL: testIssuer + "/jwks"},
		Subjects: []idtoken.Subject{
			{Subject: providerSA, Project: apitest.ProjectA, Role: idtoken.RoleEditor},
			{Subject: "system:serviceaccount:team-b:*", Project: apitest.ProjectB, Role: idtoken.RoleViewer},
		},
	}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	jwks := idtokentest.JWKS(key)
	return apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
		o.Now = clk.Now
		o.FailedAuthRate = -1 // this test counts refusals, not throttling
		o.IdentityTokens = cfg
		o.IdentityTokenOptions.Fetchers = map[string]idtoken.Fetcher{
			testIssuer: idtoken.FetcherFunc(func(context.Context) ([]byte, error) { return jwks, nil }),
		}
		if mod != nil {
			mod(o)
		}
	}))
}

func idClaims(now time.Time, sub string, mods ...func(map[string]any)) map[string]any {
	c := map[string]any{"iss": testIssuer, "sub": sub, "aud": testAudience, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for _, m := range mods {
		m(c)
	}
	return c
}

type answer struct {
	Status int
	Code   string
	// Closes is whether the answer closes its connection.
	Closes bool
}

func call(t *testing.T, env *apitest.Env, method, path, token, body string) (answer, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), method, env.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	rsp, err := env.HTTP.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	data, _ := io.ReadAll(rsp.Body)
	a := answer{Status: rsp.StatusCode, Closes: rsp.Close}
	var p widgetapi.Problem
	if rsp.StatusCode >= 400 && json.Unmarshal(data, &p) == nil {
		a.Code = p.Code
	}
	return a, string(data)
}

// TestIdentityTokens: what identity tokens may do, beside static tokens,
// through the contract checker. Every refusal is counted by reason and its
// answer repeats nothing of the token.
func TestIdentityTokens(t *testing.T) {
	clk := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	key := idtokentest.RSA(t, "k1")
	env := identityEnv(t, clk, key, nil)
	now := clk.Now()
	sign := func(c map[string]any) string { return idtokentest.Sign(t, key, c) }
	editor := sign(idClaims(now, providerSA))
	viewer := sign(idClaims(now, "system:serviceaccount:team-b:reader"))

	type step struct {
		reason       string
		method, path string
		token, body  string
		want         answer
		refused      string // the reason counted, if any
	}
	steps := []step{
		{reason: "A static token works as before.", method: "POST", path: "/v1/widgets", token: apitest.TokenA, body: `{"name":"static"}`, want: answer{Status: 201}},
		{reason: "The editor's token acts in project-a.", method: "POST", path: "/v1/widgets", token: editor, body: `{"name":"by-sa"}`, want: answer{Status: 201}},
		{reason: "It sees project-a's widgets.", method: "GET", path: "/v1/widgets/static", token: editor, want: answer{Status: 200}},
		{reason: "A viewer reads project-b.", method: "GET", path: "/v1/widgets", token: viewer, want: answer{Status: 200}},
		{reason: "A viewer does not see project-a's widgets.", method: "GET", path: "/v1/widgets/static", token: viewer, want: answer{Status: 404, Code: "not_found"}},
		{reason: "A viewer may not write; authenticated, it keeps its connection.", method: "POST", path: "/v1/widgets", token: viewer, body: `{"name":"nope"}`, want: answer{Status: 403, Code: "forbidden"}, refused: "role"},
		{
			reason: "An expired token is 401 and closes the connection.",
			method: "GET", path: "/v1/widgets", token: sign(idClaims(now.Add(-2*time.Hour), providerSA)),
			want: answer{Status: 401, Code: "unauthorized", Closes: true}, refused: "expired",
		},
		{
			reason: "A token for another audience.",
			method: "GET", path: "/v1/widgets", token: sign(idClaims(now, providerSA, func(c map[string]any) { c["aud"] = "https://kubernetes.default.svc" })),
			want: answer{Status: 401, Code: "unauthorized", Closes: true}, refused: "audience",
		},
		{
			reason: "A token of an untrusted issuer.",
			method: "GET", path: "/v1/widgets", token: sign(idClaims(now, providerSA, func(c map[string]any) { c["iss"] = "https://evil.test" })),
			want: answer{Status: 401, Code: "unauthorized", Closes: true}, refused: "issuer",
		},
		{
			reason: "A token that is not valid yet.",
			method: "GET", path: "/v1/widgets", token: sign(idClaims(now, providerSA, func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix() })),
			want: answer{Status: 401, Code: "unauthorized", Closes: true}, refused: "not_yet_valid",
		},
		{
			reason: "alg none.",
			method: "GET", path: "/v1/widgets", token: idtokentest.Unsigned(idClaims(now, providerSA)),
			want: answer{Status: 401, Code: "unauthorized", Closes: true}, refused: "algorithm",
		},
		{
			reason: "HS256 keyed with the public key.",
			method: "GET", path: "/v1/widgets", token: idtokentest.HS256WithPublicKey(key, idClaims(now, providerSA)),
			want: answer{Status: 401, Code: "unauthorized", Closes: true}, refused: "algorithm",
		},
		{
			reason: "A ServiceAccount of a namespace nothing maps: refused like an invalid token, closing the connection, so a client cannot try subject after subject on one.",
			method: "GET", path: "/v1/widgets", token: sign(idClaims(now, "system:serviceaccount:team-c:provider-widget")),
			want: answer{Status: 403, Code: "forbidden", Closes: true}, refused: "unmapped",
		},
		{
			reason: "A dotted string that is no JWT is an identity token refusal, not a crash.",
			method: "GET", path: "/v1/widgets", token: "not.a.jwt",
			want: answer{Status: 401, Code: "unauthorized", Closes: true}, refused: "malformed",
		},
		{reason: "A static token still works after all that.", method: "GET", path: "/v1/widgets", token: apitest.TokenB, want: answer{Status: 200}},
	}
	reg := env.Server.Registry()
	for _, s := range steps {
		var before float64
		if s.refused != "" {
			before = refusedCount(t, reg, s.refused)
		}
		got, body := call(t, env, s.method, s.path, s.token, s.body)
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("%s\n%s %s: -want, +got:\n%s", s.reason, s.method, s.path, diff)
		}
		if s.want.Status >= 400 && strings.Contains(body, s.token) {
			t.Errorf("%s\nthe answer repeats the token: %s", s.reason, body)
		}
		if s.refused != "" {
			if d := refusedCount(t, reg, s.refused) - before; d != 1 {
				t.Errorf("%s\nwidgetapi_identity_tokens_refused_total{reason=%q} grew by %v, want 1", s.reason, s.refused, d)
			}
		}
	}
}

// refusedCount is widgetapi_identity_tokens_refused_total{reason}.
func refusedCount(t *testing.T, reg prometheus.Gatherer, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "widgetapi_identity_tokens_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no refusal series for reason %q", reason)
	return 0
}
