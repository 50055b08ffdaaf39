package names

import (
	"context"
	"errors"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var errBoom = errors.New("boom")

func withAnnotations(mg resource.Managed, a map[string]string) resource.Managed {
	meta.AddAnnotations(mg, a)
	return mg
}

func deleting(mg resource.Managed) resource.Managed {
	now := metav1.Now()
	mg.SetDeletionTimestamp(&now)
	return mg
}

func TestInitialize(t *testing.T) {
	type want struct {
		err         error
		annotations map[string]string
		finalizers  []string
		updates     int
	}
	cases := map[string]struct {
		reason string
		mg     resource.Managed
		update error
		want   want
	}{
		"NoExternalName": {
			reason: "A resource without an external name gets the default, recorded as the default, and is saved before anything is created.",
			mg:     nsWidget("team-a", "web"),
			want: want{
				annotations: map[string]string{meta.AnnotationKeyExternalName: "team-a-web-a6d68893", AnnotationDefaultExternalName: "team-a-web-a6d68893"},
				finalizers:  []string{managed.FinalizerName},
				updates:     1,
			},
		},
		"ClusterScoped": {
			reason: "A cluster-scoped resource's default is its name.",
			mg:     clWidget("web"),
			want: want{
				annotations: map[string]string{meta.AnnotationKeyExternalName: "web", AnnotationDefaultExternalName: "web"},
				finalizers:  []string{managed.FinalizerName},
				updates:     1,
			},
		},
		"ExplicitExternalName": {
			reason: "A resource that names its widget keeps that name, is not marked defaulted, and is not updated.",
			mg:     withAnnotations(nsWidget("team-a", "web"), map[string]string{meta.AnnotationKeyExternalName: "imported"}),
			want:   want{annotations: map[string]string{meta.AnnotationKeyExternalName: "imported"}},
		},
		"AlreadyDefaulted": {
			reason: "A resource initialized before is left alone.",
			mg:     withAnnotations(nsWidget("team-a", "web"), map[string]string{meta.AnnotationKeyExternalName: "team-a-web-a6d68893", AnnotationDefaultExternalName: "team-a-web-a6d68893"}),
			want:   want{annotations: map[string]string{meta.AnnotationKeyExternalName: "team-a-web-a6d68893", AnnotationDefaultExternalName: "team-a-web-a6d68893"}},
		},
		"Deleting": {
			reason: "A resource deleted before it got a name still gets one, but no finalizer: the API server refuses new finalizers on a deleting object.",
			mg:     deleting(nsWidget("team-a", "web")),
			want: want{
				annotations: map[string]string{meta.AnnotationKeyExternalName: "team-a-web-a6d68893", AnnotationDefaultExternalName: "team-a-web-a6d68893"},
				updates:     1,
			},
		},
		"UpdateFails": {
			reason: "A default name that cannot be saved is an error, so nothing is created under an unrecorded name.",
			mg:     nsWidget("team-a", "web"),
			update: errBoom,
			want: want{
				err:         errBoom,
				annotations: map[string]string{meta.AnnotationKeyExternalName: "team-a-web-a6d68893", AnnotationDefaultExternalName: "team-a-web-a6d68893"},
				finalizers:  []string{managed.FinalizerName},
				updates:     1,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			updates := 0
			kube := &test.MockClient{MockUpdate: func(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
				updates++
				if diff := cmp.Diff(tc.want.annotations, obj.GetAnnotations()); diff != "" {
					t.Errorf("%s\nannotations saved: -want, +got:\n%s", tc.reason, diff)
				}
				if diff := cmp.Diff(tc.want.finalizers, obj.GetFinalizers()); diff != "" {
					t.Errorf("%s\nfinalizers saved: -want, +got:\n%s", tc.reason, diff)
				}
				return tc.update
			}}
			err := NewInitializer(kube).Initialize(t.Context(), tc.mg)
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nInitialize(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.annotations, tc.mg.GetAnnotations()); diff != "" {
				t.Errorf("%s\nannotations: -want, +got:\n%s", tc.reason, diff)
			}
			if updates != tc.want.updates {
				t.Errorf("%s\nUpdate calls: want %d, got %d", tc.reason, tc.want.updates, updates)
			}
		})
	}
}

func TestDefaulted(t *testing.T) {
	cases := map[string]struct {
		reason string
		mg     resource.Managed
		want   bool
	}{
		"NoAnnotations": {
			reason: "A resource without annotations has no defaulted name.",
			mg:     nsWidget("team-a", "web"),
		},
		"Defaulted": {
			reason: "A resource whose external name is the default the provider recorded is defaulted.",
			mg:     withAnnotations(nsWidget("team-a", "web"), map[string]string{meta.AnnotationKeyExternalName: "team-a-web-a6d68893", AnnotationDefaultExternalName: "team-a-web-a6d68893"}),
			want:   true,
		},
		"Explicit": {
			reason: "An external name set by a user is not defaulted.",
			mg:     withAnnotations(nsWidget("team-a", "web"), map[string]string{meta.AnnotationKeyExternalName: "imported"}),
		},
		"ChangedAfterDefaulting": {
			reason: "A user who replaces the default external name asks for that widget explicitly.",
			mg:     withAnnotations(nsWidget("team-a", "web"), map[string]string{meta.AnnotationKeyExternalName: "imported", AnnotationDefaultExternalName: "team-a-web-a6d68893"}),
		},
		"DefaultAnnotationOnly": {
			reason: "The default annotation without an external name is not a defaulted name.",
			mg:     withAnnotations(nsWidget("team-a", "web"), map[string]string{AnnotationDefaultExternalName: "team-a-web-a6d68893"}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Defaulted(tc.mg); got != tc.want {
				t.Errorf("%s\nDefaulted(...): want %t, got %t", tc.reason, tc.want, got)
			}
		})
	}
}
