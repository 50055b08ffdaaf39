//go:build linux

// Package upgrade_test upgrades a control plane running provider-widget and
// function-widget of the last release with the v1alpha1-only API to the
// packages of this tree (v1beta1, the storage version, and a conversion
// webhook), as a platform team would, and checks that nothing is lost or
// re-created on the way.
//
// It builds the old packages from git (the parent of the commit that added
// v1beta1) and runs its own one-node cluster (test/lib/cluster, as root),
// so it takes a few minutes: set E2E_API_UPGRADE=1 (`make e2e-upgrade`). It
// needs the tools of `bash hack/tools.sh env` and the packages of `make
// xpkg`.
package upgrade_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/apis"
	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	namespacedv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
	"github.com/widgetco/crossplane-widget/test/lib/widgetserver"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// The versions the packages are published at: the old packages, then this
// tree's.
const (
	oldVersion = "v0.0.1"
	newVersion = "v0.0.2"
)

const (
	ns          = "team-a"
	waitTimeout = 5 * time.Minute
	// firstBeta is a path that exists only from the commit that added
	// v1beta1 on: the old packages are built from that commit's parent.
	firstBeta = "apis/namespaced/v1beta1"
)

// managed is a managed resource of either version and scope.
type managed interface {
	client.Object
	GetCondition(ct xpv2.ConditionType) xpv2.Condition
}

type env struct {
	t    *testing.T
	ctx  context.Context
	c    *cluster.Cluster
	kube client.Client
	api  *widgetapi.Client
}

func TestAPIUpgrade(t *testing.T) {
	if os.Getenv("E2E_API_UPGRADE") == "" {
		t.Skip("set E2E_API_UPGRADE=1 (make e2e-upgrade): builds the previous API's packages from git and runs its own control plane")
	}
	tools, err := cluster.Requirements()
	if err != nil {
		t.Fatalf("runs a real one-node cluster (as root, %s=1, eval \"$(bash hack/tools.sh env)\"): %v", cluster.EnableEnv, err)
	}
	crossplane, crank := os.Getenv("CROSSPLANE_BIN"), os.Getenv("CRANK_BIN")
	if crossplane == "" || crank == "" {
		t.Fatal("CROSSPLANE_BIN or CRANK_BIN is unset: eval \"$(bash hack/tools.sh env)\"")
	}
	root, err := platform.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	current, err := platform.FindPackages(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo}))

	begin := time.Now()
	oldRoot, old := buildOld(ctx, t, root, crank)
	t.Logf("MEASURE: built the v1alpha1-only packages in %s", time.Since(begin).Round(time.Second))

	token := "upgrade-" + rand.Text()
	// Short: containerd's and kubelet's sockets live below it.
	dir, err := os.MkdirTemp("", "wupgrade-")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Start(ctx, cluster.Options{Tools: tools, Dir: dir, Log: log})
	if err != nil {
		t.Fatalf("cannot start the cluster (kept %s): %v", dir, err)
	}
	defer func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
		if left := c.Leftovers(); len(left) > 0 {
			t.Errorf("the cluster left behind:\n%s", strings.Join(left, "\n"))
		}
		if !t.Failed() && os.Getenv("E2E_KEEP_DIR") == "" {
			_ = os.RemoveAll(dir)
			return
		}
		t.Logf("kept the run's directory %s", dir)
	}()
	if _, err := c.InstallCrossplane(ctx, cluster.Crossplane{
		Bin: crossplane, Version: "v2.4.2", Args: platform.CoreArgs(),
		Values: []string{"provider.defaultActivations={}"},
	}); err != nil {
		t.Fatal(err)
	}
	widgets, err := widgetserver.Start(server.Options{Tokens: map[string]string{token: "upgrade"}, ProvisionDelay: time.Second, ResizeDelay: time.Second, DeleteDelay: time.Second}, dir, net.JoinHostPort(c.NodeIP(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = widgets.Close() }()

	old.Version = oldVersion
	if err := platform.Install(ctx, c, widgets.URL, platform.Options{Root: oldRoot, Packages: old, Crank: crank, Token: token, Log: log}); err != nil {
		t.Fatal(err)
	}
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, extv1.AddToScheme, apis.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	kube, err := client.New(c.RESTConfig(), client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	api, err := widgetapi.New(widgets.URL, widgetapi.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, c: c, kube: kube, api: api}
	if err := platform.EnsureNamespace(ctx, kube, ns); err != nil {
		t.Fatal(err)
	}

	// Before: v1alpha1 managed resources of both scopes, a claim and an
	// XWidget, all Ready on the old packages.
	before := e.createV1alpha1("old")
	claim, xr := e.createComposites(oldRoot)
	e.waitReady(before...)
	e.waitCompositesReady(claim, xr)
	widgetsBefore, keysBefore := e.snapshot()
	t.Logf("Before the upgrade: %d widgets, %d keys in the Widget API", len(widgetsBefore), len(keysBefore))

	// Watch the managed resources through the upgrade: none may lose Ready.
	recorders := e.recordReady()

	// Upgrade, as docs/install.md#upgrade says: the dependencies, then the
	// Configuration.
	begin = time.Now()
	ref, err := platform.Release(ctx, c, root, crank, current, newVersion, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpgradeProvider(ctx, platform.ProviderName, platform.DependencyRef(c, "provider-widget", newVersion), platform.ProviderRuntimeConfig); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpgradeFunction(ctx, platform.FunctionName, platform.DependencyRef(c, "function-widget", newVersion), platform.FunctionRuntimeConfig); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyConfiguration(ctx, platform.ConfigurationName, ref); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitConfiguration(ctx, platform.ConfigurationName, ref); err != nil {
		t.Fatal(err)
	}
	t.Logf("MEASURE: upgrade to %s took %s", newVersion, time.Since(begin).Round(100*time.Millisecond))
	e.eventually("CRDs serve v1beta1 as the storage version, with the conversion webhook wired", e.crdsUpgraded)

	// After: every object Ready and Synced, readable in both versions with
	// the fields where v1beta1 keeps them; nothing re-created.
	e.waitReady(before...)
	e.waitCompositesReady(claim, xr)
	e.checkBothVersions()
	widgetsAfter, keysAfter := e.snapshot()
	e.sameExternal(widgetsBefore, widgetsAfter, "widget")
	e.sameExternal(keysBefore, keysAfter, "key")
	for _, r := range recorders {
		for _, l := range r.Lost() {
			t.Errorf("%s lost Ready during the upgrade at %s: %s %s", l.Name, l.At.Format(time.RFC3339Nano), l.Reason, l.Message)
		}
	}

	// Objects written afterwards, in either version, work.
	e.waitReady(e.createV1alpha1("new-alpha")...)
	e.waitReady(e.createV1beta1("new-beta")...)

	// Migrate the stored objects to v1beta1, then drop v1alpha1 from the
	// CRDs' storedVersions: the procedure in docs/api-versions.md.
	e.migrateStorage()

	// The webhook down: v1alpha1 requests fail with a clear error,
	// v1beta1 ones (the provider's own) work, nothing is lost; the webhook
	// back, v1alpha1 works again by itself.
	e.webhookDown()
	e.waitReady(before...)
	widgetsEnd, keysEnd := e.snapshot()
	if len(widgetsEnd) != len(widgetsBefore)+4 || len(keysEnd) != len(keysBefore)+4 {
		t.Errorf("Widget API holds %d widgets and %d keys at the end, want %d and %d (the old ones and four of each created after the upgrade)", len(widgetsEnd), len(keysEnd), len(widgetsBefore)+4, len(keysBefore)+4)
	}
	e.sameExternal(widgetsBefore, widgetsEnd, "widget")
}

// buildOld checks out the parent of the commit that added v1beta1 into a
// git worktree and builds its packages there (amd64 only) at oldVersion.
func buildOld(ctx context.Context, t *testing.T, root, crank string) (string, platform.Packages) {
	t.Helper()
	added := git(ctx, t, root, "log", "--format=%H", "--diff-filter=A", "-1", "--", firstBeta)
	if added == "" {
		t.Fatalf("cannot find the commit that added %s: is this a full clone?", firstBeta)
	}
	dir := filepath.Join(t.TempDir(), "v1alpha1")
	git(ctx, t, root, "worktree", "add", "--detach", dir, added+"^")
	t.Cleanup(func() { git(context.WithoutCancel(ctx), t, root, "worktree", "remove", "--force", dir) })
	c := exec.CommandContext(ctx, "go", "run", "./package/build", "xpkg", "--version", oldVersion, "--arch", "amd64", "--output-dir", "_output", "--registry", "ghcr.io/widgetco")
	c.Dir = dir
	c.Env = append(os.Environ(), "CRANK_BIN="+crank)
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("cannot build the packages of %s^: %v\n%s", added, err, out)
	}
	old, err := platform.FindPackages(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Old packages from %s^: %s", added[:12], old.Provider)
	return dir, old
}

func git(ctx context.Context, t *testing.T, dir string, args ...string) string {
	t.Helper()
	c := exec.CommandContext(ctx, "git", args...)
	c.Dir = dir
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Run(); err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out.String())
	}
	return strings.TrimSpace(out.String())
}

func (e *env) eventually(what string, fn func() error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, waitTimeout)
	defer cancel()
	var last error
	if err := wait.Poll(ctx, 500*time.Millisecond, func(context.Context) (bool, error) {
		last = fn()
		return last == nil, nil
	}); err != nil {
		e.t.Fatalf("%s: not after %s: %v (last: %v)", what, waitTimeout, err, last)
	}
}

func (e *env) create(objs ...client.Object) {
	e.t.Helper()
	for _, o := range objs {
		if err := e.kube.Create(e.ctx, o); err != nil {
			e.t.Fatalf("cannot create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// createV1alpha1 creates, in v1alpha1, a namespaced Widget with a region and
// a WidgetKey with a description, and the same cluster-scoped.
func (e *env) createV1alpha1(prefix string) []managed {
	nw := &namespacedv1alpha1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: prefix + "-w"},
		Spec: namespacedv1alpha1.WidgetSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"}},
			ForProvider:         commonv1alpha1.WidgetParameters{Size: ptr.To("medium"), Region: ptr.To("eu-west-1"), Labels: map[string]string{"team": "a"}},
		},
	}
	nk := &namespacedv1alpha1.WidgetKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: prefix + "-k"},
		Spec: namespacedv1alpha1.WidgetKeySpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{
				ProviderConfigReference:          &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"},
				WriteConnectionSecretToReference: &xpv2.LocalSecretReference{Name: prefix + "-k"},
			},
			ForProvider: namespacedv1alpha1.WidgetKeyParameters{
				WidgetNameRef:       &xpv2.NamespacedReference{Name: nw.Name},
				WidgetKeyParameters: commonv1alpha1.WidgetKeyParameters{Description: ptr.To("key of " + prefix)},
			},
		},
	}
	cw := &clusterv1alpha1.Widget{
		ObjectMeta: metav1.ObjectMeta{Name: "upgrade-" + prefix + "-w"},
		Spec: clusterv1alpha1.WidgetSpec{
			ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{ProviderConfigReference: &xpv2.Reference{Name: "default"}},
			ForProvider:                commonv1alpha1.WidgetParameters{Size: ptr.To("small"), Region: ptr.To("us-east-1")},
		},
	}
	ck := &clusterv1alpha1.WidgetKey{
		ObjectMeta: metav1.ObjectMeta{Name: "upgrade-" + prefix + "-k"},
		Spec: clusterv1alpha1.WidgetKeySpec{
			ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{
				ProviderConfigReference:          &xpv2.Reference{Name: "default"},
				WriteConnectionSecretToReference: &xpv2.SecretReference{Name: "upgrade-" + prefix + "-k", Namespace: ns},
			},
			ForProvider: clusterv1alpha1.WidgetKeyParameters{
				WidgetNameRef:       &xpv2.Reference{Name: cw.Name},
				WidgetKeyParameters: commonv1alpha1.WidgetKeyParameters{Description: ptr.To("cluster key of " + prefix)},
			},
		},
	}
	e.create(nw, nk, cw, ck)
	return []managed{nw, nk, cw, ck}
}

// createV1beta1 is createV1alpha1 in v1beta1.
func (e *env) createV1beta1(prefix string) []managed {
	nw := &namespacedv1beta1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: prefix + "-w"},
		Spec: namespacedv1beta1.WidgetSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"}},
			ForProvider:         commonv1beta1.WidgetParameters{Size: ptr.To("medium"), Labels: map[string]string{"team": "a"}},
			InitProvider:        commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1"), Description: ptr.To("first description")},
		},
	}
	nk := &namespacedv1beta1.WidgetKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: prefix + "-k"},
		Spec: namespacedv1beta1.WidgetKeySpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{
				ProviderConfigReference:          &xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"},
				WriteConnectionSecretToReference: &xpv2.LocalSecretReference{Name: prefix + "-k"},
			},
			ForProvider:  namespacedv1beta1.WidgetKeyParameters{WidgetNameRef: &xpv2.NamespacedReference{Name: nw.Name}},
			InitProvider: commonv1beta1.WidgetKeyInitParameters{Description: ptr.To("key of " + prefix)},
		},
	}
	cw := &clusterv1beta1.Widget{
		ObjectMeta: metav1.ObjectMeta{Name: "upgrade-" + prefix + "-w"},
		Spec: clusterv1beta1.WidgetSpec{
			ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{ProviderConfigReference: &xpv2.Reference{Name: "default"}},
			ForProvider:                commonv1beta1.WidgetParameters{Size: ptr.To("small")},
			InitProvider:               commonv1beta1.WidgetInitParameters{Region: ptr.To("us-east-1")},
		},
	}
	ck := &clusterv1beta1.WidgetKey{
		ObjectMeta: metav1.ObjectMeta{Name: "upgrade-" + prefix + "-k"},
		Spec: clusterv1beta1.WidgetKeySpec{
			ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{
				ProviderConfigReference:          &xpv2.Reference{Name: "default"},
				WriteConnectionSecretToReference: &xpv2.SecretReference{Name: "upgrade-" + prefix + "-k", Namespace: ns},
			},
			ForProvider:  clusterv1beta1.WidgetKeyParameters{WidgetNameRef: &xpv2.Reference{Name: cw.Name}},
			InitProvider: commonv1beta1.WidgetKeyInitParameters{Description: ptr.To("cluster key of " + prefix)},
		},
	}
	e.create(nw, nk, cw, ck)
	return []managed{nw, nk, cw, ck}
}

// createComposites creates the example claim and XWidget of root's
// examples in the test's namespace.
func (e *env) createComposites(root string) (*unstructured.Unstructured, *unstructured.Unstructured) {
	out := make([]*unstructured.Unstructured, 0, 2)
	for _, f := range []string{"examples/composition/legacy/claim.yaml", "examples/composition/namespaced/xr.yaml"} {
		objs, err := platform.ReadObjects(filepath.Join(root, f))
		if err != nil || len(objs) != 1 {
			e.t.Fatalf("cannot read %s (%d objects): %v", f, len(objs), err)
		}
		objs[0].SetNamespace(ns)
		out = append(out, objs[0])
	}
	if err := platform.Create(e.ctx, e.kube, out...); err != nil {
		e.t.Fatal(err)
	}
	return out[0], out[1]
}

func (e *env) waitReady(objs ...managed) {
	e.t.Helper()
	for _, o := range objs {
		e.eventually(fmt.Sprintf("%T %s Ready and Synced", o, o.GetName()), func() error {
			if err := e.kube.Get(e.ctx, client.ObjectKeyFromObject(o), o); err != nil {
				return err
			}
			for _, ct := range []xpv2.ConditionType{xpv2.TypeReady, xpv2.TypeSynced} {
				if c := o.GetCondition(ct); c.Status != "True" {
					return errors.Errorf("%s is %s: %s %s", ct, c.Status, c.Reason, c.Message)
				}
			}
			return nil
		})
	}
}

func (e *env) waitCompositesReady(objs ...*unstructured.Unstructured) {
	e.t.Helper()
	for _, o := range objs {
		e.eventually(fmt.Sprintf("%s %s Ready", o.GetKind(), o.GetName()), func() error {
			if err := e.kube.Get(e.ctx, client.ObjectKeyFromObject(o), o); err != nil {
				return err
			}
			if c := platform.GetCondition(o, "Ready"); c.Status != "True" {
				return errors.Errorf("not Ready: %s", c)
			}
			return nil
		})
	}
}

// snapshot returns the IDs of every widget and key in the Widget API, by
// name.
func (e *env) snapshot() (map[string]string, map[string]string) {
	e.t.Helper()
	widgets, keys := map[string]string{}, map[string]string{}
	token := ""
	for {
		l, err := e.api.ListWidgets(e.ctx, widgetapi.ListWidgetsOptions{Limit: 500, PageToken: token})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, w := range l.Items {
			widgets[w.Name] = w.ID
			kl, err := e.api.ListKeys(e.ctx, w.Name)
			if err != nil {
				e.t.Fatal(err)
			}
			for _, k := range kl.Items {
				keys[w.Name+"/"+k.Name] = k.ID
			}
		}
		if token = l.NextPageToken; token == "" {
			return widgets, keys
		}
	}
}

// sameExternal fails unless every widget or key of before still exists in
// after with the same ID: nothing was re-created.
func (e *env) sameExternal(before, after map[string]string, what string) {
	e.t.Helper()
	for name, id := range before {
		if got, ok := after[name]; !ok || got != id {
			e.t.Errorf("%s %s had ID %s before the upgrade, now %q: it was deleted or re-created", what, name, id, got)
		}
	}
}

var managedGVRs = []schema.GroupVersionResource{
	{Group: namespacedv1beta1.Group, Version: "v1beta1", Resource: "widgets"},
	{Group: namespacedv1beta1.Group, Version: "v1beta1", Resource: "widgetkeys"},
	{Group: clusterv1beta1.Group, Version: "v1beta1", Resource: "widgets"},
	{Group: clusterv1beta1.Group, Version: "v1beta1", Resource: "widgetkeys"},
}

// recordReady watches the managed resources (in v1alpha1: the only version
// before the upgrade) for lost Ready conditions.
func (e *env) recordReady() []*platform.ReadyRecorder {
	e.t.Helper()
	out := make([]*platform.ReadyRecorder, 0, len(managedGVRs))
	for _, gvr := range managedGVRs {
		gvr.Version = "v1alpha1"
		r, err := platform.RecordReady(e.ctx, e.c.RESTConfig(), gvr, "", "")
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// crdsUpgraded checks that the managed resource CRDs serve both versions,
// store v1beta1, and have their conversion webhook wired by Crossplane.
func (e *env) crdsUpgraded() error {
	for _, gvr := range managedGVRs {
		crd := &extv1.CustomResourceDefinition{}
		if err := e.kube.Get(e.ctx, types.NamespacedName{Name: gvr.Resource + "." + gvr.Group}, crd); err != nil {
			return err
		}
		var served, storage []string
		for _, v := range crd.Spec.Versions {
			if v.Served {
				served = append(served, v.Name)
			}
			if v.Storage {
				storage = append(storage, v.Name)
			}
		}
		if !slices.Equal(served, []string{"v1alpha1", "v1beta1"}) || !slices.Equal(storage, []string{"v1beta1"}) {
			return errors.Errorf("CRD %s serves %v and stores %v, want [v1alpha1 v1beta1] and [v1beta1]", crd.Name, served, storage)
		}
		c := crd.Spec.Conversion
		if c == nil || c.Strategy != extv1.WebhookConverter || c.Webhook == nil || c.Webhook.ClientConfig == nil || c.Webhook.ClientConfig.Service == nil || len(c.Webhook.ClientConfig.CABundle) == 0 {
			return errors.Errorf("CRD %s has no conversion webhook with a Service and a CA bundle: %+v", crd.Name, c)
		}
		if s := c.Webhook.ClientConfig.Service; s.Name != platform.ProviderName || ptr.Deref(s.Path, "") != "/convert" {
			return errors.Errorf("CRD %s converts through Service %s path %s, want %s /convert", crd.Name, s.Name, ptr.Deref(s.Path, ""), platform.ProviderName)
		}
	}
	return nil
}

// checkBothVersions reads the objects created before the upgrade in both
// versions: v1beta1 has the region and the key descriptions in
// spec.initProvider, v1alpha1 still in spec.forProvider.
func (e *env) checkBothVersions() {
	e.t.Helper()
	bw := &namespacedv1beta1.Widget{}
	if err := e.kube.Get(e.ctx, types.NamespacedName{Namespace: ns, Name: "old-w"}, bw); err != nil {
		e.t.Fatalf("cannot read Widget old-w as v1beta1: %v", err)
	}
	if ptr.Deref(bw.Spec.InitProvider.Region, "") != "eu-west-1" || ptr.Deref(bw.Spec.ForProvider.Size, "") != "medium" {
		e.t.Errorf("Widget old-w as v1beta1: initProvider.region %v, forProvider.size %v; want eu-west-1 and medium", bw.Spec.InitProvider.Region, bw.Spec.ForProvider.Size)
	}
	aw := &namespacedv1alpha1.Widget{}
	if err := e.kube.Get(e.ctx, types.NamespacedName{Namespace: ns, Name: "old-w"}, aw); err != nil {
		e.t.Fatalf("cannot read Widget old-w as v1alpha1: %v", err)
	}
	if ptr.Deref(aw.Spec.ForProvider.Region, "") != "eu-west-1" {
		e.t.Errorf("Widget old-w as v1alpha1: forProvider.region %v, want eu-west-1", aw.Spec.ForProvider.Region)
	}
	bk := &clusterv1beta1.WidgetKey{}
	if err := e.kube.Get(e.ctx, types.NamespacedName{Name: "upgrade-old-k"}, bk); err != nil {
		e.t.Fatalf("cannot read WidgetKey upgrade-old-k as v1beta1: %v", err)
	}
	if ptr.Deref(bk.Spec.InitProvider.Description, "") != "cluster key of old" {
		e.t.Errorf("cluster WidgetKey as v1beta1: initProvider.description %v, want %q", bk.Spec.InitProvider.Description, "cluster key of old")
	}
	ak := &clusterv1alpha1.WidgetKey{}
	if err := e.kube.Get(e.ctx, types.NamespacedName{Name: "upgrade-old-k"}, ak); err != nil {
		e.t.Fatalf("cannot read WidgetKey upgrade-old-k as v1alpha1: %v", err)
	}
	if ptr.Deref(ak.Spec.ForProvider.Description, "") != "cluster key of old" {
		e.t.Errorf("cluster WidgetKey as v1alpha1: forProvider.description %v, want %q", ak.Spec.ForProvider.Description, "cluster key of old")
	}
}

// migrateStorage rewrites every managed resource, so that etcd holds it as
// v1beta1, and then removes v1alpha1 from the CRDs' status.storedVersions.
func (e *env) migrateStorage() {
	e.t.Helper()
	for _, gvr := range managedGVRs {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(schema.GroupVersionKind{Group: gvr.Group, Version: gvr.Version, Kind: kindOf(gvr.Resource) + "List"})
		if err := e.kube.List(e.ctx, l); err != nil {
			e.t.Fatal(err)
		}
		for i := range l.Items {
			// An update that changes nothing still re-encodes the object
			// in the storage version. Conflicts with the provider's own
			// writes mean it was rewritten anyway.
			if err := e.kube.Update(e.ctx, &l.Items[i]); err != nil && !kerrors.IsConflict(err) {
				e.t.Fatalf("cannot rewrite %s %s: %v", gvr.Resource, l.Items[i].GetName(), err)
			}
		}
		crd := &extv1.CustomResourceDefinition{}
		if err := e.kube.Get(e.ctx, types.NamespacedName{Name: gvr.Resource + "." + gvr.Group}, crd); err != nil {
			e.t.Fatal(err)
		}
		crd.Status.StoredVersions = []string{"v1beta1"}
		if err := e.kube.Status().Update(e.ctx, crd); err != nil {
			e.t.Fatalf("cannot set storedVersions of %s: %v", crd.Name, err)
		}
		if err := e.kube.Get(e.ctx, types.NamespacedName{Name: crd.Name}, crd); err != nil || !slices.Equal(crd.Status.StoredVersions, []string{"v1beta1"}) {
			e.t.Errorf("CRD %s storedVersions %v (error %v), want [v1beta1]", crd.Name, crd.Status.StoredVersions, err)
		}
	}
}

func kindOf(resource string) string {
	if resource == "widgetkeys" {
		return "WidgetKey"
	}
	return "Widget"
}

// webhookDown scales the provider to no replicas, as a platform team
// would: reading or writing v1alpha1 fails with an error naming the
// conversion webhook, v1beta1 works. Scaled back, v1alpha1 works again
// without anyone doing anything.
func (e *env) webhookDown() {
	e.t.Helper()
	e.scaleProvider(0)
	aw := &namespacedv1alpha1.Widget{}
	e.eventually("v1alpha1 read fails while the webhook is down", func() error {
		err := e.kube.Get(e.ctx, types.NamespacedName{Namespace: ns, Name: "old-w"}, aw)
		if err == nil {
			return errors.New("v1alpha1 read succeeded")
		}
		if !strings.Contains(err.Error(), "conversion webhook") {
			e.t.Errorf("v1alpha1 read with the webhook down: %v; want an error that names the conversion webhook", err)
		}
		e.t.Logf("With the webhook down, a v1alpha1 read fails: %v", err)
		return nil
	})
	bw := &namespacedv1beta1.Widget{}
	if err := e.kube.Get(e.ctx, types.NamespacedName{Namespace: ns, Name: "old-w"}, bw); err != nil {
		e.t.Errorf("v1beta1 read with the webhook down: %v; want it served without conversion", err)
	}
	e.scaleProvider(2)
	e.eventually("v1alpha1 read works again once the provider is back", func() error {
		return e.kube.Get(e.ctx, types.NamespacedName{Namespace: ns, Name: "old-w"}, aw)
	})
}

// scaleProvider sets the replicas of the provider's DeploymentRuntimeConfig.
func (e *env) scaleProvider(n int) {
	e.t.Helper()
	drc := &pkgv1beta1.DeploymentRuntimeConfig{}
	drc.SetName(platform.ProviderRuntimeConfig)
	patch := fmt.Sprintf(`{"spec":{"deploymentTemplate":{"spec":{"replicas":%d}}}}`, n)
	if err := e.c.Client().Patch(e.ctx, drc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		e.t.Fatal(err)
	}
}
