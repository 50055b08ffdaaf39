package widget

import (
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// difference is one field where the widget differs from the spec.
type difference struct {
	field, want, have string
}

// differences lists every field that differs, in a stable order.
type differences []difference

func (d differences) empty() bool { return len(d) == 0 }

// String renders the differences for people: one "field: want X, have Y"
// clause per field.
func (d differences) String() string {
	parts := make([]string, 0, len(d))
	for _, x := range d {
		parts = append(parts, x.field+": want "+x.want+", have "+x.have)
	}
	return strings.Join(parts, "; ")
}

// compare reports where w differs from the fields the user specified in
// spec.forProvider. Fields left unset there are not compared, so server
// defaults are never drift, and neither is spec.initProvider, which is used
// only to create the widget. The ownership markers must be exactly markers.
func compare(p *commonv1beta1.WidgetParameters, w *widgetapi.Widget, markers map[string]string) differences {
	var d differences
	if p.Size != nil && *p.Size != w.Size {
		d = append(d, difference{"size", quote(*p.Size), quote(w.Size)})
	}
	have := userLabels(w.Labels)
	if p.Labels != nil && !maps.Equal(p.Labels, have) {
		d = append(d, difference{"labels", formatLabels(p.Labels), formatLabels(have)})
	}
	if p.Description != nil && *p.Description != w.Description {
		d = append(d, difference{"description", quote(*p.Description), quote(w.Description)})
	}
	if have := ownership.Of(w.Labels); !maps.Equal(markers, have) {
		d = append(d, difference{"ownership labels", formatLabels(markers), formatLabels(have)})
	}
	return d
}

// lateInitialize fills the spec.forProvider fields the user left unset with
// what the API reports, and says whether it changed anything. A field set in
// spec.initProvider is left unset: it was set for the widget's creation only,
// and copying it to forProvider would make Crossplane manage it.
func lateInitialize(p *commonv1beta1.WidgetParameters, init *commonv1beta1.WidgetInitParameters, w *widgetapi.Widget) bool {
	changed := false
	if p.Size == nil && init.Size == nil && w.Size != "" {
		p.Size, changed = &w.Size, true
	}
	if l := userLabels(w.Labels); p.Labels == nil && init.Labels == nil && len(l) > 0 {
		p.Labels, changed = l, true
	}
	if p.Description == nil && init.Description == nil && w.Description != "" {
		p.Description, changed = &w.Description, true
	}
	return changed
}

// creation returns the widget to create: spec.forProvider's fields, with
// spec.initProvider's where forProvider leaves them unset, field by field,
// and the region, which only spec.initProvider has. Labels are one field:
// forProvider's, when set, are the widget's whole set (Observe compares them
// as such), so initProvider's are not merged into them.
func creation(p *commonv1beta1.WidgetParameters, init *commonv1beta1.WidgetInitParameters) (size, region, description string, labels map[string]string) {
	size = deref(p.Size, deref(init.Size, ""))
	region = deref(init.Region, "")
	description = deref(p.Description, deref(init.Description, ""))
	labels = p.Labels
	if labels == nil {
		labels = init.Labels
	}
	return size, region, description, maps.Clone(labels)
}

// userLabels returns the labels without the provider's reserved ones.
func userLabels(l map[string]string) map[string]string {
	out := make(map[string]string, len(l))
	for k, v := range l {
		if !strings.HasPrefix(k, commonv1beta1.OwnershipLabelPrefix) {
			out[k] = v
		}
	}
	return out
}

// observation converts an API widget to the resource's status.
func observation(w *widgetapi.Widget) commonv1beta1.WidgetObservation {
	o := commonv1beta1.WidgetObservation{
		ID:          w.ID,
		State:       commonv1beta1.WidgetState(w.State),
		Message:     w.Message,
		Endpoint:    w.Endpoint,
		Generation:  w.Generation,
		Size:        w.Size,
		Region:      w.Region,
		Labels:      maps.Clone(w.Labels),
		Description: w.Description,
	}
	if !w.CreatedAt.IsZero() {
		t := metav1.NewTime(w.CreatedAt.Truncate(1e9))
		o.CreatedAt = &t
	}
	if !w.UpdatedAt.IsZero() {
		t := metav1.NewTime(w.UpdatedAt.Truncate(1e9))
		o.UpdatedAt = &t
	}
	return o
}

// fromObservation is the inverse of observation, for the fields compare uses.
func fromObservation(o *commonv1beta1.WidgetObservation) *widgetapi.Widget {
	return &widgetapi.Widget{Size: o.Size, Region: o.Region, Labels: o.Labels, Description: o.Description}
}

func quote(s string) string { return `"` + s + `"` }

func formatLabels(l map[string]string) string {
	keys := slices.Sorted(maps.Keys(l))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+l[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
