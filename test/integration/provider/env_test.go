// Package provider_test runs provider-widget, the real binary, against a real
// kube-apiserver and etcd (envtest, binaries from hack/tools.sh) and the
// reference Widget API server, and checks its behaviour end to end.
package provider_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/test/lib/kube"
	"github.com/widgetco/crossplane-widget/test/lib/proc"
	"github.com/widgetco/crossplane-widget/test/lib/providerenv"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// suite is shared by every test: one API server, one provider binary.
var suite struct {
	kube       client.Client
	kubeconfig string
	bin        string
	skip       string
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv(kube.AssetsEnv) == "" {
		suite.skip = kube.ErrNoAssets.Error()
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "provider-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)

	k, err := providerenv.StartKube(providerenv.Options{Root: filepath.Join("..", "..", ".."), Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer k.Stop()
	suite.kube, suite.kubeconfig = k.Client, k.Kubeconfig

	defer proc.Clean()
	if suite.bin, err = proc.Build(context.Background(), providerenv.Binary); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// env is one test's world: a namespace, a Widget API server and a token.
type env struct {
	t    *testing.T
	kube client.Client
	api  *apitest.Env
	ns   string
	// token is the tenant's Widget API token; tokenB another tenant's
	// (apitest.ProjectB), on the same API.
	token, tokenB string
}

var nsCounter atomic.Int32

func newEnv(t *testing.T, opts ...apitest.Option) *env {
	t.Helper()
	if suite.skip != "" {
		t.Skip(suite.skip)
	}
	// Tokens of this test's API alone: an earlier test's ProviderConfigs
	// still name their API's address, which the kernel may give this
	// test's API, and the provider (each test's) still reconciles their
	// managed resources. Short, as apitest's: the API's failed-auth
	// throttle holds short tokens back with their address.
	tokenA, tokenB := "ta-"+rand.Text()[:8], "tb-"+rand.Text()[:8]
	base := []apitest.Option{apitest.WithOptions(func(o *server.Options) {
		o.Tokens = map[string]string{tokenA: apitest.ProjectA, tokenB: apitest.ProjectB}
		o.ProvisionDelay = 200 * time.Millisecond
		o.ResizeDelay = 200 * time.Millisecond
		o.DeleteDelay = 200 * time.Millisecond
	})}
	e := &env{t: t, kube: suite.kube, api: apitest.Start(t, append(base, opts...)...), token: tokenA, tokenB: tokenB}
	e.ns = fmt.Sprintf("it-%d-%s", nsCounter.Add(1), strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")))
	if len(e.ns) > 63 {
		e.ns = strings.TrimRight(e.ns[:63], "-")
	}
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}})
	return e
}

func (e *env) ctx() context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	e.t.Cleanup(cancel)
	return c
}

func (e *env) create(o client.Object) {
	e.t.Helper()
	if err := e.kube.Create(e.ctx(), o); err != nil {
		e.t.Fatalf("cannot create %T %s: %v", o, o.GetName(), err)
	}
}

// update reads o (named name, in the test's namespace) afresh, changes it
// and writes it, retried on a conflict: the provider writes the same
// objects, so a copy read moments ago may already be stale.
func (e *env) update(o client.Object, name string, change func()) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.kube.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: name}, o); err != nil {
			return err
		}
		change()
		return e.kube.Update(e.ctx(), o)
	})
}

// tokenSecret creates the Secret holding the Widget API token.
func (e *env) tokenSecret(name string) {
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}, StringData: map[string]string{"token": e.token + "\n"}})
}

// providerConfig creates a namespaced ProviderConfig "default" and its Secret
// (the token with a trailing newline, as a file-made Secret has it).
func (e *env) providerConfig() {
	e.t.Helper()
	if err := providerenv.Project(e.ctx(), e.kube, e.ns, e.api.URL, e.token+"\n"); err != nil {
		e.t.Fatal(err)
	}
}

// client is a Widget API client for checking what the provider did.
func (e *env) client() *widgetapi.Client { return e.api.Client(e.t, e.token) }

// eventually polls fn until it reports done; on timeout it fails with fn's
// last explanation.
func (e *env) eventually(d time.Duration, what string, fn func() (bool, string)) time.Duration {
	e.t.Helper()
	return wait.For(e.t, d, what, func() error {
		if done, why := fn(); !done {
			return errors.New(why)
		}
		return nil
	})
}

// provider is a running provider-widget process.
type provider struct{ *providerenv.Provider }

// startProvider runs the provider binary until the test ends, with a poll
// of a minute and change feed long polls of 5s unless args say otherwise.
func startProvider(t *testing.T, args ...string) *provider {
	t.Helper()
	full := append([]string{"--debug", "--poll-interval", "1m", "--feed-wait", "5s"}, args...)
	pp, err := providerenv.StartProvider(suite.bin, suite.kubeconfig, filepath.Join(t.TempDir(), "provider.log"), full...)
	if err != nil {
		t.Fatal(err)
	}
	p := &provider{pp}
	t.Cleanup(func() {
		_ = p.Stop()
		if t.Failed() || os.Getenv("PROVIDER_LOG") != "" {
			t.Logf("provider log:\n%s", p.Logs())
		}
	})
	return p
}

// logs returns everything the provider wrote.
func (p *provider) logs() string { return p.Logs() }

// kill sends SIGKILL: no chance to finish anything.
func (p *provider) kill() { _ = p.Kill() }

// metric returns the sum of a provider metric's samples whose labels
// include every given pair, or -1 when the metrics cannot be read.
func (p *provider) metric(name string, labels map[string]string) float64 {
	return p.Metric(context.Background(), name, labels)
}

// defaultName is the external name the provider gives a namespaced resource
// that names none, as docs/provider.md documents: "<namespace>-<name>-<hash>", the
// hash being the first 8 hex digits of SHA-256("<namespace>/<name>") (for
// names short enough not to be cut).
func defaultName(ns, name string) string {
	sum := sha256.Sum256([]byte(ns + "/" + name))
	return ns + "-" + name + "-" + hex.EncodeToString(sum[:])[:8]
}

// condition returns a condition's status, reason and message.
func condition(mg interface {
	GetCondition(xpv2.ConditionType) xpv2.Condition
}, ct xpv2.ConditionType) string {
	c := mg.GetCondition(ct)
	return fmt.Sprintf("%s=%s (%s) %q", ct, c.Status, c.Reason, c.Message)
}

func isTrue(mg interface {
	GetCondition(xpv2.ConditionType) xpv2.Condition
}, ct xpv2.ConditionType) bool {
	return mg.GetCondition(ct).Status == corev1.ConditionTrue
}
