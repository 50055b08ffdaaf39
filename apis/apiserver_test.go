package apis_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	webhookconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/widgetco/crossplane-widget/apis"
	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/test/lib/kube"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
)

// TestAPIServer installs the generated CRDs in a real kube-apiserver (envtest)
// and checks that it accepts valid objects, rejects invalid ones with the
// message the CRD promises, applies the CRDs' defaults, and converts Widgets
// and WidgetKeys between v1alpha1 and v1beta1 with the real conversion
// webhook, served in-process. It needs the kube-apiserver and etcd binaries;
// it is skipped unless KUBEBUILDER_ASSETS points at them
// (eval "$(bash hack/tools.sh env)").
func TestAPIServer(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip(`KUBEBUILDER_ASSETS is not set; run eval "$(bash hack/tools.sh env)" to test the CRDs against a real API server`)
	}
	c, reviews := startAPIServer(t)
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}); err != nil {
		t.Fatalf("cannot create namespace: %v", err)
	}

	t.Run("ValidationV1alpha1", func(t *testing.T) { testWrites(t, c, "v1alpha1", v1alpha1WriteCases()) })
	t.Run("ValidationV1beta1", func(t *testing.T) { testWrites(t, c, "v1beta1", v1beta1WriteCases()) })
	t.Run("ValidationRotation", func(t *testing.T) { testWrites(t, c, "rotation", rotationWriteCases()) })
	t.Run("RotationAnnotation", func(t *testing.T) { testRotationAnnotation(t, c) })
	t.Run("Defaults", func(t *testing.T) { testDefaults(t, c) })
	t.Run("Conversion", func(t *testing.T) { testConversion(t, c) })
	t.Run("Annotation", func(t *testing.T) { testAnnotation(t, c) })
	t.Run("ReviewSize", func(t *testing.T) { testReviewSize(t, c, reviews) })
	t.Run("Examples", func(t *testing.T) { testExamples(t, c) })
}

const testNamespace = "team-a"

// convertedCRDs are the CRDs that serve two versions and so need the
// conversion webhook.
var convertedCRDs = []string{
	"widgets.widget.m.widgetco.io",
	"widgetkeys.widget.m.widgetco.io",
	"widgets.widget.widgetco.io",
	"widgetkeys.widget.widgetco.io",
}

// startAPIServer starts kube-apiserver and etcd with the generated CRDs, and
// the conversion webhook those CRDs declare, and returns an admin client
// whose scheme knows every kind and version of package apis, and the log of
// the ConversionReviews the webhook served.
//
// envtest points the conversion webhook of every CRD whose kind the scheme
// knows as convertible (a v1beta1 hub, v1alpha1 spokes) at a local URL, with
// a CA it generates; the webhook is served here by controller-runtime's
// conversion handler, the one the provider serves at /convert, converting
// with the API types' own ConvertTo and ConvertFrom.
func startAPIServer(t testing.TB) (client.WithWatch, *reviewLog) {
	t.Helper()
	// controller-runtime logs through its global logger; conversion failures
	// reach the tests as the API server's errors.
	ctrllog.SetLogger(logr.Discard())

	s := runtime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		t.Fatalf("AddToScheme(): %v", err)
	}
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatalf("corev1.AddToScheme(): %v", err)
	}
	if err := extv1.AddToScheme(s); err != nil {
		t.Fatalf("extv1.AddToScheme(): %v", err)
	}

	// The scheme tells the API server which CRDs' conversion webhooks to
	// call locally; the conversion of any other CRD is removed.
	env, err := kube.Start(kube.Options{CRDDirs: []string{crdDir}, ConversionScheme: s, Scheme: s})
	if errors.Is(err, kube.ErrNoAssets) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("cannot stop kube-apiserver and etcd: %v", err)
		}
	})

	wo := env.ConversionWebhook()
	srv := webhook.NewServer(webhook.Options{Host: wo.Host, Port: wo.Port, CertDir: wo.CertDir})
	reviews := &reviewLog{}
	srv.Register("/convert", reviews.wrap(webhookconversion.NewWebhookHandler(s, webhookconversion.NewRegistry())))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Start(ctx) }()
	// Cleanups run last in, first out: the webhook stops before the API
	// server does.
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("conversion webhook server: %v", err)
		}
	})
	started := srv.StartedChecker()
	wait.For(t, 30*time.Second, "the conversion webhook server to serve", func() error {
		select {
		case err := <-stopped:
			stopped <- err // For the cleanup.
			t.Fatalf("the conversion webhook server stopped before it served: %v", err)
		default:
		}
		return started(&http.Request{})
	})

	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatalf("cannot create client: %v", err)
	}

	// envtest silently drops the conversion of a CRD whose kind the scheme
	// does not know as convertible; the tests below would then not run the
	// webhook at all.
	for _, name := range convertedCRDs {
		crd := &extv1.CustomResourceDefinition{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatalf("cannot get CRD %s: %v", name, err)
		}
		if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != extv1.WebhookConverter {
			t.Fatalf("CRD %s was installed without its conversion webhook: %+v", name, crd.Spec.Conversion)
		}
	}
	return c, reviews
}

// A writeCase is one write, or a create and then a write, that the API
// server must accept or reject.
type writeCase struct {
	reason string
	// create is created first; it must be accepted when update or patch
	// is set.
	create client.Object
	// update, if set, changes the created object, which is then updated.
	update func(o client.Object)
	// status makes the update a status update.
	status bool
	// patch, if set, is a JSON merge patch applied to the created object:
	// for writes a typed client cannot make, such as removing a field that
	// is not a pointer.
	patch string
	// wantErr is part of the API server's message rejecting the last
	// write, or "" if the write must be accepted.
	wantErr string
}

// testWrites runs cases against the API server. Each case's object is named
// after the case, prefixed by prefix: cases of different versions of a kind
// name objects of the same resource.
func testWrites(t *testing.T, c client.Client, prefix string, cases map[string]writeCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			tc.create.SetName(prefix + "-" + strings.ToLower(name))
			err := c.Create(ctx, tc.create)
			if tc.update != nil || tc.patch != "" {
				if err != nil {
					t.Fatalf("%s\nCreate(): %v", tc.reason, err)
				}
				switch {
				case tc.patch != "":
					err = c.Patch(ctx, tc.create, client.RawPatch(types.MergePatchType, []byte(tc.patch)))
				case tc.status:
					tc.update(tc.create)
					err = c.Status().Update(ctx, tc.create)
				default:
					tc.update(tc.create)
					err = c.Update(ctx, tc.create)
				}
			}
			var problem string
			switch {
			case tc.wantErr == "" && err != nil:
				problem = fmt.Sprintf("want the write accepted, got: %v", err)
			case tc.wantErr != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantErr)):
				problem = fmt.Sprintf("want the write rejected as invalid with %q, got: %v", tc.wantErr, err)
			}
			if problem != "" {
				t.Errorf("%s\n%s", tc.reason, problem)
			}
		})
	}
}

// testDefaults creates Widgets that leave every defaulted field unset, in
// each version, and checks what the API server set.
func testDefaults(t *testing.T, c client.Client) {
	ctx := context.Background()

	type nsManaged interface {
		client.Object
		GetProviderConfigReference() *xpv2.ProviderConfigReference
		GetManagementPolicies() xpv2.ManagementPolicies
	}
	namespaced := map[string]nsManaged{
		"v1alpha1": nsWidget(commonv1alpha1.WidgetParameters{}),
		"v1beta1":  nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: ptr.To("small")}}),
	}
	for version, w := range namespaced {
		w.SetName("defaults-" + version)
		if err := c.Create(ctx, w); err != nil {
			t.Fatalf("Create() in %s: %v", version, err)
		}
		if diff := cmp.Diff(&xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"}, w.GetProviderConfigReference()); diff != "" {
			t.Errorf("A namespaced %s Widget without a providerConfigRef should use the ClusterProviderConfig named default: -want, +got:\n%s", version, diff)
		}
		if diff := cmp.Diff(xpv2.ManagementPolicies{xpv2.ManagementActionAll}, w.GetManagementPolicies()); diff != "" {
			t.Errorf("A namespaced %s Widget should be fully managed by default: -want, +got:\n%s", version, diff)
		}
	}

	type clManaged interface {
		client.Object
		GetProviderConfigReference() *xpv2.Reference
		GetDeletionPolicy() xpv2.DeletionPolicy
	}
	cluster := map[string]clManaged{
		"v1alpha1": clWidget(commonv1alpha1.WidgetParameters{}),
		"v1beta1":  clWidgetV1beta1(clusterv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: ptr.To("small")}}),
	}
	for version, w := range cluster {
		w.SetName("defaults-" + version)
		if err := c.Create(ctx, w); err != nil {
			t.Fatalf("Create() in %s: %v", version, err)
		}
		if diff := cmp.Diff(&xpv2.Reference{Name: "default"}, w.GetProviderConfigReference()); diff != "" {
			t.Errorf("A cluster-scoped %s Widget without a providerConfigRef should use the ProviderConfig named default: -want, +got:\n%s", version, diff)
		}
		if diff := cmp.Diff(xpv2.DeletionDelete, w.GetDeletionPolicy()); diff != "" {
			t.Errorf("A cluster-scoped %s Widget should delete its widget by default: -want, +got:\n%s", version, diff)
		}
	}
}
