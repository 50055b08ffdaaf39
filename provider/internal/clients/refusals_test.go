package clients

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// TestResolveBudgetPerNamespace wires the owner's budget through a Resolver
// to the reference Widget API, which throttles failed authentication per
// client address (here: 5 refusals, then 429 for everyone on the address):
// team-a's 12 ProviderConfigs, each with another refused token and its
// endpoint spelled differently, cost 3 refusals; team-b, on the same
// address, is never answered 429.
func TestResolveBudgetPerNamespace(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
		o.FailedAuthBurst = 5
		o.FailedAuthRate = 0.001
	}))
	var (
		mu   sync.Mutex
		sent = map[int]int{}
	)
	observe := func(_ string, status int, _ time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		sent[status]++
	}
	variants := []string{env.URL, env.URL + "/", strings.Replace(env.URL, "http://", "HTTP://", 1), env.URL + "?attempt=1"}
	objs := []client.Object{}
	ref := func(i int) *xpv2.ProviderConfigReference {
		return &xpv2.ProviderConfigReference{Kind: nsv1alpha1.ProviderConfigKind, Name: fmt.Sprintf("pc-%d", i)}
	}
	pc := func(ns string, i int, endpoint, token string) {
		name := fmt.Sprintf("pc-%d", i)
		objs = append(objs,
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{testKey: []byte(token)}},
			&nsv1alpha1.ProviderConfig{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: commonv1alpha1.LocalProviderConfigSpec{
					APIConnection: commonv1alpha1.APIConnection{Endpoint: endpoint},
					Credentials: commonv1alpha1.LocalProviderCredentials{
						Source:    xpv2.CredentialsSourceSecret,
						SecretRef: &xpv2.LocalSecretKeySelector{LocalSecretReference: xpv2.LocalSecretReference{Name: name}, Key: testKey},
					},
				},
			})
	}
	const teamA = 12
	for i := range teamA {
		pc("team-a", i, variants[i%len(variants)], fmt.Sprintf("refused-%d", i))
	}
	pc("team-b", 0, env.URL, apitest.TokenB)
	sessions := &Sessions{
		Resolver: NewResolver(fakes.NewKube(objs...), WithPauses(NewPauses(10*time.Second, time.Minute)), WithObserver(observe)),
		Throttle: NewThrottle(),
	}
	get := func(ns string, i int) error {
		mg := &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("w-%d", i), UID: types.UID(fmt.Sprintf("uid-%s-%d", ns, i))}}
		mg.SetGroupVersionKind(nsv1beta1.WidgetGroupVersionKind)
		mg.SetProviderConfigReference(ref(i))
		s, err := sessions.Open(context.Background(), mg, &fakes.Delayer{}, "Widget.kind", "web")
		if err != nil {
			return err
		}
		_, err = s.GetWidget(context.Background(), "web")
		return err
	}

	var got struct{ Refused, Spent, Other int }
	for i := range teamA {
		switch err := get("team-a", i); {
		case widgetapi.IsUnauthorized(err):
			got.Refused++
		case IsPaused(err):
			got.Spent++
		default:
			got.Other++
			t.Errorf("team-a's ProviderConfig pc-%d: want a refusal or a call held back, got %v", i, err)
		}
	}
	if diff := cmp.Diff(struct{ Refused, Spent, Other int }{Refused: 3, Spent: teamA - 3}, got); diff != "" {
		t.Errorf("team-a's ProviderConfigs: -want, +got:\n%s", diff)
	}
	for range 3 {
		if err := get("team-b", 0); !widgetapi.IsNotFound(err) {
			t.Errorf("team-b's GetWidget: want 404 (authenticated), got %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(map[int]int{401: 3, 404: 3}, sent); diff != "" {
		t.Errorf("requests sent, by status: -want, +got:\n%s", diff)
	}
}
