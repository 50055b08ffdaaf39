//go:build linux

package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	namespacedv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	"github.com/widgetco/crossplane-widget/test/lib/leaks"
)

// keySecretShape matches the access key secrets the Widget API issues
// ("wks_" and 43 base64url characters), so that the scan also finds keys
// whose secret never reached a Secret, where the ledger would learn it.
var keySecretShape = regexp.MustCompile(`wks_[A-Za-z0-9_-]{43}`)

// keyField matches the connection details that hold an access key secret: a
// WidgetKey's "key", an XWidget's "key-0", "key-1"...
var keyField = regexp.MustCompile(`^key(-[0-9]+)?$`)

// maxLeaksReported bounds the report; the rest are counted.
const maxLeaksReported = 40

// A secretLedger watches every Secret while the suite runs and records each
// access key secret that appears in one (any WidgetKey's or XWidget's
// connection details), and in which Secrets every key secret and Widget API
// token sits. It keeps what it saw after the Secret is deleted, so the check
// at the end covers the keys of scenarios that cleaned up.
type secretLedger struct {
	tokens []string
	// projected returns the projected ServiceAccount tokens written so
	// far, which belong in no Secret.
	projected func() []string
	stop      chan struct{}
	inf       cache.SharedIndexInformer

	mu sync.Mutex
	// keys are the access key secrets seen.
	keys map[string]bool
	// at maps each secret to the Secrets ("namespace/name") holding it.
	at map[string]map[string]bool
}

// startSecretLedger starts watching Secrets, and returns once it has seen
// those that exist. tokens are the Widget API tokens of the suite;
// projected returns the projected ServiceAccount tokens written so far.
func startSecretLedger(cfg *rest.Config, projected func() []string, tokens ...string) (*secretLedger, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, errors.Wrap(err, "cannot create a client to watch Secrets")
	}
	l := &secretLedger{tokens: tokens, projected: projected, stop: make(chan struct{}), keys: map[string]bool{}, at: map[string]map[string]bool{}}
	f := informers.NewSharedInformerFactory(cs, 0)
	l.inf = f.Core().V1().Secrets().Informer()
	if _, err := l.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    l.see,
		UpdateFunc: func(_, o any) { l.see(o) },
	}); err != nil {
		return nil, errors.Wrap(err, "cannot watch Secrets")
	}
	f.Start(l.stop)
	if !cache.WaitForCacheSync(l.stop, l.inf.HasSynced) {
		close(l.stop)
		return nil, errors.New("cannot list Secrets to watch them")
	}
	return l, nil
}

// see records a Secret: the key secrets it holds, and where each known
// secret sits.
func (l *secretLedger) see(o any) {
	s, ok := o.(*corev1.Secret)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, v := range s.Data {
		if len(v) > 0 && keyField.MatchString(k) {
			l.keys[string(v)] = true
		}
		for _, m := range keySecretShape.FindAll(v, -1) {
			l.keys[string(m)] = true
		}
	}
	name := s.Namespace + "/" + s.Name
	for _, v := range s.Data {
		for secret := range l.candidates() {
			if bytes.Contains(v, []byte(secret)) {
				if l.at[secret] == nil {
					l.at[secret] = map[string]bool{}
				}
				l.at[secret][name] = true
			}
		}
	}
}

// candidates returns every secret the ledger knows. Call with mu held.
func (l *secretLedger) candidates() map[string]bool {
	out := make(map[string]bool, len(l.keys)+len(l.tokens))
	for k := range l.keys {
		out[k] = true
	}
	for _, t := range l.tokens {
		out[t] = true
	}
	if l.projected != nil {
		for _, t := range l.projected() {
			out[t] = true
		}
	}
	return out
}

// finish stops watching, after one last look at every Secret, and returns
// the key secrets and where each key secret and token sat.
func (l *secretLedger) finish() (keys []string, at map[string][]string) {
	for _, o := range l.inf.GetStore().List() {
		l.see(o)
	}
	close(l.stop)
	l.mu.Lock()
	defer l.mu.Unlock()
	keys = slices.Sorted(maps.Keys(l.keys))
	at = map[string][]string{}
	for secret, where := range l.at {
		at[secret] = slices.Sorted(maps.Keys(where))
	}
	return keys, at
}

// checkSecrets is the suite's canary check, run once after every scenario:
// every access key secret the suite's Secrets ever held and every Widget API
// token must appear only in the Secrets they belong in (misplacedSecrets) -
// in no process's log, event, condition, status or other object (see
// leaks.Scan). It returns an error listing where they appeared, by
// fingerprint, never the secrets themselves.
func checkSecrets(ctx context.Context, l *secretLedger) error {
	keys, at := l.finish()
	credentials, err := credentialSecrets(ctx)
	if err != nil {
		return err
	}
	found := misplacedSecrets(keys, l.tokens, at, credentials, suite.c.Namespace())
	// A projected token belongs in its pod's volume, in no Secret.
	projected, tokenCanaries := projectedTokenCanaries()
	found = append(found, misplacedSecrets(nil, projected, at, nil, suite.c.Namespace())...)

	canaries := []leaks.Canary{{Kind: "key-shaped string", Pattern: keySecretShape}}
	canaries = append(canaries, tokenCanaries...)
	for _, t := range l.tokens {
		canaries = append(canaries, leaks.Canary{Kind: "Widget API token", Value: t})
	}
	for _, k := range keys {
		canaries = append(canaries, leaks.Canary{Kind: "access key secret", Value: k})
	}
	// The registry's password: only in its pull Secrets.
	if pw := suite.c.Registry.Auth.Password; pw != "" {
		canaries = append(canaries, leaks.Canary{Kind: "registry password", Value: pw})
	}
	// What signs the packages: nowhere in the cluster or its logs.
	canaries = append(canaries, signingCanaries()...)
	scan, err := leaks.Scan(ctx, suite.c.Kube.Config, suite.c.LogDirs(ctx), leaks.NewScanner(canaries...))
	found = append(found, scan.Leaks...)
	fmt.Printf("E2E SECRETS: looked for %d access key secrets, %d Widget API token(s), %d ServiceAccount tokens (%d projected), the registry password, the package signing key and its password, and key-shaped strings in %d logs and %d objects (every type but Secrets), and checked the Secrets holding them: %d leaks\n",
		len(keys), len(l.tokens), len(tokenCanaries), len(projected), scan.Logs, scan.Objects, len(found))
	if err != nil {
		return errors.Wrap(err, "cannot look everywhere for leaked secrets; run the suite again, and if this persists fix the scan (test/lib/leaks)")
	}
	if len(keys) == 0 {
		fmt.Println("E2E SECRETS: no scenario that ran created an access key, so only the token and key-shaped strings were looked for")
	}
	if len(found) == 0 {
		return nil
	}
	b := &strings.Builder{}
	fmt.Fprintf(b, "SECRET LEAKS: %d places hold an access key secret or Widget API token they must not (secrets are named by the first 12 hex digits of their SHA-256; the run's logs/ directory is kept):", len(found))
	for i, lk := range found {
		if i == maxLeaksReported {
			fmt.Fprintf(b, "\n  ... and %d more", len(found)-i)
			break
		}
		fmt.Fprintf(b, "\n  %s", lk)
	}
	b.WriteString("\nFind what writes them there (a log line, an event, a condition or status field) and make it stop: a secret belongs only in Secrets.")
	return errors.New(b.String())
}

// credentialSecrets returns the Secrets ("namespace/name") that
// ProviderConfigs and ClusterProviderConfigs take their token from.
func credentialSecrets(ctx context.Context) (map[string]bool, error) {
	pcs := &namespacedv1alpha1.ProviderConfigList{}
	cpcs := &namespacedv1alpha1.ClusterProviderConfigList{}
	legacy := &clusterv1alpha1.ProviderConfigList{}
	for _, l := range []client.ObjectList{pcs, cpcs, legacy} {
		if err := suite.kube.List(ctx, l); err != nil {
			return nil, errors.Wrap(err, "cannot list provider configs")
		}
	}
	specs := make([]commonv1alpha1.ProviderConfigSpec, 0, len(pcs.Items)+len(cpcs.Items)+len(legacy.Items))
	for i := range pcs.Items {
		specs = append(specs, pcs.Items[i].GetProviderConfigSpec())
	}
	for i := range cpcs.Items {
		specs = append(specs, cpcs.Items[i].GetProviderConfigSpec())
	}
	for i := range legacy.Items {
		specs = append(specs, legacy.Items[i].GetProviderConfigSpec())
	}
	out := map[string]bool{}
	for _, s := range specs {
		if r := s.Credentials.SecretRef; r != nil {
			out[r.Namespace+"/"+r.Name] = true
		}
	}
	return out, nil
}

// misplacedSecrets returns the Secrets that hold a secret they must not:
//
//   - a Widget API token belongs only in the Secrets provider configs take
//     it from (credentials, "namespace/name");
//   - an access key secret belongs to one tenant: every Secret holding it is
//     in one namespace - apart from Crossplane's own (crossplaneNS), where
//     the legacy claims' composites and managed resources write theirs.
//
// at maps each secret to the Secrets holding it.
func misplacedSecrets(keys, tokens []string, at map[string][]string, credentials map[string]bool, crossplaneNS string) []leaks.Leak {
	var out []leaks.Leak
	for _, t := range tokens {
		for _, s := range at[t] {
			if !credentials[s] {
				out = append(out, leaks.Leak{Canary: "Widget API token " + leaks.Fingerprint(t), Where: "Secret " + s + ", which no provider config takes its token from", Form: "verbatim"})
			}
		}
	}
	for _, k := range keys {
		namespaces := map[string]bool{}
		for _, s := range at[k] {
			if ns, _, _ := strings.Cut(s, "/"); ns != crossplaneNS {
				namespaces[ns] = true
			}
		}
		if len(namespaces) > 1 {
			out = append(out, leaks.Leak{Canary: "access key secret " + leaks.Fingerprint(k), Where: "Secrets of " + strings.Join(slices.Sorted(maps.Keys(namespaces)), " and ") + " (" + strings.Join(at[k], ", ") + "), but a key belongs to one namespace", Form: "verbatim"})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Canary < out[j].Canary })
	return out
}

// checkSecretsTimeout bounds checkSecrets.
const checkSecretsTimeout = 5 * time.Minute

func TestMisplacedSecrets(t *testing.T) {
	// Fingerprints, computed by hand (printf %s tok-canary-1 | sha256sum):
	// tok-canary-1 sha256:1f73a9fc1093, wks_team-a-key sha256:6dc5bed6a43f,
	// wks_team-b-key sha256:42ef086c680d, wks_legacy-key sha256:2a74e833fba0.
	const (
		token    = "tok-canary-1"
		keyA     = "wks_team-a-key"
		keyB     = "wks_team-b-key"
		keyClaim = "wks_legacy-key"
	)
	credentials := map[string]bool{"crossplane-system/widget-api-token": true, "team-a/widget-api-token": true}
	cases := map[string]struct {
		reason string
		keys   []string
		at     map[string][]string
		want   []leaks.Leak
	}{
		"WhereTheyBelong": {
			reason: "Tokens in provider configs' Secrets and keys in their own tenant's Secrets (a legacy claim's also in Crossplane's namespace) are where they belong.",
			keys:   []string{keyA, keyB, keyClaim},
			at: map[string][]string{
				token:    {"crossplane-system/widget-api-token", "team-a/widget-api-token"},
				keyA:     {"team-a/web-key-0", "team-a/web-connection"},
				keyB:     {"team-b/ci-key"},
				keyClaim: {"crossplane-system/0a1b-key-0", "crossplane-system/0a1b", "team-c/claim-secret"},
			},
		},
		"TokenInConnectionSecret": {
			reason: "A token in a connection Secret reaches a tenant: misplaced.",
			keys:   []string{keyA},
			at: map[string][]string{
				token: {"crossplane-system/widget-api-token", "team-a/web-connection"},
				keyA:  {"team-a/web-key-0"},
			},
			want: []leaks.Leak{{Canary: "Widget API token sha256:1f73a9fc1093", Where: "Secret team-a/web-connection, which no provider config takes its token from", Form: "verbatim"}},
		},
		"KeyInAnotherTenantsSecret": {
			reason: "Team b's key in a Secret of team a's crossed tenants: misplaced.",
			keys:   []string{keyA, keyB},
			at: map[string][]string{
				keyA: {"team-a/web-key-0"},
				keyB: {"team-a/stolen", "team-b/ci-key", "crossplane-system/copy"},
			},
			want: []leaks.Leak{{Canary: "access key secret sha256:42ef086c680d", Where: "Secrets of team-a and team-b (team-a/stolen, team-b/ci-key, crossplane-system/copy), but a key belongs to one namespace", Form: "verbatim"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := misplacedSecrets(tc.keys, []string{token}, tc.at, credentials, "crossplane-system")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nmisplacedSecrets(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
