package mrsetup

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/names"
)

var errBoom = errors.New("boom")

func newWidget(uid, rv string) *nsv1beta1.Widget {
	w := widget(nil)
	w.SetUID(types.UID(uid))
	w.SetResourceVersion(rv)
	return w
}

// fakeExternal is an external client whose Observe answers exists or err.
type fakeExternal struct {
	managed.TypedExternalClient[*nsv1beta1.Widget]
	exists bool
	err    error
}

// countingUpdates is a client whose updates succeed and are counted in n.
func countingUpdates(n *int) *test.MockClient {
	return &test.MockClient{MockUpdate: func(context.Context, client.Object, ...client.UpdateOption) error {
		*n++
		return nil
	}}
}

func (f fakeExternal) Observe(context.Context, *nsv1beta1.Widget) (managed.ExternalObservation, error) {
	return managed.ExternalObservation{ResourceExists: f.exists}, f.err
}

func TestDeferredFinalizer(t *testing.T) {
	type observation struct {
		exists bool
		err    error
	}
	cases := map[string]struct {
		reason string
		// observe, if set, is what Observe answered in this reconcile.
		observe *observation
		// written, if set, changes the resource version after Observe.
		written bool
		// deleting marks the resource deleted before Observe.
		deleting bool
		// observeTwice observes, then adds the finalizer twice.
		twice      bool
		wantWrites int
	}{
		"Absent": {
			reason:     "A resource whose external resource does not exist gets the finalizer without a write: the create that follows saves it.",
			observe:    &observation{},
			wantWrites: 0,
		},
		"Exists": {
			reason:     "A resource whose external resource exists gets the finalizer saved at once.",
			observe:    &observation{exists: true},
			wantWrites: 1,
		},
		"ObserveFailed": {
			reason:     "When Observe failed nothing is known, so the finalizer is saved.",
			observe:    &observation{err: errBoom},
			wantWrites: 1,
		},
		"NotObserved": {
			reason:     "A reconcile that did not observe saves the finalizer.",
			wantWrites: 1,
		},
		"WrittenSince": {
			reason:     "A resource written after the observation (a different resource version) saves the finalizer.",
			observe:    &observation{},
			written:    true,
			wantWrites: 1,
		},
		"Deleting": {
			reason:     "An observation of a deleted resource is not remembered.",
			observe:    &observation{},
			deleting:   true,
			wantWrites: 1,
		},
		"OnlyOnce": {
			reason:     "An absence is used once: a second reconcile that did not observe again saves the finalizer.",
			observe:    &observation{},
			twice:      true,
			wantWrites: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			writes := 0
			kube := countingUpdates(&writes)
			absent := &absences{}
			f := &deferredFinalizer{Finalizer: resource.NewAPIFinalizer(kube, managed.FinalizerName), absent: absent}
			mg := newWidget("uid-1", "1")
			if tc.deleting {
				now := metav1.Now()
				mg.SetDeletionTimestamp(&now)
			}
			if tc.observe != nil {
				c := &observingClient[*nsv1beta1.Widget]{TypedExternalClient: fakeExternal{exists: tc.observe.exists, err: tc.observe.err}, absent: absent}
				if _, err := c.Observe(t.Context(), mg); !errors.Is(err, tc.observe.err) {
					t.Fatalf("Observe: want error %v, got %v", tc.observe.err, err)
				}
			}
			if tc.written {
				mg.SetResourceVersion("2")
			}
			if err := f.AddFinalizer(t.Context(), mg); err != nil {
				t.Fatal(err)
			}
			if tc.twice {
				mg.SetFinalizers(nil)
				if err := f.AddFinalizer(t.Context(), mg); err != nil {
					t.Fatal(err)
				}
			}
			if writes != tc.wantWrites {
				t.Errorf("%s\nwrites: want %d, got %d", tc.reason, tc.wantWrites, writes)
			}
			if !meta.FinalizerExists(mg, managed.FinalizerName) {
				t.Errorf("%s\nthe resource lacks the finalizer", tc.reason)
			}
		})
	}
}

func TestReinitializing(t *testing.T) {
	cases := map[string]struct {
		reason  string
		resolve managed.ReferenceResolverFn
		want    map[string]string
		wantErr error
	}{
		"PatchedAway": {
			reason: "A resolver whose patch replaced the resource with the API server's copy, without the default external name, is followed by the initializer again.",
			resolve: func(_ context.Context, mg resource.Managed) error {
				mg.SetAnnotations(nil)
				return nil
			},
			want: map[string]string{meta.AnnotationKeyExternalName: "team-a-web-a6d68893", names.AnnotationDefaultExternalName: "team-a-web-a6d68893"},
		},
		"ResolveFailed": {
			reason:  "A resolver's error is returned as it is.",
			resolve: func(context.Context, resource.Managed) error { return errBoom },
			wantErr: errBoom,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mg := widget(nil)
			mg.SetNamespace("team-a")
			mg.SetName("web")
			err := reinitializing{next: tc.resolve, init: names.NewInitializer()}.ResolveReferences(t.Context(), mg)
			if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nerror: -want, +got:\n%s", tc.reason, diff)
			}
			if tc.wantErr == nil {
				if diff := cmp.Diff(tc.want, mg.GetAnnotations()); diff != "" {
					t.Errorf("%s\nannotations: -want, +got:\n%s", tc.reason, diff)
				}
			}
		})
	}
}

func TestSucceededUnwritten(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	cases := map[string]struct {
		reason                     string
		pending, succeeded, failed time.Time
		wantWrites                 int
	}{
		"CreateSucceeded": {
			reason:     "The reconciler has just recorded a successful create: no write for the succeeded annotation alone.",
			pending:    t0,
			succeeded:  t0,
			wantWrites: 0,
		},
		"CreateFailed": {
			reason:     "A failed create's annotation is saved.",
			pending:    t1,
			succeeded:  t0,
			failed:     t1,
			wantWrites: 1,
		},
		"CreateFailedNeverSucceeded": {
			reason:     "A failed first create's annotation is saved.",
			pending:    t0,
			failed:     t0,
			wantWrites: 1,
		},
		"RecreateSucceeded": {
			reason:     "A successful create after an earlier failure needs no write either.",
			pending:    t1,
			succeeded:  t1,
			failed:     t0,
			wantWrites: 0,
		},
		"NoMarkers": {
			reason:     "Any other critical annotation update is saved.",
			wantWrites: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			writes := 0
			kube := countingUpdates(&writes)
			mg := newWidget("uid-1", "1")
			if !tc.pending.IsZero() {
				meta.SetExternalCreatePending(mg, tc.pending)
			}
			if !tc.succeeded.IsZero() {
				meta.SetExternalCreateSucceeded(mg, tc.succeeded)
			}
			if !tc.failed.IsZero() {
				meta.SetExternalCreateFailed(mg, tc.failed)
			}
			u := succeededUnwritten{managed.NewRetryingCriticalAnnotationUpdater(kube)}
			if err := u.UpdateCriticalAnnotations(t.Context(), mg); err != nil {
				t.Fatal(err)
			}
			if writes != tc.wantWrites {
				t.Errorf("%s\nwrites: want %d, got %d", tc.reason, tc.wantWrites, writes)
			}
		})
	}
}
