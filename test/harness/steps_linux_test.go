package harness

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	authnv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"

	xpextv1alpha1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1alpha1"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
)

// widgetAPIServes checks the harness's Widget API answers on loopback.
func (s *story) widgetAPIServes(t *testing.T) {
	ctx, h := s.ctx, s.h
	w := h.WidgetAPI()
	if w == nil {
		t.Fatal("WidgetAPI() = nil with Options.WidgetAPI set")
	}
	if !strings.HasPrefix(w.URL, "http://127.0.0.1:") {
		t.Errorf("WidgetAPI().URL = %q, want http://127.0.0.1:PORT", w.URL)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.URL+"/v1/widgets", nil)
	req.Header.Set("Authorization", "Bearer harness-token")
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = rsp.Body.Close()
	if rsp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/widgets: status %d, want 200", rsp.StatusCode)
	}
}

// functionBecomesHealthy installs function-auto-ready from the loopback
// registry and checks its pod runs as Crossplane's Deployment runtime says:
// the package's image, uid and gid 2000, the runtime's environment, a root
// of its own.
func (s *story) functionBecomesHealthy(t *testing.T) {
	ctx, h, ref := s.ctx, s.h, s.ref
	tf := time.Now()
	fn, err := h.InstallFunction(ctx, "function-auto-ready", ref, InstallOptions{})
	if err != nil {
		t.Fatalf("InstallFunction(...): %v", err)
	}
	s.fn, s.fnDur = fn, time.Since(tf)
	rev := activeFunctionRevision(ctx, t, h, "function-auto-ready")
	if want := "dns:///function-auto-ready.crossplane-system:9443"; rev.Status.Endpoint != want {
		t.Errorf("FunctionRevision %s status.endpoint = %q, want %q (the Deployment runtime's Service)", rev.Name, rev.Status.Endpoint, want)
	}
	if rev.Spec.Package != ref {
		t.Errorf("FunctionRevision %s spec.package = %q, want %q", rev.Name, rev.Spec.Package, ref)
	}
	pods := fn.Pods()
	if len(pods) != 1 {
		t.Fatalf("function-auto-ready has %d pods, want 1", len(pods))
	}
	checkPodProcess(t, pods[0], map[string]string{
		"FUNCTION_NAME":        "function-auto-ready",
		"TLS_SERVER_CERTS_DIR": "/tls/server",
		"REVISION_NAME":        rev.Name,
	})
}

// serviceReachableByClusterIP checks that a Service with a ClusterIP (like
// the webhook Service Crossplane makes for a provider; a function's is
// headless) is served on that ClusterIP, a loopback IP from ServiceCIDR,
// from the host: the way kube-apiserver reaches a webhook Service. A TLS
// handshake through it gets the function pod's serving certificate.
func (s *story) serviceReachableByClusterIP(t *testing.T) {
	ctx, h := s.ctx, s.h
	fn := &corev1.Service{}
	if err := h.Client().Get(ctx, types.NamespacedName{Namespace: h.Namespace(), Name: "function-auto-ready"}, fn); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.Namespace(), Name: "probe-clusterip"},
		Spec:       corev1.ServiceSpec{Selector: fn.Spec.Selector, Ports: []corev1.ServicePort{{Name: "grpc", Port: 9443}}},
	}
	if err := h.Client().Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Client().Delete(context.Background(), svc) })
	_, cidr, _ := net.ParseCIDR(ServiceCIDR)
	if ip := net.ParseIP(svc.Spec.ClusterIP); ip == nil || !cidr.Contains(ip) {
		t.Fatalf("Service function-auto-ready has ClusterIP %q, want one in %s", svc.Spec.ClusterIP, ServiceCIDR)
	}
	addr := net.JoinHostPort(svc.Spec.ClusterIP, "9443")
	eventually(ctx, t, "a TLS server answers on the Service's ClusterIP", func(ctx context.Context) error {
		var presented bool
		d := &tls.Dialer{Config: &tls.Config{
			InsecureSkipVerify: true, // Only checks that the pod's server answers.
			VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
				presented = len(raw) > 0
				return nil
			},
		}}
		c, err := d.DialContext(ctx, "tcp", addr)
		if c != nil {
			_ = c.Close()
		}
		if !presented {
			return fmt.Errorf("no server certificate from %s: %w", addr, err)
		}
		return nil
	})
}

// coreRunsPipelineOverTLS checks Crossplane core calls the function over
// mTLS and a composite resource goes Ready.
func (s *story) coreRunsPipelineOverTLS(t *testing.T) {
	ctx, h, fn := s.ctx, s.h, s.fn
	applyYAML(ctx, t, h.Client(), probeXRD, probeComposition)
	eventually(ctx, t, "XRD established", func(ctx context.Context) error {
		return conditionTrue(ctx, h.Client(), "apiextensions.crossplane.io/v2", "CompositeResourceDefinition", "", "xprobes.harness.example.org", "Established")
	})
	// The XR's CRD is created by core once the XRD is established.
	eventually(ctx, t, "XR CRD established", func(ctx context.Context) error {
		if !h.crdEstablished(ctx, "xprobes.harness.example.org") {
			return fmt.Errorf("CRD xprobes.harness.example.org not established")
		}
		return nil
	})
	applyYAML(ctx, t, h.Client(), probeXR)
	// Synced=True means the pipeline ran: a failed RunFunction call
	// leaves the XR Synced=False with the gRPC error.
	eventually(ctx, t, "XR synced", func(ctx context.Context) error {
		return conditionTrue(ctx, h.Client(), "harness.example.org/v1alpha1", "XProbe", "default", "probe", "Synced")
	})
	eventually(ctx, t, "XR ready", func(ctx context.Context) error {
		return conditionTrue(ctx, h.Client(), "harness.example.org/v1alpha1", "XProbe", "default", "probe", "Ready")
	})
	// Core counted a successful call through its mTLS gRPC client...
	eventually(ctx, t, "core metrics show an OK RunFunction response", func(ctx context.Context) error {
		n, target, err := okResponses(ctx, h.CoreMetricsURL(), "function-auto-ready")
		if err != nil {
			return err
		}
		if n < 1 {
			return fmt.Errorf("no OK responses from function-auto-ready yet")
		}
		t.Logf("Core received %v OK RunFunction responses from function-auto-ready via %s", n, target)
		return nil
	})
	// ...and the function saw the request.
	pods := fn.Pods()
	if len(pods) == 0 {
		t.Fatal("function-auto-ready has no pods")
	}
	b, err := os.ReadFile(pods[0].LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "Running Function") {
		t.Errorf("function-auto-ready's log %s has no \"Running Function\" line; want its log of the request", pods[0].LogPath())
	}
}

// functionCrashIsReportedAndRecovered kills the function's container (the
// node restarts it in the same pod), then keeps its pod down and lets it run
// again.
func (s *story) functionCrashIsReportedAndRecovered(t *testing.T) {
	ctx, h, fn := s.ctx, s.h, s.fn
	before := fn.Pods()[0]
	pid := before.PID()
	if err := fn.Kill(); err != nil {
		t.Fatalf("Kill(): %v", err)
	}
	eventually(ctx, t, "the node restarted the killed container", func(context.Context) error {
		p := fn.Pods()
		if len(p) != 1 || p[0].Name() != before.Name() || !p[0].Ready() || p[0].PID() == pid {
			return fmt.Errorf("pods %v, want %s ready again with a new process", p, before.Name())
		}
		return nil
	})
	if err := fn.Stop(); err != nil {
		t.Fatalf("Stop(): %v", err)
	}
	eventually(ctx, t, "Function unhealthy while it has no pod", func(ctx context.Context) error {
		f := &pkgv1.Function{}
		if err := h.Client().Get(ctx, types.NamespacedName{Name: "function-auto-ready"}, f); err != nil {
			return err
		}
		if c := f.GetCondition(pkgv1.TypeHealthy); c.Status != corev1.ConditionFalse {
			return fmt.Errorf("Healthy=%s, want False", c.Status)
		}
		return nil
	})
	if err := fn.Start(); err != nil {
		t.Fatalf("Start(): %v", err)
	}
	eventually(ctx, t, "Function healthy after restart", func(ctx context.Context) error {
		f := &pkgv1.Function{}
		if err := h.Client().Get(ctx, types.NamespacedName{Name: "function-auto-ready"}, f); err != nil {
			return err
		}
		if c := f.GetCondition(pkgv1.TypeHealthy); c.Status != corev1.ConditionTrue {
			return fmt.Errorf("Healthy=%s (%s), want True", c.Status, c.Message)
		}
		return nil
	})
}

// providerSmoke installs a provider package and checks its MRD and CRDs.
func (s *story) providerSmoke(t *testing.T) {
	ctx, h, dir, tools := s.ctx, s.h, s.dir, s.tools
	root := filepath.Join(dir, "pkg-provider-smoke")
	writeFiles(t, root, map[string]string{
		"crossplane.yaml":                             smokeProviderMeta,
		"crds/gadgets.smoke.example.org.yaml":         smokeGadgetCRD,
		"crds/providerconfigs.smoke.example.org.yaml": smokeProviderConfigCRD,
	})
	out := filepath.Join(dir, "provider-smoke.xpkg")
	// The provider reconciles nothing; it serves the Gadget CRD's conversion
	// webhook (see providerConversionWebhook).
	if err := BuildPackage(ctx, tools.Crank, PackageBuild{Root: root, Out: out, RuntimeBinary: buildConversionWebhook(ctx, t, dir)}); err != nil {
		t.Fatal(err)
	}
	pref, err := h.PushPackage(ctx, out, "provider-smoke:v0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.InstallProvider(ctx, "provider-smoke", pref, InstallOptions{})
	if err != nil {
		t.Fatalf("InstallProvider(...): %v", err)
	}
	if !p.Running() {
		t.Errorf("provider-smoke has no ready pod")
	}
	// The Deployment runtime gives a provider's pod the ServiceAccount the
	// RBAC manager binds to the revision's ClusterRole.
	rev := &pkgv1.ProviderRevisionList{}
	if err := h.Client().List(ctx, rev, client.MatchingLabels{pkgv1.LabelParentPackage: "provider-smoke"}); err != nil || len(rev.Items) != 1 {
		t.Fatalf("cannot find provider-smoke's revision (%d, %v)", len(rev.Items), err)
	}
	eventually(ctx, t, "the RBAC manager bound the provider's ServiceAccount", func(ctx context.Context) error {
		crb := &rbacv1.ClusterRoleBinding{}
		name := "crossplane:provider:" + rev.Items[0].Name + ":system"
		if err := h.Client().Get(ctx, types.NamespacedName{Name: name}, crb); err != nil {
			return err
		}
		for _, sub := range crb.Subjects {
			if sub.Kind == "ServiceAccount" && sub.Name == rev.Items[0].Name {
				return nil
			}
		}
		return fmt.Errorf("ClusterRoleBinding %s has subjects %v, want ServiceAccount %s", name, crb.Subjects, rev.Items[0].Name)
	})
	// The ServiceAccount may do only what the revision's ClusterRole says;
	// anything else is refused and shows up in Forbidden (and diagnostics).
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: h.Namespace(), Name: rev.Items[0].Name}}
	tr := &authnv1.TokenRequest{}
	if err := h.Client().SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatalf("cannot request a token for the provider's ServiceAccount: %v", err)
	}
	cfg := &rest.Config{Host: h.RESTConfig().Host, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: h.RESTConfig().CAData}}
	as, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := as.List(ctx, &corev1.NamespaceList{}); !kerrors.IsForbidden(err) {
		t.Errorf("the provider's ServiceAccount listing namespaces: error %v, want Forbidden (its ClusterRole does not grant it)", err)
	}
	if err := as.List(ctx, &corev1.SecretList{}, client.InNamespace(h.Namespace())); err != nil {
		t.Errorf("the provider's ServiceAccount listing Secrets: %v, want allowed (every provider may)", err)
	}
	eventually(ctx, t, "the refused request shows up in Forbidden", func(context.Context) error {
		fb, err := h.Forbidden()
		if err != nil {
			return err
		}
		for _, f := range fb {
			if f.User == "system:serviceaccount:"+h.Namespace()+":"+sa.Name && f.Verb == "list" && f.Resource == "namespaces" {
				return nil
			}
		}
		return fmt.Errorf("Forbidden() = %v, want the ServiceAccount's list of namespaces", fb)
	})
	checkPodProcess(t, p.Pods()[0], map[string]string{
		"PROVIDER_NAME":        "provider-smoke",
		"POD_NAMESPACE":        "crossplane-system",
		"TLS_SERVER_CERTS_DIR": "/tls/server",
		"TLS_CLIENT_CERTS_DIR": "/tls/client",
		"WEBHOOK_TLS_CERT_DIR": "/tls/server",
	})
	// Core turned the managed resource CRD into an active MRD, which
	// made the CRD; the ProviderConfig stayed a plain CRD.
	mrd := &xpextv1alpha1.ManagedResourceDefinition{}
	if err := h.Client().Get(ctx, types.NamespacedName{Name: "gadgets.smoke.example.org"}, mrd); err != nil {
		t.Fatalf("cannot get MRD gadgets.smoke.example.org: %v", err)
	}
	if mrd.Spec.State != xpextv1alpha1.ManagedResourceDefinitionActive {
		t.Errorf("MRD state = %q, want Active", mrd.Spec.State)
	}
	if err := h.Client().Get(ctx, types.NamespacedName{Name: "providerconfigs.smoke.example.org"}, &xpextv1alpha1.ManagedResourceDefinition{}); err == nil {
		t.Errorf("ProviderConfig CRD was turned into an MRD; want a plain CRD")
	}
	if !h.crdEstablished(ctx, "providerconfigs.smoke.example.org") {
		t.Errorf("CRD providerconfigs.smoke.example.org not established")
	}
	g := &unstructured.Unstructured{}
	g.SetAPIVersion("smoke.example.org/v1alpha1")
	g.SetKind("Gadget")
	g.SetNamespace("default")
	g.SetName("g1")
	_ = unstructured.SetNestedField(g.Object, "blue", "spec", "forProvider", "color")
	if err := h.Client().Create(ctx, g); err != nil {
		t.Fatalf("cannot create a Gadget: its CRD is not served: %v", err)
	}
}

// garbageCollection checks kube-controller-manager collects dependents.
func (s *story) garbageCollection(t *testing.T) {
	ctx, h, tools := s.ctx, s.h, s.tools
	// Crossplane deletes composed resources, package revisions and
	// MRD-owned CRDs through ownerReferences: only kube-controller-
	// manager's garbage collector acts on those.
	if tools.KubeControllerManager == "" {
		t.Skip("set KUBE_CONTROLLER_MANAGER_BIN to run kube-controller-manager's garbage collector")
	}
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gc-owner"}}
	if err := h.Client().Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gc-dependent", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
	}}}}
	if err := h.Client().Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	if err := h.Client().Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "dependent garbage collected", func(ctx context.Context) error {
		err := h.Client().Get(ctx, client.ObjectKeyFromObject(dep), &corev1.ConfigMap{})
		if kerrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("dependent still exists (get error: %w)", err)
	})
}

// dumpDiagnostics checks the diagnostics hold what a failure needs.
func (s *story) dumpDiagnostics(t *testing.T) {
	ctx, h := s.ctx, s.h
	d, err := h.DumpDiagnostics(ctx, "")
	if err != nil {
		t.Fatalf("DumpDiagnostics(...): %v", err)
	}
	for _, f := range []string{
		"summary.txt", "events.txt", "secrets.txt", "crds.txt",
		"resources/functions.pkg.crossplane.io.yaml",
		"resources/functionrevisions.pkg.crossplane.io.yaml",
		"resources/providerrevisions.pkg.crossplane.io.yaml",
		"resources/managedresourcedefinitions.apiextensions.crossplane.io.yaml",
		"resources/compositeresourcedefinitions.apiextensions.crossplane.io.yaml",
		"resources/compositions.apiextensions.crossplane.io.yaml",
		"resources/xprobes.harness.example.org.yaml",
		"resources/gadgets.smoke.example.org.yaml",
		"logs/crossplane.log", "logs/crossplane-rbac-manager.log",
		"logs/kube-apiserver.log", "logs/etcd.log", "logs/registry.log",
	} {
		if _, err := os.Stat(filepath.Join(d, f)); err != nil {
			t.Errorf("diagnostics lack %s: %v", f, err)
		}
	}
	for _, pkg := range []string{"function-auto-ready", "provider-smoke"} {
		if m, _ := filepath.Glob(filepath.Join(d, "logs", "pod-"+pkg+"-*.log")); len(m) == 0 {
			t.Errorf("diagnostics lack the log of %s's pod (logs/pod-%s-*.log)", pkg, pkg)
		}
	}
	if _, err := os.Stat(filepath.Join(d, "errors.txt")); err == nil {
		b, _ := os.ReadFile(filepath.Join(d, "errors.txt"))
		t.Errorf("diagnostics reported errors:\n%s", b)
	}
	b, _ := os.ReadFile(filepath.Join(d, "secrets.txt"))
	if strings.Contains(string(b), "BEGIN") {
		t.Errorf("secrets.txt contains Secret data")
	}
}

const probeXRD = `apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata:
  name: xprobes.harness.example.org
spec:
  scope: Namespaced
  group: harness.example.org
  names:
    kind: XProbe
    plural: xprobes
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              note:
                type: string
`

const probeComposition = `apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: xprobes
spec:
  compositeTypeRef:
    apiVersion: harness.example.org/v1alpha1
    kind: XProbe
  mode: Pipeline
  pipeline:
  - step: auto-ready
    functionRef:
      name: function-auto-ready
`

const probeXR = `apiVersion: harness.example.org/v1alpha1
kind: XProbe
metadata:
  namespace: default
  name: probe
spec:
  note: hello
  crossplane:
    compositionRef:
      name: xprobes
`

const smokeProviderMeta = `apiVersion: meta.pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-smoke
spec:
  crossplane:
    version: ">=v2.0.0"
`

const smokeGadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.smoke.example.org
spec:
  group: smoke.example.org
  names:
    kind: Gadget
    listKind: GadgetList
    plural: gadgets
    singular: gadget
    categories: [crossplane, managed]
  scope: Namespaced
  # Crossplane fills in the service's name, namespace and port and the
  # caBundle; the path is the provider's to say.
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        service:
          path: /convert
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources:
      status: {}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
  - name: v1beta1
    served: true
    storage: false
    subresources:
      status: {}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
`

const smokeProviderConfigCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: providerconfigs.smoke.example.org
spec:
  group: smoke.example.org
  names:
    kind: ProviderConfig
    listKind: ProviderConfigList
    plural: providerconfigs
    singular: providerconfig
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
`
