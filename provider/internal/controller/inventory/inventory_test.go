package inventory

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// pagedAPI serves widgets in pages of at most its page size, and counts
// the calls.
type pagedAPI struct {
	widgets []widgetapi.Widget
	page    int
	calls   int
	err     error
}

func (a *pagedAPI) ListWidgets(_ context.Context, o widgetapi.ListWidgetsOptions) (*widgetapi.WidgetList, error) {
	a.calls++
	if a.err != nil {
		return nil, a.err
	}
	start := 0
	if o.PageToken != "" {
		_, _ = fmt.Sscan(o.PageToken, &start)
	}
	end := min(start+min(a.page, o.Limit), len(a.widgets))
	l := &widgetapi.WidgetList{Items: a.widgets[start:end]}
	if end < len(a.widgets) {
		l.NextPageToken = fmt.Sprint(end)
	}
	return l, nil
}

func inv(limit *int32) *nsv1beta1.WidgetInventory {
	return &nsv1beta1.WidgetInventory{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "all"},
		Spec: nsv1beta1.WidgetInventorySpec{ForProvider: nsv1beta1.WidgetInventoryParameters{Limit: limit}}}
}

func TestObserve(t *testing.T) {
	w := func(name string, labels map[string]string) widgetapi.Widget {
		return widgetapi.Widget{Name: name, Size: "small", Region: "eu-west-1", State: widgetapi.StateReady, Labels: labels}
	}
	project := []widgetapi.Widget{
		w("mine", map[string]string{"app": "web", ownership.OwnerLabel: "n_team-a.web", ownership.ControlPlaneLabel: "cp-1"}),
		w("legacy", map[string]string{"app": "legacy"}),
		w("theirs", map[string]string{"app": "secret-project", ownership.OwnerLabel: "n_team-b.api"}),
		w("platform", map[string]string{ownership.OwnerLabel: "c_shared"}),
		w("kept", map[string]string{ownership.ReleasedByLabel: "team-a"}),
		w("reserved", map[string]string{ownership.ReleasedByLabel: "team-b"}),
		w("another", nil),
	}
	cases := map[string]struct {
		reason string
		mg     *nsv1beta1.WidgetInventory
		api    *pagedAPI
		want   nsv1beta1.WidgetInventoryObservation
		calls  int
	}{
		"SortsAndHides": {
			reason: "Unowned widgets come first, then those released here, then those managed here; other namespaces' and the platform's widgets, and widgets reserved for another namespace, are only counted.",
			mg:     inv(nil),
			api:    &pagedAPI{widgets: project, page: 3},
			want: nsv1beta1.WidgetInventoryObservation{
				Widgets: []nsv1beta1.InventoryWidget{
					{Name: "another", Owner: nsv1beta1.OwnerUnowned, Size: "small", Region: "eu-west-1", State: "Ready"},
					{Name: "legacy", Owner: nsv1beta1.OwnerUnowned, Size: "small", Region: "eu-west-1", State: "Ready", Labels: map[string]string{"app": "legacy"}},
					{Name: "kept", Owner: nsv1beta1.OwnerReleasedHere, Size: "small", Region: "eu-west-1", State: "Ready"},
					{Name: "mine", Owner: nsv1beta1.OwnerManagedHere, ManagedBy: "web", ControlPlane: "cp-1", Size: "small", Region: "eu-west-1", State: "Ready", Labels: map[string]string{"app": "web"}},
				},
				Matched: 7, Unowned: 2, ReleasedHere: 1, ManagedHere: 1, OutOfReach: 3,
			},
			calls: 3,
		},
		"Limit": {
			reason: "The list holds at most limit widgets; the counts hold all.",
			mg:     inv(ptr.To(int32(1))),
			api:    &pagedAPI{widgets: project, page: 500},
			want: nsv1beta1.WidgetInventoryObservation{
				Widgets: []nsv1beta1.InventoryWidget{{Name: "another", Owner: nsv1beta1.OwnerUnowned, Size: "small", Region: "eu-west-1", State: "Ready"}},
				Matched: 7, Unowned: 2, ReleasedHere: 1, ManagedHere: 1, OutOfReach: 3,
			},
			calls: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := &external{api: tc.api}
			o, err := e.Observe(t.Context(), tc.mg)
			if err != nil {
				t.Fatal(err)
			}
			if !o.ResourceExists || !o.ResourceUpToDate {
				t.Errorf("%s\nObserve(...): the inventory must exist and be up to date, got %+v", tc.reason, o)
			}
			if diff := cmp.Diff(tc.want, tc.mg.Status.AtProvider); diff != "" {
				t.Errorf("%s\nstatus.atProvider: -want, +got:\n%s", tc.reason, diff)
			}
			if tc.api.calls != tc.calls {
				t.Errorf("%s\nwant %d list calls, got %d", tc.reason, tc.calls, tc.api.calls)
			}
		})
	}
}

// TestObserveIsBounded: a project of 25,000 matching widgets is read up to
// MaxInventoryScan, in pages of the Widget API's most, and says so.
func TestObserveIsBounded(t *testing.T) {
	many := make([]widgetapi.Widget, 25000)
	for i := range many {
		many[i] = widgetapi.Widget{Name: fmt.Sprintf("w-%05d", i)}
	}
	api := &pagedAPI{widgets: many, page: 500}
	mg := inv(nil)
	if _, err := (&external{api: api}).Observe(t.Context(), mg); err != nil {
		t.Fatal(err)
	}
	got := mg.Status.AtProvider
	if !got.Truncated || got.Matched != nsv1beta1.MaxInventoryScan || got.Unowned != nsv1beta1.MaxInventoryScan || len(got.Widgets) != int(nsv1beta1.DefaultInventoryLimit) || api.calls != nsv1beta1.MaxInventoryScan/pageSize {
		t.Errorf("want %d read in %d calls, truncated, %d listed; got matched %d, unowned %d, truncated %t, %d listed, %d calls", nsv1beta1.MaxInventoryScan, nsv1beta1.MaxInventoryScan/pageSize, nsv1beta1.DefaultInventoryLimit, got.Matched, got.Unowned, got.Truncated, len(got.Widgets), api.calls)
	}
}

// TestObserveDeletedReadsNothing: a deleted inventory does not exist, and
// costs no Widget API call.
func TestObserveDeletedReadsNothing(t *testing.T) {
	mg := inv(nil)
	now := metav1.Now()
	mg.SetDeletionTimestamp(&now)
	api := &pagedAPI{err: fmt.Errorf("must not be called")}
	o, err := (&external{api: api}).Observe(t.Context(), mg)
	if err != nil || o.ResourceExists || api.calls != 0 {
		t.Errorf("deleted inventory: want not existing, no call; got %+v, %v, %d calls", o, err, api.calls)
	}
}

// TestObserveError: a failed list is reported, and the status is left as
// it was.
func TestObserveError(t *testing.T) {
	mg := inv(nil)
	mg.Status.AtProvider.Matched = 3
	_, err := (&external{api: &pagedAPI{err: fmt.Errorf("boom")}}).Observe(t.Context(), mg)
	if err == nil || mg.Status.AtProvider.Matched != 3 {
		t.Errorf("want an error and the old status; got %v, %+v", err, mg.Status.AtProvider)
	}
}
