package widget

import (
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

func TestDelete(t *testing.T) {
	t.Run("Namespaced", func(t *testing.T) { testDelete(t, newNamespaced) })
	t.Run("Cluster", func(t *testing.T) { testDelete(t, newCluster) })
}

func testDelete[T commonv1beta1.WidgetResource](t *testing.T, newMG func() T) {
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
			server: apitest.RateLimited,
			before: apitest.Exhaust,
			want:   want{err: cmpopts.AnyError, checked: isRateLimited, ready: noReady},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
				o.DeleteDelay = time.Hour
			}), apitest.WithOptions(tc.server))
			api := env.Client(t, apitest.TokenA)
			mg := newMG()
			defaultName()(mg)
			deleted()(mg)
			name := meta.GetExternalName(mg)
			if tc.seed != nil {
				tc.seed.create(t, api, name, ownership.Marker(mg))
			}
			if tc.before != nil {
				tc.before(t, api)
			}
			e := &external[T]{api: env.Client(t, apitest.TokenA), record: event.NewNopRecorder(), metrics: metrics.New(), kind: "Widget"}

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
