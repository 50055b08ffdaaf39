package clients

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource/fake"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
)

var errBoom = errors.New("boom")

const (
	testNamespace = "team-a"
	testSystemNS  = "crossplane-system"
	testPC        = "default"
	testSecret    = "widget-token"
	testKey       = "token"
)

func tokenSecret(ns, value string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: testSecret},
		Data:       map[string][]byte{testKey: []byte(value)},
	}
}

// nsPC is a namespaced ProviderConfig in testNamespace.
func nsPC(endpoint string, mods ...func(*commonv1alpha1.LocalProviderConfigSpec)) *nsv1alpha1.ProviderConfig {
	pc := &nsv1alpha1.ProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testPC},
		Spec: commonv1alpha1.LocalProviderConfigSpec{
			APIConnection: commonv1alpha1.APIConnection{Endpoint: endpoint},
			Credentials: commonv1alpha1.LocalProviderCredentials{
				Source:    xpv2.CredentialsSourceSecret,
				SecretRef: &xpv2.LocalSecretKeySelector{LocalSecretReference: xpv2.LocalSecretReference{Name: testSecret}, Key: testKey},
			},
		},
	}
	for _, m := range mods {
		m(&pc.Spec)
	}
	return pc
}

func clusterSpec(endpoint string, mods ...func(*commonv1alpha1.ProviderConfigSpec)) commonv1alpha1.ProviderConfigSpec {
	s := commonv1alpha1.ProviderConfigSpec{
		APIConnection: commonv1alpha1.APIConnection{Endpoint: endpoint},
		Credentials: commonv1alpha1.ProviderCredentials{
			Source:    xpv2.CredentialsSourceSecret,
			SecretRef: &xpv2.SecretKeySelector{SecretReference: xpv2.SecretReference{Namespace: testSystemNS, Name: testSecret}, Key: testKey},
		},
	}
	for _, m := range mods {
		m(&s)
	}
	return s
}

func clusterPC(endpoint string, mods ...func(*commonv1alpha1.ProviderConfigSpec)) *nsv1alpha1.ClusterProviderConfig {
	return &nsv1alpha1.ClusterProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: testPC}, Spec: clusterSpec(endpoint, mods...)}
}

func legacyPC(endpoint string, mods ...func(*commonv1alpha1.ProviderConfigSpec)) *clusterv1alpha1.ProviderConfig {
	return &clusterv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: testPC}, Spec: clusterSpec(endpoint, mods...)}
}

// nsMR is a namespaced Widget referencing a config of kind in its namespace
// (or the cluster). A nil ref means no providerConfigRef.
func nsMR(ref *xpv2.ProviderConfigReference) *nsv1beta1.Widget {
	mg := &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "web", UID: "uid-ns"}}
	mg.SetGroupVersionKind(nsv1beta1.WidgetGroupVersionKind)
	mg.SetProviderConfigReference(ref)
	return mg
}

// clMR is a cluster-scoped Widget referencing a legacy ProviderConfig.
func clMR(ref *xpv2.Reference) *clusterv1beta1.Widget {
	mg := &clusterv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "uid-cl"}}
	mg.SetGroupVersionKind(clusterv1beta1.WidgetGroupVersionKind)
	mg.SetProviderConfigReference(ref)
	return mg
}

// usage is what the tests compare of a recorded ProviderConfigUsage.
type usage struct {
	Namespace, Name string
	Config          string
	Resource        xpv2.TypedReference
}

func usageOf(o client.Object) usage {
	switch u := o.(type) {
	case *nsv1alpha1.ProviderConfigUsage:
		return usage{Namespace: u.GetNamespace(), Name: u.GetName(), Config: u.ProviderConfigReference.Kind + "/" + u.ProviderConfigReference.Name, Resource: u.ResourceReference}
	case *clusterv1alpha1.ProviderConfigUsage:
		return usage{Namespace: u.GetNamespace(), Name: u.GetName(), Config: "legacy/" + u.ProviderConfigReference.Name, Resource: u.ResourceReference}
	default:
		return usage{Name: "unexpected " + reflect.TypeOf(o).String()}
	}
}

func TestResolve(t *testing.T) {
	env := apitest.Start(t)
	ep := env.URL
	token := apitest.TokenA

	pcRef := &xpv2.ProviderConfigReference{Kind: nsv1alpha1.ProviderConfigKind, Name: testPC}
	cpcRef := &xpv2.ProviderConfigReference{Kind: nsv1alpha1.ClusterProviderConfigKind, Name: testPC}
	legacyRef := &xpv2.Reference{Name: testPC}
	nsResource := xpv2.TypedReference{APIVersion: nsv1beta1.WidgetGroupVersionKind.GroupVersion().String(), Kind: nsv1beta1.WidgetKind, Name: "web"}
	clResource := xpv2.TypedReference{APIVersion: clusterv1beta1.WidgetGroupVersionKind.GroupVersion().String(), Kind: clusterv1beta1.WidgetKind, Name: "web"}

	type want struct {
		err error
		// mentions are facts a person needs that the error must state.
		mentions []string
		usages   []usage
	}
	cases := map[string]struct {
		reason string
		mg     resource.Managed
		objs   []client.Object
		getErr map[reflect.Type]error
		create error
		want   want
	}{
		"NamespacedProviderConfig": {
			reason: "A namespaced resource uses the ProviderConfig in its namespace, its token Secret in that namespace, and records a usage there.",
			mg:     nsMR(pcRef),
			objs:   []client.Object{nsPC(ep), tokenSecret(testNamespace, token)},
			want:   want{usages: []usage{{Namespace: testNamespace, Name: "uid-ns", Config: "ProviderConfig/default", Resource: nsResource}}},
		},
		"ClusterProviderConfig": {
			reason: "A namespaced resource may use a ClusterProviderConfig, whose Secret reference names its namespace; the usage is namespaced.",
			mg:     nsMR(cpcRef),
			objs:   []client.Object{clusterPC(ep), tokenSecret(testSystemNS, token)},
			want:   want{usages: []usage{{Namespace: testNamespace, Name: "uid-ns", Config: "ClusterProviderConfig/default", Resource: nsResource}}},
		},
		"LegacyProviderConfig": {
			reason: "A cluster-scoped resource uses the cluster-scoped ProviderConfig and records a cluster-scoped usage.",
			mg:     clMR(legacyRef),
			objs:   []client.Object{legacyPC(ep), tokenSecret(testSystemNS, token)},
			want:   want{usages: []usage{{Name: "uid-cl", Config: "legacy/default", Resource: clResource}}},
		},
		"TokenWithTrailingNewline": {
			reason: "A token Secret written with `echo` ends in a newline, which must not reach the Authorization header.",
			mg:     nsMR(pcRef),
			objs:   []client.Object{nsPC(ep), tokenSecret(testNamespace, token+"\n")},
			want:   want{usages: []usage{{Namespace: testNamespace, Name: "uid-ns", Config: "ProviderConfig/default", Resource: nsResource}}},
		},
		"NoProviderConfigRef": {
			reason: "A namespaced resource without a providerConfigRef is an error that says what to set.",
			mg:     nsMR(nil),
			want:   want{err: cmpopts.AnyError, mentions: []string{"spec.providerConfigRef"}},
		},
		"NoLegacyProviderConfigRef": {
			reason: "A cluster-scoped resource without a providerConfigRef is an error that says what to set.",
			mg:     clMR(nil),
			want:   want{err: cmpopts.AnyError, mentions: []string{"spec.providerConfigRef"}},
		},
		"UnknownResource": {
			reason: "A resource that is neither namespaced nor legacy cluster-scoped is an error naming its type.",
			mg:     &fake.Managed{},
			want:   want{err: cmpopts.AnyError, mentions: []string{"*fake.Managed"}},
		},
		"UnsupportedKind": {
			reason: "A providerConfigRef of a kind this provider does not serve is an error naming the kind.",
			mg:     nsMR(&xpv2.ProviderConfigReference{Kind: "AWSProviderConfig", Name: testPC}),
			want:   want{err: cmpopts.AnyError, mentions: []string{`"AWSProviderConfig"`}},
		},
		"MissingProviderConfig": {
			reason: "A missing ProviderConfig is an error naming it, and nothing is tracked.",
			mg:     nsMR(pcRef),
			objs:   []client.Object{tokenSecret(testNamespace, token)},
			want:   want{err: cmpopts.AnyError, mentions: []string{"ProviderConfig team-a/default not found"}},
		},
		"MissingClusterProviderConfig": {
			reason: "A missing ClusterProviderConfig is an error naming it.",
			mg:     nsMR(cpcRef),
			want:   want{err: cmpopts.AnyError, mentions: []string{"ClusterProviderConfig default not found"}},
		},
		"MissingLegacyProviderConfig": {
			reason: "A missing cluster-scoped ProviderConfig is an error naming it.",
			mg:     clMR(legacyRef),
			want:   want{err: cmpopts.AnyError, mentions: []string{"ProviderConfig default not found"}},
		},
		"GetProviderConfigFails": {
			reason: "Any other error reading the ProviderConfig is returned wrapped.",
			mg:     nsMR(pcRef),
			getErr: map[reflect.Type]error{reflect.TypeFor[*nsv1alpha1.ProviderConfig](): errBoom},
			want:   want{err: errBoom},
		},
		"GetLegacyProviderConfigFails": {
			reason: "Any other error reading the legacy ProviderConfig is returned wrapped.",
			mg:     clMR(legacyRef),
			getErr: map[reflect.Type]error{reflect.TypeFor[*clusterv1alpha1.ProviderConfig](): errBoom},
			want:   want{err: errBoom},
		},
		"TrackingFails": {
			reason: "A usage that cannot be recorded fails the resolve: a ProviderConfig must not be deletable while it is in use.",
			mg:     nsMR(pcRef),
			objs:   []client.Object{nsPC(ep), tokenSecret(testNamespace, token)},
			create: errBoom,
			want:   want{err: errBoom},
		},
		"LegacyTrackingFails": {
			reason: "A legacy usage that cannot be recorded fails the resolve.",
			mg:     clMR(legacyRef),
			objs:   []client.Object{legacyPC(ep), tokenSecret(testSystemNS, token)},
			create: errBoom,
			want:   want{err: errBoom},
		},
		"MissingSecret": {
			reason: "A missing token Secret is an error naming the Secret and the key to put the token under; the usage is still recorded.",
			mg:     nsMR(pcRef),
			objs:   []client.Object{nsPC(ep)},
			want: want{
				err:      cmpopts.AnyError,
				mentions: []string{"team-a/widget-token not found", `"token"`},
				usages:   []usage{{Namespace: testNamespace, Name: "uid-ns", Config: "ProviderConfig/default", Resource: nsResource}},
			},
		},
		"GetSecretFails": {
			reason: "Any other error reading the token Secret is returned wrapped.",
			mg:     nsMR(pcRef),
			objs:   []client.Object{nsPC(ep)},
			getErr: map[reflect.Type]error{reflect.TypeFor[*corev1.Secret](): errBoom},
			want: want{
				err:    errBoom,
				usages: []usage{{Namespace: testNamespace, Name: "uid-ns", Config: "ProviderConfig/default", Resource: nsResource}},
			},
		},
		"MissingKey": {
			reason: "A token Secret without the referenced key is an error naming the key.",
			mg:     nsMR(pcRef),
			objs: []client.Object{nsPC(ep, func(s *commonv1alpha1.LocalProviderConfigSpec) { s.Credentials.SecretRef.Key = "other" }),
				tokenSecret(testNamespace, token)},
			want: want{
				err:      cmpopts.AnyError,
				mentions: []string{`"other"`},
				usages:   []usage{{Namespace: testNamespace, Name: "uid-ns", Config: "ProviderConfig/default", Resource: nsResource}},
			},
		},
		"EmptyToken": {
			reason: "A token of only whitespace is as good as none.",
			mg:     nsMR(pcRef),
			objs:   []client.Object{nsPC(ep), tokenSecret(testNamespace, " \n")},
			want: want{
				err:      cmpopts.AnyError,
				mentions: []string{"empty"},
				usages:   []usage{{Namespace: testNamespace, Name: "uid-ns", Config: "ProviderConfig/default", Resource: nsResource}},
			},
		},
		"NoSecretRef": {
			reason: "Credentials from a Secret need a secretRef naming the Secret and key.",
			mg:     clMR(legacyRef),
			objs:   []client.Object{legacyPC(ep, func(s *commonv1alpha1.ProviderConfigSpec) { s.Credentials.SecretRef = nil })},
			want: want{
				err:      cmpopts.AnyError,
				mentions: []string{"spec.credentials.secretRef"},
				usages:   []usage{{Name: "uid-cl", Config: "legacy/default", Resource: clResource}},
			},
		},
		"WrongCredentialsSource": {
			reason: "Only Secret credentials are supported; another source is an error naming it.",
			mg:     clMR(legacyRef),
			objs: []client.Object{legacyPC(ep, func(s *commonv1alpha1.ProviderConfigSpec) { s.Credentials.Source = xpv2.CredentialsSourceEnvironment }),
				tokenSecret(testSystemNS, token)},
			want: want{
				err:      cmpopts.AnyError,
				mentions: []string{`"Environment"`},
				usages:   []usage{{Name: "uid-cl", Config: "legacy/default", Resource: clResource}},
			},
		},
		"BadCABundle": {
			reason: "A caBundle without a PEM certificate is an error naming the ProviderConfig.",
			mg:     nsMR(cpcRef),
			objs: []client.Object{clusterPC(ep, func(s *commonv1alpha1.ProviderConfigSpec) { s.CABundle = "not a certificate" }),
				tokenSecret(testSystemNS, token)},
			want: want{
				err:      cmpopts.AnyError,
				mentions: []string{"caBundle", "ClusterProviderConfig default"},
				usages:   []usage{{Namespace: testNamespace, Name: "uid-ns", Config: "ClusterProviderConfig/default", Resource: nsResource}},
			},
		},
		"InvalidEndpoint": {
			reason: "An endpoint that is not an absolute http(s) URL is an error naming the ProviderConfig.",
			mg:     nsMR(pcRef),
			objs:   []client.Object{nsPC("widgets.example.com"), tokenSecret(testNamespace, token)},
			want: want{
				err:      cmpopts.AnyError,
				mentions: []string{"ProviderConfig team-a/default"},
				usages:   []usage{{Namespace: testNamespace, Name: "uid-ns", Config: "ProviderConfig/default", Resource: nsResource}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := fakes.NewKube(tc.objs...)
			for typ, err := range tc.getErr {
				kube.GetErr[typ] = err
			}
			if tc.create != nil {
				kube.MockCreate = test.NewMockCreateFn(tc.create)
			}
			c, err := NewResolver(kube).Resolve(t.Context(), tc.mg)
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nResolve(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			applied := kube.Applied()
			got := make([]usage, 0, len(applied))
			for _, o := range applied {
				got = append(got, usageOf(o))
			}
			if diff := cmp.Diff(tc.want.usages, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nProviderConfigUsages applied: -want, +got:\n%s", tc.reason, diff)
			}
			if err != nil {
				for _, m := range tc.want.mentions {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("%s\nResolve(...): error %q does not mention %q", tc.reason, err, m)
					}
				}
				if strings.Contains(err.Error(), token) {
					t.Errorf("%s\nResolve(...): error %q contains the token", tc.reason, err)
				}
				return
			}
			if c.Endpoint != ep {
				t.Errorf("%s\nResolve(...).Endpoint: want %q, got %q", tc.reason, ep, c.Endpoint)
			}
			if strings.Contains(c.Key, token) {
				t.Errorf("%s\nResolve(...).Key %q contains the token", tc.reason, c.Key)
			}
			// The client authenticates as the token's project: the
			// reference server rejects any other token.
			if _, err := c.Client.ListWidgets(t.Context(), widgetapi.ListWidgetsOptions{}); err != nil {
				t.Errorf("%s\nthe resolved client cannot call the Widget API: %v", tc.reason, err)
			}
		})
	}
}

// TestResolveKey checks the connection key: equal for equal endpoints,
// tokens and CA bundles, different otherwise, and never the token itself.
func TestResolveKey(t *testing.T) {
	ep := "https://widgets.example.com"
	ca := pemCert(t, httptest.NewUnstartedServer(nil))
	resolve := func(t *testing.T, token, caBundle string) string {
		t.Helper()
		kube := fakes.NewKube(
			legacyPC(ep, func(s *commonv1alpha1.ProviderConfigSpec) { s.CABundle = caBundle }),
			tokenSecret(testSystemNS, token))
		c, err := NewResolver(kube).Resolve(t.Context(), clMR(&xpv2.Reference{Name: testPC}))
		if err != nil {
			t.Fatalf("Resolve(...): %v", err)
		}
		if strings.Contains(c.Key, strings.TrimSpace(token)) {
			t.Errorf("Key %q contains the token", c.Key)
		}
		return c.Key
	}
	base := resolve(t, apitest.TokenA, "")
	cases := map[string]struct {
		reason   string
		token    string
		caBundle string
		same     bool
	}{
		"SameToken":          {reason: "The same endpoint and token are the same connection.", token: apitest.TokenA, same: true},
		"TrimmedToken":       {reason: "A trailing newline does not make a different token.", token: apitest.TokenA + "\n", same: true},
		"OtherToken":         {reason: "Another token is another account: its own rate limits and change feed.", token: apitest.TokenB},
		"SimilarToken":       {reason: "Tokens that differ in one character are different connections.", token: apitest.TokenA + "x"},
		"DifferentCABundles": {reason: "A different CA bundle is a different connection.", token: apitest.TokenA, caBundle: ca},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := resolve(t, tc.token, tc.caBundle)
			if (got == base) != tc.same {
				t.Errorf("%s\nKey: got %q, base key %q, want same=%t", tc.reason, got, base, tc.same)
			}
		})
	}
}

// pemCert starts s with TLS and returns its certificate as PEM.
func pemCert(t *testing.T, s *httptest.Server) string {
	t.Helper()
	s.StartTLS()
	t.Cleanup(s.Close)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}))
}

// TestResolveCABundle checks that a ProviderConfig's caBundle is trusted, and
// that HTTP clients are shared per bundle.
func TestResolveCABundle(t *testing.T) {
	env := apitest.Start(t)
	tls := httptest.NewUnstartedServer(env.HTTP.Config.Handler)
	ca := pemCert(t, tls)

	cases := map[string]struct {
		reason   string
		caBundle string
		wantErr  bool
	}{
		"TrustedCA": {reason: "A Widget API served with a private CA works when the caBundle holds that CA.", caBundle: ca},
		"NoCA":      {reason: "Without the caBundle, the private CA is not trusted.", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := fakes.NewKube(
				clusterPC(tls.URL, func(s *commonv1alpha1.ProviderConfigSpec) { s.CABundle = tc.caBundle }),
				tokenSecret(testSystemNS, apitest.TokenA))
			r := NewResolver(kube, WithRetryPolicy(widgetapi.RetryPolicy{Attempts: 1}))
			c, err := r.Resolve(t.Context(), nsMR(&xpv2.ProviderConfigReference{Kind: nsv1alpha1.ClusterProviderConfigKind, Name: testPC}))
			if err != nil {
				t.Fatalf("%s\nResolve(...): %v", tc.reason, err)
			}
			_, err = c.Client.ListWidgets(t.Context(), widgetapi.ListWidgetsOptions{})
			if (err != nil) != tc.wantErr {
				t.Errorf("%s\nListWidgets over TLS: got error %v, want error %t", tc.reason, err, tc.wantErr)
			}
			again, err := r.Resolve(t.Context(), nsMR(&xpv2.ProviderConfigReference{Kind: nsv1alpha1.ClusterProviderConfigKind, Name: testPC}))
			if err != nil {
				t.Fatalf("%s\nsecond Resolve(...): %v", tc.reason, err)
			}
			if again.Key != c.Key {
				t.Errorf("%s\nKey changed between resolves: %q then %q", tc.reason, c.Key, again.Key)
			}
			if n := r.httpClients.len(); n != 1 {
				t.Errorf("%s\nHTTP clients after two resolves of one bundle: want 1, got %d", tc.reason, n)
			}
		})
	}
}

// TestResolveOptions checks that the Resolver reports every call to its
// observer, and every successful call to its Throttle.
func TestResolveOptions(t *testing.T) {
	env := apitest.Start(t)
	type call struct {
		op     string
		status int
	}
	var calls []call
	throttle := NewThrottle()
	kube := fakes.NewKube(nsPC(env.URL), tokenSecret(testNamespace, apitest.TokenA))
	r := NewResolver(kube,
		WithUserAgent("provider-widget/test"),
		WithThrottle(throttle),
		WithObserver(func(op string, status int, _ time.Duration) { calls = append(calls, call{op, status}) }))
	c, err := r.Resolve(t.Context(), nsMR(&xpv2.ProviderConfigReference{Kind: nsv1alpha1.ProviderConfigKind, Name: testPC}))
	if err != nil {
		t.Fatalf("Resolve(...): %v", err)
	}
	throttle.Throttled(c.Key, time.Millisecond)
	before := throttle.conns[c.Key].lim.Limit()

	if _, err := c.Client.GetWidget(t.Context(), "missing"); !widgetapi.IsNotFound(err) {
		t.Fatalf("GetWidget(missing): want not found, got %v", err)
	}
	if got := throttle.conns[c.Key].lim.Limit(); got != before {
		t.Errorf("a failed call raised the client-side rate limit from %v to %v", before, got)
	}
	if _, err := c.Client.ListWidgets(t.Context(), widgetapi.ListWidgetsOptions{}); err != nil {
		t.Fatalf("ListWidgets: %v", err)
	}
	if got := throttle.conns[c.Key].lim.Limit(); got <= before {
		t.Errorf("a successful call did not raise the client-side rate limit: %v, was %v", got, before)
	}
	want := []call{{"get widget", 404}, {"list widgets", 200}}
	if diff := cmp.Diff(want, calls, cmp.AllowUnexported(call{})); diff != "" {
		t.Errorf("observed calls: -want, +got:\n%s", diff)
	}
}

// TestProviderConfigKey checks the object keys the Resolver reads.
func TestProviderConfigKey(t *testing.T) {
	cases := map[string]struct {
		reason string
		mg     resource.Managed
		want   []types.NamespacedName
	}{
		"Namespaced": {
			reason: "A ProviderConfig is read from the resource's namespace, its Secret from the same namespace.",
			mg:     nsMR(&xpv2.ProviderConfigReference{Kind: nsv1alpha1.ProviderConfigKind, Name: testPC}),
			want:   []types.NamespacedName{{Namespace: testNamespace, Name: testPC}, {Namespace: testNamespace, Name: testSecret}},
		},
		"Cluster": {
			reason: "A ClusterProviderConfig is cluster-scoped; its Secret is where it says.",
			mg:     nsMR(&xpv2.ProviderConfigReference{Kind: nsv1alpha1.ClusterProviderConfigKind, Name: testPC}),
			want:   []types.NamespacedName{{Name: testPC}, {Namespace: testSystemNS, Name: testSecret}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := fakes.NewKube(nsPC("https://w.example.com"), clusterPC("https://w.example.com"),
				tokenSecret(testNamespace, "a"), tokenSecret(testSystemNS, "b"))
			var got []types.NamespacedName
			get := kube.MockGet
			kube.MockGet = func(ctx context.Context, key client.ObjectKey, obj client.Object) error {
				switch obj.(type) {
				case commonv1alpha1.ProviderConfigResource, *corev1.Secret:
					got = append(got, key)
				}
				return get(ctx, key, obj)
			}
			if _, err := NewResolver(kube).Resolve(t.Context(), tc.mg); err != nil {
				t.Fatalf("%s\nResolve(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nkeys read: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// countingKube counts reads of Secrets.
type countingKube struct {
	client.Client
	secretReads int
}

func (k *countingKube) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok {
		k.secretReads++
	}
	return k.Client.Get(ctx, key, obj, opts...)
}

// TestTokenTTL checks that a token is read from its Secret at most once per
// TokenTTL, that a rotated token is used once TokenTTL has passed, and that
// a Secret that cannot be read is never answered from memory.
func TestTokenTTL(t *testing.T) {
	ep := "https://widgets.example.com"
	secret := tokenSecret(testSystemNS, apitest.TokenA)
	fake := fakes.NewKube(legacyPC(ep), secret)
	kube := &countingKube{Client: fake}
	now := time.Unix(1_700_000_000, 0)
	r := NewResolver(kube)
	r.tokens.SetClock(func() time.Time { return now })
	resolve := func() (string, error) {
		c, err := r.Resolve(t.Context(), clMR(&xpv2.Reference{Name: testPC}))
		if err != nil {
			return "", err
		}
		return c.Key, nil
	}

	first, err := resolve()
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(TokenTTL / 2)
	if k, err := resolve(); err != nil || k != first || kube.secretReads != 1 {
		t.Errorf("within TokenTTL: want the same key from one Secret read, got key %q (first %q), %d reads, error %v", k, first, kube.secretReads, err)
	}

	// Rotate the token.
	secret.Data[testKey] = []byte(apitest.TokenB)
	if err := fake.Update(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	if k, _ := resolve(); k != first {
		t.Errorf("within TokenTTL of the first read the old token should still be used")
	}
	now = now.Add(TokenTTL)
	rotated, err := resolve()
	if err != nil || rotated == first || kube.secretReads != 2 {
		t.Errorf("after TokenTTL: want the rotated token's key from a second read, got key %q (first %q), %d reads, error %v", rotated, first, kube.secretReads, err)
	}

	// Empty the Secret: after TokenTTL the error is reported, and the token
	// is not used from memory afterwards either.
	secret.Data = map[string][]byte{}
	if err := fake.Update(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	now = now.Add(TokenTTL)
	for range 2 {
		if _, err := resolve(); err == nil || !strings.Contains(err.Error(), "has no (or an empty) key") {
			t.Errorf("an emptied token Secret: want an error saying so, got %v", err)
		}
	}
}

// TestConnectionsPerEndpoint checks that however many calls run at once, at
// most MaxConnsPerEndpoint reach one Widget API host at a time, and that the
// others wait rather than fail.
func TestConnectionsPerEndpoint(t *testing.T) {
	var mu sync.Mutex
	inFlight, most := 0, 0
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"widgets":[]}`))
	}))
	t.Cleanup(slow.Close)
	kube := fakes.NewKube(nsPC(slow.URL), tokenSecret(testNamespace, apitest.TokenA))
	c, err := NewResolver(kube, WithRetryPolicy(widgetapi.RetryPolicy{Attempts: 1})).Resolve(t.Context(), nsMR(&xpv2.ProviderConfigReference{Kind: nsv1alpha1.ProviderConfigKind, Name: testPC}))
	if err != nil {
		t.Fatal(err)
	}
	const calls = 3 * MaxConnsPerEndpoint
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for range calls {
		wg.Go(func() {
			if _, err := c.Client.ListWidgets(t.Context(), widgetapi.ListWidgetsOptions{}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a call that had to wait failed: %v", err)
	}
	if most > MaxConnsPerEndpoint || most < MaxConnsPerEndpoint/2 {
		t.Errorf("requests in flight at most: got %d, want at most %d (and, with %d calls at once, at least %d)", most, MaxConnsPerEndpoint, calls, MaxConnsPerEndpoint/2)
	}
}
