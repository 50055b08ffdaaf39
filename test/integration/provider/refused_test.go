package provider_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/widgetco/crossplane-widget/test/lib/prom"
)

// refusedToken is team-a's token: one the Widget API does not know, as an
// expired or revoked one would be.
const refusedToken = "token-team-a-revoked"

// Widgets per team: team-a's are more than the Widget API's
// failed-authentication burst (20), so even their first attempts, made at
// once, would spend it if nothing held them back.
const (
	teamAWidgets = 24
	teamBWidgets = 3
	// teamBWidgetsNotPaused is how many widgets team-b creates at once
	// while team-a spends the budget without the pause.
	teamBWidgetsNotPaused = 10
)

// apiMetric returns the sum of the Widget API's metric samples whose labels
// include every given pair.
func (e *env) apiMetric(name string, labels map[string]string) float64 {
	e.t.Helper()
	ss, err := prom.Scrape(context.Background(), nil, e.api.URL+"/metrics")
	if err != nil {
		e.t.Fatalf("cannot read the Widget API's metrics: %v", err)
	}
	return ss.Sum(name, labels)
}

// tenant returns a second tenant of e's Widget API: its own namespace, with
// token.
func (e *env) tenant(suffix, token string) *env {
	ns := strings.TrimRight(e.ns[:min(len(e.ns), 60)], "-") + "-" + suffix
	o := &env{t: e.t, kube: e.kube, api: e.api, ns: ns, token: token}
	o.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	return o
}

// TestRefusedTokenDoesNotThrottleOtherTenants: the Widget API throttles
// failed authentication per client address (20 in a row, then 1 a second,
// answered 429 whatever the token), and every tenant's calls leave from
// the provider's address. Team-a's ProviderConfig holds a token the API
// refuses; team-b's is good. With the provider's pause of refused tokens,
// team-b's widgets go Ready without a single 429, team-a's say what is
// wrong, and the refusals the API counts stay well under the burst; once
// team-a fixes its Secret, its widgets go Ready too. Without the pause
// (--refused-token-pause=0) team-a's retries spend the burst and team-b's
// calls are answered 429: what the pause is for.
func TestRefusedTokenDoesNotThrottleOtherTenants(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   []string
		paused bool
	}{
		"Paused": {
			reason: "A refused token is held back, so the address's budget is never spent.",
			paused: true,
		},
		"NotPaused": {
			reason: "Without the pause, one tenant's refused token gets every tenant 429s.",
			args:   []string{"--refused-token-pause", "0"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := newEnv(t)
			valid := a.token
			a.token = refusedToken
			a.providerConfig()
			b := a.tenant("b", a.tokenB)
			b.providerConfig()
			p := startProvider(t, tc.args...)
			start := time.Now()
			for i := range teamAWidgets {
				a.widget(fmt.Sprintf("a%d", i))
			}
			refused := func() float64 { return a.apiMetric("widgetapi_requests_total", map[string]string{"code": "401"}) }
			throttled := func() float64 { return a.apiMetric("widgetapi_auth_throttled_requests_total", nil) }

			if !tc.paused {
				a.eventually(60*time.Second, "team-a's refusals to spend the address's failed-authentication burst", func() (bool, string) {
					return throttled() > 0, fmt.Sprintf("%v refused, %v throttled", refused(), throttled())
				})
				// At once, and more than the Paused case's: the throttle
				// lets a request through now and then as team-a's retries
				// back off, and a single one of team-b's could be it.
				for i := range teamBWidgetsNotPaused {
					b.widget(fmt.Sprintf("b%d", i))
				}
				b.eventually(60*time.Second, "a Widget of team-b to be Synced=False for a 429", func() (bool, string) {
					var seen []string
					for i := range teamBWidgetsNotPaused {
						c := b.getWidget(fmt.Sprintf("b%d", i)).GetCondition(xpv2.TypeSynced)
						if c.Status == corev1.ConditionFalse && (strings.Contains(c.Message, "429") || strings.Contains(c.Message, "rate limiting this provider")) {
							return true, ""
						}
						seen = append(seen, c.Message)
					}
					return false, fmt.Sprintf("team-b's Synced messages: %q", seen)
				})
				t.Logf("%s: after %s: the Widget API refused team-a's token %v times and answered %v requests 429 (the provider saw %v)",
					tc.reason, time.Since(start).Round(time.Second), refused(), throttled(), p.metric("widget_api_requests_total", map[string]string{"code": "429"}))
				return
			}

			for i := range teamAWidgets {
				w := a.waitSyncedFalse(fmt.Sprintf("a%d", i), "refused this ProviderConfig's token (401 unauthorized")
				c := w.GetCondition(xpv2.TypeSynced)
				if !strings.Contains(c.Message, "put a valid token in the ProviderConfig's credentials") || strings.Contains(c.Message, refusedToken) {
					t.Errorf("team-a's Widget a%d: the message must say what to do and hold no token: %q", i, c.Message)
				}
				if i == 0 {
					t.Logf("team-a's Widget a0: Synced=%s, %s: %s", c.Status, c.Reason, c.Message)
				}
			}
			// Team-b starts once team-a's resources have been refused and
			// are retrying: without the pause the burst is spent by now.
			for i := range teamBWidgets {
				b.widget(fmt.Sprintf("b%d", i))
			}
			for i := range teamBWidgets {
				b.waitReady(fmt.Sprintf("b%d", i))
			}
			// Long enough for the first pauses (10s, then 20s) to end and
			// their one attempt each to be refused.
			if d := 25*time.Second - time.Since(start); d > 0 {
				time.Sleep(d)
			}
			n429 := p.metric("widget_api_requests_total", map[string]string{"code": "429"})
			got := struct{ Refused, Throttled, Provider429 float64 }{refused(), throttled(), n429}
			t.Logf("%s: after %s: the Widget API refused team-a's token %v times, answered %v requests 429 (the provider saw %v)",
				tc.reason, time.Since(start).Round(time.Second), got.Refused, got.Throttled, got.Provider429)
			if got.Throttled != 0 || got.Provider429 != 0 {
				t.Errorf("%s: want no 429s, got %v from the Widget API, %v seen by the provider", tc.reason, got.Throttled, got.Provider429)
			}
			// The first attempt, which the others waited for, and one per
			// pause that ended (after 10s, then 20s; jitter adds up to a
			// fifth).
			if limit := 3.0; got.Refused < 1 || got.Refused > limit {
				t.Errorf("%s: want 1 to %v refusals of team-a's token, got %v", tc.reason, limit, got.Refused)
			}

			// A new token is used at each resource's next retry (the
			// controller's backoff, at most a minute, and the provider
			// reads the Secret again within its 10s TokenTTL), pause or
			// not.
			s := &corev1.Secret{}
			if err := a.update(s, "widget-token", func() { s.Data = map[string][]byte{"token": []byte(valid)} }); err != nil {
				t.Fatal(err)
			}
			fixed := time.Now()
			for i := range teamAWidgets {
				name := fmt.Sprintf("a%d", i)
				a.eventually(90*time.Second, "team-a's Widget "+name+" Ready once its Secret is fixed", func() (bool, string) {
					w := a.getWidget(name)
					return isTrue(w, xpv2.TypeReady) && isTrue(w, xpv2.TypeSynced), condition(w, xpv2.TypeReady) + " " + condition(w, xpv2.TypeSynced)
				})
			}
			t.Logf("team-a's widgets were Ready %s after its Secret was fixed", time.Since(fixed).Round(time.Second))
		})
	}
}
