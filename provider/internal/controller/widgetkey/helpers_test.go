package widgetkey

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/names"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

var errBoom = errors.New("boom")

// timeout bounds every wait: generous, for a slow shared machine.
const timeout = 30 * time.Second

const (
	widgetName   = "w"
	secretName   = "ci-connection"
	clusterSecNS = "crossplane-system"
)

func newNamespaced() *nsv1beta1.WidgetKey {
	return &nsv1beta1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ci"}}
}

func newCluster() *clusterv1beta1.WidgetKey {
	return &clusterv1beta1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Name: "ci"}}
}

type mod func(mg commonv1beta1.WidgetKeyResource)

func explicitName(n string) mod {
	return func(mg commonv1beta1.WidgetKeyResource) { meta.SetExternalName(mg, n) }
}

// defaultName gives the resource the external name the provider chooses,
// and marks a create pending under it, as the reconciler does before every
// create.
func defaultName() mod {
	return func(mg commonv1beta1.WidgetKeyResource) {
		chosenName()(mg)
		meta.SetExternalCreatePending(mg, time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	}
}

// chosenName gives the resource the external name the provider chooses, as
// its initializer does before the first create.
func chosenName() mod {
	return func(mg commonv1beta1.WidgetKeyResource) {
		n := names.Default(mg)
		meta.SetExternalName(mg, n)
		meta.AddAnnotations(mg, map[string]string{names.AnnotationDefaultExternalName: n})
	}
}

// forWidget sets the key's widget, as widgetName or a resolved reference
// would.
func forWidget(n string) mod {
	return func(mg commonv1beta1.WidgetKeyResource) {
		switch m := any(mg).(type) {
		case *nsv1beta1.WidgetKey:
			m.Spec.ForProvider.WidgetName = &n
		case *clusterv1beta1.WidgetKey:
			m.Spec.ForProvider.WidgetName = &n
		}
	}
}

// described sets the key's description, which only spec.initProvider has:
// the Widget API cannot change a key.
func described(d string) mod {
	return func(mg commonv1beta1.WidgetKeyResource) { mg.GetWidgetKeyInitParameters().Description = &d }
}

// writesSecret makes the resource write its connection details to a Secret.
func writesSecret() mod {
	return func(mg commonv1beta1.WidgetKeyResource) {
		switch m := any(mg).(type) {
		case *nsv1beta1.WidgetKey:
			m.SetWriteConnectionSecretToReference(&xpv2.LocalSecretReference{Name: secretName})
		case *clusterv1beta1.WidgetKey:
			m.SetWriteConnectionSecretToReference(&xpv2.SecretReference{Namespace: clusterSecNS, Name: secretName})
		}
	}
}

// secretKey is where mg's connection Secret lives.
func secretKey(mg commonv1beta1.WidgetKeyResource) types.NamespacedName {
	if mg.GetNamespace() != "" {
		return types.NamespacedName{Namespace: mg.GetNamespace(), Name: secretName}
	}
	return types.NamespacedName{Namespace: clusterSecNS, Name: secretName}
}

// recordedID records a key ID in status, as anyone who may edit the
// resource's status can.
func recordedID(id string) mod {
	return func(mg commonv1beta1.WidgetKeyResource) {
		mg.SetWidgetKeyObservation(commonv1beta1.WidgetKeyObservation{ID: id})
	}
}

func deleted() mod {
	return func(mg commonv1beta1.WidgetKeyResource) {
		now := metav1.Now()
		mg.SetDeletionTimestamp(&now)
	}
}

func observeOnlyPolicy() mod {
	return func(mg commonv1beta1.WidgetKeyResource) {
		mg.SetManagementPolicies(xpv2.ManagementPolicies{xpv2.ManagementActionObserve})
	}
}

// A secretState is what a Secret reader finds.
type secretState int

const (
	// secretAbsent: no connection Secret.
	secretAbsent secretState = iota
	// secretWithKey: the connection Secret holds the key's secret.
	secretWithKey
	// secretWithoutKey: the connection Secret exists without the key's
	// secret (e.g. only the endpoint was written).
	secretWithoutKey
	// secretError: reading the Secret fails.
	secretError
)

// fakeReader is a SecretReader that finds a Secret in a given state, and
// records the keys it was asked for. Its hook, if any, runs on each Get.
type fakeReader struct {
	GetFn func(ctx context.Context, key client.ObjectKey, obj client.Object) error
	gets  []types.NamespacedName
}

func (r *fakeReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.gets = append(r.gets, key)
	return r.GetFn(ctx, key, obj)
}

func reader(s secretState, hook func()) *fakeReader {
	return &fakeReader{GetFn: func(_ context.Context, key client.ObjectKey, obj client.Object) error {
		if hook != nil {
			hook()
		}
		sec, ok := obj.(*corev1.Secret)
		if !ok {
			return errors.New("not a Secret")
		}
		switch s {
		case secretWithKey:
			sec.Data = map[string][]byte{DetailKey: []byte("wks_recorded"), DetailKeyName: []byte("k")}
		case secretWithoutKey:
			sec.Data = map[string][]byte{DetailEndpoint: []byte("https://x")}
		case secretError:
			return errBoom
		default:
			return kerrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
		}
		return nil
	}}
}

// apiError checks that err wraps the Widget API error that want recognises
// (nil: nothing to check). The session a controller gets throttles on 429s
// itself (clients.Session, tested there); here the controller must hand the
// API's error back.
func apiError(t *testing.T, reason string, err error, want func(error) bool) {
	t.Helper()
	if want != nil && !want(err) {
		t.Errorf("%s\nerror %v does not wrap the wanted Widget API error", reason, err)
	}
}

func isRateLimited(err error) bool { _, ok := widgetapi.IsRateLimited(err); return ok }

// rateLimitedSlowProvisioning also keeps widgets Provisioning, so seeding
// them costs a fixed number of calls.
func rateLimitedSlowProvisioning(o *server.Options) {
	apitest.RateLimited(o)
	o.ProvisionDelay = time.Hour
}

// ownedWidget returns the labels of a widget that a Widget managed resource
// named like the widget, in mg's scope and namespace, manages.
func ownedWidget(mg commonv1beta1.WidgetKeyResource) map[string]string {
	if ns := mg.GetNamespace(); ns != "" {
		return map[string]string{ownership.OwnerLabel: "n_" + ns + "." + widgetName}
	}
	return map[string]string{ownership.OwnerLabel: "c_" + widgetName}
}

// seedWidget creates the widget with labels and waits for state.
func seedWidget(t *testing.T, api *widgetapi.Client, state widgetapi.State, labels map[string]string) *widgetapi.Widget {
	t.Helper()
	if _, err := api.CreateWidget(t.Context(), widgetapi.CreateWidgetRequest{Name: widgetName, Labels: labels}); err != nil {
		t.Fatalf("cannot seed widget: %v", err)
	}
	deadline := time.Now().Add(timeout)
	for {
		w, err := api.GetWidget(t.Context(), widgetName)
		if err != nil {
			t.Fatalf("cannot get widget: %v", err)
		}
		if w.State == state {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for widget to be %s; it is %s", timeout, state, w.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// seedKey creates a key of the widget with labels (ownership.Labels of the
// resource that created it, or nil for a key made outside Crossplane).
func seedKey(t *testing.T, api *widgetapi.Client, name, desc string, labels map[string]string) *widgetapi.Key {
	t.Helper()
	k, err := api.CreateKey(t.Context(), widgetName, widgetapi.CreateKeyRequest{Name: name, Description: desc, Labels: labels})
	if err != nil {
		t.Fatalf("cannot seed key %s: %v", name, err)
	}
	return &k.Key
}

func keyExists(t *testing.T, api *widgetapi.Client, name string) bool {
	t.Helper()
	_, err := api.GetKey(t.Context(), widgetName, name)
	if err != nil && !widgetapi.IsNotFound(err) {
		t.Fatalf("cannot get key %s: %v", name, err)
	}
	return err == nil
}

var (
	ignoreTransitionTime = cmpopts.IgnoreFields(xpv2.Condition{}, "LastTransitionTime")
	noReady              = xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionUnknown}
)

// A widgetSeed says whether and how the widget exists before the test.
type widgetSeed int

const (
	noWidget widgetSeed = iota
	readyWidget
	provisioningWidget
)

// hookAPI runs beforeGetKey before each GetKey.
type hookAPI struct {
	API
	beforeGetKey func()
}

func (a *hookAPI) GetKey(ctx context.Context, widget, key string) (*widgetapi.Key, error) {
	a.beforeGetKey()
	return a.API.GetKey(ctx, widget, key)
}
