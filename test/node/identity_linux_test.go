package node_test

import (
	"path/filepath"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// TestWorkloadIdentity runs a Widget on the provider's own identity: the
// ServiceAccount token kubelet projects into its pods for the Widget API's
// audience (examples/runtime), read through the ClusterProviderConfig of
// examples/provider/clusterproviderconfig-token-file.yaml, with no token
// Secret. The widget lands in the identity's project, not the static
// token's.
func TestWorkloadIdentity(t *testing.T) {
	c := suite(t)
	kc := c.Client()
	ns := "node-identity"
	ensureNamespace(t, kc, ns)
	objs, err := platform.ReadObjects(filepath.Join(env.rootDir, "examples", "provider", "clusterproviderconfig-token-file.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if err := unstructured.SetNestedField(u.Object, env.apiURL, "spec", "endpoint"); err != nil {
			t.Fatal(err)
		}
	}
	if err := platform.Create(t.Context(), kc, objs...); err != nil {
		t.Fatal(err)
	}
	mr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"providerConfigRef": map[string]any{"kind": "ClusterProviderConfig", "name": objs[0].GetName()},
		"forProvider":       map[string]any{"size": "small", "description": "on the provider's projected token"},
	}}}
	mr.SetAPIVersion("widget.m.widgetco.io/v1beta1")
	mr.SetKind("Widget")
	mr.SetNamespace(ns)
	mr.SetName("by-identity")
	applied := time.Now()
	if err := kc.Create(t.Context(), mr); err != nil {
		t.Fatal(err)
	}
	waitReady(t, kc, 2*time.Minute, mr)
	t.Logf("MEASURED Widget on the provider's projected token Ready %s after it was applied", time.Since(applied).Round(100*time.Millisecond))
	if err := kc.Get(t.Context(), client.ObjectKeyFromObject(mr), mr); err != nil {
		t.Fatal(err)
	}
	name := meta.GetExternalName(mr)

	// A reader in the identity's project: another ServiceAccount of
	// Crossplane's namespace, with a token from the TokenRequest API.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.CrossplaneNamespace, Name: "node-identity-auditor"}}
	if err := kc.Create(t.Context(), sa); err != nil && !kerrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{identityAudience}, ExpirationSeconds: ptr.To[int64](600)}}
	if err := kc.SubResource("token").Create(t.Context(), sa, tr); err != nil {
		t.Fatal(err)
	}
	reader, err := widgetapi.New(env.apiURL, widgetapi.WithToken(tr.Status.Token))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reader.GetWidget(t.Context(), name); err != nil {
		t.Errorf("widget %s is not in project %s, which only the provider's identity acts in: %v", name, identityProject, err)
	}
	if _, err := env.api.GetWidget(t.Context(), name); !widgetapi.IsNotFound(err) {
		t.Errorf("widget %s in the static token's project: want 404, got %v", name, err)
	}
}
