package mrsetup

import (
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/names"
)

func widget(a map[string]string) *nsv1beta1.Widget {
	return &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", Annotations: a}}
}

func TestForeignAnnotationChanged(t *testing.T) {
	const def = "team-a-web-a6d68893"
	defaulted := map[string]string{meta.AnnotationKeyExternalName: def, names.AnnotationDefaultExternalName: def}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	cases := map[string]struct {
		reason   string
		old, new map[string]string
		want     bool
	}{
		"InitializerDefault": {
			reason: "The initializer recording the default external name is our own write.",
			old:    nil,
			new:    defaulted,
		},
		"CreateMarkers": {
			reason: "The reconciler's create-pending and create-succeeded markers are its own writes.",
			old:    with(defaulted, meta.AnnotationKeyExternalCreatePending, "t1"),
			new:    with(defaulted, meta.AnnotationKeyExternalCreatePending, "t1", meta.AnnotationKeyExternalCreateSucceeded, "t2"),
		},
		"CreateFailed": {
			reason: "The create-failed marker is the reconciler's own write too.",
			old:    defaulted,
			new:    with(defaulted, meta.AnnotationKeyExternalCreateFailed, "t1"),
		},
		"Import": {
			reason: "An external name set by a user (an import) is a change to react to.",
			old:    nil,
			new:    map[string]string{meta.AnnotationKeyExternalName: "existing"},
			want:   true,
		},
		"Renamed": {
			reason: "An external name changed away from the default is a change to react to.",
			old:    defaulted,
			new:    with(defaulted, meta.AnnotationKeyExternalName, "other"),
			want:   true,
		},
		"OtherAnnotation": {
			reason: "Any other annotation (e.g. a management hint) is a change to react to.",
			old:    defaulted,
			new:    with(defaulted, "crossplane.io/paused", "true"),
			want:   true,
		},
		"Unchanged": {
			reason: "No annotation changed.",
			old:    defaulted,
			new:    defaulted,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ForeignAnnotationChanged{}.Update(event.UpdateEvent{ObjectOld: widget(tc.old), ObjectNew: widget(tc.new)})
			if got != tc.want {
				t.Errorf("%s\nUpdate(...): want %t, got %t", tc.reason, tc.want, got)
			}
		})
	}
	if (ForeignAnnotationChanged{}).Update(event.UpdateEvent{}) {
		t.Error("an update without objects passed")
	}
}
