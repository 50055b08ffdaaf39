package clients

import (
	"encoding/pem"
	"testing"

	"github.com/widgetco/crossplane-widget/test/lib/testcert"
)

// TestCredentialKey: variants of an endpoint or a CA bundle that send the
// same token to the same server are one credential, so a tenant cannot make
// a new credential, and a new refusal, out of a spelling.
func TestCredentialKey(t *testing.T) {
	ca1, _ := testcert.SelfSigned(t, "ca-1")
	ca2, _ := testcert.SelfSigned(t, "ca-2")
	block, _ := pem.Decode(ca1)
	rewrapped := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes}))
	const (
		ep  = "https://widgets.example.com"
		tok = "token"
	)
	base := credentialKey(ep, tok, string(ca1))
	cases := map[string]struct {
		reason                    string
		endpoint, token, caBundle string
		same                      bool
	}{
		"DefaultPort":      {reason: "host and host:443 are one server.", endpoint: "https://widgets.example.com:443", same: true},
		"Case":             {reason: "Scheme and host are not case-sensitive.", endpoint: "HTTPS://Widgets.Example.COM", same: true},
		"TrailingSlash":    {reason: "The client drops one trailing slash.", endpoint: ep + "/", same: true},
		"TrailingDot":      {reason: "A fully qualified host is the same host.", endpoint: "https://widgets.example.com.", same: true},
		"Query":            {reason: "The client replaces the query and drops the fragment.", endpoint: ep + "?n=1#x", same: true},
		"UserInfo":         {reason: "The bearer token takes precedence over user info.", endpoint: "https://u:p@widgets.example.com", same: true},
		"Comment":          {reason: "Text outside the PEM blocks is not trust.", caBundle: "# team-a, attempt 7\n" + string(ca1) + "\ntrailing words", same: true},
		"Repeated":         {reason: "A certificate twice is trusted once.", caBundle: string(ca1) + string(ca1), same: true},
		"Rewrapped":        {reason: "The same certificate in other PEM text is the same certificate.", caBundle: rewrapped, same: true},
		"Unparseable":      {reason: "A CERTIFICATE block that does not parse is skipped by the client's pool.", caBundle: string(ca1) + "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", same: true},
		"OtherBlock":       {reason: "A block of another type is skipped by the client's pool.", caBundle: string(ca1) + "-----BEGIN JUNK-----\nAAAA\n-----END JUNK-----\n", same: true},
		"OtherToken":       {reason: "Another token is another credential.", token: "token2"},
		"OtherHost":        {reason: "Another host is another credential.", endpoint: "https://widgets2.example.com"},
		"OtherPort":        {reason: "Another port is another server.", endpoint: "https://widgets.example.com:8443"},
		"OtherPath":        {reason: "Another path prefix is another API.", endpoint: ep + "/v2"},
		"OtherCA":          {reason: "Another trust is another credential.", caBundle: string(ca2)},
		"MoreCAs":          {reason: "More trust is another credential.", caBundle: string(ca1) + string(ca2)},
		"OtherScheme":      {reason: "http and https are different servers.", endpoint: "http://widgets.example.com:443"},
		"IPv4NotAHostname": {reason: "An address is not its name.", endpoint: "https://127.0.0.1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			endpoint, token, caBundle := tc.endpoint, tc.token, tc.caBundle
			if endpoint == "" {
				endpoint = ep
			}
			if token == "" {
				token = tok
			}
			if caBundle == "" {
				caBundle = string(ca1)
			}
			if got := credentialKey(endpoint, token, caBundle) == base; got != tc.same {
				t.Errorf("%s\ncredentialKey(%q, ..., ...) same as the base: got %t, want %t", tc.reason, endpoint, got, tc.same)
			}
		})
	}
	if a, b := credentialKey("http://widgets.example.com", tok, string(ca1)), credentialKey("http://widgets.example.com:80/", tok, string(ca2)); a != b {
		t.Errorf("over http, the CA bundle and the default port must not make another credential")
	}
	if a, b := credentialKey("https://[0:0:0:0:0:0:0:1]", tok, ""), credentialKey("https://[::1]:443", tok, ""); a != b {
		t.Errorf("an IPv6 address must be compared in its canonical form")
	}
}
