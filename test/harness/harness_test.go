package harness

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/widgetco/crossplane-widget/test/lib/registry"
)

func TestToolsFromEnv(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	all := map[string]string{
		"KUBEBUILDER_ASSETS":         dir,
		"CROSSPLANE_BIN":             bin,
		"CROSSPLANE_CRDS":            dir,
		"CROSSPLANE_WEBHOOK_CONFIGS": dir,
		"CRANK_BIN":                  bin,
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for kk, vv := range all {
			m[kk] = vv
		}
		m[k] = v
		return m
	}
	cases := map[string]struct {
		reason string
		env    map[string]string
		want   Tools
		err    error
	}{
		"AllSet": {
			reason: "Every variable names an existing file or directory.",
			env:    all,
			want:   Tools{KubebuilderAssets: dir, Crossplane: bin, CrossplaneCRDs: dir, CrossplaneWebhookConfigs: dir, Crank: bin},
		},
		"Unset": {
			reason: "An unset variable means the tools were not built.",
			env:    with("CROSSPLANE_BIN", ""),
			want:   Tools{KubebuilderAssets: dir, CrossplaneCRDs: dir, CrossplaneWebhookConfigs: dir, Crank: bin},
			err:    ErrToolsMissing,
		},
		"Missing": {
			reason: "A variable naming nothing is as good as unset.",
			env:    with("CRANK_BIN", filepath.Join(dir, "nope")),
			want:   Tools{KubebuilderAssets: dir, Crossplane: bin, CrossplaneCRDs: dir, CrossplaneWebhookConfigs: dir, Crank: filepath.Join(dir, "nope")},
			err:    ErrToolsMissing,
		},
		"FileForDir": {
			reason: "KUBEBUILDER_ASSETS must be a directory.",
			env:    with("KUBEBUILDER_ASSETS", bin),
			want:   Tools{KubebuilderAssets: bin, Crossplane: bin, CrossplaneCRDs: dir, CrossplaneWebhookConfigs: dir, Crank: bin},
			err:    ErrToolsMissing,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			t.Setenv("KUBE_CONTROLLER_MANAGER_BIN", "")
			t.Setenv("CROSSPLANE_CHART", "")
			got, err := ToolsFromEnv()
			if diff := cmp.Diff(tc.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nToolsFromEnv(): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nToolsFromEnv(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// crossplaneCA makes a CA Secret the way `crossplane core init` does: RSA,
// PKCS#1 key, in tls.crt and tls.key.
func crossplaneCA(t *testing.T) *corev1.Secret {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(2022),
		Subject:               pkix.Name{CommonName: "Crossplane"},
		DNSNames:              []string{"crossplane-root-ca"},
		NotBefore:             time.Now(),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCRLSign | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "crossplane-system", Name: RootCASecret},
		Data: map[string][]byte{
			corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		},
	}
}

func TestIssue(t *testing.T) {
	ca, err := caFromSecret(crossplaneCA(t))
	if err != nil {
		t.Fatalf("caFromSecret(...): %v", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)

	cases := map[string]struct {
		reason string
		usage  x509.ExtKeyUsage
		dns    []string
		ips    []net.IP
		verify x509.VerifyOptions
	}{
		"FunctionServerByIP": {
			reason: "Core dials dns:///127.0.0.1:PORT, so gRPC verifies the server certificate for the IP 127.0.0.1.",
			usage:  x509.ExtKeyUsageServerAuth,
			dns:    []string{"fn", "fn.crossplane-system", "fn.crossplane-system.svc"},
			ips:    []net.IP{net.IPv4(127, 0, 0, 1)},
			verify: x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1"},
		},
		"FunctionServerByServiceName": {
			reason: "The certificate is also valid for the names the Deployment runtime uses.",
			usage:  x509.ExtKeyUsageServerAuth,
			dns:    []string{"fn", "fn.crossplane-system", "fn.crossplane-system.svc"},
			ips:    []net.IP{net.IPv4(127, 0, 0, 1)},
			verify: x509.VerifyOptions{Roots: roots, DNSName: "fn.crossplane-system.svc"},
		},
		"ProviderClient": {
			reason: "A provider's client certificate verifies for client auth.",
			usage:  x509.ExtKeyUsageClientAuth,
			dns:    []string{"provider-widget-abc"},
			verify: x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := ca.issue(tc.usage, "test", tc.dns, tc.ips)
			if err != nil {
				t.Fatalf("%s\nissue(...): %v", tc.reason, err)
			}
			b, _ := pem.Decode(c.certPEM)
			if b == nil {
				t.Fatalf("%s\nissue(...): certificate is not PEM", tc.reason)
			}
			crt, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := crt.Verify(tc.verify); err != nil {
				t.Errorf("%s\nVerify(...): %v", tc.reason, err)
			}
			dir := t.TempDir()
			if err := writeTLSDir(dir, c.certPEM, c.keyPEM, ca.certPEM); err != nil {
				t.Fatalf("writeTLSDir(...): %v", err)
			}
			for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("%s\nwriteTLSDir(...): %s missing: %v", tc.reason, f, err)
				}
			}
		})
	}
}

func TestLoopbackRef(t *testing.T) {
	h := &Harness{registry: &registry.Registry{Host: "127.0.0.1:5000"}}
	cases := map[string]struct {
		reason  string
		ref     string
		want    string
		wantErr bool
	}{
		"RepoTag": {
			reason: "A bare repo:tag is pushed to the loopback registry.",
			ref:    "function-widget:v0.1.0",
			want:   "127.0.0.1:5000/function-widget:v0.1.0",
		},
		"OrgRepoTag": {
			reason: "An org/repo:tag without a registry host is pushed to the loopback registry.",
			ref:    "widgetco/function-widget:v0.1.0",
			want:   "127.0.0.1:5000/widgetco/function-widget:v0.1.0",
		},
		"Loopback": {
			reason: "A reference naming the loopback registry is kept.",
			ref:    "127.0.0.1:5000/provider-widget:v0.1.0",
			want:   "127.0.0.1:5000/provider-widget:v0.1.0",
		},
		"PublicRegistry": {
			reason:  "Nothing may point at a non-loopback address.",
			ref:     "xpkg.crossplane.io/crossplane-contrib/function-auto-ready:v0.6.0",
			wantErr: true,
		},
		"OtherLocalPort": {
			reason:  "Another local registry is not the harness's.",
			ref:     "localhost:5000/function-widget:v0.1.0",
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := h.loopbackRef(tc.ref)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nloopbackRef(%q): error %v, want error: %t", tc.reason, tc.ref, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nloopbackRef(%q): -want, +got:\n%s", tc.reason, tc.ref, diff)
			}
		})
	}
}
