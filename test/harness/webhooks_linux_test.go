package harness

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	xpextv1alpha1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1alpha1"
)

// coreWebhookRefusesDeletingInUse checks that core's own webhook works as in
// a cluster. `core init` pointed the crossplane-no-usages
// ValidatingWebhookConfiguration at the crossplane-webhooks Service, with
// the server certificate it issued (signed by the root CA) as the caBundle;
// the node serves that Service's ClusterIP with core's webhook server; and
// kube-apiserver, calling it, refuses to delete a ConfigMap a Usage
// protects - which only core's webhook can do (no schema or CEL rule sees
// a DELETE).
func (s *story) coreWebhookRefusesDeletingInUse(t *testing.T) {
	ctx, h := s.ctx, s.h
	ns := h.Namespace()
	vwc := &admv1.ValidatingWebhookConfiguration{}
	if err := h.Client().Get(ctx, types.NamespacedName{Name: "crossplane-no-usages"}, vwc); err != nil {
		t.Fatalf("cannot get core's ValidatingWebhookConfiguration: %v", err)
	}
	if len(vwc.Webhooks) != 1 {
		t.Fatalf("crossplane-no-usages has %d webhooks, want 1", len(vwc.Webhooks))
	}
	cc := vwc.Webhooks[0].ClientConfig
	want := &admv1.ServiceReference{Namespace: ns, Name: WebhookService, Path: ptr.To("/validate-no-usages"), Port: ptr.To[int32](WebhookPort)}
	if diff := cmp.Diff(want, cc.Service); diff != "" {
		t.Errorf("crossplane-no-usages service: -want, +got:\n%s", diff)
	}
	server, root := &corev1.Secret{}, &corev1.Secret{}
	if err := h.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: ServerTLSSecret}, server); err != nil {
		t.Fatal(err)
	}
	if err := h.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: RootCASecret}, root); err != nil {
		t.Fatal(err)
	}
	// Crossplane's caBundle is the server certificate itself, not its CA.
	if !bytes.Equal(cc.CABundle, server.Data[corev1.TLSCertKey]) {
		t.Errorf("crossplane-no-usages caBundle is not the tls.crt of Secret %s", ServerTLSSecret)
	}
	dnsName := WebhookService + "." + ns + ".svc"
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(root.Data[corev1.TLSCertKey])
	if _, err := parseCert(t, server.Data[corev1.TLSCertKey]).Verify(x509.VerifyOptions{Roots: roots, DNSName: dnsName}); err != nil {
		t.Errorf("the certificate in %s does not verify against %s for %s: %v", ServerTLSSecret, RootCASecret, dnsName, err)
	}

	// What kube-apiserver does: dial the Service's ClusterIP, trusting only
	// the caBundle, checking the Service's DNS name.
	svc := &corev1.Service{}
	if err := h.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: WebhookService}, svc); err != nil {
		t.Fatal(err)
	}
	bundle := x509.NewCertPool()
	bundle.AppendCertsFromPEM(cc.CABundle)
	addr := net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(WebhookPort))
	eventually(ctx, t, "core's webhook server answers on "+addr+" with the caBundle's certificate", func(ctx context.Context) error {
		c, err := (&tls.Dialer{Config: &tls.Config{RootCAs: bundle, ServerName: dnsName, MinVersion: tls.VersionTLS13}}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	})

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "webhook-probe"}}
	if err := h.Client().Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	reason := "harness: proves core's webhook answers"
	usage := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "protection.crossplane.io/v1beta1",
		"kind":       "Usage",
		"metadata":   map[string]any{"namespace": "default", "name": "webhook-probe"},
		"spec": map[string]any{
			"of":     map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": map[string]any{"name": cm.Name}},
			"reason": reason,
		},
	}}
	if err := h.Client().Create(ctx, usage); err != nil {
		t.Fatalf("cannot create a Usage: %v", err)
	}
	eventually(ctx, t, "core's Usage controller marks the ConfigMap in use", func(ctx context.Context) error {
		got := &corev1.ConfigMap{}
		if err := h.Client().Get(ctx, types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}, got); err != nil {
			return err
		}
		if got.Labels["crossplane.io/in-use"] != "true" {
			return fmt.Errorf("ConfigMap labels %v, want crossplane.io/in-use=true", got.Labels)
		}
		return nil
	})
	err := h.Client().Delete(ctx, cm)
	if err == nil || !strings.Contains(err.Error(), `admission webhook "nousages.protection.crossplane.io" denied the request`) || !strings.Contains(err.Error(), reason) {
		t.Fatalf("deleting a ConfigMap in use: error %v, want core's webhook to refuse it naming the Usage's reason", err)
	}
	t.Logf("kube-apiserver, through core's webhook: %v", err)

	// Once the Usage is gone, the ConfigMap may go.
	if err := h.Client().Delete(ctx, usage); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the ConfigMap can be deleted once its Usage is gone", func(ctx context.Context) error {
		if err := h.Client().Delete(ctx, cm); err != nil && !kerrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}

// providerConversionWebhook checks that Crossplane's package manager wires a
// provider's conversion webhook as in a cluster, and that kube-apiserver
// reaches it. The smoke provider's Gadget CRD declares conversion strategy
// Webhook with only a path; core gave the revision a Service port "webhook"
// and a TLS server Secret, and injected the Secret's certificate and the
// Service into the MRD and so the CRD. Reading the Gadget ProviderSmoke
// created at v1alpha1 as v1beta1, and back, goes through the provider's pod.
func (s *story) providerConversionWebhook(t *testing.T) {
	ctx, h := s.ctx, s.h
	ns := h.Namespace()
	svc := &corev1.Service{}
	if err := h.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: "provider-smoke"}, svc); err != nil {
		t.Fatalf("cannot get the provider's Service: %v", err)
	}
	wantPort := corev1.ServicePort{Name: "webhook", Protocol: corev1.ProtocolTCP, Port: 9443, TargetPort: intstr.FromString("webhook")}
	found := false
	for _, p := range svc.Spec.Ports {
		found = found || cmp.Equal(p, wantPort)
	}
	if !found {
		t.Errorf("Service provider-smoke has ports %v, want %v", svc.Spec.Ports, wantPort)
	}
	sec := &corev1.Secret{}
	if err := h.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: "provider-smoke-tls-server"}, sec); err != nil {
		t.Fatalf("cannot get the provider's TLS server Secret: %v", err)
	}
	want := &extv1.WebhookClientConfig{
		Service:  &extv1.ServiceReference{Namespace: ns, Name: "provider-smoke", Path: ptr.To("/convert"), Port: ptr.To[int32](9443)},
		CABundle: sec.Data[corev1.TLSCertKey],
	}
	mrd := &xpextv1alpha1.ManagedResourceDefinition{}
	if err := h.Client().Get(ctx, types.NamespacedName{Name: "gadgets.smoke.example.org"}, mrd); err != nil {
		t.Fatal(err)
	}
	if c := mrd.Spec.Conversion; c == nil || c.Strategy != extv1.WebhookConverter || c.Webhook == nil {
		t.Fatalf("MRD gadgets.smoke.example.org conversion %+v, want strategy Webhook", c)
	}
	if diff := cmp.Diff(want, mrd.Spec.Conversion.Webhook.ClientConfig); diff != "" {
		t.Errorf("MRD gadgets.smoke.example.org conversion client config: -want, +got:\n%s", diff)
	}
	eventually(ctx, t, "the CRD has the MRD's conversion client config", func(ctx context.Context) error {
		crd := &extv1.CustomResourceDefinition{}
		if err := h.Client().Get(ctx, types.NamespacedName{Name: "gadgets.smoke.example.org"}, crd); err != nil {
			return err
		}
		if c := crd.Spec.Conversion; c == nil || c.Webhook == nil {
			return fmt.Errorf("CRD conversion %+v, want a webhook", c)
		}
		if diff := cmp.Diff(want, crd.Spec.Conversion.Webhook.ClientConfig); diff != "" {
			return fmt.Errorf("CRD conversion client config: -want, +got:\n%s", diff)
		}
		return nil
	})

	// Read as v1beta1: kube-apiserver asks the provider's pod to convert.
	g := &unstructured.Unstructured{}
	g.SetAPIVersion("smoke.example.org/v1beta1")
	g.SetKind("Gadget")
	eventually(ctx, t, "the Gadget reads as v1beta1, converted by the provider", func(ctx context.Context) error {
		if err := h.Client().Get(ctx, types.NamespacedName{Namespace: "default", Name: "g1"}, g); err != nil {
			return err
		}
		if c, _, _ := unstructured.NestedString(g.Object, "spec", "forProvider", "colour"); c != "blue" {
			return fmt.Errorf("v1beta1 spec.forProvider %v, want colour blue", g.Object["spec"])
		}
		return nil
	})
	// Write as v1beta1, read as v1alpha1 (the storage version).
	_ = unstructured.SetNestedField(g.Object, "green", "spec", "forProvider", "colour")
	if err := h.Client().Update(ctx, g); err != nil {
		t.Fatalf("cannot update the Gadget as v1beta1: %v", err)
	}
	old := &unstructured.Unstructured{}
	old.SetAPIVersion("smoke.example.org/v1alpha1")
	old.SetKind("Gadget")
	if err := h.Client().Get(ctx, types.NamespacedName{Namespace: "default", Name: "g1"}, old); err != nil {
		t.Fatal(err)
	}
	if c, _, _ := unstructured.NestedString(old.Object, "spec", "forProvider", "color"); c != "green" {
		t.Errorf("v1alpha1 spec.forProvider %v, want color green", old.Object["spec"])
	}
}

// buildConversionWebhook builds testdata/conversion-webhook, the smoke
// provider's runtime, as a static binary.
func buildConversionWebhook(ctx context.Context, t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "conversion-webhook")
	c := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, "./testdata/conversion-webhook")
	c.Env = append(c.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := c.CombinedOutput(); err != nil {
		t.Fatalf("cannot build testdata/conversion-webhook: %v: %s", err, b)
	}
	return out
}

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatal("cannot decode a PEM certificate")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
