package widgetkey

import (
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/google/go-cmp/cmp"

	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

func TestUpdateAndDisconnect(t *testing.T) {
	e := &external[*nsv1beta1.WidgetKey]{}
	got, err := e.Update(t.Context(), newNamespaced())
	if diff := cmp.Diff(managed.ExternalUpdate{}, got); diff != "" || err != nil {
		t.Errorf("Update(...): keys have nothing to update; got %v, %v", got, err)
	}
	if err := e.Disconnect(t.Context()); err != nil {
		t.Errorf("Disconnect(...): want nil, got %v", err)
	}
}
