//go:build linux

package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

// An e2eVariant is a way of composing the run's claims: the same XRD, the
// same claims and the same managed resources, composed by another
// Composition. Issue 34 asks whether the usual way (function-patch-and-
// transform and function-auto-ready) settles where function-widget does not,
// on the same core, machine and load.
type e2eVariant struct {
	name  string // as WIDGET_BENCH_E2E_VARIANTS names it
	title string // as the report's column names it
	// composition is the Composition its claims select by
	// spec.compositionRef, or "" for the XRD's default (function-widget's).
	composition string
	// firstStep is the function of the pipeline's first step, installed
	// under that name: its calls are the pipeline's runs.
	firstStep string
	// install sets the variant up on a control plane that has the platform
	// installed (nil: nothing to add).
	install func(ctx context.Context, t *testing.T, e *e2eEnv)
	// functionEnv names the environment variable that holds the
	// function-widget package the variant installs instead of the working
	// tree's ("": the working tree's).
	functionEnv string
}

var (
	variantWidget = &e2eVariant{name: "widget", title: "function-widget", firstStep: platform.FunctionName}
	variantPT     = &e2eVariant{
		name: "pt", title: "P&T v0.5.0 + auto-ready v0.6.0", composition: "xwidgets-pt.legacy.platform.widgetco.io",
		firstStep: fnPT, install: installPT,
	}
	// variantBase is function-widget of another build (a before/after
	// pair in one run), as WIDGET_BENCH_E2E_BASE_FUNCTION names its package.
	variantBase = &e2eVariant{
		name: "base", title: "function-widget, baseline build", firstStep: platform.FunctionName,
		functionEnv: "WIDGET_BENCH_E2E_BASE_FUNCTION",
	}
)

// allVariants is every variant WIDGET_BENCH_E2E_VARIANTS may name.
var allVariants = []*e2eVariant{variantWidget, variantPT, variantBase, variantPolicy}

// The peer functions, under the names the peer Composition calls them by.
const (
	fnPT        = "function-patch-and-transform"
	fnAutoReady = "function-auto-ready"
	// ptComposition is the peer Composition, relative to the module root.
	ptComposition = "test/bench/testdata/pt-composition.yaml"
	// legacyComposition is function-widget's Composition of the legacy
	// XWidget, the XRD's default (examples/composition/legacy).
	legacyComposition = "xwidgets.legacy.platform.widgetco.io"
)

// parseVariants reads WIDGET_BENCH_E2E_VARIANTS: variant names, comma
// separated, each once. Empty means function-widget only, the section's
// behaviour before variants existed.
func parseVariants(s string) ([]*e2eVariant, error) {
	if strings.TrimSpace(s) == "" {
		return []*e2eVariant{variantWidget}, nil
	}
	parts := strings.Split(s, ",")
	vs := make([]*e2eVariant, 0, len(parts))
	for _, n := range parts {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc(allVariants, func(v *e2eVariant) bool { return v.name == n })
		if i < 0 {
			return nil, errors.Errorf("unknown variant %q: want widget, pt, base or policy", n)
		}
		v := allVariants[i]
		if slices.Contains(vs, v) {
			return nil, errors.Errorf("variant %q is named twice", n)
		}
		vs = append(vs, v)
	}
	return vs, nil
}

// e2eVariants is the variants of the section, from WIDGET_BENCH_E2E_VARIANTS.
// The peer composes claims only: it has no Composition for namespaced
// XWidgets, so it does not mix with WIDGET_BENCH_E2E_MIX=half.
func e2eVariants(t *testing.T, mix []*e2eKind) []*e2eVariant {
	t.Helper()
	vs, err := parseVariants(os.Getenv("WIDGET_BENCH_E2E_VARIANTS"))
	if err != nil {
		t.Fatalf("WIDGET_BENCH_E2E_VARIANTS: %v", err)
	}
	if slices.Contains(vs, variantPT) && slices.ContainsFunc(mix, func(k *e2eKind) bool { return k.gvk != gvkClaim }) {
		t.Fatal("WIDGET_BENCH_E2E_VARIANTS=pt composes claims only: unset WIDGET_BENCH_E2E_MIX")
	}
	return vs
}

// variantOrder is the order of the variants in run i (from 0): rotated by
// one each run, so that over several runs each variant goes first as often
// as the others and what the machine carries from one control plane to the
// next (page cache, the Go build cache, other work's phases) does not
// favour one.
func variantOrder(vs []*e2eVariant, i int) []*e2eVariant {
	out := make([]*e2eVariant, 0, len(vs))
	for j := range vs {
		out = append(out, vs[(i+j)%len(vs)])
	}
	return out
}

// functionPackage is the function-widget package the variant installs, or
// "" for the working tree's.
func (v *e2eVariant) functionPackage(t *testing.T) string {
	t.Helper()
	if v == nil || v.functionEnv == "" {
		return ""
	}
	p := os.Getenv(v.functionEnv)
	if p == "" {
		t.Fatalf("variant %s needs %s: a function-widget .xpkg of the baseline build", v.name, v.functionEnv)
	}
	return p
}

// selectComposition makes the claims of mk name the variant's Composition
// by spec.compositionRef, function-widget's too, so that core takes the
// same path for every variant: a claim that names none gets the XRD's
// default from its XR, and core then applies it back to the XR once more,
// a change that wakes the claim again. WIDGET_BENCH_E2E_NAME_COMPOSITION=0
// leaves function-widget's claims to the XRD's default.
func (v *e2eVariant) selectComposition(mk func(ns, name string) *unstructured.Unstructured) func(ns, name string) *unstructured.Unstructured {
	comp := v.compositionName(os.Getenv("WIDGET_BENCH_E2E_NAME_COMPOSITION") != "0")
	if comp == "" {
		return mk
	}
	return func(ns, name string) *unstructured.Unstructured {
		u := mk(ns, name)
		_ = unstructured.SetNestedField(u.Object, comp, "spec", "compositionRef", "name")
		return u
	}
}

// compositionName is the Composition the variant's claims name: the
// variant's own, or, when always is true, function-widget's too (the XRD's
// default), so that every variant's claims take the same path through
// core.
func (v *e2eVariant) compositionName(always bool) string {
	switch {
	case v == nil:
		return ""
	case v.composition != "":
		return v.composition
	case always:
		return legacyComposition
	}
	return ""
}

// peerPackages are the peer functions' packages, built once per benchmark
// process from the binaries hack/tools.sh builds.
var peerPackages = struct {
	once sync.Once
	pkgs map[string]string // function -> .xpkg
	err  error
}{}

// installPT installs function-patch-and-transform and function-auto-ready
// through Crossplane's package manager, as the upstream reproduction in
// test/e2e does, and creates the peer Composition.
func installPT(ctx context.Context, t *testing.T, e *e2eEnv) {
	t.Helper()
	peerPackages.once.Do(func() {
		peerPackages.pkgs, peerPackages.err = buildPeers(ctx, filepath.Join(e.root, "_output", "bench", "peers"))
	})
	if peerPackages.err != nil {
		t.Fatalf("the pt variant needs the peer functions (bash hack/tools.sh %s %s; eval \"$(bash hack/tools.sh env)\"): %v", fnPT, fnAutoReady, peerPackages.err)
	}
	// A package that cannot be installed fails the run with its reason
	// rather than holding it forever.
	ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for _, f := range []struct{ name, tag string }{{fnPT, "v0.5.0"}, {fnAutoReady, "v0.6.0"}} {
		// Under the platform's organisation, whose ImageConfig gives
		// Crossplane the registry's credentials.
		ref, err := e.c.PushPackage(ictx, peerPackages.pkgs[f.name], platform.Org+"/"+f.name+":"+f.tag)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.InstallFunction(ictx, f.name, ref, ""); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := platform.ReadObjects(filepath.Join(e.root, ptComposition))
	if err != nil {
		t.Fatal(err)
	}
	if err := platform.Create(ctx, e.c.Client(), objs...); err != nil {
		t.Fatal(err)
	}
}

// buildPeers packages the peer functions' binaries into dir.
func buildPeers(ctx context.Context, dir string) (map[string]string, error) {
	crank := os.Getenv("CRANK_BIN")
	if crank == "" {
		return nil, errors.New("CRANK_BIN is unset: eval \"$(bash hack/tools.sh env)\"")
	}
	pkgs := map[string]string{}
	for _, f := range []struct{ name, env string }{{fnPT, "FUNCTION_PATCH_AND_TRANSFORM_BIN"}, {fnAutoReady, "FUNCTION_AUTO_READY_BIN"}} {
		bin := os.Getenv(f.env)
		if bin == "" {
			return nil, errors.Errorf("%s is unset", f.env)
		}
		p, err := platform.BuildFunction(ctx, crank, dir, f.name, bin)
		if err != nil {
			return nil, errors.Wrapf(err, "cannot build the %s package", f.name)
		}
		pkgs[f.name] = p
	}
	return pkgs, nil
}

// variantRuns are the runs of one variant, in the order they ran, and the
// control plane of its last run (for the report's details).
type variantRuns struct {
	v    *e2eVariant
	runs []*e2eRun
	env  *e2eEnv
}

// logRun logs how a run of variant v went.
func logRun(t *testing.T, v *e2eVariant, i, n int, r *e2eRun) {
	t.Helper()
	k := claimRun(r)
	t.Logf("e2e run %d (%s): %d of %d Ready in %s, p50 %s, max %s; claim Ready lost %d times, XR Ready %d times; %d Ready at the end of the steady window",
		i+1, v.name, r.ready, n, r.allReady.Round(10*time.Millisecond), quantile(r.toReady, .5).Round(10*time.Millisecond),
		quantile(r.toReady, 1).Round(10*time.Millisecond), k.flaps[stReady], k.flaps[stXRReady], k.readyEnd)
}

// TestParseVariants checks WIDGET_BENCH_E2E_VARIANTS (it runs without
// WIDGET_BENCH).
func TestParseVariants(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   []string
		err    bool
	}{
		"Default": {reason: "unset, the section runs function-widget only, as before variants", in: "", want: []string{"widget"}},
		"Both":    {reason: "variants run in the order given", in: "pt, widget", want: []string{"pt", "widget"}},
		"Unknown": {reason: "an unknown variant is an error, not skipped", in: "widget,kcl", err: true},
		"Twice":   {reason: "a variant named twice is an error", in: "pt,pt", err: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			vs, err := parseVariants(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("%s: err = %v, want error %t", tc.reason, err, tc.err)
			}
			var got []string
			for _, v := range vs {
				got = append(got, v.name)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestVariantOrder checks that each variant goes first in turn.
func TestVariantOrder(t *testing.T) {
	vs := []*e2eVariant{variantWidget, variantPT}
	cases := map[string]struct {
		reason string
		run    int
		want   []string
	}{
		"FirstRun":  {reason: "the first run keeps the given order", run: 0, want: []string{"widget", "pt"}},
		"SecondRun": {reason: "the second run starts with the second variant", run: 1, want: []string{"pt", "widget"}},
		"ThirdRun":  {reason: "the third run starts over", run: 2, want: []string{"widget", "pt"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, v := range variantOrder(vs, tc.run) {
				got = append(got, v.name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestSelectComposition checks that every variant's claims name their
// Composition, and that function-widget's keep the XRD's default when
// asked to.
func TestSelectComposition(t *testing.T) {
	mk := func(ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"region": "eu-west-1"}}}
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	cases := map[string]struct {
		reason string
		v      *e2eVariant
		env    string
		want   string
	}{
		"Widget":        {reason: "function-widget's claims name its Composition", v: variantWidget, want: legacyComposition},
		"Base":          {reason: "the baseline build's claims name the same Composition", v: variantBase, want: legacyComposition},
		"WidgetDefault": {reason: "with WIDGET_BENCH_E2E_NAME_COMPOSITION=0 function-widget's claims name none", v: variantWidget, env: "0", want: ""},
		"PT":            {reason: "the peer's claims name the peer Composition", v: variantPT, want: "xwidgets-pt.legacy.platform.widgetco.io"},
		"PTDefault":     {reason: "the peer's claims must name theirs: it is not the XRD's default", v: variantPT, env: "0", want: "xwidgets-pt.legacy.platform.widgetco.io"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv("WIDGET_BENCH_E2E_NAME_COMPOSITION", tc.env)
			u := tc.v.selectComposition(mk)("ns", "c-0000")
			got, _, _ := unstructured.NestedString(u.Object, "spec", "compositionRef", "name")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
