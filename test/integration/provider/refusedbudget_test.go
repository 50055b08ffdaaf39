package provider_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/test/lib/testcert"
)

// The attack of TestManyRefusedCredentialsDoNotThrottleOtherTenants.
const (
	// attackConfigs are team-a's ProviderConfigs, each with a token of its
	// own that the Widget API refuses, and one Widget: twice the Widget
	// API's failed-authentication burst (20).
	attackConfigs = 40
	// attackRotation is how often team-a gives half its Secrets a new
	// refused token, each a credential never tried before.
	attackRotation = 3 * time.Second
	// attackHead is how long team-a attacks before team-b applies its
	// Widgets.
	attackHead = 10 * time.Second
	// victimWidgets are team-b's Widgets, on a token the Widget API
	// accepts.
	victimWidgets = 5
)

// TestManyRefusedCredentialsDoNotThrottleOtherTenants: a tenant that owns
// namespaced ProviderConfigs can make credentials at will, and the Widget
// API charges every refusal to the provider's one address (20 in a row,
// then 1 a second; past that, every request from the address is answered
// 429). Team-a runs 40 ProviderConfigs with refused tokens, spelling the
// endpoint four ways, with comments in a CA bundle, and rotating half of
// its Secrets every 3 s; 10 s in, team-b applies 5 Widgets. Team-b's
// Widgets must go Ready with no request from the address answered 429,
// and team-a's refusals must stay within its namespace's budget (3 at
// once, then one a minute).
//
// What it relies on: the reference Widget API with its default
// failed-authentication throttle, and team-b's token (env.tokenB) short
// enough that the throttle still holds it back with its address (the
// Widget API serves long static tokens from a throttled address; the
// provider must not rely on that). The count of refusals does not depend
// on either.
func TestManyRefusedCredentialsDoNotThrottleOtherTenants(t *testing.T) {
	a := newEnv(t)
	b := a.tenant("b", a.tokenB)
	b.providerConfig()
	ca, _ := testcert.SelfSigned(t, "team-a")
	for i := range attackConfigs {
		a.refusedConfig(i, string(ca))
	}
	ctx, stop := context.WithCancel(context.Background())
	var rotating sync.WaitGroup
	rotating.Go(func() { a.rotateRefusedTokens(ctx) })
	t.Cleanup(func() { stop(); rotating.Wait() })

	p := startProvider(t)
	start := time.Now()
	for i := range attackConfigs {
		a.widget(fmt.Sprintf("a%d", i), usingConfig(i))
	}
	time.Sleep(attackHead)

	applied := time.Now()
	for i := range victimWidgets {
		b.widget(fmt.Sprintf("b%d", i))
	}
	// Every Synced message team-b's Widgets show on the way, to report a
	// 429 that a Widget got and then recovered from.
	saw429 := map[string]bool{}
	ready := b.eventually(2*time.Minute, "team-b's Widgets Ready", func() (bool, string) {
		var notReady []string
		for i := range victimWidgets {
			name := fmt.Sprintf("b%d", i)
			w := b.getWidget(name)
			if m := w.GetCondition(xpv2.TypeSynced).Message; strings.Contains(m, "429") || strings.Contains(m, "rate limiting this provider") {
				saw429[name] = true
			}
			if !isTrue(w, xpv2.TypeReady) || !isTrue(w, xpv2.TypeSynced) {
				notReady = append(notReady, name+": "+condition(w, xpv2.TypeReady)+" "+condition(w, xpv2.TypeSynced))
			}
		}
		return len(notReady) == 0, strings.Join(notReady, "; ")
	})

	refused := a.apiMetric("widgetapi_requests_total", map[string]string{"code": "401"})
	throttled := a.apiMetric("widgetapi_auth_throttled_requests_total", nil)
	seen429 := p.metric("widget_api_requests_total", map[string]string{"code": "429"})
	elapsed := time.Since(start)
	t.Logf("team-b's %d Widgets Ready %s after they were applied (%s into the attack); %d of them showed a 429 on the way; "+
		"the Widget API refused %v of team-a's attempts and answered %v requests from the address 429 (the provider saw %v)",
		victimWidgets, ready.Round(100*time.Millisecond), applied.Sub(start).Round(time.Second), len(saw429), refused, throttled, seen429)

	if throttled != 0 || seen429 != 0 || len(saw429) != 0 {
		t.Errorf("want no request from the provider's address answered 429, got %v (the provider saw %v; team-b's Widgets that showed one: %d)", throttled, seen429, len(saw429))
	}
	// The namespace's burst, and one a minute after it.
	if limit := 3 + float64(int(elapsed/time.Minute)); refused > limit {
		t.Errorf("want at most %v refusals of team-a's credentials in %s, got %v", limit, elapsed.Round(time.Second), refused)
	}
	a.eventually(time.Minute, "a Widget of team-a to say that its namespace has had too many credentials refused", func() (bool, string) {
		var seen []string
		for i := range attackConfigs {
			c := a.getWidget(fmt.Sprintf("a%d", i)).GetCondition(xpv2.TypeSynced)
			if c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "refused too many credentials of namespace "+a.ns) {
				return true, ""
			}
			seen = append(seen, c.Message)
		}
		return false, fmt.Sprintf("team-a's Synced messages: %q", seen)
	})
}

// refusedConfig creates ProviderConfig pc-<i> and its Secret, holding a
// token the Widget API refuses. Its endpoint is one of four spellings of
// the same server, and some carry the CA bundle ca with a comment of their
// own (an http endpoint does not use it).
func (e *env) refusedConfig(i int, ca string) {
	name := fmt.Sprintf("pc-%d", i)
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}, StringData: map[string]string{"token": refusedTokenOf(i, 0)}})
	endpoints := []string{e.api.URL, e.api.URL + "/", e.api.URL + "?pc=" + name, strings.Replace(e.api.URL, "http://", "http://"+name+"@", 1)}
	conn := commonv1alpha1.APIConnection{Endpoint: endpoints[i%len(endpoints)]}
	if i%3 == 0 {
		conn.CABundle = "# " + name + "\n" + ca
	}
	e.create(&nsv1alpha1.ProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: commonv1alpha1.LocalProviderConfigSpec{
			APIConnection: conn,
			Credentials: commonv1alpha1.LocalProviderCredentials{
				Source:    xpv2.CredentialsSourceSecret,
				SecretRef: &xpv2.LocalSecretKeySelector{LocalSecretReference: xpv2.LocalSecretReference{Name: name}, Key: "token"},
			},
		},
	})
}

// refusedTokenOf is the token of pc-<i> after its Secret's nth rotation.
func refusedTokenOf(i, n int) string { return fmt.Sprintf("token-team-a-%d-rotation-%d", i, n) }

// rotateRefusedTokens gives the even-numbered Secrets of refusedConfig a
// new refused token every attackRotation, until ctx ends.
func (e *env) rotateRefusedTokens(ctx context.Context) {
	tick := time.NewTicker(attackRotation)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for i := 0; i < attackConfigs; i += 2 {
			// Not e.update: its contexts end with the test, and this
			// runs until the test's cleanup stops it. Errors are the
			// test ending under it: nothing to report.
			_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				s := &corev1.Secret{}
				if err := e.kube.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: fmt.Sprintf("pc-%d", i)}, s); err != nil {
					return err
				}
				s.Data = map[string][]byte{"token": []byte(refusedTokenOf(i, n))}
				return e.kube.Update(ctx, s)
			})
		}
	}
}

// usingConfig makes a Widget use ProviderConfig pc-<i>.
func usingConfig(i int) func(*nsv1beta1.Widget) {
	return func(w *nsv1beta1.Widget) {
		w.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: nsv1alpha1.ProviderConfigKind, Name: fmt.Sprintf("pc-%d", i)}
	}
}
