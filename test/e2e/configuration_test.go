//go:build linux

package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// The XWidget API's resources, for watching them.
var (
	xwidgetsGVR = schema.GroupVersionResource{Group: "platform.widgetco.io", Version: "v1alpha1", Resource: "xwidgets"}
	claimsGVR   = schema.GroupVersionResource{Group: "legacy.platform.widgetco.io", Version: "v1alpha1", Resource: "widgetclaims"}
)

func controlledByKind(refs []metav1.OwnerReference, kind string) bool {
	for _, r := range refs {
		if r.Kind == kind && r.Controller != nil && *r.Controller {
			return true
		}
	}
	return false
}

// checkResolved checks what the suite's set-up did: it installed only
// configuration-widget, and Crossplane's package manager resolved its
// dependencies from the cluster's registry and installed them under the
// names the packaged Compositions call them by.
func checkResolved(t *testing.T, s *scenario) {
	t.Helper()
	c := suite.c.Client()
	cfg := &pkgv1.Configuration{}
	if err := c.Get(s.ctx, types.NamespacedName{Name: platform.ConfigurationName}, cfg); err != nil {
		t.Fatal(err)
	}
	for _, ct := range []xpv2.ConditionType{pkgv1.TypeInstalled, pkgv1.TypeHealthy} {
		if got := cfg.GetCondition(ct); got.Status != corev1.ConditionTrue {
			t.Errorf("Configuration %s %s=%s (%s), want True", cfg.Name, ct, got.Status, got.Message)
		}
	}
	lock := &pkgv1beta1.Lock{}
	if err := c.Get(s.ctx, types.NamespacedName{Name: "lock"}, lock); err != nil {
		t.Fatal(err)
	}
	// Each dependency: in the Lock with the version Crossplane chose, as a
	// package object it created with the name Crossplane derives.
	for _, d := range []struct {
		pkg, name string
		obj       client.Object
	}{
		{"provider-widget", platform.ProviderName, &pkgv1.Provider{}},
		{"function-widget", platform.FunctionName, &pkgv1.Function{}},
	} {
		source := platform.Registry(suite.c) + "/" + d.pkg
		found := false
		for _, p := range lock.Packages {
			if p.Source == source {
				found = true
				if p.Version != suite.pkgs.Version {
					t.Errorf("Lock: %s at %s, want %s", source, p.Version, suite.pkgs.Version)
				}
			}
		}
		if !found {
			t.Errorf("Lock has no package %s: %+v", source, lock.Packages)
		}
		if err := c.Get(s.ctx, types.NamespacedName{Name: d.name}, d.obj); err != nil {
			t.Errorf("Crossplane did not install %s as %s: %v", d.pkg, d.name, err)
		}
	}
	// The packaged Compositions call the function by its dependency name.
	for _, name := range []string{"xwidgets.platform.widgetco.io", "xwidgets.legacy.platform.widgetco.io"} {
		comp := &xpextv1.Composition{}
		if err := c.Get(s.ctx, types.NamespacedName{Name: name}, comp); err != nil {
			t.Fatal(err)
		}
		if got := comp.Spec.Pipeline[0].FunctionRef.Name; got != platform.FunctionName {
			t.Errorf("Composition %s calls function %q, want %q", name, got, platform.FunctionName)
		}
		if !controlledByKind(comp.OwnerReferences, "ConfigurationRevision") {
			t.Errorf("Composition %s is not controlled by a ConfigurationRevision: %+v", name, comp.OwnerReferences)
		}
	}
}

// TestConfigurationUpgrade checks how the suite's set-up resolved the
// Configuration's dependencies (checkResolved), then publishes a newer release of all three packages,
// upgrades to it the way the README says (dependencies first, then the
// Configuration), then tries a Configuration whose dependencies nothing
// satisfies and rolls back. Claims and XWidgets that exist throughout stay
// Ready all along (every change of their Ready condition is watched), and
// new ones go Ready afterwards.
func TestConfigurationUpgrade(t *testing.T) {
	// Alone: the upgrade restarts the provider and the function.
	s := newScenario(t, false)
	c := suite.c.Client()
	checkResolved(t, s)
	claim := s.claim("before", map[string]any{"keys": int64(1)})
	xr := s.xwidget("before", map[string]any{"keys": int64(1)})
	s.create(claim, xr)
	s.waitReady(claim)
	s.waitReady(xr)

	gvrs := []schema.GroupVersionResource{claimsGVR, xwidgetsGVR}
	recorders := make([]*platform.ReadyRecorder, 0, len(gvrs))
	for _, gvr := range gvrs {
		r, err := platform.RecordReady(s.ctx, suite.c.RESTConfig(), gvr, s.ns, "")
		if err != nil {
			t.Fatal(err)
		}
		recorders = append(recorders, r)
	}
	// Crossplane core v2.4.2 can turn a just-Ready XR (and its claim) back
	// to not Ready for a moment by applying stale conditions
	// (docs/convergence.md, TestConvergence); that is not the upgrade's
	// doing. The upgrade starts once both have stayed Ready for a while, and
	// only losses after that count.
	settled := settle(t, s, recorders, 5*time.Second)

	next, unsatisfiable := nextVersions(t, suite.pkgs.Version)
	t.Logf("Installed %s; upgrading to %s, then trying %s (whose dependencies are not published)", suite.pkgs.Version, next, unsatisfiable)

	// Publish: all three at the next version, as make publish does.
	begin := time.Now()
	nextRef, err := platform.Release(s.ctx, suite.c, suite.root, suite.crank, suite.pkgs, next, suite.signer)
	if err != nil {
		t.Fatal(err)
	}
	// Upgrade: the dependencies first (Crossplane v2.4 does not upgrade a
	// dependency a Configuration has outgrown unless its alpha flag
	// --enable-dependency-version-upgrades is on), then the Configuration.
	// Each is a new package revision: new pods replace the old ones.
	if _, err := suite.c.UpgradeProvider(s.ctx, platform.ProviderName, platform.DependencyRef(suite.c, "provider-widget", next),
		platform.ProviderRuntimeConfig); err != nil {
		t.Fatal(err)
	}
	if _, err := suite.c.UpgradeFunction(s.ctx, platform.FunctionName, platform.DependencyRef(suite.c, "function-widget", next),
		platform.FunctionRuntimeConfig); err != nil {
		t.Fatal(err)
	}
	if err := suite.c.ApplyConfiguration(s.ctx, platform.ConfigurationName, nextRef); err != nil {
		t.Fatal(err)
	}
	if err := suite.c.WaitConfiguration(s.ctx, platform.ConfigurationName, nextRef); err != nil {
		t.Fatal(err)
	}
	s.eventually("Lock records the upgraded dependencies", func() error { return lockVersions(s, next) })
	t.Logf("MEASURE: upgrade to %s (publish, dependencies, Configuration) took %s", next, time.Since(begin).Round(100*time.Millisecond))

	// A release whose dependencies are not in the registry: a clear error
	// on the Configuration, and nothing else changes.
	badRef, err := platform.ReleaseConfiguration(s.ctx, suite.c, suite.root, suite.crank, unsatisfiable)
	if err != nil {
		t.Fatal(err)
	}
	if err := suite.c.ApplyConfiguration(s.ctx, platform.ConfigurationName, badRef); err != nil {
		t.Fatal(err)
	}
	var msg string
	s.eventually("Configuration reports the unsatisfiable dependency", func() error {
		cfg := &pkgv1.Configuration{}
		if err := c.Get(s.ctx, types.NamespacedName{Name: platform.ConfigurationName}, cfg); err != nil {
			return err
		}
		h := cfg.GetCondition(pkgv1.TypeHealthy)
		msg = h.Message
		if h.Status != corev1.ConditionFalse || !strings.Contains(msg, "provider-widget") || !strings.Contains(msg, unsatisfiable) {
			return errors.Errorf("Configuration %s Healthy=%s: %q", cfg.Name, h.Status, msg)
		}
		return nil
	})
	t.Logf("Configuration at %s says: %s", unsatisfiable, msg)
	if err := lockVersions(s, next); err != nil {
		t.Errorf("after the unsatisfiable release: %v", err)
	}

	// Roll back.
	begin = time.Now()
	if err := suite.c.ApplyConfiguration(s.ctx, platform.ConfigurationName, nextRef); err != nil {
		t.Fatal(err)
	}
	if err := suite.c.WaitConfiguration(s.ctx, platform.ConfigurationName, nextRef); err != nil {
		t.Fatal(err)
	}
	t.Logf("MEASURE: rollback to %s took %s", next, time.Since(begin).Round(100*time.Millisecond))

	// New objects work after all that.
	after := s.xwidget("after", map[string]any{"keys": int64(1)})
	afterClaim := s.claim("after", map[string]any{"keys": int64(1)})
	s.create(after, afterClaim)
	s.waitReady(after)
	s.waitReady(afterClaim)

	for _, r := range recorders {
		lost, err := r.Stop()
		if err != nil {
			t.Error(err)
		}
		for _, l := range lost {
			// Only what existed before the upgrade: one created during
			// the recording can lose Ready once on its way, while its
			// keys are still being composed.
			if l.Name == "before" && l.At.After(settled) {
				t.Errorf("%s lost Ready at %s: %s %s %s", l.Name, l.At.Format(time.RFC3339Nano), l.Status, l.Reason, l.Message)
			}
		}
	}
	s.waitReady(claim)
	s.waitReady(xr)
}

// nextVersions returns, for the installed version v, the next release in the
// same line (which v's Configuration constraint admits) and the first
// release of the next line (whose dependencies are never published here).
func nextVersions(t *testing.T, v string) (string, string) {
	t.Helper()
	sv, err := semver.StrictNewVersion(strings.TrimPrefix(v, "v"))
	if err != nil {
		t.Fatalf("installed version %q is not semantic: %v", v, err)
	}
	next := semver.New(sv.Major(), sv.Minor(), sv.Patch(), "", "")
	if sv.Prerelease() == "" {
		n := next.IncPatch()
		next = &n
	}
	bad := semver.New(sv.Major()+1, 0, 0, "", "")
	if sv.Major() == 0 {
		bad = semver.New(0, sv.Minor()+1, 0, "", "")
	}
	return "v" + next.String(), "v" + bad.String()
}

// lockVersions checks that the Lock holds both dependencies at version.
func lockVersions(s *scenario, version string) error {
	lock := &pkgv1beta1.Lock{}
	if err := suite.c.Client().Get(s.ctx, types.NamespacedName{Name: "lock"}, lock); err != nil {
		return err
	}
	for _, pkg := range []string{"provider-widget", "function-widget"} {
		source := platform.Registry(suite.c) + "/" + pkg
		for _, p := range lock.Packages {
			if p.Source == source && p.Version != version {
				return errors.Errorf("Lock: %s at %s, want %s", source, p.Version, version)
			}
		}
	}
	return nil
}

// settle waits until the recorders have seen no loss of Ready for quiet,
// logs the losses before that (converging, not upgrading), and returns when
// it stopped waiting.
func settle(t *testing.T, s *scenario, recorders []*platform.ReadyRecorder, quiet time.Duration) time.Time {
	t.Helper()
	last := func() time.Time {
		var at time.Time
		for _, r := range recorders {
			for _, l := range r.Lost() {
				if l.At.After(at) {
					at = l.At
				}
			}
		}
		return at
	}
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-s.ctx.Done():
			t.Fatal(s.ctx.Err())
		case <-time.After(quiet):
		}
		if l := last(); time.Since(l) >= quiet || time.Now().After(deadline) {
			for _, r := range recorders {
				for _, x := range r.Lost() {
					t.Logf("converging, before the upgrade: %s lost Ready at %s (%s %s), as Crossplane core's stale conditions cause (issue 15)", x.Name, x.At.Format(time.RFC3339Nano), x.Reason, x.Message)
				}
			}
			return time.Now()
		}
	}
}
