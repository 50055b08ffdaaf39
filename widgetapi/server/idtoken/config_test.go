package idtoken_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken"
)

func TestLoadConfig(t *testing.T) {
	const head = "issuers:\n- issuer: https://kubernetes.default.svc\n  audience: widget-api\n  keys: {discovery: true}\n  subjects:\n"
	cases := map[string]struct {
		reason string
		yaml   string
		err    string // part of the error; empty for none
	}{
		"Valid": {
			reason: "Exact subjects and a namespace wildcard.",
			yaml: head + "  - {subject: 'system:serviceaccount:crossplane-system:provider-widget', project: platform, role: editor}\n" +
				"  - {subject: 'system:serviceaccount:team-a:*', project: team-a, role: viewer}\n",
		},
		"NamespaceOfAnyName": {
			reason: "A wildcard over namespaces is not explicit enough.",
			yaml:   head + "  - {subject: 'system:serviceaccount:*:provider-widget', project: p, role: editor}\n",
			err:    "the only wildcard",
		},
		"Star": {
			reason: "A bare * would map every subject.",
			yaml:   head + "  - {subject: '*', project: p, role: editor}\n",
			err:    "the only wildcard",
		},
		"Prefix": {
			reason: "Prefix wildcards are not accepted.",
			yaml:   head + "  - {subject: 'system:serviceaccount:team-*', project: p, role: editor}\n",
			err:    "the only wildcard",
		},
		"Role": {
			reason: "Roles are editor and viewer.",
			yaml:   head + "  - {subject: me, project: p, role: admin}\n",
			err:    "role must be",
		},
		"UnknownField": {
			reason: "A misspelt field is an error, not a silently absent check.",
			yaml:   head + "  - {subject: me, project: p, role: editor}\n  audiences: [x]\n",
			err:    "unknown field",
		},
		"NoAudience": {
			reason: "An issuer needs an audience.",
			yaml:   "issuers:\n- issuer: https://i\n  keys: {discovery: true}\n  subjects: [{subject: me, project: p, role: editor}]\n",
			err:    "audience is required",
		},
		"TwoKeySources": {
			reason: "Exactly one key source.",
			yaml:   "issuers:\n- issuer: https://i\n  audience: a\n  keys: {discovery: true, jwksFile: /x}\n  subjects: [{subject: me, project: p, role: editor}]\n",
			err:    "exactly one",
		},
		"PlainHTTP": {
			reason: "Keys over plain HTTP only from loopback.",
			yaml:   "issuers:\n- issuer: https://i\n  audience: a\n  keys: {jwksURL: 'http://keys.example/jwks'}\n  subjects: [{subject: me, project: p, role: editor}]\n",
			err:    "must be https",
		},
		"LoopbackIPv4": {
			reason: "Plain HTTP to a loopback address.",
			yaml:   "issuers:\n- issuer: https://i\n  audience: a\n  keys: {jwksURL: 'http://127.0.0.1:8080/jwks'}\n  subjects: [{subject: me, project: p, role: editor}]\n",
		},
		"LoopbackIPv6": {
			reason: "Plain HTTP to the IPv6 loopback address.",
			yaml:   "issuers:\n- issuer: https://i\n  audience: a\n  keys: {jwksURL: 'http://[::1]:8080/jwks'}\n  subjects: [{subject: me, project: p, role: editor}]\n",
		},
		"Localhost": {
			reason: "Plain HTTP to the name localhost.",
			yaml:   "issuers:\n- issuer: https://i\n  audience: a\n  keys: {jwksURL: 'http://localhost:8080/jwks'}\n  subjects: [{subject: me, project: p, role: editor}]\n",
		},
		"NameThatLooksLikeLoopback": {
			reason: "A DNS name that starts like a loopback address resolves wherever its owner points it: not loopback.",
			yaml:   "issuers:\n- issuer: https://i\n  audience: a\n  keys: {jwksURL: 'http://127.0.0.1.nip.io/keys'}\n  subjects: [{subject: me, project: p, role: editor}]\n",
			err:    "must be https",
		},
		"DiscoveryNameThatLooksLikeLoopback": {
			reason: "The same holds for a discovery URL.",
			yaml:   "issuers:\n- issuer: https://i\n  audience: a\n  keys: {discovery: true, discoveryURL: 'http://127.evil.example'}\n  subjects: [{subject: me, project: p, role: editor}]\n",
			err:    "must be https",
		},
		"Skew": {
			reason: "Clock skew is bounded.",
			yaml:   "clockSkew: 1h\n" + head + "  - {subject: me, project: p, role: editor}\n",
			err:    "clockSkew",
		},
		"RepeatedSubject": {
			reason: "A subject maps once.",
			yaml:   head + "  - {subject: me, project: p, role: editor}\n  - {subject: me, project: q, role: viewer}\n",
			err:    "repeated",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "identity.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := idtoken.LoadConfig(path)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if (tc.err == "") != (got == "") || !strings.Contains(got, tc.err) {
				t.Errorf("%s\nLoadConfig: want error containing %q, got %q", tc.reason, tc.err, got)
			}
		})
	}
}

// TestNewValidates: New validates its configuration and fills in its
// defaults, so a caller that skipped Validate gets no zero fetch timeout.
func TestNewValidates(t *testing.T) {
	if _, err := idtoken.New(&idtoken.Config{}, idtoken.Options{}); err == nil {
		t.Error("New with no issuers: want an error")
	}
	cfg := &idtoken.Config{Issuers: []idtoken.Issuer{{
		Issuer: "https://i.test", Audience: "a", Keys: idtoken.Keys{JWKSFile: "/nonexistent"},
		Subjects: []idtoken.Subject{{Subject: "me", Project: "p", Role: idtoken.RoleEditor}},
	}}}
	a, err := idtoken.New(cfg, idtoken.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	if got := time.Duration(cfg.Issuers[0].Keys.FetchTimeout); got != idtoken.DefaultFetchTimeout {
		t.Errorf("fetchTimeout after New: want the default %s, got %s", idtoken.DefaultFetchTimeout, got)
	}
}
