package widget

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/provider/internal/names"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
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

func newNamespaced() *nsv1alpha1.Widget {
	return &nsv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", Generation: 1, UID: "uid-web"}}
}

func newCluster() *clusterv1alpha1.Widget {
	return &clusterv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 1, UID: "uid-web"}}
}

// A mod changes a managed resource before the test.
type mod func(mg commonv1alpha1.WidgetResource)

// explicitName sets an external name as a user importing a widget would.
func explicitName(n string) mod {
	return func(mg commonv1alpha1.WidgetResource) { meta.SetExternalName(mg, n) }
}

// defaultName gives the resource the external name the provider chooses.
func defaultName() mod {
	return func(mg commonv1alpha1.WidgetResource) {
		n := names.Default(mg)
		meta.SetExternalName(mg, n)
		meta.AddAnnotations(mg, map[string]string{names.AnnotationDefaultExternalName: n})
	}
}

func withSpec(p commonv1alpha1.WidgetParameters) mod {
	return func(mg commonv1alpha1.WidgetResource) { *mg.GetWidgetParameters() = *p.DeepCopy() }
}

func deleted() mod {
	return func(mg commonv1alpha1.WidgetResource) {
		now := metav1.Now()
		mg.SetDeletionTimestamp(&now)
	}
}

func observeOnlyPolicy() mod {
	return func(mg commonv1alpha1.WidgetResource) {
		mg.SetManagementPolicies(xpv2.ManagementPolicies{xpv2.ManagementActionObserve})
	}
}

// synced marks the resource's current spec as successfully synced.
func synced() mod {
	return func(mg commonv1alpha1.WidgetResource) {
		mg.SetConditions(xpv2.ReconcileSuccess().WithObservedGeneration(mg.GetGeneration()))
	}
}

// syncedEarlier marks an older generation of the spec as synced: the user
// changed the spec since.
func syncedEarlier() mod {
	return func(mg commonv1alpha1.WidgetResource) {
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

// full are parameters that match fullSeed.
var full = commonv1alpha1.WidgetParameters{
	Size:        ptr.To("small"),
	Region:      ptr.To("us-east-1"),
	Labels:      map[string]string{"team": "a"},
	Description: ptr.To("web tier"),
}

func fullSeed(owner string) *seed {
	return &seed{size: "small", region: "us-east-1", labels: map[string]string{"team": "a"}, description: "web tier", owner: owner, state: widgetapi.StateReady}
}

func with(p commonv1alpha1.WidgetParameters, fn func(p *commonv1alpha1.WidgetParameters)) commonv1alpha1.WidgetParameters {
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
	return map[string]string{names.OwnerLabel: owner}
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
		labels[names.OwnerLabel] = s.owner
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

// rateLimited makes the server allow each token a few calls, and no more
// for a long time.
func rateLimited(o *server.Options) { o.RateLimit = 0.001; o.RateBurst = 20 }

// exhaust uses up the token's rate limit.
func exhaust(t *testing.T, api *widgetapi.Client) {
	t.Helper()
	for range 1000 {
		_, err := api.ListWidgets(t.Context(), widgetapi.ListWidgetsOptions{})
		if isRateLimited(err) {
			return
		}
		if err != nil {
			t.Fatalf("cannot list widgets: %v", err)
		}
	}
	t.Fatal("the Widget API is not rate limiting after 1000 calls")
}

// thirtyTwoLabels are as many labels as the CRD accepts.
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
	if l[names.OwnerLabel] == ownerPlaceholder {
		maps.Copy(out, markersOf(owner))
	}
	return out
}

// fakeRecorder records events.
type fakeRecorder struct{ events []event.Event }

func (r *fakeRecorder) Event(_ runtime.Object, e event.Event)    { r.events = append(r.events, e) }
func (r *fakeRecorder) WithAnnotations(...string) event.Recorder { return r }

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

func TestObserve(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) { testObserve(t, newNamespaced) })
	t.Run("Cluster", func(t *testing.T) { testObserve(t, newCluster) })
}

func testObserve[T commonv1alpha1.WidgetResource](t *testing.T, newMG func() T) {
	type want struct {
		// o is the observation, except its connection details.
		o managed.ExternalObservation
		// endpoint says whether the widget's endpoint is published as a
		// connection detail.
		endpoint bool
		err      error
		mentions []string
		checked  func(error) bool
		ready    xpv2.Condition
		spec     commonv1alpha1.WidgetParameters
		// status says whether status.atProvider shows the widget.
		status   bool
		adopting bool
	}
	cases := map[string]struct {
		reason string
		// skip, when set, explains a known bug this case demonstrates.
		skip    string
		server  func(*server.Options)
		seed    *seed
		before  func(t *testing.T, api *widgetapi.Client)
		mods    []mod
		knownID bool
		want    want
	}{
		"NoExternalName": {
			reason: "A resource without an external name has no widget yet.",
			want:   want{ready: noReady},
		},
		"InvalidExternalName": {
			reason: "An external name the API could never accept is an error saying what a valid name is.",
			mods:   []mod{explicitName("Not_A_Widget")},
			want:   want{err: cmpopts.AnyError, mentions: []string{`"Not_A_Widget"`, "lowercase"}, ready: noReady},
		},
		"NotFound": {
			reason: "A widget that does not exist is reported as such, so it is created.",
			mods:   []mod{defaultName(), withSpec(full)},
			want:   want{ready: noReady, spec: full},
		},
		"UpToDate": {
			reason: "A widget that matches the spec and carries our marker is up to date, Ready, and publishes its endpoint.",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{defaultName(), withSpec(full)},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true,
			},
		},
		"SizeDrift": {
			reason: "A different size is drift, with a readable diff.",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{defaultName(), withSpec(with(full, func(p *commonv1alpha1.WidgetParameters) { p.Size = ptr.To("large") }))},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, Diff: `size: want "large", have "small"`},
				endpoint: true, ready: xpv2.Available(), status: true,
				spec: with(full, func(p *commonv1alpha1.WidgetParameters) { p.Size = ptr.To("large") }),
			},
		},
		"LabelsDrift": {
			reason: "Different user labels are drift; the diff lists both sets without the marker.",
			seed:   withSeed(fullSeed(ownerPlaceholder), func(s *seed) { s.labels = map[string]string{"team": "b", "env": "prod"} }),
			mods:   []mod{defaultName(), withSpec(full)},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, Diff: `labels: want {team=a}, have {env=prod, team=b}`},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true,
			},
		},
		"DescriptionDrift": {
			reason: "A different description is drift.",
			seed:   withSeed(fullSeed(ownerPlaceholder), func(s *seed) { s.description = "changed by hand" }),
			mods:   []mod{defaultName(), withSpec(full)},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, Diff: `description: want "web tier", have "changed by hand"`},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true,
			},
		},
		"RegionDiffers": {
			reason: "A region that differs from the spec is reported (Update explains that it cannot change).",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{defaultName(), withSpec(with(full, func(p *commonv1alpha1.WidgetParameters) { p.Region = ptr.To("eu-west-1") }))},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, Diff: `region: want "eu-west-1", have "us-east-1"`},
				endpoint: true, ready: xpv2.Available(), status: true,
				spec: with(full, func(p *commonv1alpha1.WidgetParameters) { p.Region = ptr.To("eu-west-1") }),
			},
		},
		"OwnerLabelRemoved": {
			reason:  "A widget we recorded (by ID) whose marker someone removed is ours: drift to repair, not an adoption.",
			seed:    fullSeed(""),
			mods:    []mod{defaultName(), withSpec(full)},
			knownID: true,
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, Diff: `ownership labels: want {markers}, have {}`},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true,
			},
		},
		"ServerDefaultsAreNotDrift": {
			reason: "Size and region the user left unset take the server's defaults; they are late-initialized, not drift.",
			seed:   &seed{owner: ownerPlaceholder, state: widgetapi.StateReady},
			mods:   []mod{defaultName()},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true, ResourceLateInitialized: true},
				endpoint: true, ready: xpv2.Available(), status: true,
				spec: commonv1alpha1.WidgetParameters{Size: ptr.To("small"), Region: ptr.To("us-east-1")},
			},
		},
		"LateInitialize": {
			reason: "Every field the user left unset is filled from the widget, user labels only.",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{defaultName(), withSpec(commonv1alpha1.WidgetParameters{Size: ptr.To("small")})},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true, ResourceLateInitialized: true},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true,
			},
		},
		"OwnedByAnother": {
			reason: "A widget another resource manages is a clear error naming that resource, never a takeover.",
			seed:   fullSeed("n_team-a.other"),
			mods:   []mod{explicitName("shared"), withSpec(full)},
			want: want{
				err: cmpopts.AnyError, mentions: []string{"shared", "namespaced managed resource team-a/other"},
				ready: noReady, spec: full,
			},
		},
		"OwnedByAnotherRecordedID": {
			reason:  "A widget we once recorded that another resource now manages is still not ours.",
			seed:    fullSeed("n_team-a.other"),
			mods:    []mod{defaultName(), withSpec(full)},
			knownID: true,
			want: want{
				err: cmpopts.AnyError, mentions: []string{"namespaced managed resource team-a/other"},
				ready: noReady, spec: full,
			},
		},
		"OwnedByAnotherWhileDeleting": {
			reason: "Deleting a resource must never delete a widget another resource manages: it reports no widget.",
			seed:   fullSeed("n_other.web"),
			mods:   []mod{explicitName("shared"), withSpec(full), deleted()},
			want:   want{ready: noReady, spec: full},
		},
		"UnownedUnderDefaultName": {
			reason: "An existing unowned widget under a name the provider chose is not adopted silently: an error says how to adopt it.",
			seed:   fullSeed(""),
			mods:   []mod{defaultName(), withSpec(full)},
			want: want{
				err: cmpopts.AnyError, mentions: []string{"crossplane.io/external-name"},
				ready: noReady, spec: full,
			},
		},
		"UnownedUnderDefaultNameWhileDeleting": {
			reason: "Deleting a resource that refused to adopt an unowned widget must not delete that widget: it reports no widget.",
			seed:   fullSeed(""),
			mods:   []mod{defaultName(), withSpec(full), deleted()},
			want:   want{ready: noReady, spec: full},
		},
		"UnownedUnderExplicitName": {
			reason: "An unowned widget named explicitly is adopted: it exists, is late-initialized, and needs our marker.",
			seed:   fullSeed(""),
			mods:   []mod{explicitName("imported")},
			want: want{
				o: managed.ExternalObservation{ResourceExists: true, ResourceLateInitialized: true,
					Diff: `ownership labels: want {markers}, have {}`},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true, adopting: true,
			},
		},
		"ObserveOnlyImport": {
			reason: "With management policy Observe an unowned widget is observed and late-initialized without error, even under a defaulted name.",
			seed:   fullSeed(""),
			mods:   []mod{defaultName(), observeOnlyPolicy()},
			want: want{
				o: managed.ExternalObservation{ResourceExists: true, ResourceLateInitialized: true,
					Diff: `ownership labels: want {markers}, have {}`},
				endpoint: true, ready: xpv2.Available(), spec: full, status: true, adopting: true,
			},
		},
		"Provisioning": {
			reason: "A provisioning widget is Creating and has no endpoint yet.",
			server: func(o *server.Options) { o.ProvisionDelay = time.Hour },
			seed:   withSeed(fullSeed(ownerPlaceholder), func(s *seed) { s.state = widgetapi.StateProvisioning }),
			mods:   []mod{defaultName(), withSpec(full)},
			want: want{
				o:     managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				ready: xpv2.Creating().WithMessage("The Widget API is provisioning the widget"), spec: full, status: true,
			},
		},
		"Resizing": {
			reason: "A resizing widget is not ready, with reason Resizing and the target size.",
			server: func(o *server.Options) { o.ResizeDelay = time.Hour },
			seed: withSeed(fullSeed(ownerPlaceholder), func(s *seed) {
				s.act = resize("large")
				s.state = widgetapi.StateResizing
			}),
			mods: []mod{defaultName(), withSpec(with(full, func(p *commonv1alpha1.WidgetParameters) { p.Size = ptr.To("large") }))},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				endpoint: true, status: true,
				ready: xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: ReasonResizing, Message: "The Widget API is resizing the widget to large"},
				spec:  with(full, func(p *commonv1alpha1.WidgetParameters) { p.Size = ptr.To("large") }),
			},
		},
		"Failed": {
			reason: "A failed widget is unavailable with the API's message.",
			server: func(o *server.Options) { o.FailingRegions = []string{"eu-fail-1"} },
			seed: withSeed(fullSeed(ownerPlaceholder), func(s *seed) {
				s.region = "eu-fail-1"
				s.state = widgetapi.StateFailed
			}),
			mods: []mod{defaultName(), withSpec(with(full, func(p *commonv1alpha1.WidgetParameters) { p.Region = ptr.To("eu-fail-1") }))},
			want: want{
				o: managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				ready: xpv2.Unavailable().WithMessage("The widget failed: region eu-fail-1 has no capacity for new widgets; " +
					"delete this widget and create it in another region"),
				spec:   with(full, func(p *commonv1alpha1.WidgetParameters) { p.Region = ptr.To("eu-fail-1") }),
				status: true,
			},
		},
		"DeletingInBand": {
			reason: "A widget being deleted because the resource is deleted is Deleting, and not compared (nothing to update).",
			server: func(o *server.Options) { o.DeleteDelay = time.Hour },
			seed: withSeed(fullSeed(ownerPlaceholder), func(s *seed) {
				s.act = deleteWidget
				s.state = widgetapi.StateDeleting
			}),
			mods: []mod{defaultName(), withSpec(with(full, func(p *commonv1alpha1.WidgetParameters) { p.Size = ptr.To("large") })), deleted()},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				endpoint: true, ready: xpv2.Deleting(), status: true,
				spec: with(full, func(p *commonv1alpha1.WidgetParameters) { p.Size = ptr.To("large") }),
			},
		},
		"DeletingOutOfBand": {
			reason: "A widget someone else is deleting is unavailable, says it will come back, and is not updated meanwhile.",
			server: func(o *server.Options) { o.DeleteDelay = time.Hour },
			seed: withSeed(fullSeed(ownerPlaceholder), func(s *seed) {
				s.act = deleteWidget
				s.state = widgetapi.StateDeleting
			}),
			mods: []mod{defaultName(), withSpec(with(full, func(p *commonv1alpha1.WidgetParameters) { p.Size = ptr.To("large") }))},
			want: want{
				o:        managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true},
				endpoint: true, status: true,
				ready: xpv2.Unavailable().WithMessage("The widget is being deleted outside Crossplane; it will be created again once it is gone"),
				spec:  with(full, func(p *commonv1alpha1.WidgetParameters) { p.Size = ptr.To("large") }),
			},
		},
		"RateLimited": {
			reason: "A 429 goes through the session's Check (which throttles) and is returned.",
			server: rateLimited,
			before: exhaust,
			mods:   []mod{defaultName(), withSpec(full)},
			want:   want{err: cmpopts.AnyError, checked: isRateLimited, ready: noReady, spec: full},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.skip != "" {
				t.Skip(tc.skip)
			}
			env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
				if tc.server != nil {
					tc.server(o)
				}
			}))
			api := env.Client(t, apitest.TokenA)
			mg := newMG()
			for _, m := range tc.mods {
				m(mg)
			}
			owner := names.Owner(mg)
			var seeded *widgetapi.Widget
			if tc.seed != nil {
				seeded = tc.seed.create(t, api, meta.GetExternalName(mg), owner)
			}
			if tc.knownID {
				mg.SetWidgetObservation(commonv1alpha1.WidgetObservation{ID: seeded.ID})
			}
			if tc.before != nil {
				tc.before(t, api)
			}
			e := &external[T]{api: env.Client(t, apitest.TokenA), record: &fakeRecorder{}, metrics: metrics.New(), kind: "Widget"}

			got, err := e.Observe(t.Context(), mg)
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nObserve(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			mentions(t, tc.reason, err, tc.want.mentions, owner)
			apiError(t, tc.reason, err, tc.want.checked)

			wantO := tc.want.o
			wantO.Diff = fill(wantO.Diff, owner)
			if diff := cmp.Diff(wantO, got, cmpopts.IgnoreFields(managed.ExternalObservation{}, "ConnectionDetails")); diff != "" {
				t.Errorf("%s\nObserve(...): -want, +got:\n%s", tc.reason, diff)
			}
			var wantCD managed.ConnectionDetails
			if tc.want.endpoint {
				wantCD = managed.ConnectionDetails{"endpoint": []byte(seeded.Endpoint)}
			}
			if diff := cmp.Diff(wantCD, got.ConnectionDetails); diff != "" {
				t.Errorf("%s\nObserve(...).ConnectionDetails: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.ready, mg.GetCondition(xpv2.TypeReady), ignoreTransitionTime); diff != "" {
				t.Errorf("%s\nReady condition: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.spec, *mg.GetWidgetParameters(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nspec.forProvider: -want, +got:\n%s", tc.reason, diff)
			}
			wantStatus := commonv1alpha1.WidgetObservation{}
			switch {
			case tc.want.status:
				wantStatus = observation(seeded)
			case tc.knownID:
				wantStatus = commonv1alpha1.WidgetObservation{ID: seeded.ID}
			}
			if diff := cmp.Diff(wantStatus, *mg.GetWidgetObservation()); diff != "" {
				t.Errorf("%s\nstatus.atProvider: -want, +got:\n%s", tc.reason, diff)
			}
			// After an error or a "gone" there is no Update, so adopting
			// does not matter.
			if err == nil && tc.want.o.ResourceExists && e.adopting != tc.want.adopting {
				t.Errorf("%s\nadopting: want %t, got %t", tc.reason, tc.want.adopting, e.adopting)
			}
		})
	}
}

func TestCreate(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) { testCreate(t, newNamespaced) })
	t.Run("Cluster", func(t *testing.T) { testCreate(t, newCluster) })
}

func testCreate[T commonv1alpha1.WidgetResource](t *testing.T, newMG func() T) {
	// widget is what the test compares of the widget in the API.
	type widget struct {
		Size, Region, Description string
		Labels                    map[string]string
		State                     widgetapi.State
	}
	type want struct {
		err      error
		mentions []string
		checked  func(error) bool
		// widget is the widget in the API afterwards, nil for none.
		widget *widget
		ready  xpv2.Condition
	}
	cases := map[string]struct {
		reason string
		// skip, when set, explains a known bug this case demonstrates.
		skip   string
		server func(*server.Options)
		seed   *seed
		mods   []mod
		want   want
	}{
		"AllFields": {
			reason: "The widget is created as specified, carrying our marker, and its status is recorded at once.",
			mods:   []mod{defaultName(), withSpec(with(full, func(p *commonv1alpha1.WidgetParameters) { p.Region = ptr.To("eu-west-1") }))},
			want: want{
				widget: &widget{Size: "small", Region: "eu-west-1", Description: "web tier", State: widgetapi.StateProvisioning,
					Labels: map[string]string{"team": "a", names.OwnerLabel: ownerPlaceholder}},
				ready: xpv2.Creating().WithMessage("The Widget API is provisioning the widget"),
			},
		},
		"ServerDefaults": {
			reason: "Unset fields are left to the server's defaults; the marker is always set.",
			mods:   []mod{explicitName("imported")},
			want: want{
				widget: &widget{Size: "small", Region: "us-east-1", State: widgetapi.StateProvisioning, Labels: map[string]string{names.OwnerLabel: ownerPlaceholder}},
				ready:  xpv2.Creating().WithMessage("The Widget API is provisioning the widget"),
			},
		},
		"AlreadyExists": {
			reason: "A name taken in the meantime is an error that says so, and the existing widget is left alone.",
			seed:   withSeed(fullSeed(""), func(s *seed) { s.state = widgetapi.StateProvisioning }),
			mods:   []mod{defaultName(), withSpec(with(full, func(p *commonv1alpha1.WidgetParameters) { p.Size = ptr.To("large") }))},
			want: want{
				err: cmpopts.AnyError, mentions: []string{"already has a widget named"},
				widget: &widget{Size: "small", Region: "us-east-1", Description: "web tier", State: widgetapi.StateProvisioning, Labels: map[string]string{"team": "a"}},
				ready:  noReady,
			},
		},
		"MostLabels": {
			reason: "A spec with as many labels as the CRD allows (31) can be created: with the ownership marker that is the 32 the API allows.",
			mods:   []mod{defaultName(), withSpec(commonv1alpha1.WidgetParameters{Labels: mostLabels()})},
			want: want{
				widget: &widget{Size: "small", Region: "us-east-1", State: widgetapi.StateProvisioning,
					Labels: func() map[string]string { l := mostLabels(); l[names.OwnerLabel] = ownerPlaceholder; return l }()},
				ready: xpv2.Creating().WithMessage("The Widget API is provisioning the widget"),
			},
		},
		"Rejected": {
			reason: "A create the API rejects goes through Check and is returned.",
			mods:   []mod{defaultName(), withSpec(with(full, func(p *commonv1alpha1.WidgetParameters) { p.Region = ptr.To("Not A Region") }))},
			want:   want{err: cmpopts.AnyError, checked: isInvalid, ready: noReady},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.skip != "" {
				t.Skip(tc.skip)
			}
			env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
				o.ProvisionDelay = time.Hour
				if tc.server != nil {
					tc.server(o)
				}
			}))
			api := env.Client(t, apitest.TokenA)
			mg := newMG()
			for _, m := range tc.mods {
				m(mg)
			}
			owner := names.Owner(mg)
			name := meta.GetExternalName(mg)
			if tc.seed != nil {
				tc.seed.create(t, api, name, owner)
			}
			e := &external[T]{api: env.Client(t, apitest.TokenA), record: &fakeRecorder{}, metrics: metrics.New(), kind: "Widget"}

			got, err := e.Create(t.Context(), mg)
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nCreate(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			mentions(t, tc.reason, err, tc.want.mentions, owner)
			apiError(t, tc.reason, err, tc.want.checked)
			if diff := cmp.Diff(managed.ExternalCreation{}, got); diff != "" {
				t.Errorf("%s\nCreate(...): -want, +got:\n%s", tc.reason, diff)
			}

			w, gerr := api.GetWidget(t.Context(), name)
			var gotWidget *widget
			if gerr == nil {
				gotWidget = &widget{Size: w.Size, Region: w.Region, Description: w.Description, Labels: w.Labels, State: w.State}
			}
			var wantWidget *widget
			if tc.want.widget != nil {
				ww := *tc.want.widget
				ww.Labels = fillLabels(ww.Labels, owner)
				wantWidget = &ww
			}
			if diff := cmp.Diff(wantWidget, gotWidget); diff != "" {
				t.Errorf("%s\nwidget in the API: -want, +got:\n%s", tc.reason, diff)
			}
			wantStatus := commonv1alpha1.WidgetObservation{}
			if err == nil {
				wantStatus = observation(w)
			}
			if diff := cmp.Diff(wantStatus, *mg.GetWidgetObservation()); diff != "" {
				t.Errorf("%s\nstatus.atProvider: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.ready, mg.GetCondition(xpv2.TypeReady), ignoreTransitionTime); diff != "" {
				t.Errorf("%s\nReady condition: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) { testUpdate(t, newNamespaced) })
	t.Run("Cluster", func(t *testing.T) { testUpdate(t, newCluster) })
}

// testUpdate observes a widget, as the reconciler does before every update,
// then updates it.
func testUpdate[T commonv1alpha1.WidgetResource](t *testing.T, newMG func() T) {
	type widget struct {
		Size, Description string
		Labels            map[string]string
	}
	type want struct {
		err      error
		mentions []string
		checked  func(error) bool
		// widget is the widget in the API afterwards.
		widget widget
		// untouched says the update must not have changed the widget.
		untouched bool
		events    []event.Event
		// cause is the update counted in the metrics, "" for none.
		cause string
		ready xpv2.Condition
	}
	large := with(full, func(p *commonv1alpha1.WidgetParameters) { p.Size = ptr.To("large") })
	resizing := xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: ReasonResizing, Message: "The Widget API is resizing the widget to large"}
	cases := map[string]struct {
		reason  string
		server  func(*server.Options)
		seed    *seed
		mods    []mod
		knownID bool
		// between runs after Observe and before Update: a concurrent change.
		between func(t *testing.T, api *widgetapi.Client, name string)
		// exhaust uses up the update's rate limit before it runs.
		exhaust bool
		want    want
	}{
		"DriftRepaired": {
			reason: "A widget changed behind our back is restored, with an event saying what changed and a drift metric.",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{defaultName(), withSpec(large), synced()},
			want: want{
				widget: widget{Size: "large", Description: "web tier", Labels: map[string]string{"team": "a", names.OwnerLabel: ownerPlaceholder}},
				events: []event.Event{event.Normal(ReasonDriftRepaired, `Widget was changed outside Crossplane; restored it: size: want "large", have "small"`)},
				cause:  "drift",
				ready:  resizing,
			},
		},
		"SpecChanged": {
			reason: "A spec the user changed since the last sync is applied, reported as an update, not drift.",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{defaultName(), withSpec(large), syncedEarlier()},
			want: want{
				widget: widget{Size: "large", Description: "web tier", Labels: map[string]string{"team": "a", names.OwnerLabel: ownerPlaceholder}},
				events: []event.Event{event.Normal(ReasonUpdated, `Updated widget to match the spec: size: want "large", have "small"`)},
				cause:  "spec",
				ready:  resizing,
			},
		},
		"NeverSynced": {
			reason: "A resource that never synced is applying its spec.",
			seed:   withSeed(fullSeed(ownerPlaceholder), func(s *seed) { s.description = "old" }),
			mods:   []mod{defaultName(), withSpec(full)},
			want: want{
				widget: widget{Size: "small", Description: "web tier", Labels: map[string]string{"team": "a", names.OwnerLabel: ownerPlaceholder}},
				events: []event.Event{event.Normal(ReasonUpdated, `Updated widget to match the spec: description: want "web tier", have "old"`)},
				cause:  "spec",
				ready:  xpv2.Available(),
			},
		},
		"Adopt": {
			reason: "Adopting an unowned widget named explicitly adds our marker, keeps its settings, and says so.",
			seed:   withSeed(fullSeed(""), func(s *seed) { s.labels = map[string]string{"team": "a", "env": "prod"} }),
			mods:   []mod{explicitName("imported")},
			want: want{
				widget: widget{Size: "small", Description: "web tier", Labels: map[string]string{"team": "a", "env": "prod", names.OwnerLabel: ownerPlaceholder}},
				events: []event.Event{event.Normal(ReasonAdopted, "Adopted widget imported; it is now managed by this resource")},
				cause:  "adopt",
				ready:  xpv2.Available(),
			},
		},
		"OwnerLabelRestored": {
			reason:  "A widget we recorded whose marker was removed gets it back as a drift repair, not an adoption.",
			seed:    fullSeed(""),
			mods:    []mod{defaultName(), withSpec(full), synced()},
			knownID: true,
			want: want{
				widget: widget{Size: "small", Description: "web tier", Labels: map[string]string{"team": "a", names.OwnerLabel: ownerPlaceholder}},
				events: []event.Event{event.Normal(ReasonDriftRepaired, `Widget was changed outside Crossplane; restored it: ownership labels: want {markers}, have {}`)},
				cause:  "drift",
				ready:  xpv2.Available(),
			},
		},
		"UnspecifiedLabelsKept": {
			reason: "Without labels in the spec the widget's labels, reserved ones included, survive an update.",
			seed: withSeed(fullSeed(ownerPlaceholder), func(s *seed) {
				s.labels = map[string]string{commonv1alpha1.OwnershipLabelPrefix + "tier": "gold"}
			}),
			mods: []mod{defaultName(), withSpec(commonv1alpha1.WidgetParameters{Size: ptr.To("large")}), synced()},
			want: want{
				widget: widget{Size: "large", Description: "web tier", Labels: map[string]string{commonv1alpha1.OwnershipLabelPrefix + "tier": "gold", names.OwnerLabel: ownerPlaceholder}},
				events: []event.Event{event.Normal(ReasonDriftRepaired, `Widget was changed outside Crossplane; restored it: size: want "large", have "small"`)},
				cause:  "drift",
				ready:  resizing,
			},
		},
		"RegionChange": {
			reason: "A region change is refused with an error that says how to fix it; the widget is not touched.",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{defaultName(), withSpec(with(full, func(p *commonv1alpha1.WidgetParameters) { p.Region = ptr.To("eu-west-1") }))},
			want: want{
				err: cmpopts.AnyError, mentions: []string{`"eu-west-1"`, `"us-east-1"`, "cannot change"},
				widget:    widget{Size: "small", Description: "web tier", Labels: map[string]string{"team": "a", names.OwnerLabel: ownerPlaceholder}},
				untouched: true,
				ready:     xpv2.Available(),
			},
		},
		"ConcurrentChange": {
			reason: "A widget changed since it was observed is not overwritten blindly: the update fails (412) and the change survives.",
			seed:   fullSeed(ownerPlaceholder),
			mods:   []mod{defaultName(), withSpec(large)},
			between: func(t *testing.T, api *widgetapi.Client, name string) {
				t.Helper()
				if _, err := api.PatchWidget(t.Context(), name, widgetapi.PatchWidgetRequest{Description: ptr.To("someone else")}); err != nil {
					t.Fatal(err)
				}
			},
			want: want{
				err: cmpopts.AnyError, mentions: []string{"changed while it was being updated"},
				widget:    widget{Size: "small", Description: "someone else", Labels: map[string]string{"team": "a", names.OwnerLabel: ownerPlaceholder}},
				untouched: true,
				ready:     xpv2.Available(),
			},
		},
		"DeletedMeanwhile": {
			reason:  "An API error (here: the widget is being deleted) goes through Check and is returned.",
			server:  func(o *server.Options) { o.DeleteDelay = time.Hour },
			seed:    fullSeed(ownerPlaceholder),
			mods:    []mod{defaultName(), withSpec(large)},
			between: deleteWidget,
			want: want{
				err: cmpopts.AnyError, checked: widgetapi.IsConflict,
				widget:    widget{Size: "small", Description: "web tier", Labels: map[string]string{"team": "a", names.OwnerLabel: ownerPlaceholder}},
				untouched: true,
				ready:     xpv2.Available(),
			},
		},
		"RateLimited": {
			reason:  "A 429 goes through Check (which throttles) and is returned; the widget is not touched.",
			server:  func(o *server.Options) { rateLimited(o); o.ProvisionDelay = time.Hour },
			seed:    withSeed(fullSeed(ownerPlaceholder), func(s *seed) { s.state = widgetapi.StateProvisioning }),
			mods:    []mod{defaultName(), withSpec(large)},
			exhaust: true,
			want: want{
				err: cmpopts.AnyError, checked: isRateLimited,
				widget:    widget{Size: "small", Description: "web tier", Labels: map[string]string{"team": "a", names.OwnerLabel: ownerPlaceholder}},
				untouched: true,
				ready:     xpv2.Creating().WithMessage("The Widget API is provisioning the widget"),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
				o.ResizeDelay = time.Hour
				o.Tokens = map[string]string{apitest.TokenA: apitest.ProjectA, "seed-token": apitest.ProjectA}
				if tc.server != nil {
					tc.server(o)
				}
			}))
			// The test sets up and inspects the widget with its own token
			// of the same project, so a rate limit hits only the calls
			// under test.
			seedAPI, api := env.Client(t, "seed-token"), env.Client(t, apitest.TokenA)
			mg := newMG()
			for _, m := range tc.mods {
				m(mg)
			}
			owner := names.Owner(mg)
			name := meta.GetExternalName(mg)
			seeded := tc.seed.create(t, seedAPI, name, owner)
			if tc.knownID {
				mg.SetWidgetObservation(commonv1alpha1.WidgetObservation{ID: seeded.ID})
			}
			rec := &fakeRecorder{}
			met := metrics.New()
			// One external client observes, then updates, as in a reconcile.
			e := &external[T]{api: api, record: rec, metrics: met, kind: "Widget"}
			if _, err := e.Observe(t.Context(), mg); err != nil {
				t.Fatalf("%s\nObserve(...) before Update: %v", tc.reason, err)
			}
			if tc.between != nil {
				tc.between(t, seedAPI, name)
			}
			before, err := seedAPI.GetWidget(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			if tc.exhaust {
				exhaust(t, api)
			}

			got, err := e.Update(t.Context(), mg)
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nUpdate(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			mentions(t, tc.reason, err, tc.want.mentions, owner)
			apiError(t, tc.reason, err, tc.want.checked)
			if diff := cmp.Diff(managed.ExternalUpdate{}, got); diff != "" {
				t.Errorf("%s\nUpdate(...): -want, +got:\n%s", tc.reason, diff)
			}

			after, err := seedAPI.GetWidget(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			wantWidget := tc.want.widget
			wantWidget.Labels = fillLabels(wantWidget.Labels, owner)
			if diff := cmp.Diff(wantWidget, widget{Size: after.Size, Description: after.Description, Labels: after.Labels}); diff != "" {
				t.Errorf("%s\nwidget in the API: -want, +got:\n%s", tc.reason, diff)
			}
			if tc.want.untouched && after.Generation != before.Generation {
				t.Errorf("%s\nwidget generation went from %d to %d; want the widget untouched", tc.reason, before.Generation, after.Generation)
			}
			if !tc.want.untouched {
				if diff := cmp.Diff(observation(after), *mg.GetWidgetObservation()); diff != "" {
					t.Errorf("%s\nstatus.atProvider after Update: -want, +got:\n%s", tc.reason, diff)
				}
			}
			wantEvents := make([]event.Event, 0, len(tc.want.events))
			for _, ev := range tc.want.events {
				ev.Message = fill(ev.Message, owner)
				wantEvents = append(wantEvents, ev)
			}
			if diff := cmp.Diff(wantEvents, rec.events, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nevents: -want, +got:\n%s", tc.reason, diff)
			}
			for _, cause := range []string{"drift", "spec", "adopt"} {
				want := 0.0
				if cause == tc.want.cause {
					want = 1
				}
				if got := counter(t, met.Updates.WithLabelValues("Widget", cause)); got != want {
					t.Errorf("%s\nupdates with cause %s: want %v, got %v", tc.reason, cause, want, got)
				}
			}
			if diff := cmp.Diff(tc.want.ready, mg.GetCondition(xpv2.TypeReady), ignoreTransitionTime); diff != "" {
				t.Errorf("%s\nReady condition: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) { testDelete(t, newNamespaced) })
	t.Run("Cluster", func(t *testing.T) { testDelete(t, newCluster) })
}

func testDelete[T commonv1alpha1.WidgetResource](t *testing.T, newMG func() T) {
	type want struct {
		err     error
		checked func(error) bool
		// state is the widget's state afterwards, "" for gone.
		state widgetapi.State
		ready xpv2.Condition
	}
	cases := map[string]struct {
		reason string
		server func(*server.Options)
		seed   *seed
		before func(t *testing.T, api *widgetapi.Client)
		want   want
	}{
		"Exists": {
			reason: "Deleting a widget starts its deletion; the resource is Deleting until Observe finds it gone.",
			seed:   fullSeed(ownerPlaceholder),
			want:   want{state: widgetapi.StateDeleting, ready: xpv2.Deleting()},
		},
		"AlreadyDeleting": {
			reason: "Deleting a widget that is already being deleted is fine (the reconciler calls again until it is gone).",
			seed: withSeed(fullSeed(ownerPlaceholder), func(s *seed) {
				s.act = deleteWidget
				s.state = widgetapi.StateDeleting
			}),
			want: want{state: widgetapi.StateDeleting, ready: xpv2.Deleting()},
		},
		"Missing": {
			reason: "A widget that is already gone is deleted: success.",
			want:   want{ready: xpv2.Deleting()},
		},
		"RateLimited": {
			reason: "A 429 goes through Check (which throttles) and is returned.",
			server: rateLimited,
			before: exhaust,
			want:   want{err: cmpopts.AnyError, checked: isRateLimited, ready: noReady},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
				o.DeleteDelay = time.Hour
				if tc.server != nil {
					tc.server(o)
				}
			}))
			api := env.Client(t, apitest.TokenA)
			mg := newMG()
			defaultName()(mg)
			deleted()(mg)
			name := meta.GetExternalName(mg)
			if tc.seed != nil {
				tc.seed.create(t, api, name, names.Owner(mg))
			}
			if tc.before != nil {
				tc.before(t, api)
			}
			e := &external[T]{api: env.Client(t, apitest.TokenA), record: &fakeRecorder{}, metrics: metrics.New(), kind: "Widget"}

			got, err := e.Delete(t.Context(), mg)
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nDelete(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			apiError(t, tc.reason, err, tc.want.checked)
			if diff := cmp.Diff(managed.ExternalDelete{}, got); diff != "" {
				t.Errorf("%s\nDelete(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.ready, mg.GetCondition(xpv2.TypeReady), ignoreTransitionTime); diff != "" {
				t.Errorf("%s\nReady condition: -want, +got:\n%s", tc.reason, diff)
			}
			if tc.want.checked != nil {
				return // the API is still rate limiting this token
			}
			var state widgetapi.State
			w, err := api.GetWidget(t.Context(), name)
			switch {
			case err == nil:
				state = w.State
			case !widgetapi.IsNotFound(err):
				t.Fatal(err)
			}
			if state != tc.want.state {
				t.Errorf("%s\nwidget state afterwards: want %q, got %q", tc.reason, tc.want.state, state)
			}
		})
	}
}

func TestDisconnect(t *testing.T) {
	if err := (&external[*nsv1alpha1.Widget]{}).Disconnect(t.Context()); err != nil {
		t.Errorf("Disconnect(...): want nil, got %v", err)
	}
}
