package kube

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

func TestStart(t *testing.T) {
	if os.Getenv(AssetsEnv) == "" {
		if _, err := Start(Options{}); !errors.Is(err, ErrNoAssets) {
			t.Fatalf("Start without assets: want ErrNoAssets, got %v", err)
		}
		t.Skip(ErrNoAssets.Error())
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	e, err := Start(Options{Kubeconfig: kc, CRDDirs: []string{filepath.Join("..", "..", "..", "package", "provider", "crds")}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.Stop(); err != nil {
			t.Errorf("Stop(): %v", err)
		}
	}()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-test"}}
	if err := e.Client.Create(t.Context(), ns); err != nil {
		t.Fatalf("the admin client cannot create a namespace: %v", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatalf("the kubeconfig written cannot be read: %v", err)
	}
	if strings.TrimSuffix(cfg.Host, "/") != strings.TrimSuffix(e.Config.Host, "/") {
		t.Errorf("the kubeconfig written names %s, want the API server %s", cfg.Host, e.Config.Host)
	}
	if _, err := Start(Options{CRDDirs: []string{"no/such/dir"}}); err == nil {
		t.Errorf("Start with a missing CRD directory: want an error, got none")
	}
}

// TestStartForPods starts kube-apiserver on an address of its own, as a
// real cluster's node runs it, and checks that its serving certificate is
// valid for the `kubernetes` Service's ClusterIP and names, which in-cluster
// clients use. (kube-apiserver gives the Service no endpoint on a loopback
// address; the e2e suite's pods reach it through the Service.)
func TestStartForPods(t *testing.T) {
	if os.Getenv(AssetsEnv) == "" {
		t.Skip(ErrNoAssets.Error())
	}
	if _, err := Start(Options{Address: "127.0.0.2"}); err == nil {
		t.Errorf("Start with Address but no CertDir or ServiceCIDR: want an error, got none")
	}
	e, err := Start(Options{Address: "127.0.0.2", ServiceCIDR: "10.0.0.0/24", CertDir: t.TempDir(), Pods: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.Stop(); err != nil {
			t.Errorf("Stop(): %v", err)
		}
	}()
	if !strings.HasPrefix(e.Config.Host, "https://127.0.0.2:") {
		t.Errorf("admin client's host: got %s, want https://127.0.0.2:<port>", e.Config.Host)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(e.Config.CAData) {
		t.Fatal("the admin client's CA is not PEM")
	}
	u, err := url.Parse(e.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"10.0.0.1", "kubernetes.default.svc", "127.0.0.2", "localhost"} {
		d := &tls.Dialer{Config: &tls.Config{RootCAs: roots, ServerName: name, MinVersion: tls.VersionTLS12}}
		conn, err := d.DialContext(t.Context(), "tcp", u.Host)
		if err != nil {
			t.Errorf("TLS to kube-apiserver as %s: %v", name, err)
			continue
		}
		_ = conn.Close()
	}
	d := &tls.Dialer{Config: &tls.Config{RootCAs: roots, ServerName: "10.0.0.2", MinVersion: tls.VersionTLS12}}
	if conn, err := d.DialContext(t.Context(), "tcp", u.Host); err == nil {
		_ = conn.Close()
		t.Errorf("TLS to kube-apiserver as 10.0.0.2: want a certificate error, got none")
	}
}
