package widgetkey

import (
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	"github.com/widgetco/crossplane-widget/provider/internal/clients"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
)

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
		reason  string
		objs    []client.Object
		wantErr error
		// wantFollows are the widgets followed.
		wantFollows []fakes.Follow
	}{
		"Connected": {
			reason:      "A key connects and follows its widget.",
			objs:        []client.Object{pc, token},
			wantFollows: []fakes.Follow{{Widget: widgetName}},
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
			feeds := &fakes.Follower[*clients.Connection]{}
			c := &connector[*clusterv1beta1.WidgetKey]{
				kind:     "WidgetKey.widget.widgetco.io",
				sessions: &clients.Sessions{Resolver: clients.NewResolver(fakes.NewKube(tc.objs...)), Throttle: th, Feeds: feeds},
				delay:    &fakes.Delayer{},
				cache:    reader(secretWithKey, nil),
				live:     reader(secretWithKey, nil),
				record:   event.NewNopRecorder(),
			}
			mg := newCluster()
			mg.SetUID("uid-ci") // the name of its ProviderConfigUsage
			mg.SetProviderConfigReference(&xpv2.Reference{Name: "default"})
			explicitName("ci-key")(mg)
			forWidget(widgetName)(mg)
			ext, err := c.Connect(t.Context(), mg)
			if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nConnect(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantFollows, feeds.Follows(), cmpopts.IgnoreFields(fakes.Follow{}, "Kind", "MR")); diff != "" {
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
