package names

import (
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
	cases := map[string]struct {
		reason string
		mg     resource.Managed
		want   map[string]string
	}{
		"NoExternalName": {
			reason: "A resource without an external name gets the default, recorded as the default.",
			mg:     nsWidget("team-a", "web"),
			want:   map[string]string{meta.AnnotationKeyExternalName: "team-a-web-a6d68893", AnnotationDefaultExternalName: "team-a-web-a6d68893"},
		},
		"ClusterScoped": {
			reason: "A cluster-scoped resource's default is its name.",
			mg:     clWidget("web"),
			want:   map[string]string{meta.AnnotationKeyExternalName: "web", AnnotationDefaultExternalName: "web"},
		},
		"ExplicitExternalName": {
			reason: "A resource that names its widget keeps that name and is not marked defaulted.",
			mg:     withAnnotations(nsWidget("team-a", "web"), map[string]string{meta.AnnotationKeyExternalName: "imported"}),
			want:   map[string]string{meta.AnnotationKeyExternalName: "imported"},
		},
		"AlreadyDefaulted": {
			reason: "A resource initialized before is left alone.",
			mg:     withAnnotations(nsWidget("team-a", "web"), map[string]string{meta.AnnotationKeyExternalName: "team-a-web-a6d68893", AnnotationDefaultExternalName: "team-a-web-a6d68893"}),
			want:   map[string]string{meta.AnnotationKeyExternalName: "team-a-web-a6d68893", AnnotationDefaultExternalName: "team-a-web-a6d68893"},
		},
		"Deleting": {
			reason: "A resource deleted before it got a name still gets one, so that its widget, if any, can be found and deleted.",
			mg:     deleting(nsWidget("team-a", "web")),
			want:   map[string]string{meta.AnnotationKeyExternalName: "team-a-web-a6d68893", AnnotationDefaultExternalName: "team-a-web-a6d68893"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if err := NewInitializer().Initialize(t.Context(), tc.mg); err != nil {
				t.Errorf("%s\nInitialize(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, tc.mg.GetAnnotations()); diff != "" {
				t.Errorf("%s\nannotations: -want, +got:\n%s", tc.reason, diff)
			}
			if f := tc.mg.GetFinalizers(); len(f) > 0 {
				t.Errorf("%s\nInitialize added finalizers %v; the reconciler adds the finalizer", tc.reason, f)
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
