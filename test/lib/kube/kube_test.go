package kube

import (
	"errors"
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
