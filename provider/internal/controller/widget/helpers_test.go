package widget

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/names"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

var errBoom = errors.New("boom")

// timeout bounds every wait: generous, for a slow shared machine.
const timeout = 30 * time.Second

// ownerPlaceholder in a wanted diff, message or label stands for the
// ownership marker of the resource under test, which differs by scope;
// markersPlaceholder for all its ownership labels, as a diff prints them.
const (
	ownerPlaceholder   = "{owner}"
	markersPlaceholder = "{markers}"
)

func newNamespaced() *nsv1beta1.Widget {
	return &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", Generation: 1, UID: "uid-web"}}
}

func newCluster() *clusterv1beta1.Widget {
	return &clusterv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 1, UID: "uid-web"}}
}

// A mod changes a managed resource before the test.
type mod func(mg commonv1beta1.WidgetResource)

// explicitName sets an external name as a user importing a widget would.
func explicitName(n string) mod {
	return func(mg commonv1beta1.WidgetResource) { meta.SetExternalName(mg, n) }
}

// defaultName gives the resource the external name the provider chooses,
// and marks a create pending under it, as the reconciler does before every
// create.
func defaultName() mod {
	return func(mg commonv1beta1.WidgetResource) {
		chosenName()(mg)
		meta.SetExternalCreatePending(mg, time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	}
}

// chosenName gives the resource the external name the provider chooses, as
// its initializer does before the first create.
func chosenName() mod {
	return func(mg commonv1beta1.WidgetResource) {
		n := names.Default(mg)
		meta.SetExternalName(mg, n)
		meta.AddAnnotations(mg, map[string]string{names.AnnotationDefaultExternalName: n})
	}
}

func withSpec(p commonv1beta1.WidgetParameters) mod {
	return func(mg commonv1beta1.WidgetResource) { *mg.GetWidgetParameters() = *p.DeepCopy() }
}

// withInit sets spec.initProvider.
func withInit(p commonv1beta1.WidgetInitParameters) mod {
	return func(mg commonv1beta1.WidgetResource) { *mg.GetWidgetInitParameters() = *p.DeepCopy() }
}

func deleted() mod {
	return func(mg commonv1beta1.WidgetResource) {
		now := metav1.Now()
		mg.SetDeletionTimestamp(&now)
	}
}

// reviewedImport leaves the UpToDate condition an Observe-only import
// review writes.
func reviewedImport() mod {
	return func(mg commonv1beta1.WidgetResource) {
		mg.SetConditions(xpv2.Condition{Type: TypeUpToDate, Status: corev1.ConditionFalse, Reason: ReasonWouldChange, Message: "earlier review"})
	}
}

func observeOnlyPolicy() mod {
	return func(mg commonv1beta1.WidgetResource) {
		mg.SetManagementPolicies(xpv2.ManagementPolicies{xpv2.ManagementActionObserve})
	}
}

// synced marks the resource's current spec as successfully synced.
func synced() mod {
	return func(mg commonv1beta1.WidgetResource) {
		mg.SetConditions(xpv2.ReconcileSuccess().WithObservedGeneration(mg.GetGeneration()))
	}
}

// syncedEarlier marks an older generation of the spec as synced: the user
// changed the spec since.
func syncedEarlier() mod {
	return func(mg commonv1beta1.WidgetResource) {
		mg.SetConditions(xpv2.ReconcileSuccess().WithObservedGeneration(mg.GetGeneration() - 1))
	}
}

// seed is a widget that exists in the Widget API before the test.
type seed struct {
	size, region, description string
	labels                    map[string]string
	// owner is the ownership marker to give it: ownerPlaceholder for the
	// resource under test, "" for none.
	owner string
	// act runs after the widget is created, e.g. to resize or delete it.
	act func(t *testing.T, api *widgetapi.Client, name string)
	// state is the state to wait for before the test goes on.
	state widgetapi.State
}

// full are parameters that match fullSeed. A widget's region is not among
// them: it is set only in spec.initProvider, for the widget's creation.
var full = commonv1beta1.WidgetParameters{
	Size:        ptr.To("small"),
	Labels:      map[string]string{"team": "a"},
	Description: ptr.To("web tier"),
}

func fullSeed(owner string) *seed {
	return &seed{size: "small", region: "us-east-1", labels: map[string]string{"team": "a"}, description: "web tier", owner: owner, state: widgetapi.StateReady}
}

func with(p commonv1beta1.WidgetParameters, fn func(p *commonv1beta1.WidgetParameters)) commonv1beta1.WidgetParameters {
	out := p.DeepCopy()
	fn(out)
	return *out
}

func withSeed(s *seed, fn func(s *seed)) *seed {
	out := *s
	out.labels = maps.Clone(s.labels)
	fn(&out)
	return &out
}

// fill replaces the owner and markers placeholders.
func fill(s, owner string) string {
	s = strings.ReplaceAll(s, markersPlaceholder, formatLabels(markersOf(owner)))
	return strings.ReplaceAll(s, ownerPlaceholder, owner)
}

// markersOf returns the ownership labels of the resource whose marker is
// owner. The resources under test have short names: the marker is all.
func markersOf(owner string) map[string]string {
	return map[string]string{ownership.OwnerLabel: owner}
}

// create creates the seed widget as name and returns it once it reached the
// seed's state.
func (s *seed) create(t *testing.T, api *widgetapi.Client, name, owner string) *widgetapi.Widget {
	t.Helper()
	labels := maps.Clone(s.labels)
	if labels == nil {
		labels = map[string]string{}
	}
	switch s.owner {
	case "":
	case ownerPlaceholder:
		maps.Copy(labels, markersOf(owner))
	default:
		labels[ownership.OwnerLabel] = s.owner
	}
	if _, err := api.CreateWidget(t.Context(), widgetapi.CreateWidgetRequest{Name: name, Size: s.size, Region: s.region, Labels: labels, Description: s.description}); err != nil {
		t.Fatalf("cannot seed widget %s: %v", name, err)
	}
	if s.act != nil {
		if s.state != widgetapi.StateProvisioning {
			waitState(t, api, name, widgetapi.StateReady)
		}
		s.act(t, api, name)
	}
	return waitState(t, api, name, s.state)
}

// waitState waits until the widget is in state and returns it.
func waitState(t *testing.T, api *widgetapi.Client, name string, state widgetapi.State) *widgetapi.Widget {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		w, err := api.GetWidget(t.Context(), name)
		if err != nil {
			t.Fatalf("cannot get widget %s: %v", name, err)
		}
		if w.State == state {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for widget %s to be %s; it is %s", timeout, name, state, w.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func resize(size string) func(t *testing.T, api *widgetapi.Client, name string) {
	return func(t *testing.T, api *widgetapi.Client, name string) {
		t.Helper()
		if _, err := api.PatchWidget(t.Context(), name, widgetapi.PatchWidgetRequest{Size: &size}); err != nil {
			t.Fatalf("cannot resize widget %s: %v", name, err)
		}
	}
}

func deleteWidget(t *testing.T, api *widgetapi.Client, name string) {
	t.Helper()
	if _, err := api.DeleteWidget(t.Context(), name); err != nil {
		t.Fatalf("cannot delete widget %s: %v", name, err)
	}
}

// mostLabels are as many labels as the CRD accepts (31).
func mostLabels() map[string]string {
	l := make(map[string]string, 31)
	for i := range 31 {
		l[fmt.Sprintf("label-%02d", i)] = "v"
	}
	return l
}

// fillLabels returns labels with the owner placeholder replaced.
func fillLabels(l map[string]string, owner string) map[string]string {
	if l == nil {
		return nil
	}
	out := make(map[string]string, len(l))
	for k, v := range l {
		out[k] = fill(v, owner)
	}
	if l[ownership.OwnerLabel] == ownerPlaceholder {
		maps.Copy(out, markersOf(owner))
	}
	return out
}

// apiError checks that err wraps the Widget API error that want recognises
// (nil: nothing to check). The session a controller gets throttles on 429s
// itself (clients.Session, tested there); here the controller must hand the
// API's error back.
func apiError(t *testing.T, reason string, err error, want func(error) bool) {
	t.Helper()
	if want != nil && !want(err) {
		t.Errorf("%s\nerror %v does not wrap the wanted Widget API error", reason, err)
	}
}

func isRateLimited(err error) bool { _, ok := widgetapi.IsRateLimited(err); return ok }
func isInvalid(err error) bool     { _, ok := widgetapi.IsInvalid(err); return ok }

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := c.Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// mentions checks that err states each fact.
func mentions(t *testing.T, reason string, err error, facts []string, owner string) {
	t.Helper()
	for _, f := range facts {
		if err == nil || !strings.Contains(err.Error(), fill(f, owner)) {
			t.Errorf("%s\nerror %v does not mention %q", reason, err, fill(f, owner))
		}
	}
}

var (
	ignoreTransitionTime = cmpopts.IgnoreFields(xpv2.Condition{}, "LastTransitionTime")
	// noReady is what GetCondition returns when no Ready condition is set.
	noReady = xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionUnknown}
)
