// Package inventory reconciles WidgetInventories: a namespace's read-only
// list of the widgets of its Widget API project, with who manages each as
// that namespace may know it. It only reads: Create, Update and Delete
// never reach the Widget API.
package inventory

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/clients"
	"github.com/widgetco/crossplane-widget/provider/internal/mrsetup"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// API is the part of the Widget API client the controller uses.
type API interface {
	ListWidgets(ctx context.Context, o widgetapi.ListWidgetsOptions) (*widgetapi.WidgetList, error)
}

// pageSize is how many widgets one list call asks for: the Widget API's
// most.
const pageSize = 500

// connector connects a WidgetInventory to the Widget API.
type connector struct {
	sessions *clients.Sessions
	delay    clients.Delayer
	kind     string
}

// Connect resolves the ProviderConfig and returns a client for one reconcile.
func (c *connector) Connect(ctx context.Context, mg *nsv1beta1.WidgetInventory) (managed.TypedExternalClient[*nsv1beta1.WidgetInventory], error) {
	s, err := c.sessions.Open(ctx, mg, c.delay, c.kind, "")
	if err != nil {
		return nil, err
	}
	return &external{api: s}, nil
}

// external lists one WidgetInventory's widgets.
type external struct {
	api API
}

// Observe reads the project's widgets that the selector matches, at most
// nsv1beta1.MaxInventoryScan of them, and writes what the namespace may know
// of them to the status. The inventory always exists: there is nothing to
// create, and deleting it deletes nothing.
func (e *external) Observe(ctx context.Context, mg *nsv1beta1.WidgetInventory) (managed.ExternalObservation, error) {
	if meta.WasDeleted(mg) {
		return managed.ExternalObservation{}, nil
	}
	p := mg.Spec.ForProvider
	var found []widgetapi.Widget
	truncated := false
	for token := ""; ; {
		l, err := e.api.ListWidgets(ctx, widgetapi.ListWidgetsOptions{Labels: p.MatchLabels, Limit: pageSize, PageToken: token})
		if err != nil {
			return managed.ExternalObservation{}, errors.Wrap(err, "cannot list widgets")
		}
		found = append(found, l.Items...)
		token = l.NextPageToken
		if token == "" {
			break
		}
		if len(found) >= nsv1beta1.MaxInventoryScan {
			truncated = true
			break
		}
	}
	limit := nsv1beta1.DefaultInventoryLimit
	if p.Limit != nil {
		limit = min(max(*p.Limit, 1), nsv1beta1.MaxInventoryLimit)
	}
	mg.Status.AtProvider = inventory(mg, found, int(limit), truncated)
	mg.SetConditions(xpv2.Available())
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, nil
}

// inventory sorts widgets by what mg's namespace may know of them: listed
// (unowned first, then released here, then managed here; by name within
// each) up to limit, or only counted.
func inventory(mg resource.Managed, widgets []widgetapi.Widget, limit int, truncated bool) nsv1beta1.WidgetInventoryObservation {
	o := nsv1beta1.WidgetInventoryObservation{Matched: int32(len(widgets)), Truncated: truncated} //nolint:gosec // at most MaxInventoryScan plus one page
	listed := make([]nsv1beta1.InventoryWidget, 0, len(widgets))
	for _, w := range widgets {
		owner, ok := ownerOf(mg, w.Labels)
		if !ok {
			o.OutOfReach++
			continue
		}
		switch owner {
		case nsv1beta1.OwnerUnowned:
			o.Unowned++
		case nsv1beta1.OwnerReleasedHere:
			o.ReleasedHere++
		case nsv1beta1.OwnerManagedHere:
			o.ManagedHere++
		}
		item := nsv1beta1.InventoryWidget{
			Name:   w.Name,
			Owner:  owner,
			Size:   w.Size,
			Region: w.Region,
			State:  string(w.State),
			Labels: userLabels(w.Labels),
		}
		if owner == nsv1beta1.OwnerManagedHere {
			item.ManagedBy = managedBy(w.Labels[ownership.OwnerLabel])
			item.ControlPlane = w.Labels[ownership.ControlPlaneLabel]
		}
		listed = append(listed, item)
	}
	slices.SortFunc(listed, func(a, b nsv1beta1.InventoryWidget) int {
		return cmp.Or(cmp.Compare(rank[a.Owner], rank[b.Owner]), strings.Compare(a.Name, b.Name))
	})
	if len(listed) > limit {
		listed = listed[:limit]
	}
	o.Widgets = listed
	return o
}

// rank orders the owners in the list: what a team can adopt first.
var rank = map[nsv1beta1.Owner]int{nsv1beta1.OwnerUnowned: 0, nsv1beta1.OwnerReleasedHere: 1, nsv1beta1.OwnerManagedHere: 2}

// ownerOf says who manages a widget with labels, as mg's namespace may know
// it; ok is false for a widget out of its reach (ownership.InReach and
// ownership.ReservedAgainst), which it may not even name.
func ownerOf(mg resource.Managed, labels map[string]string) (nsv1beta1.Owner, bool) {
	if labels[ownership.OwnerLabel] != "" {
		return nsv1beta1.OwnerManagedHere, ownership.InReach(mg, labels)
	}
	if ownership.ReservedAgainst(mg, labels) {
		return "", false
	}
	if _, released := labels[ownership.ReleasedByLabel]; released {
		return nsv1beta1.OwnerReleasedHere, true
	}
	return nsv1beta1.OwnerUnowned, true
}

// managedBy is the resource name a namespaced marker spells, or the marker
// where it was shortened.
func managedBy(marker string) string {
	rest, _ := strings.CutPrefix(marker, "n_")
	if _, name, ok := strings.Cut(rest, "."); ok && name != "" {
		return name
	}
	return marker
}

// userLabels returns the labels without the provider's reserved ones.
func userLabels(l map[string]string) map[string]string {
	out := maps.Clone(l)
	maps.DeleteFunc(out, func(k, _ string) bool { return strings.HasPrefix(k, commonv1beta1.OwnershipLabelPrefix) })
	if len(out) == 0 {
		return nil
	}
	return out
}

// Create never reaches the Widget API: Observe always reports the inventory
// as existing.
func (e *external) Create(context.Context, *nsv1beta1.WidgetInventory) (managed.ExternalCreation, error) {
	return managed.ExternalCreation{}, nil
}

// Update never reaches the Widget API: Observe always reports the inventory
// as up to date.
func (e *external) Update(context.Context, *nsv1beta1.WidgetInventory) (managed.ExternalUpdate, error) {
	return managed.ExternalUpdate{}, nil
}

// Delete never reaches the Widget API: a deleted inventory does not exist.
func (e *external) Delete(context.Context, *nsv1beta1.WidgetInventory) (managed.ExternalDelete, error) {
	return managed.ExternalDelete{}, nil
}

// Disconnect is a no-op: the HTTP client is shared.
func (e *external) Disconnect(context.Context) error { return nil }

// Setup adds the WidgetInventory controller.
func Setup(mgr ctrl.Manager, o controller.Options, d mrsetup.Deps) error {
	return mrsetup.Setup(mgr, o, d, nsv1beta1.WidgetInventoryGroupVersionKind,
		func() *nsv1beta1.WidgetInventory { return &nsv1beta1.WidgetInventory{} },
		func() resource.ManagedList { return &nsv1beta1.WidgetInventoryList{} },
		func(env mrsetup.Env) managed.TypedExternalConnector[*nsv1beta1.WidgetInventory] {
			return &connector{sessions: d.Sessions, delay: env.Limiter, kind: env.Kind}
		})
}
