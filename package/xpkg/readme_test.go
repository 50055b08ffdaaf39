package xpkg_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"

	"github.com/widgetco/crossplane-widget/package/xpkg"
)

// The packages, by the name the registry shows.
const (
	provider      = "provider-widget"
	function      = "function-widget"
	configuration = "configuration-widget"
)

// features are the features README.md names, each with the phrase that
// names it in README.md and the phrase each package's readme must carry for
// it. A registry user reads only the readme, so a feature the README
// advertises but a readme leaves out is one that user never hears of. Add a
// row when the README gains a feature.
var features = map[string]struct {
	reason string
	readme string            // how README.md names it; the row fails once the README stops naming it
	in     map[string]string // package -> phrase in its readme
}{
	"Import": {
		reason: "The provider imports widgets that already exist; its readme says how.",
		readme: "import of widgets that already exist",
		in:     map[string]string{provider: "`crossplane.io/external-name`"},
	},
	"AdoptionWithReview": {
		reason: "Adoption is reviewed before anything changes, for an MR and for an XWidget.",
		readme: "mode: Review",
		in: map[string]string{
			provider:      "what taking the widget over would change",
			function:      "`spec.adopt: {name, mode: Review}`",
			configuration: "`spec.adopt` reviews, then manages",
		},
	},
	"KeepOnDelete": {
		reason: "A widget can outlive its MR, its XWidget or its claim.",
		readme: "spec.onDelete",
		in: map[string]string{
			provider:      "leave `Delete` out of `managementPolicies`",
			function:      "`spec.onDelete: KeepWidget`",
			configuration: "`spec.onDelete` keeps the widget",
		},
	},
	"KeyRotation": {
		reason: "Keys rotate without a failed call; the XWidget asks, the provider rotates.",
		readme: "spec.rotation",
		in: map[string]string{
			provider:      "`spec.forProvider.rotation`",
			function:      "`spec.rotation`",
			configuration: "`spec.rotation` rotates the keys",
		},
	},
	"DriftRepair": {
		reason: "The provider repairs drift from the change feed.",
		readme: "drift detection and repair",
		in:     map[string]string{provider: "**Drift repair**"},
	},
	"ManagementPolicies": {
		reason: "Management policies are how an MR is observed only or kept on delete.",
		readme: "management policies",
		in:     map[string]string{provider: "`managementPolicies: [\"Observe\"]`"},
	},
	"TokenSecret": {
		reason: "A static token in a Secret, re-read without a restart.",
		readme: "static token",
		in:     map[string]string{provider: "a token in a Secret, re-read within 10 s"},
	},
	"IdentityTokens": {
		reason: "The provider's own Kubernetes identity (workload identity), cluster-scoped configs only.",
		readme: "Kubernetes identity",
		in: map[string]string{
			provider:      "projected ServiceAccount token",
			configuration: "the provider's Kubernetes identity",
		},
	},
	"ConnectionDetails": {
		reason: "Keys reach the app team only through connection Secrets.",
		readme: "connection Secrets",
		in: map[string]string{
			provider: "A key's secret appears only in its connection Secret",
			function: "composed connection Secret",
		},
	},
	"NamespacedXRsAndClaims": {
		reason: "Both flavours: a Crossplane v2 namespaced XR and a legacy claim.",
		readme: "legacy Claim",
		in: map[string]string{
			function:      "a legacy claim gets cluster-scoped ones",
			configuration: "`WidgetClaim`",
		},
	},
	"Conditions": {
		reason: "What is wrong reaches the app team's own object.",
		readme: "`PolicyCompliant`",
		in:     map[string]string{function: "`PolicyCompliant`, `WidgetReady` and `KeysReady`"},
	},
	"NamespacePoliciesAndQuotas": {
		reason: "Platform teams narrow the policy and set quotas per namespace.",
		readme: "quotas",
		in: map[string]string{
			function:      "**Namespace policies and quotas**",
			configuration: "namespace policies and quotas",
		},
	},
	"ChangeLogs": {
		reason: "An audit trail of every change the provider makes.",
		readme: "turn on change logs",
		in:     map[string]string{provider: "change logs"},
	},
	"ConversionWebhook": {
		reason: "v1alpha1 is still served through the provider's conversion webhook, which only kube-apiserver should reach.",
		readme: "conversion webhook",
		in:     map[string]string{provider: "admit only kube-apiserver to the conversion webhook's port"},
	},
	"Limits": {
		reason: "Every input a tenant or a caller controls is bounded.",
		readme: "is bounded",
		in: map[string]string{
			provider: "every input a tenant or a caller controls is bounded",
			function: "a call's work is bounded by the request's size",
		},
	},
	"RateLimits": {
		reason: "A 429 pauses the connection for Retry-After.",
		readme: "Retry-After",
		in:     map[string]string{provider: "pauses that connection for `Retry-After`"},
	},
	"SafeStart": {
		reason: "The managed resources must be activated.",
		readme: "ManagedResourceActivationPolicy",
		in: map[string]string{
			provider:      "ManagedResourceActivationPolicy",
			configuration: "ManagedResourceActivationPolicy",
		},
	},
	"CoreSettings": {
		reason: "The core version and flag the platform team must run.",
		readme: "--max-concurrent-reconciles=10",
		in:     map[string]string{configuration: "Crossplane core v2.4.2 or later with `--max-concurrent-reconciles=10`"},
	},
}

// crossplaneVersions are, per package, the Crossplane versions it must
// install into (true) and those it must refuse (false): provider-widget
// v2.0, function-widget v2.4, the core line it is built and tested against,
// and configuration-widget v2.4.2, which the e2e tier runs
// (docs/install.md says why).
var crossplaneVersions = map[string]map[string]bool{
	provider:      {"v2.0.0": true, "v2.4.0": true, "v2.4.2": true, "v1.20.0": false},
	function:      {"v2.4.0": true, "v2.4.2": true, "v2.5.0": true, "v2.3.0": false, "v2.0.0": false, "v1.20.0": false},
	configuration: {"v2.4.2": true, "v2.5.0": true, "v2.4.0": false, "v2.3.0": false, "v1.20.0": false},
}

// checkCrossplaneConstraint checks a package's spec.crossplane.version
// against crossplaneVersions.
func checkCrossplaneConstraint(t *testing.T, pkg, constraint string) {
	t.Helper()
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		t.Fatalf("%s: Crossplane constraint %q: %v", pkg, constraint, err)
	}
	versions, ok := crossplaneVersions[pkg]
	if !ok {
		t.Fatalf("crossplaneVersions has no entry for %s", pkg)
	}
	for v, want := range versions {
		if got := c.Check(semver.MustParse(v)); got != want {
			t.Errorf("%s: Crossplane %s in constraint %q: want %t, got %t", pkg, v, constraint, want, got)
		}
	}
}

// pkgMeta is the part of a crossplane.yaml these tests read.
type pkgMeta struct {
	Metadata struct {
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Crossplane struct {
			Version string `json:"version"`
		} `json:"crossplane"`
	} `json:"spec"`
}

// metas reads every package's crossplane.yaml, by package name.
func metas(t *testing.T, root string) map[string]pkgMeta {
	t.Helper()
	files := map[string]string{configuration: xpkg.Configuration.Meta}
	for _, p := range xpkg.Packages {
		files[p.Name] = filepath.Join(p.Root, "crossplane.yaml")
	}
	out := map[string]pkgMeta{}
	for name, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		var m pkgMeta
		if err := yaml.Unmarshal(b, &m); err != nil {
			t.Fatalf("cannot parse %s: %v", f, err)
		}
		out[name] = m
	}
	return out
}

// oneLine folds every run of white space into one space, so that a phrase
// matches however the page wraps it.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestReadmesNameEveryFeature fails when a feature README.md names is
// missing from a package readme (meta.crossplane.io/readme) that should
// name it, so that what a registry user reads cannot go stale silently.
func TestReadmesNameEveryFeature(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := oneLine(string(b))
	ms := metas(t, root)
	for name, f := range features {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(readme, f.readme) {
				t.Errorf("\n%s\nREADME.md no longer says %q: update this row with the README", f.reason, f.readme)
			}
			for pkg, phrase := range f.in {
				m, ok := ms[pkg]
				if !ok {
					t.Fatalf("no package %s", pkg)
				}
				if !strings.Contains(oneLine(m.Metadata.Annotations["meta.crossplane.io/readme"]), phrase) {
					t.Errorf("\n%s\nthe readme of %s does not say %q", f.reason, pkg, phrase)
				}
			}
		})
	}
}

// docsLink is a link in a readme to a page of this repository.
var docsLink = regexp.MustCompile(`\]\(https://github\.com/widgetco/crossplane-widget/blob/main/([^)#\s]+)(#[^)\s]*)?\)`)

// TestReadmes checks what else a registry user reads: every package
// carries the common annotations, its readme's links to this repository
// name files that exist, and its Crossplane constraint admits exactly the
// versions it supports.
func TestReadmes(t *testing.T) {
	root := filepath.Join("..", "..")
	for pkg, m := range metas(t, root) {
		t.Run(pkg, func(t *testing.T) {
			ann := m.Metadata.Annotations
			for _, k := range []string{"maintainer", "source", "license", "description", "readme"} {
				if strings.TrimSpace(ann["meta.crossplane.io/"+k]) == "" {
					t.Errorf("annotation meta.crossplane.io/%s is missing", k)
				}
			}
			if got := ann["meta.crossplane.io/license"]; got != "Apache-2.0" {
				t.Errorf("meta.crossplane.io/license: want Apache-2.0 (the LICENSE file), got %q", got)
			}
			links := docsLink.FindAllStringSubmatch(ann["meta.crossplane.io/readme"], -1)
			if len(links) == 0 {
				t.Errorf("the readme links to no page of the docs")
			}
			for _, l := range links {
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(l[1]))); err != nil {
					t.Errorf("the readme links to %s, which does not exist: %v", l[1], err)
				}
			}
			checkCrossplaneConstraint(t, pkg, m.Spec.Crossplane.Version)
		})
	}
	if _, err := os.Stat(filepath.Join(root, "LICENSE")); err != nil {
		t.Errorf("every package declares Apache-2.0, so the repository carries its LICENSE: %v", err)
	}
}
