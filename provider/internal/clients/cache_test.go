package clients

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/test/lib/testcert"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
)

// Two tokens whose SHA-256 digests share their first six bytes
// (2b8ffa088b03...), found with Floyd's cycle-finding over
// "widget-token-" + 12 hex digits: a key built from a truncated hash of the
// token, as the provider's once was, is the same for both.
const (
	collidingTokenA = "widget-token-e3d133f9c142"
	collidingTokenB = "widget-token-f314380e7550"
)

// TestConnectionKeyComparesFullValues checks that two connections share a
// key (and with it rate limits, a change feed and the memory of recent
// widgets) only when endpoint, token and CA bundle are all equal, even when
// a short prefix of their hashes is.
func TestConnectionKeyComparesFullValues(t *testing.T) {
	a, b := sha256.Sum256([]byte(collidingTokenA)), sha256.Sum256([]byte(collidingTokenB))
	if a == b || [6]byte(a[:6]) != [6]byte(b[:6]) {
		t.Fatalf("the test's tokens must differ and share the first six bytes of their SHA-256")
	}
	ep := "https://widgets.example.com"
	bundleA, bundleB := collidingBundles(t)
	cases := map[string]struct {
		reason         string
		tokenA, tokenB string
		caA, caB       string
		same           bool
	}{
		"TokensWithAHashPrefixInCommon": {
			reason: "Two tokens are two accounts, however much of their hashes they share.",
			tokenA: collidingTokenA, tokenB: collidingTokenB,
		},
		"BundlesWithAHashPrefixInCommon": {
			reason: "Two CA bundles are two trust decisions, however much of their hashes they share.",
			tokenA: apitest.TokenA, tokenB: apitest.TokenA, caA: bundleA, caB: bundleB,
		},
		"SameValues": {
			reason: "The same endpoint, token and bundle are the same connection.",
			tokenA: apitest.TokenA, tokenB: apitest.TokenA, caA: bundleA, caB: bundleA, same: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := NewResolver(fakes.NewKube(
				teamPC("team-a", ep, tc.caA), teamSecret("team-a", tc.tokenA),
				teamPC("team-b", ep, tc.caB), teamSecret("team-b", tc.tokenB)))
			ka := resolveIn(t, r, "team-a").Key
			kb := resolveIn(t, r, "team-b").Key
			if (ka == kb) != tc.same {
				t.Errorf("%s\nkeys %q and %q: want equal %t", tc.reason, ka, kb, tc.same)
			}
			for _, tok := range []string{tc.tokenA, tc.tokenB} {
				if strings.Contains(ka+kb, tok) {
					t.Errorf("%s\na key contains a token", tc.reason)
				}
			}
		})
	}
}

// TestCABundleCollisionKeepsTrust is the attack of issue 29's first finding:
// a tenant's caBundle whose hash shares a prefix with another tenant's must
// not give the other tenant the attacker's trust store.
func TestCABundleCollisionKeepsTrust(t *testing.T) {
	env := apitest.Start(t)
	srv := httptest.NewUnstartedServer(env.HTTP.Config.Handler)
	victimCA := pemCert(t, srv)
	victim, attacker := grindBundles(t, victimCA, selfSignedPEM(t))

	r := NewResolver(fakes.NewKube(
		teamPC("team-a", srv.URL, victim), teamSecret("team-a", apitest.TokenA),
		teamPC("team-evil", srv.URL, attacker), teamSecret("team-evil", apitest.TokenA)),
		WithRetryPolicy(widgetapi.RetryPolicy{Attempts: 1}))
	// The attacker's ProviderConfig is resolved first, so its client is
	// the one cached.
	evil := resolveIn(t, r, "team-evil")
	if _, err := evil.Client.ListWidgets(t.Context(), widgetapi.ListWidgetsOptions{}); err == nil {
		t.Errorf("the attacker's bundle does not hold the server's CA: its call should fail TLS verification")
	}
	c := resolveIn(t, r, "team-a")
	if _, err := c.Client.ListWidgets(t.Context(), widgetapi.ListWidgetsOptions{}); err != nil {
		t.Errorf("the victim's ProviderConfig got another tenant's trust store: %v", err)
	}
	if c.Key == evil.Key {
		t.Errorf("the victim's connection shares its key with the attacker's")
	}
	if n := r.httpClients.len(); n != 2 {
		t.Errorf("HTTP clients for two bundles: want 2, got %d", n)
	}
}

// TestHTTPClientsBounded checks that the HTTP client cache holds at most its
// bound and drops clients no ProviderConfig has used for its idle time.
func TestHTTPClientsBounded(t *testing.T) {
	ca := selfSignedPEM(t)
	bundle := func(i int) string { return ca + fmt.Sprintf("# %d\n", i) }
	now := time.Unix(1_700_000_000, 0)
	c := newHTTPClients(4, time.Minute)
	c.now = func() time.Time { return now }

	first, err := c.get(bundle(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 10; i++ {
		now = now.Add(time.Second)
		if _, err := c.get(bundle(i)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.get(bundle(0)); err != nil { // keeps bundle 0 recently used
			t.Fatal(err)
		}
	}
	if n := c.len(); n != 4 {
		t.Errorf("clients after 10 bundles with a bound of 4: want 4, got %d", n)
	}
	if again, _ := c.get(bundle(0)); again != first {
		t.Errorf("the most recently used client was dropped")
	}
	now = now.Add(2 * time.Minute)
	if _, err := c.get(bundle(42)); err != nil {
		t.Fatal(err)
	}
	if n := c.len(); n != 1 {
		t.Errorf("clients after the others were idle for longer than the idle time: want 1, got %d", n)
	}
}

// TestTokenTooLarge checks that a token longer than MaxTokenBytes is refused
// with an error that names the Secret and key but not the value.
func TestTokenTooLarge(t *testing.T) {
	cases := map[string]struct {
		reason  string
		token   string
		wantErr bool
	}{
		"AtTheLimit": {reason: "A token of MaxTokenBytes is used.", token: strings.Repeat("a", MaxTokenBytes)},
		"TooLarge":   {reason: "A token over MaxTokenBytes is refused.", token: strings.Repeat("b", MaxTokenBytes+1), wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := NewResolver(fakes.NewKube(teamPC("team-a", "https://widgets.example.com", ""), teamSecret("team-a", tc.token)))
			_, err := r.Resolve(t.Context(), teamMR("team-a"))
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nResolve(...): got error %v, want error %t", tc.reason, err, tc.wantErr)
			}
			if err == nil {
				return
			}
			msg := err.Error()
			if !strings.Contains(msg, "team-a/"+testSecret) || !strings.Contains(msg, testKey) || !strings.Contains(msg, fmt.Sprint(MaxTokenBytes)) {
				t.Errorf("%s\nthe error should name the Secret, the key and the limit: %s", tc.reason, msg)
			}
			if strings.Contains(msg, "bbbb") {
				t.Errorf("%s\nthe error holds the token", tc.reason)
			}
		})
	}
}

func teamPC(ns, endpoint, caBundle string) *nsv1alpha1.ProviderConfig {
	pc := nsPC(endpoint, func(s *commonv1alpha1.LocalProviderConfigSpec) { s.CABundle = caBundle })
	pc.Namespace = ns
	return pc
}

func teamSecret(ns, token string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: testSecret},
		Data:       map[string][]byte{testKey: []byte(token)},
	}
}

func teamMR(ns string) *nsv1beta1.Widget {
	mg := nsMR(&xpv2.ProviderConfigReference{Kind: nsv1alpha1.ProviderConfigKind, Name: testPC})
	mg.Namespace = ns
	return mg
}

func resolveIn(t *testing.T, r *Resolver, ns string) *Connection {
	t.Helper()
	c, err := r.Resolve(t.Context(), teamMR(ns))
	if err != nil {
		t.Fatalf("Resolve(%s): %v", ns, err)
	}
	return c
}

// collidingBundles returns two bundles of different CAs whose SHA-256
// digests share their first four bytes.
func collidingBundles(t *testing.T) (string, string) {
	t.Helper()
	return grindBundles(t, selfSignedPEM(t), selfSignedPEM(t))
}

// grindBundles appends a comment line to each of two bundles until their
// SHA-256 digests share the first four bytes (PEM parsing ignores text
// outside the blocks, so both still hold their CA). A birthday search: about
// 2^17 hashes, well under a second.
func grindBundles(t *testing.T, a, b string) (string, string) {
	t.Helper()
	prefix := func(s string) uint32 { h := sha256.Sum256([]byte(s)); return binary.BigEndian.Uint32(h[:4]) }
	variant := func(s string, i int) string { return s + fmt.Sprintf("# %d\n", i) }
	const stored = 1 << 17
	seen := make(map[uint32]int, stored)
	for i := range stored {
		seen[prefix(variant(a, i))] = i
	}
	for j := range 1 << 22 {
		if i, ok := seen[prefix(variant(b, j))]; ok {
			return variant(a, i), variant(b, j)
		}
	}
	t.Fatal("no bundles with a common 4-byte hash prefix found")
	return "", ""
}

// selfSignedPEM returns a new self-signed CA certificate as PEM.
func selfSignedPEM(t *testing.T) string {
	t.Helper()
	cert, _ := testcert.SelfSigned(t, "attacker CA")
	return string(cert)
}

// TestConnectionNamespace checks that a connection names the tenant that
// controls it: the namespace of a namespaced ProviderConfig, none for a
// ClusterProviderConfig.
func TestConnectionNamespace(t *testing.T) {
	kube := fakes.NewKube(teamPC("team-a", "https://widgets.example.com", ""), teamSecret("team-a", apitest.TokenA),
		clusterPC("https://widgets.example.com"), tokenSecret(testSystemNS, apitest.TokenA))
	r := NewResolver(kube)
	if got := resolveIn(t, r, "team-a").Namespace; got != "team-a" {
		t.Errorf("a namespaced ProviderConfig's connection: want namespace team-a, got %q", got)
	}
	c, err := r.Resolve(t.Context(), nsMR(&xpv2.ProviderConfigReference{Kind: nsv1alpha1.ClusterProviderConfigKind, Name: testPC}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Namespace != "" {
		t.Errorf("a ClusterProviderConfig's connection: want no namespace, got %q", c.Namespace)
	}
}

// TestObservedStatuses checks that the statuses a Widget API answers reach
// the observer (and so metric labels) as the contract's codes or their
// class: a server cannot add a series per code it makes up.
func TestObservedStatuses(t *testing.T) {
	var status atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(int(status.Load()))
	}))
	t.Cleanup(srv.Close)
	var got []int
	r := NewResolver(fakes.NewKube(teamPC("team-a", srv.URL, ""), teamSecret("team-a", apitest.TokenA)),
		WithRetryPolicy(widgetapi.RetryPolicy{Attempts: 1}),
		WithObserver(func(_ string, s int, _ time.Duration) { got = append(got, s) }))
	c := resolveIn(t, r, "team-a")
	for _, s := range []int{404, 418, 299, 429, 599, 999} {
		status.Store(int64(s))
		_, _ = c.Client.GetWidget(t.Context(), "w")
	}
	if diff := cmp.Diff([]int{404, 400, 200, 429, 500, 0}, got); diff != "" {
		t.Errorf("statuses observed: -want, +got:\n%s", diff)
	}
}
