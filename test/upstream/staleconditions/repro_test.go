package staleconditions

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

func TestManifests(t *testing.T) {
	objs, err := Manifests()
	if err != nil {
		t.Fatal(err)
	}
	kinds := make([]string, 0, len(objs))
	for _, o := range objs {
		kinds = append(kinds, o.GetKind()+"/"+o.GetName())
	}
	want := []string{"ClusterRole/crossplane:repro:configmaps", "CompositeResourceDefinition/xrepros.repro.example.org", "Composition/xrepros.repro.example.org"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Fatalf("Manifests(): -want, +got:\n%s", diff)
	}

	// The Composition composes the XRD's kind, and core may compose what
	// it composes.
	xrd, comp, role := objs[1].Object, objs[2].Object, objs[0].Object
	group := xrd["spec"].(map[string]any)["group"].(string)
	kind := xrd["spec"].(map[string]any)["names"].(map[string]any)["kind"].(string)
	ref := comp["spec"].(map[string]any)["compositeTypeRef"].(map[string]any)
	if got, want := ref["apiVersion"].(string)+"/"+ref["kind"].(string), GVR.GroupVersion().String()+"/"+kind; got != want || group != GVR.Group {
		t.Errorf("the Composition composes %s, want %s (XRD group %s)", got, want, group)
	}
	if got := objs[0].GetLabels()["rbac.crossplane.io/aggregate-to-crossplane"]; got != "true" {
		t.Errorf("the ClusterRole is not aggregated into Crossplane's: label %q", got)
	}
	rules := role["rules"].([]any)
	if diff := cmp.Diff([]any{"configmaps"}, rules[0].(map[string]any)["resources"]); diff != "" {
		t.Errorf("the ClusterRole's resources: -want, +got:\n%s", diff)
	}
	step := comp["spec"].(map[string]any)["pipeline"].([]any)
	if len(step) != 1 || step[0].(map[string]any)["functionRef"].(map[string]any)["name"] != "function-patch-and-transform" {
		t.Errorf("the pipeline must run function-patch-and-transform alone, got %v", step)
	}
}

func TestResult(t *testing.T) {
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	loss := func(name string, after time.Duration, reason string) platform.ReadyLoss {
		return platform.ReadyLoss{Name: name, At: at.Add(after), Status: "False", Reason: reason, Message: "Unready resources: config"}
	}
	cases := map[string]struct {
		r                  Result
		wantXRs, wantAfter int
		wantReasons        []string
	}{
		"None": {
			r:           Result{N: 3, AllReadyAt: at},
			wantReasons: []string{},
		},
		"BeforeAndAfter": {
			r: Result{N: 3, AllReadyAt: at, Losses: []platform.ReadyLoss{
				loss("r000", -time.Second, "Creating"), loss("r000", time.Second, "Creating"), loss("r001", 2*time.Second, "Creating"),
			}},
			wantXRs:     2,
			wantAfter:   2,
			wantReasons: []string{"3x Ready=False Creating: Unready resources: config"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.r.LostXRs(); got != tc.wantXRs {
				t.Errorf("LostXRs(): want %d, got %d", tc.wantXRs, got)
			}
			if got := tc.r.LostAfterAllReady(); got != tc.wantAfter {
				t.Errorf("LostAfterAllReady(): want %d, got %d", tc.wantAfter, got)
			}
			if diff := cmp.Diff(tc.wantReasons, tc.r.Reasons()); diff != "" {
				t.Errorf("Reasons(): -want, +got:\n%s", diff)
			}
		})
	}
}
