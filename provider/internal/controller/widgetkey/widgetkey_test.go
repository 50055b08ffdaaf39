package widgetkey

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	"github.com/widgetco/crossplane-widget/provider/internal/clients"
	"github.com/widgetco/crossplane-widget/provider/internal/names"
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

func newNamespaced() *nsv1alpha1.WidgetKey {
	return &nsv1alpha1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ci"}}
}

func newCluster() *clusterv1alpha1.WidgetKey {
	return &clusterv1alpha1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Name: "ci"}}
}

type mod func(mg commonv1alpha1.WidgetKeyResource)

func explicitName(n string) mod {
	return func(mg commonv1alpha1.WidgetKeyResource) { meta.SetExternalName(mg, n) }
}

func defaultName() mod {
	return func(mg commonv1alpha1.WidgetKeyResource) {
		n := names.Default(mg)
		meta.SetExternalName(mg, n)
		meta.AddAnnotations(mg, map[string]string{names.AnnotationDefaultExternalName: n})
	}
}

// forWidget sets the key's widget, as widgetName or a resolved reference
// would.
func forWidget(n string) mod {
	return func(mg commonv1alpha1.WidgetKeyResource) {
		switch m := any(mg).(type) {
		case *nsv1alpha1.WidgetKey:
			m.Spec.ForProvider.WidgetName = &n
		case *clusterv1alpha1.WidgetKey:
			m.Spec.ForProvider.WidgetName = &n
		}
	}
}

func described(d string) mod {
	return func(mg commonv1alpha1.WidgetKeyResource) { mg.GetWidgetKeyParameters().Description = &d }
}

// writesSecret makes the resource write its connection details to a Secret.
func writesSecret() mod {
	return func(mg commonv1alpha1.WidgetKeyResource) {
		switch m := any(mg).(type) {
		case *nsv1alpha1.WidgetKey:
			m.SetWriteConnectionSecretToReference(&xpv2.LocalSecretReference{Name: secretName})
		case *clusterv1alpha1.WidgetKey:
			m.SetWriteConnectionSecretToReference(&xpv2.SecretReference{Namespace: clusterSecNS, Name: secretName})
		}
	}
}

// secretKey is where mg's connection Secret lives.
func secretKey(mg commonv1alpha1.WidgetKeyResource) types.NamespacedName {
	if mg.GetNamespace() != "" {
		return types.NamespacedName{Namespace: mg.GetNamespace(), Name: secretName}
	}
	return types.NamespacedName{Namespace: clusterSecNS, Name: secretName}
}

func deleted() mod {
	return func(mg commonv1alpha1.WidgetKeyResource) {
		now := metav1.Now()
		mg.SetDeletionTimestamp(&now)
	}
}

func observeOnlyPolicy() mod {
	return func(mg commonv1alpha1.WidgetKeyResource) {
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

type fakeRecorder struct{ events []event.Event }

func (r *fakeRecorder) Event(_ runtime.Object, e event.Event)    { r.events = append(r.events, e) }
func (r *fakeRecorder) WithAnnotations(...string) event.Recorder { return r }

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

func rateLimited(o *server.Options) { o.RateLimit = 0.001; o.RateBurst = 20 }

// rateLimitedSlowProvisioning also keeps widgets Provisioning, so seeding
// them costs a fixed number of calls.
func rateLimitedSlowProvisioning(o *server.Options) {
	rateLimited(o)
	o.ProvisionDelay = time.Hour
}

// exhaust uses up the token's rate limit.
func exhaust(t *testing.T, api *widgetapi.Client) {
	t.Helper()
	for range 1000 {
		_, err := api.ListWidgets(context.Background(), widgetapi.ListWidgetsOptions{})
		if isRateLimited(err) {
			return
		}
		if err != nil {
			t.Fatalf("cannot list widgets: %v", err)
		}
	}
	t.Fatal("the Widget API is not rate limiting after 1000 calls")
}

// ownedWidget returns the labels of a widget that a Widget managed resource
// named like the widget, in mg's scope and namespace, manages.
func ownedWidget(mg commonv1alpha1.WidgetKeyResource) map[string]string {
	if ns := mg.GetNamespace(); ns != "" {
		return map[string]string{names.OwnerLabel: "n_" + ns + "." + widgetName}
	}
	return map[string]string{names.OwnerLabel: "c_" + widgetName}
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

// seedKey creates a key of the widget with labels (names.Markers of the
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

func TestObserve(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) { testObserve(t, newNamespaced) })
	t.Run("Cluster", func(t *testing.T) { testObserve(t, newCluster) })
}

func testObserve[T commonv1alpha1.WidgetKeyResource](t *testing.T, newMG func() T) {
	type want struct {
		exists bool
		// status says whether status.atProvider shows the key.
		status bool
		// endpoint says whether the widget's endpoint is a connection
		// detail.
		endpoint bool
		err      error
		mentions []string
		checked  func(error) bool
		ready    xpv2.Condition
		// keyKept says whether the key still exists in the API afterwards.
		keyKept bool
		// lost says the key was found without its secret, for Create to
		// replace.
		lost bool
		// cache and live say whether each reader was consulted.
		cache, live bool
	}
	cases := map[string]struct {
		reason string
		server func(*server.Options)
		widget widgetSeed
		// key is the description of a key to seed under the resource's
		// external name; nil for none.
		key  *string
		mods []mod
		// cache and live are what each Secret reader finds.
		cache, live secretState
		// exhaust uses up the rate limit before Observe.
		exhaust bool
		// beforeGetKey runs between reading the widget and the key.
		beforeGetKey func(t *testing.T, api *widgetapi.Client)
		want         want
	}{
		"NoExternalName": {
			reason: "A resource without an external name has no key yet.",
			mods:   []mod{forWidget(widgetName)},
			want:   want{ready: noReady},
		},
		"InvalidExternalName": {
			reason: "An external name the API could never accept is an error saying what a valid name is.",
			mods:   []mod{explicitName("Bad_Key"), forWidget(widgetName)},
			want:   want{err: cmpopts.AnyError, mentions: []string{`"Bad_Key"`}, ready: noReady},
		},
		"WidgetNameUnresolved": {
			reason: "A key whose widget is not known yet is an error saying how to name it.",
			mods:   []mod{defaultName()},
			want:   want{err: cmpopts.AnyError, mentions: []string{"spec.forProvider.widgetName", "widgetNameRef"}, ready: noReady},
		},
		"WidgetNameUnresolvedWhileDeleting": {
			reason: "A key that never knew its widget can be deleted: it has no key.",
			mods:   []mod{defaultName(), deleted()},
			want:   want{ready: noReady},
		},
		"WidgetMissing": {
			reason: "A key of a widget that does not exist does not exist.",
			mods:   []mod{defaultName(), forWidget(widgetName)},
			want:   want{ready: noReady},
		},
		"KeyMissing": {
			reason: "A key that does not exist is reported as such, so it is created.",
			widget: readyWidget,
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret()},
			want:   want{ready: noReady},
		},
		"SecretRecorded": {
			reason: "A key whose secret is in the connection Secret exists, is Ready, and publishes its name, widget and the widget's endpoint.",
			widget: readyWidget,
			key:    ptr.To("ci"),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret()},
			cache:  secretWithKey,
			want:   want{exists: true, status: true, endpoint: true, ready: xpv2.Available(), keyKept: true, cache: true},
		},
		"WidgetNotReady": {
			reason: "The endpoint is published only once the widget has one.",
			server: func(o *server.Options) { o.ProvisionDelay = time.Hour },
			widget: provisioningWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret()},
			cache:  secretWithKey,
			want:   want{exists: true, status: true, ready: xpv2.Available(), keyKept: true, cache: true},
		},
		"NoConnectionSecret": {
			reason: "A resource that writes no connection Secret has nothing to lose: the key exists as is.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName)},
			want:   want{exists: true, status: true, endpoint: true, ready: xpv2.Available(), keyKept: true},
		},
		"SecretLostDefaultName": {
			reason: "A key whose secret never reached the connection Secret is useless: under a defaulted name it is reported missing and marked lost, so Create replaces it; Observe itself changes nothing.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret()},
			want:   want{ready: noReady, lost: true, keyKept: true, cache: true, live: true},
		},
		"SecretWithoutKeyDefaultName": {
			reason: "A connection Secret without the key's secret is as good as none.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret()},
			cache:  secretWithoutKey,
			live:   secretWithoutKey,
			want:   want{ready: noReady, lost: true, keyKept: true, cache: true, live: true},
		},
		"SecretLostExplicitName": {
			reason: "A key named explicitly is never revoked by the provider: an error says what to do.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{explicitName("imported-key"), forWidget(widgetName), writesSecret()},
			want: want{
				err: cmpopts.AnyError, mentions: []string{"imported-key", "crossplane.io/external-name"},
				ready: noReady, keyKept: true, cache: true, live: true,
			},
		},
		"CacheLags": {
			reason: "A Secret the cache does not show yet but the API server has is not lost: the key is not rotated.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret()},
			cache:  secretAbsent,
			live:   secretWithKey,
			want:   want{exists: true, status: true, endpoint: true, ready: xpv2.Available(), keyKept: true, cache: true, live: true},
		},
		"ObserveOnly": {
			reason: "An observe-only resource never rotates a key, and does not look for its secret.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret(), observeOnlyPolicy()},
			want:   want{exists: true, status: true, endpoint: true, ready: xpv2.Available(), keyKept: true},
		},
		"Deleting": {
			reason: "A resource being deleted reports its key, whatever the Secret holds, so it is revoked.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret(), deleted()},
			want:   want{exists: true, status: true, endpoint: true, ready: xpv2.Available(), keyKept: true},
		},
		"CacheFails": {
			reason: "An error reading the connection Secret is returned; nothing is rotated.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret()},
			cache:  secretError,
			want:   want{err: errBoom, ready: noReady, keyKept: true, cache: true},
		},
		"LiveFails": {
			reason: "An error confirming a missing Secret with the API server is returned; nothing is rotated.",
			widget: readyWidget,
			key:    ptr.To(""),
			mods:   []mod{defaultName(), forWidget(widgetName), writesSecret()},
			live:   secretError,
			want:   want{err: errBoom, ready: noReady, keyKept: true, cache: true, live: true},
		},
		"GetWidgetRateLimited": {
			reason:  "A 429 reading the key's widget goes through Check and is returned.",
			server:  rateLimitedSlowProvisioning,
			widget:  provisioningWidget,
			key:     ptr.To(""),
			mods:    []mod{defaultName(), forWidget(widgetName), writesSecret()},
			exhaust: true,
			want:    want{err: cmpopts.AnyError, checked: isRateLimited, ready: noReady, keyKept: true},
		},
		"GetKeyRateLimited": {
			reason:       "A 429 reading the key goes through Check and is returned.",
			server:       rateLimitedSlowProvisioning,
			widget:       provisioningWidget,
			key:          ptr.To(""),
			mods:         []mod{defaultName(), forWidget(widgetName), writesSecret()},
			beforeGetKey: exhaust,
			want:         want{err: cmpopts.AnyError, checked: isRateLimited, ready: noReady, keyKept: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
				o.Tokens = map[string]string{apitest.TokenA: apitest.ProjectA, "seed-token": apitest.ProjectA}
				if tc.server != nil {
					tc.server(o)
				}
			}))
			seedAPI, api := env.Client(t, "seed-token"), env.Client(t, apitest.TokenA)
			mg := newMG()
			for _, m := range tc.mods {
				m(mg)
			}
			keyName := meta.GetExternalName(mg)
			var w *widgetapi.Widget
			switch tc.widget {
			case readyWidget:
				w = seedWidget(t, seedAPI, widgetapi.StateReady, ownedWidget(mg))
			case provisioningWidget:
				w = seedWidget(t, seedAPI, widgetapi.StateProvisioning, ownedWidget(mg))
			case noWidget:
			}
			var k *widgetapi.Key
			if tc.key != nil {
				k = seedKey(t, seedAPI, keyName, *tc.key, names.Markers(mg))
			}
			if tc.exhaust {
				exhaust(t, api)
			}
			var hooked API = api
			if tc.beforeGetKey != nil {
				hooked = &hookAPI{API: api, beforeGetKey: func() { tc.beforeGetKey(t, api) }}
			}
			cache, live := reader(tc.cache, nil), reader(tc.live, nil)
			rec := &fakeRecorder{}
			e := &external[T]{api: hooked, cache: cache, live: live, record: rec}

			got, err := e.Observe(t.Context(), mg)
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nObserve(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			for _, f := range tc.want.mentions {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("%s\nObserve(...): error %q does not mention %q", tc.reason, err, f)
				}
			}
			apiError(t, tc.reason, err, tc.want.checked)

			want := managed.ExternalObservation{}
			wantStatus := commonv1alpha1.WidgetKeyObservation{}
			if tc.want.exists {
				want = managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true,
					ConnectionDetails: managed.ConnectionDetails{DetailKeyName: []byte(keyName), DetailWidget: []byte(widgetName)}}
				if tc.want.endpoint {
					want.ConnectionDetails[DetailEndpoint] = []byte(w.Endpoint)
				}
			}
			if tc.want.status {
				wantStatus = commonv1alpha1.WidgetKeyObservation{ID: k.ID, WidgetName: widgetName, Description: k.Description,
					CreatedAt: ptr.To(metav1.NewTime(k.CreatedAt.Truncate(time.Second)))}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nObserve(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(wantStatus, *mg.GetWidgetKeyObservation()); diff != "" {
				t.Errorf("%s\nstatus.atProvider: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.ready, mg.GetCondition(xpv2.TypeReady), ignoreTransitionTime); diff != "" {
				t.Errorf("%s\nReady condition: -want, +got:\n%s", tc.reason, diff)
			}
			if k != nil {
				if got := keyExists(t, seedAPI, keyName); got != tc.want.keyKept {
					t.Errorf("%s\nkey in the API afterwards: want %t, got %t", tc.reason, tc.want.keyKept, got)
				}
			}
			if e.lost != tc.want.lost {
				t.Errorf("%s\nlost: want %t, got %t", tc.reason, tc.want.lost, e.lost)
			}
			if len(rec.events) > 0 {
				t.Errorf("%s\nObserve emitted events %v, want none", tc.reason, rec.events)
			}
			for _, r := range []struct {
				name   string
				reader *fakeReader
				want   bool
			}{{"cache", cache, tc.want.cache}, {"live", live, tc.want.live}} {
				var wantGets []types.NamespacedName
				if r.want {
					wantGets = []types.NamespacedName{secretKey(mg)}
				}
				if diff := cmp.Diff(wantGets, r.reader.gets); diff != "" {
					t.Errorf("%s\nSecrets read from the %s: -want, +got:\n%s", tc.reason, r.name, diff)
				}
			}
		})
	}
}

func TestCreate(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) { testCreate(t, newNamespaced) })
	t.Run("Cluster", func(t *testing.T) { testCreate(t, newCluster) })
}

func testCreate[T commonv1alpha1.WidgetKeyResource](t *testing.T, newMG func() T) {
	type want struct {
		err      error
		mentions []string
		checked  func(error) bool
		// created says a key was created: the connection details carry its
		// secret.
		created bool
		// description is the created key's description.
		description string
		ready       xpv2.Condition
		// rotated says a lost key was revoked, with an event.
		rotated bool
	}
	cases := map[string]struct {
		reason  string
		server  func(*server.Options)
		widget  widgetSeed
		seedKey bool
		// lost is what Observe found: the seeded key's secret was lost.
		lost bool
		// exhaust uses up the rate limit before Create.
		exhaust bool
		// deleteWidget starts deleting the widget before the test.
		deleteWidget bool
		mods         []mod
		want         want
	}{
		"SecretLost": {
			reason:  "A key whose secret was lost is revoked (with an event) and a new one created under the same name.",
			widget:  readyWidget,
			seedKey: true,
			lost:    true,
			mods:    []mod{defaultName(), forWidget(widgetName)},
			want:    want{created: true, rotated: true, ready: xpv2.Creating()},
		},
		"RevokeRateLimited": {
			reason:  "A 429 revoking a key whose secret was lost goes through Check and is returned; no event claims a rotation.",
			server:  rateLimitedSlowProvisioning,
			widget:  provisioningWidget,
			seedKey: true,
			lost:    true,
			exhaust: true,
			mods:    []mod{defaultName(), forWidget(widgetName)},
			want:    want{err: cmpopts.AnyError, checked: isRateLimited, ready: noReady},
		},
		"Created": {
			reason: "The key is created and its secret, name and widget are returned as connection details - the only place the secret goes.",
			widget: readyWidget,
			mods:   []mod{defaultName(), forWidget(widgetName), described("ci pipeline")},
			want:   want{created: true, description: "ci pipeline", ready: xpv2.Creating()},
		},
		"NoDescription": {
			reason: "A key without a description is created without one.",
			widget: readyWidget,
			mods:   []mod{explicitName("k1"), forWidget(widgetName)},
			want:   want{created: true, ready: xpv2.Creating()},
		},
		"AlreadyExists": {
			reason:  "A name taken in the meantime is an error that says so.",
			widget:  readyWidget,
			seedKey: true,
			mods:    []mod{defaultName(), forWidget(widgetName)},
			want:    want{err: cmpopts.AnyError, mentions: []string{"already has a key named"}, ready: noReady},
		},
		"WidgetMissing": {
			reason: "A key of a widget that does not exist yet is a clear error; it is created once the widget exists.",
			mods:   []mod{defaultName(), forWidget(widgetName)},
			want:   want{err: cmpopts.AnyError, mentions: []string{"widget w does not exist"}, ready: noReady},
		},
		"WidgetDeleting": {
			reason:       "Other API errors (here: the widget is being deleted) go through Check and are returned.",
			server:       func(o *server.Options) { o.DeleteDelay = time.Hour },
			widget:       readyWidget,
			deleteWidget: true,
			mods:         []mod{defaultName(), forWidget(widgetName)},
			want:         want{err: cmpopts.AnyError, checked: widgetapi.IsConflict, ready: noReady},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
				if tc.server != nil {
					tc.server(o)
				}
			}))
			api := env.Client(t, apitest.TokenA)
			mg := newMG()
			for _, m := range tc.mods {
				m(mg)
			}
			keyName := meta.GetExternalName(mg)
			var w *widgetapi.Widget
			switch tc.widget {
			case readyWidget:
				w = seedWidget(t, api, widgetapi.StateReady, ownedWidget(mg))
			case provisioningWidget:
				w = seedWidget(t, api, widgetapi.StateProvisioning, ownedWidget(mg))
			case noWidget:
			}
			var seeded *widgetapi.Key
			if tc.seedKey {
				seeded = seedKey(t, api, keyName, "", names.Markers(mg))
			}
			if tc.deleteWidget {
				if _, err := api.DeleteWidget(t.Context(), widgetName); err != nil {
					t.Fatal(err)
				}
			}
			if tc.exhaust {
				exhaust(t, api)
			}
			rec := &fakeRecorder{}
			// Observe found w within reach (the reconciler always observes
			// before it creates).
			e := &external[T]{api: env.Client(t, apitest.TokenA), record: rec, widget: w, lost: tc.lost}

			got, err := e.Create(t.Context(), mg)
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nCreate(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			for _, f := range tc.want.mentions {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("%s\nCreate(...): error %q does not mention %q", tc.reason, err, f)
				}
			}
			apiError(t, tc.reason, err, tc.want.checked)
			if diff := cmp.Diff(tc.want.ready, mg.GetCondition(xpv2.TypeReady), ignoreTransitionTime); diff != "" {
				t.Errorf("%s\nReady condition: -want, +got:\n%s", tc.reason, diff)
			}
			var wantEvents []event.Event
			if tc.want.rotated {
				wantEvents = []event.Event{event.Normal(ReasonRotated, "Key "+keyName+" existed but its secret was never recorded "+
					"(the provider stopped between creating it and saving it); revoked it to create a new one")}
			}
			if diff := cmp.Diff(wantEvents, rec.events); diff != "" {
				t.Errorf("%s\nevents: -want, +got:\n%s", tc.reason, diff)
			}
			if !tc.want.created {
				if diff := cmp.Diff(managed.ExternalCreation{}, got); diff != "" {
					t.Errorf("%s\nCreate(...): -want, +got:\n%s", tc.reason, diff)
				}
				return
			}
			secret := got.ConnectionDetails[DetailKey]
			if len(secret) == 0 {
				t.Errorf("%s\nCreate(...): no key secret in the connection details", tc.reason)
			}
			want := managed.ExternalCreation{ConnectionDetails: managed.ConnectionDetails{
				DetailKey: secret, DetailKeyName: []byte(keyName), DetailWidget: []byte(widgetName),
			}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nCreate(...): -want, +got:\n%s", tc.reason, diff)
			}
			k, err := api.GetKey(t.Context(), widgetName, keyName)
			if err != nil {
				t.Fatalf("%s\nthe created key cannot be read: %v", tc.reason, err)
			}
			if k.Description != tc.want.description {
				t.Errorf("%s\nkey description: want %q, got %q", tc.reason, tc.want.description, k.Description)
			}
			if diff := cmp.Diff(names.Markers(mg), k.Labels); diff != "" {
				t.Errorf("%s\nkey labels: the key must carry the resource's ownership markers: -want, +got:\n%s", tc.reason, diff)
			}
			if seeded != nil && k.ID == seeded.ID {
				t.Errorf("%s\nthe key is still the lost one (ID %s): want a new key", tc.reason, k.ID)
			}
			if diff := cmp.Diff(commonv1alpha1.WidgetKeyObservation{}, *mg.GetWidgetKeyObservation()); diff != "" {
				t.Errorf("%s\nstatus.atProvider is left to Observe: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) { testDelete(t, newNamespaced) })
	t.Run("Cluster", func(t *testing.T) { testDelete(t, newCluster) })
}

func testDelete[T commonv1alpha1.WidgetKeyResource](t *testing.T, newMG func() T) {
	type want struct {
		err     error
		checked func(error) bool
		// calls is the number of Widget API calls Delete makes.
		calls int32
	}
	cases := map[string]struct {
		reason  string
		server  func(*server.Options)
		seedKey bool
		mods    []mod
		exhaust bool
		want    want
	}{
		"Exists": {
			reason:  "Deleting a key revokes it.",
			seedKey: true,
			mods:    []mod{defaultName(), forWidget(widgetName)},
			want:    want{calls: 1},
		},
		"Missing": {
			reason: "A key that is already gone is deleted: success.",
			mods:   []mod{defaultName(), forWidget(widgetName)},
			want:   want{calls: 1},
		},
		"WidgetNameUnresolved": {
			reason: "A key that never knew its widget has nothing to revoke, and calls nothing.",
			mods:   []mod{defaultName()},
		},
		"RateLimited": {
			reason:  "A 429 goes through Check and is returned.",
			server:  rateLimited,
			seedKey: true,
			mods:    []mod{defaultName(), forWidget(widgetName)},
			exhaust: true,
			want:    want{err: cmpopts.AnyError, checked: isRateLimited, calls: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
				o.Tokens = map[string]string{apitest.TokenA: apitest.ProjectA, "seed-token": apitest.ProjectA}
				o.ProvisionDelay = time.Hour
				if tc.server != nil {
					tc.server(o)
				}
			}))
			seedAPI := env.Client(t, "seed-token")
			var calls atomic.Int32
			api := env.Client(t, apitest.TokenA, widgetapi.WithObserver(func(string, int, time.Duration) { calls.Add(1) }))
			mg := newMG()
			for _, m := range tc.mods {
				m(mg)
			}
			deleted()(mg)
			keyName := meta.GetExternalName(mg)
			seedWidget(t, seedAPI, widgetapi.StateProvisioning, ownedWidget(mg))
			if tc.seedKey {
				seedKey(t, seedAPI, keyName, "", names.Markers(mg))
			}
			if tc.exhaust {
				exhaust(t, api)
				calls.Store(0)
			}
			e := &external[T]{api: api, record: &fakeRecorder{}}

			got, err := e.Delete(t.Context(), mg)
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nDelete(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			apiError(t, tc.reason, err, tc.want.checked)
			if diff := cmp.Diff(managed.ExternalDelete{}, got); diff != "" {
				t.Errorf("%s\nDelete(...): -want, +got:\n%s", tc.reason, diff)
			}
			if got := calls.Load(); got != tc.want.calls {
				t.Errorf("%s\nWidget API calls: want %d, got %d", tc.reason, tc.want.calls, got)
			}
			if tc.seedKey && err == nil && keyExists(t, seedAPI, keyName) {
				t.Errorf("%s\nthe key still exists after Delete", tc.reason)
			}
		})
	}
}

func TestUpdateAndDisconnect(t *testing.T) {
	e := &external[*nsv1alpha1.WidgetKey]{}
	got, err := e.Update(t.Context(), newNamespaced())
	if diff := cmp.Diff(managed.ExternalUpdate{}, got); diff != "" || err != nil {
		t.Errorf("Update(...): keys have nothing to update; got %v, %v", got, err)
	}
	if err := e.Disconnect(t.Context()); err != nil {
		t.Errorf("Disconnect(...): want nil, got %v", err)
	}
}

// hookAPI runs beforeGetKey before each GetKey.
type hookAPI struct {
	API
	beforeGetKey func()
}

func (a *hookAPI) GetKey(ctx context.Context, widget, key string) (*widgetapi.Key, error) {
	a.beforeGetKey()
	return a.API.GetKey(ctx, widget, key)
}

// fakeKube serves objs by Go type and key, and accepts the
// ProviderConfigUsages the Resolver records.
func fakeKube(objs ...client.Object) *test.MockClient {
	return &test.MockClient{
		MockGet: func(_ context.Context, key client.ObjectKey, obj client.Object) error {
			for _, o := range objs {
				if reflect.TypeOf(o) == reflect.TypeOf(obj) && o.GetName() == key.Name && o.GetNamespace() == key.Namespace {
					reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(o.DeepCopyObject()).Elem())
					return nil
				}
			}
			return kerrors.NewNotFound(schema.GroupResource{}, key.Name)
		},
		MockCreate: test.NewMockCreateFn(nil),
	}
}

type nopDelayer struct{}

func (nopDelayer) After(reconcile.Request, time.Duration) {}

type fakeFollower struct{ widgets []string }

func (f *fakeFollower) Follow(_ *clients.Connection, _, widget string, _ types.NamespacedName) {
	f.widgets = append(f.widgets, widget)
}

func (f *fakeFollower) Seen(*clients.Connection, string, string, types.NamespacedName, int64, widgetapi.State) {
}

// TestConnect checks that a key connects through its ProviderConfig and
// follows the changes of its widget (not of a widget named like the key).
func TestConnect(t *testing.T) {
	env := apitest.Start(t)
	pc := &clusterv1alpha1.ProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: commonv1alpha1.ProviderConfigSpec{
			APIConnection: commonv1alpha1.APIConnection{Endpoint: env.URL},
			Credentials: commonv1alpha1.ProviderCredentials{Source: xpv2.CredentialsSourceSecret,
				SecretRef: &xpv2.SecretKeySelector{SecretReference: xpv2.SecretReference{Namespace: clusterSecNS, Name: "token"}, Key: "token"}},
		},
	}
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: clusterSecNS, Name: "token"}, Data: map[string][]byte{"token": []byte(apitest.TokenA)}}

	cases := map[string]struct {
		reason      string
		objs        []client.Object
		wantErr     error
		wantFollows []string
	}{
		"Connected": {
			reason:      "A key connects and follows its widget.",
			objs:        []client.Object{pc, token},
			wantFollows: []string{widgetName},
		},
		"NoProviderConfig": {
			reason:  "A key whose ProviderConfig is missing cannot connect.",
			objs:    []client.Object{token},
			wantErr: cmpopts.AnyError,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			th := clients.NewThrottle()
			feeds := &fakeFollower{}
			c := &connector[*clusterv1alpha1.WidgetKey]{
				kind:     "WidgetKey.widget.widgetco.io",
				sessions: &clients.Sessions{Resolver: clients.NewResolver(fakeKube(tc.objs...)), Throttle: th, Feeds: feeds},
				delay:    nopDelayer{},
				cache:    reader(secretWithKey, nil),
				live:     reader(secretWithKey, nil),
				record:   &fakeRecorder{},
			}
			mg := newCluster()
			mg.SetProviderConfigReference(&xpv2.Reference{Name: "default"})
			explicitName("ci-key")(mg)
			forWidget(widgetName)(mg)
			ext, err := c.Connect(t.Context(), mg)
			if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nConnect(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantFollows, feeds.widgets); diff != "" {
				t.Errorf("%s\nwidgets followed: -want, +got:\n%s", tc.reason, diff)
			}
			if err != nil {
				return
			}
			if o, err := ext.Observe(t.Context(), mg); err != nil || o.ResourceExists {
				t.Errorf("%s\nObserve(...) through the connection: want no key and no error, got %+v, %v", tc.reason, o, err)
			}
		})
	}
}
