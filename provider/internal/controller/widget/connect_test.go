package widget

import (
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/clients"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
)

func TestConnect(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) {
		testConnect(t, func() *nsv1beta1.Widget {
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
		testConnect(t, func() *clusterv1beta1.Widget {
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
func testConnect[T commonv1beta1.WidgetResource](t *testing.T, newMG func() T, config func(endpoint string) []client.Object) {
	const feedKind = "Widget.kind"
	type want struct {
		err     error
		follows []fakes.Follow
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
				follows:    []fakes.Follow{{Kind: feedKind, Widget: "web"}},
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
				follows:      []fakes.Follow{{Kind: feedKind, Widget: "web"}},
				observeErr:   isRateLimited,
				delays:       []time.Duration{1000 * time.Second},
				reconnectErr: true,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t, apitest.WithOptions(apitest.RateLimited))
			var objs []client.Object
			if !tc.noConfig {
				objs = config(env.URL)
			}
			th := clients.NewThrottle()
			feeds := &fakes.Follower[*clients.Connection]{}
			delay := &fakes.Delayer{}
			c := &connector[T]{
				sessions: &clients.Sessions{Resolver: clients.NewResolver(fakes.NewKube(objs...), clients.WithThrottle(th)), Throttle: th, Feeds: feeds},
				delay:    delay,
				record:   event.NewNopRecorder(),
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
			wantFollows := make([]fakes.Follow, 0, len(tc.want.follows))
			for _, f := range tc.want.follows {
				f.MR = types.NamespacedName{Namespace: mg.GetNamespace(), Name: mg.GetName()}
				wantFollows = append(wantFollows, f)
			}
			if diff := cmp.Diff(wantFollows, feeds.Follows(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nFollow calls: -want, +got:\n%s", tc.reason, diff)
			}
			if err != nil {
				return
			}
			if tc.exhaust {
				apitest.Exhaust(t, env.Client(t, apitest.TokenA))
			}
			_, err = ext.Observe(t.Context(), mg)
			if !tc.want.observeErr(err) {
				t.Errorf("%s\nObserve(...): unexpected error %v", tc.reason, err)
			}
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: mg.GetNamespace(), Name: mg.GetName()}}
			want := make([]fakes.Delay, 0, len(tc.want.delays))
			for _, d := range tc.want.delays {
				want = append(want, fakes.Delay{Req: req, D: d})
			}
			// Retry-After counts down while a slow machine runs the test.
			approx := cmp.Comparer(func(a, b time.Duration) bool { return a-b <= max(a, b)/50 && b-a <= max(a, b)/50 })
			if diff := cmp.Diff(want, delay.Delays(), cmpopts.EquateEmpty(), approx); diff != "" {
				t.Errorf("%s\nrequeue delays: -want, +got:\n%s", tc.reason, diff)
			}
			if !tc.want.reconnectErr {
				return
			}
			delay.Reset()
			if _, err := c.Connect(t.Context(), mg); err == nil {
				t.Errorf("%s\nConnect(...) again: want an error while throttled, got none", tc.reason)
			}
			// What is left of Retry-After, plus up to half of it as jitter.
			if again := delay.Delays(); len(again) != 1 || again[0].Req != req || again[0].D < 900*time.Second || again[0].D > 1500*time.Second {
				t.Errorf("%s\nConnect(...) again: want one delay of 900s to 1500s for %v, got %v", tc.reason, req, again)
			}
		})
	}
}

func TestDisconnect(t *testing.T) {
	if err := (&external[*nsv1beta1.Widget]{}).Disconnect(t.Context()); err != nil {
		t.Errorf("Disconnect(...): want nil, got %v", err)
	}
}
