package harness

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/widgetco/crossplane-widget/test/lib/kube"
)

// TestProjectedServiceAccountToken: a projected volume with a
// serviceAccountToken source holds a token kube-apiserver issued for the
// pod's ServiceAccount, the source's audience and lifetime, and the node
// replaces it with a fresh one before it expires (here after a second,
// Options.ProjectedTokenRefresh), seen through the bind mount in the
// container's root.
func TestProjectedServiceAccountToken(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root, as the harness's node does")
	}
	e, err := kube.Start(kube.Options{})
	if errors.Is(err, kube.ErrNoAssets) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "crossplane-system"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "crossplane-system", Name: "provider-widget-abc"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "crossplane-system", Name: "ca"}, Data: map[string]string{"ca.crt": "a CA"}}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	ledger := &tokenLedger{}
	p := &pod{
		name: "provider-widget-abc-0",
		spec: corev1.PodSpec{ServiceAccountName: "provider-widget-abc"},
		env:  &podEnv{kube: e.Client, namespace: "crossplane-system", tokenRefresh: time.Second, tokens: ledger, log: slog.New(slog.DiscardHandler)},
		log:  testLogger(t),
		dir:  dir,
	}
	vol := corev1.Volume{Name: "widget-api-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
		ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "widget-api", ExpirationSeconds: ptr.To[int64](600), Path: "token"},
	}, {
		ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}},
	}}}}}
	target := filepath.Join(dir, "root", "var", "run", "secrets", "widgetco.io", "serviceaccount")
	podCtx, stop := context.WithCancel(ctx)
	defer func() {
		stop()
		p.wg.Wait()
		_ = p.mounts.unmountAll()
	}()
	if err := p.projected(podCtx, vol, target); err != nil {
		t.Fatal(err)
	}

	first := readToken(t, filepath.Join(target, "token"))
	c := claims(t, first)
	if c.Sub != "system:serviceaccount:crossplane-system:provider-widget-abc" || len(c.Aud) != 1 || c.Aud[0] != "widget-api" || c.Exp-c.Iat != 600 {
		t.Errorf("token claims sub=%q aud=%q lifetime=%ds, want the pod's ServiceAccount, [widget-api], 600s", c.Sub, c.Aud, c.Exp-c.Iat)
	}
	review(ctx, t, e, first)
	if b, err := os.ReadFile(filepath.Join(target, "ca.crt")); err != nil || string(b) != "a CA" {
		t.Errorf("ca.crt of the ConfigMap source: %q, %v; want \"a CA\"", b, err)
	}

	// Refreshed within a few seconds; the file always holds a whole token.
	var second string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		tok := readToken(t, filepath.Join(target, "token"))
		if tok != first {
			second = tok
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if second == "" {
		t.Fatal("the projected token was not refreshed within 20s with a refresh period of 1s")
	}
	review(ctx, t, e, second)
	if got := ledger.all(); len(got) < 2 || got[0] != first {
		t.Errorf("the ledger holds %d tokens, the first the one first written: %t; want at least 2, the first first", len(got), len(got) > 0 && got[0] == first)
	}
}

func readToken(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(b), ".") != 2 {
		t.Fatalf("%s holds %d bytes that are not a JWT", path, len(b))
	}
	return string(b)
}

type tokenClaims struct {
	Sub string   `json:"sub"`
	Aud []string `json:"aud"`
	Iat int64    `json:"iat"`
	Exp int64    `json:"exp"`
}

func claims(t *testing.T, tok string) tokenClaims {
	t.Helper()
	parts := strings.Split(tok, ".")
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c tokenClaims
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// review asks kube-apiserver whether tok is valid for the audience
// widget-api.
func review(ctx context.Context, t *testing.T, e *kube.Env, tok string) {
	t.Helper()
	tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: tok, Audiences: []string{"widget-api"}}}
	if err := e.Client.Create(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if !tr.Status.Authenticated {
		t.Errorf("kube-apiserver does not accept the projected token for audience widget-api: %s", tr.Status.Error)
	}
}
