package mrsetup

import (
	"context"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reference"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

func TestPendingReferences(t *testing.T) {
	created := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	noMatch := errors.Wrap(errors.New("no resources matched selector"), "mg.Spec.ForProvider.WidgetName")
	noValue := errors.Wrap(errors.New("referenced field was empty (referenced resource may not yet be ready)"), "mg.Spec.ForProvider.WidgetName")
	notFound := errors.Wrap(kerrors.NewNotFound(schema.GroupResource{Group: "widget.m.widgetco.io", Resource: "widgets"}, "web"), "mg.Spec.ForProvider.WidgetName")
	other := errors.New("cannot list widgets: connection refused")

	cases := map[string]struct {
		reason   string
		err      error
		age      time.Duration
		conflict bool
	}{
		"Resolved":       {reason: "A resolved reference is no error.", age: time.Second},
		"NoMatchYet":     {reason: "A new key whose selector matches no Widget yet waits quietly.", err: noMatch, age: time.Second, conflict: true},
		"UnnamedYet":     {reason: "A new key whose Widget has no external name yet waits quietly.", err: noValue, age: 30 * time.Second, conflict: true},
		"NotFoundYet":    {reason: "A new key whose named Widget does not exist yet waits quietly.", err: notFound, age: time.Second, conflict: true},
		"PastGrace":      {reason: "Past the grace period the reference is the error crossplane-runtime reports.", err: noValue, age: time.Minute},
		"OtherError":     {reason: "An error reading references is reported at once.", err: other, age: time.Second},
		"FutureCreation": {reason: "A creation time ahead of this clock (skew) is within the grace period.", err: noMatch, age: -time.Second, conflict: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := pendingReferences{
				next:  managed.ReferenceResolverFn(func(context.Context, resource.Managed) error { return tc.err }),
				grace: time.Minute,
				now:   func() time.Time { return created.Add(tc.age) },
			}
			k := &nsv1beta1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web-key", CreationTimestamp: metav1.NewTime(created)}}
			err := p.ResolveReferences(t.Context(), k)
			if got := kerrors.IsConflict(err); got != tc.conflict {
				t.Errorf("%s\nResolveReferences(...): %v, a Conflict: %t, want %t", tc.reason, err, got, tc.conflict)
			}
			if !tc.conflict && !errors.Is(err, tc.err) && err != tc.err { //nolint:errorlint // The same error, unwrapped.
				t.Errorf("%s\nResolveReferences(...): %v, want %v", tc.reason, err, tc.err)
			}
		})
	}
}

// TestRuntimeReferenceErrors: pendingReferences tells a reference that is
// not ready yet by the texts of crossplane-runtime's resolver errors, which
// have no types.
func TestRuntimeReferenceErrors(t *testing.T) {
	noMatches := reference.NamespacedResolutionResponse{}
	withoutValue := reference.NamespacedResolutionResponse{ResolvedReference: &xpv2.NamespacedReference{Name: "web"}}
	got := map[string]bool{}
	for name, err := range map[string]error{"empty": noMatches.Validate(), "unnamed": withoutValue.Validate()} {
		got[name] = err != nil && referencePending(err)
	}
	if diff := cmp.Diff(map[string]bool{"empty": true, "unnamed": true}, got); diff != "" {
		t.Errorf("crossplane-runtime's errors for a reference without a value, recognised as pending: -want, +got:\n%s", diff)
	}

	// A selector that matches nothing.
	k := &test.MockClient{MockList: test.NewMockListFn(nil)}
	key := &nsv1beta1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web-key"}}
	key.Spec.ForProvider.WidgetNameSelector = &xpv2.NamespacedSelector{MatchLabels: map[string]string{"app": "web"}, MatchControllerRef: ptr(true)}
	err := key.ResolveReferences(t.Context(), k)
	if err == nil || !referencePending(err) {
		t.Errorf("resolving a selector that matches no Widget: %v, want an error referencePending recognises", err)
	}
}

// TestRuntimeConflictResolvingReferencesIsQuiet: pendingReferences relies
// on crossplane-runtime's managed reconciler requeueing a resource whose
// references fail to resolve with a Conflict without an event or a status
// write.
func TestRuntimeConflictResolvingReferencesIsQuiet(t *testing.T) {
	var log []string
	k := newFakeKube(&log)
	newWidgetIn(k, nil)
	rec := &annotatingRecorder{log: &log}
	r := runtimeFor(k, &fakeWidgets{log: &log}, managed.WithRecorder(rec),
		managed.WithReferenceResolver(managed.ReferenceResolverFn(func(context.Context, resource.Managed) error {
			return kerrors.NewConflict(schema.GroupResource{}, "web", errors.New("waiting"))
		})))
	res, err := r.Reconcile(t.Context(), req)
	if err != nil || !res.Requeue { //nolint:staticcheck // Requeue is what the reconciler sets.
		t.Errorf("Reconcile(...): %+v, %v, want a requeue and no error", res, err)
	}
	if got := calls(log, "event", "kube Status", "kube Update", "kube Patch", "ext"); len(got) > 0 {
		t.Errorf("a Conflict resolving references: %v, want no event, write or external call", got)
	}
}
