package widget

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	"github.com/widgetco/crossplane-widget/provider/internal/clients"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
)

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

type fakeDelayer struct{ after []delayed }

type delayed struct {
	Req reconcile.Request
	D   time.Duration
}

func (f *fakeDelayer) After(req reconcile.Request, d time.Duration) {
	f.after = append(f.after, delayed{Req: req, D: d})
}

type fakeFollower struct{ follows []followed }

type followed struct {
	Kind, Widget string
	MR           types.NamespacedName
}

func (f *fakeFollower) Follow(_ *clients.Connection, kind, widget string, key types.NamespacedName) {
	f.follows = append(f.follows, followed{Kind: kind, Widget: widget, MR: key})
}

func (f *fakeFollower) Seen(*clients.Connection, string, string, types.NamespacedName, int64, widgetapi.State) {
}

func TestConnect(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) {
		testConnect(t, func() *nsv1alpha1.Widget {
			mg := newNamespaced()
			mg.SetProviderConfigReference(&xpv2.ProviderConfigReference{Kind: nsv1alpha1.ProviderConfigKind, Name: "default"})
			return mg
		}, func(endpoint string) []client.Object {
			return []client.Object{
				&nsv1alpha1.ProviderConfig{
					ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "default"},
					Spec: commonv1alpha1.LocalProviderConfigSpec{
						APIConnection: commonv1alpha1.APIConnection{Endpoint: endpoint},
						Credentials: commonv1alpha1.LocalProviderCredentials{Source: xpv2.CredentialsSourceSecret,
							SecretRef: &xpv2.LocalSecretKeySelector{LocalSecretReference: xpv2.LocalSecretReference{Name: "token"}, Key: "token"}},
					},
				},
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "token"}, Data: map[string][]byte{"token": []byte(apitest.TokenA)}},
			}
		})
	})
	t.Run("Cluster", func(t *testing.T) {
		testConnect(t, func() *clusterv1alpha1.Widget {
			mg := newCluster()
			mg.SetProviderConfigReference(&xpv2.Reference{Name: "default"})
			return mg
		}, func(endpoint string) []client.Object {
			return []client.Object{
				&clusterv1alpha1.ProviderConfig{
					ObjectMeta: metav1.ObjectMeta{Name: "default"},
					Spec: commonv1alpha1.ProviderConfigSpec{
						APIConnection: commonv1alpha1.APIConnection{Endpoint: endpoint},
						Credentials: commonv1alpha1.ProviderCredentials{Source: xpv2.CredentialsSourceSecret,
							SecretRef: &xpv2.SecretKeySelector{SecretReference: xpv2.SecretReference{Namespace: "crossplane-system", Name: "token"}, Key: "token"}},
					},
				},
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "crossplane-system", Name: "token"}, Data: map[string][]byte{"token": []byte(apitest.TokenA)}},
			}
		})
	})
}

// testConnect checks the connector end to end with real Sessions: a resource
// connects through its ProviderConfig, follows its widget's changes, and a
// 429 from the Widget API throttles the connection and delays the resource.
func testConnect[T commonv1alpha1.WidgetResource](t *testing.T, newMG func() T, config func(endpoint string) []client.Object) {
	const feedKind = "Widget.kind"
	type want struct {
		err     error
		follows []followed
		// observeErr is what Observe returns when the test calls it.
		observeErr func(error) bool
		// delays are the requeue delays asked for by Observe's 429.
		delays []time.Duration
		// reconnectErr says whether connecting again fails, asking for a
		// delay of what is left of Retry-After.
		reconnectErr bool
	}
	cases := map[string]struct {
		reason   string
		noConfig bool
		// exhaust uses up the token's rate limit before Observe.
		exhaust bool
		want    want
	}{
		"Connected": {
			reason: "A resource connects through its ProviderConfig and follows its widget's changes.",
			want: want{
				follows:    []followed{{Kind: feedKind, Widget: "web"}},
				observeErr: func(err error) bool { return err == nil },
			},
		},
		"NoProviderConfig": {
			reason:   "A resource whose ProviderConfig is missing cannot connect.",
			noConfig: true,
			want:     want{err: cmpopts.AnyError},
		},
		"RateLimited": {
			reason:  "A 429 throttles the connection: the resource is requeued after Retry-After, and so is the next connect.",
			exhaust: true,
			want: want{
				follows:      []followed{{Kind: feedKind, Widget: "web"}},
				observeErr:   isRateLimited,
				delays:       []time.Duration{1000 * time.Second},
				reconnectErr: true,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t, apitest.WithOptions(rateLimited))
			var objs []client.Object
			if !tc.noConfig {
				objs = config(env.URL)
			}
			th := clients.NewThrottle()
			feeds := &fakeFollower{}
			delay := &fakeDelayer{}
			c := &connector[T]{
				sessions: &clients.Sessions{Resolver: clients.NewResolver(fakeKube(objs...), clients.WithThrottle(th)), Throttle: th, Feeds: feeds},
				delay:    delay,
				record:   &fakeRecorder{},
				metrics:  metrics.New(),
				kind:     "Widget",
				feedKind: feedKind,
			}
			mg := newMG()
			explicitName("web")(mg)
			ext, err := c.Connect(t.Context(), mg)
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nConnect(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			wantFollows := make([]followed, 0, len(tc.want.follows))
			for _, f := range tc.want.follows {
				f.MR = types.NamespacedName{Namespace: mg.GetNamespace(), Name: mg.GetName()}
				wantFollows = append(wantFollows, f)
			}
			if diff := cmp.Diff(wantFollows, feeds.follows, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nFollow calls: -want, +got:\n%s", tc.reason, diff)
			}
			if err != nil {
				return
			}
			if tc.exhaust {
				exhaust(t, env.Client(t, apitest.TokenA))
			}
			_, err = ext.Observe(t.Context(), mg)
			if !tc.want.observeErr(err) {
				t.Errorf("%s\nObserve(...): unexpected error %v", tc.reason, err)
			}
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: mg.GetNamespace(), Name: mg.GetName()}}
			want := make([]delayed, 0, len(tc.want.delays))
			for _, d := range tc.want.delays {
				want = append(want, delayed{Req: req, D: d})
			}
			// Retry-After counts down while a slow machine runs the test.
			approx := cmp.Comparer(func(a, b time.Duration) bool { return a-b <= max(a, b)/50 && b-a <= max(a, b)/50 })
			if diff := cmp.Diff(want, delay.after, cmpopts.EquateEmpty(), approx); diff != "" {
				t.Errorf("%s\nrequeue delays: -want, +got:\n%s", tc.reason, diff)
			}
			if !tc.want.reconnectErr {
				return
			}
			delay.after = nil
			if _, err := c.Connect(t.Context(), mg); err == nil {
				t.Errorf("%s\nConnect(...) again: want an error while throttled, got none", tc.reason)
			}
			// What is left of Retry-After, plus up to half of it as jitter.
			if len(delay.after) != 1 || delay.after[0].Req != req || delay.after[0].D < 900*time.Second || delay.after[0].D > 1500*time.Second {
				t.Errorf("%s\nConnect(...) again: want one delay of 900s to 1500s for %v, got %v", tc.reason, req, delay.after)
			}
		})
	}
}
