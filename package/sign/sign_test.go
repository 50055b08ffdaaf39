package sign

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
)

func TestAnnotationFlags(t *testing.T) {
	got := annotationFlags(map[string]string{"version": "v1", "package": "provider-widget"})
	want := []string{"-a", "package=provider-widget", "-a", "version=v1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("annotationFlags: -want, +got:\n%s", diff)
	}
}

func TestStatementOf(t *testing.T) {
	const digest = "sha256:0123abcd"
	envelope := func(payload string) []byte {
		b, _ := json.Marshal(map[string]string{"payloadType": "application/vnd.in-toto+json", "payload": base64.StdEncoding.EncodeToString([]byte(payload))})
		return b
	}
	cases := map[string]struct {
		reason   string
		envelope []byte
		about    bool
		err      string
	}{
		"AboutTheImage": {
			reason:   "A statement whose subject is the image's digest is about it.",
			envelope: envelope(`{"predicateType":"https://spdx.dev/Document","subject":[{"name":"r/p","digest":{"sha256":"0123abcd"}}],"predicate":{}}`),
			about:    true,
		},
		"AboutAnotherImage": {
			reason:   "A statement copied from another image is not about this one.",
			envelope: envelope(`{"predicateType":"https://spdx.dev/Document","subject":[{"name":"r/p","digest":{"sha256":"ffff"}}],"predicate":{}}`),
		},
		"NotAnEnvelope": {
			reason:   "Output that is not a DSSE envelope is an error, not a panic.",
			envelope: []byte(`{"payload": 3}`),
			err:      "not a DSSE envelope",
		},
		"NotBase64": {
			reason:   "A payload that is not base64 is an error.",
			envelope: []byte(`{"payload": "%%%"}`),
			err:      "not base64",
		},
		"NotAStatement": {
			reason:   "A payload that is not JSON is an error.",
			envelope: envelope(`not json`),
			err:      "not an in-toto statement",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st, err := statementOf(tc.envelope)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%s\nstatementOf: got error %v, want one with %q", tc.reason, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nstatementOf: %v", tc.reason, err)
			}
			if got := st.about(digest); got != tc.about {
				t.Errorf("%s\nabout(%s) = %t, want %t", tc.reason, digest, got, tc.about)
			}
		})
	}
}

func TestTailAndRedact(t *testing.T) {
	c := Cosign{Password: "pw-secret"}
	long := strings.Repeat("x", 3*maxOutput) + "\nError: decrypt pw-secret failed\nerror during command execution: decrypt pw-secret failed\n"
	got := c.redact(reason(long))
	if strings.Contains(got, "pw-secret") {
		t.Errorf("the password survived: %q", got)
	}
	if got != "decrypt [redacted] failed" {
		t.Errorf("reason: got %q, want cosign's Error line alone", got)
	}
	if got := reason(strings.Repeat("y", 3*maxOutput)); len(got) != maxOutput+len("...") {
		t.Errorf("reason of output without an Error line kept %d bytes, want its last %d", len(got), maxOutput)
	}
}

func TestEnvCarriesOnlyItsOwnPassword(t *testing.T) {
	t.Setenv("COSIGN_PASSWORD", "from-the-shell")
	t.Setenv("DOCKER_CONFIG", "/somewhere/else")
	env := Cosign{Password: "mine", DockerConfig: "/tmp/registry"}.env()
	var pw, dc []string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "COSIGN_PASSWORD="); ok {
			pw = append(pw, v)
		}
		if v, ok := strings.CutPrefix(kv, "DOCKER_CONFIG="); ok {
			dc = append(dc, v)
		}
	}
	if diff := cmp.Diff([]string{"mine"}, pw); diff != "" {
		t.Errorf("COSIGN_PASSWORD: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/tmp/registry"}, dc); diff != "" {
		t.Errorf("DOCKER_CONFIG: -want, +got:\n%s", diff)
	}
}

func TestWithoutCosign(t *testing.T) {
	_, err := Cosign{}.Verify(t.Context(), "k.pub", name.MustParseReference("xpkg.example.com/widgetco/provider-widget:v1"), nil)
	if err == nil || !strings.Contains(err.Error(), "bash hack/tools.sh cosign") {
		t.Errorf("Verify without cosign: got %v, want an error saying how to build it", err)
	}
}

func TestCapped(t *testing.T) {
	c := &capped{max: 8}
	for _, w := range []string{"abc", "defg", "hijk"} {
		if n, err := c.Write([]byte(w)); err != nil || n != len(w) {
			t.Fatalf("Write(%q) = %d, %v; want all of it taken, no error (cosign must not block)", w, n, err)
		}
	}
	if c.String() != "abcdefgh" || !c.over {
		t.Errorf("kept %q, over %t; want the first 8 bytes and over", c.String(), c.over)
	}
}
