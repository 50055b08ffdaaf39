package fn

import (
	"fmt"
	"slices"
	"strings"

	"github.com/crossplane/function-sdk-go/errors"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
)

// An AdoptWidgets operation step (see operation.go) turns the unowned
// widgets a WidgetInventory lists into XWidgets that review them: bulk
// adoption, one review per widget, reusing the XWidget's own spec.adopt.

// reqInventory and reqComposites name the WidgetInventory and the
// namespace's existing XWidgets among the required resources.
const (
	reqInventory  = "adopt-widgets-inventory"
	reqComposites = "adopt-widgets-existing"
)

// adoptWidgets runs an AdoptWidgets operation step.
func adoptWidgets(req *fnv1.RunFunctionRequest, log logging.Logger) *fnv1.RunFunctionResponse {
	rsp := response.To(req, response.DefaultTTL)
	in := &v1beta1.AdoptWidgets{}
	if err := readInput(req, in, validateAdoptWidgets); err != nil {
		response.Fatal(rsp, err)
		return rsp
	}
	ns := in.Inventory.Namespace
	rsp.Requirements = &fnv1.Requirements{Resources: map[string]*fnv1.ResourceSelector{
		reqInventory: {
			ApiVersion: nsv1beta1.SchemeGroupVersion.String(), Kind: nsv1beta1.WidgetInventoryKind, Namespace: &ns,
			Match: &fnv1.ResourceSelector_MatchName{MatchName: in.Inventory.Name},
		},
		reqComposites: {
			ApiVersion: in.Composite.APIVersion, Kind: in.Composite.Kind, Namespace: &ns,
			Match: &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{}},
		},
	}}
	inv, okInv, err := request.GetRequiredResource(req, reqInventory)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot read the WidgetInventory"))
		return rsp
	}
	existing, okExisting, err := request.GetRequiredResource(req, reqComposites)
	if err != nil {
		response.Fatal(rsp, errors.Wrapf(err, "cannot read the %s objects of namespace %s", in.Composite.Kind, ns))
		return rsp
	}
	if !okInv || !okExisting {
		// Core fetches the requirements and calls again.
		return rsp
	}
	if len(inv) == 0 {
		response.Fatal(rsp, errors.Errorf("WidgetInventory %s/%s does not exist: create it (docs/operations.md#adopt-what-a-team-already-runs), wait until it is Ready, and run the operation again", ns, in.Inventory.Name))
		return rsp
	}
	obs, err := inventoryOf(inv[0].Resource)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp
	}
	plan := planAdoptions(obs, existing)
	limit := v1beta1.DefaultMaxWidgets
	if in.MaxWidgets != nil {
		limit = *in.MaxWidgets
	}
	if len(plan.adopt) > int(limit) {
		response.Fatal(rsp, errors.Errorf("WidgetInventory %s/%s lists %d widgets to adopt, more than maxWidgets (%d): nothing was written; raise maxWidgets (at most %d) or narrow the inventory's matchLabels", ns, in.Inventory.Name, len(plan.adopt), limit, v1beta1.MaxWidgets))
		return rsp
	}
	rsp.Desired = &fnv1.State{Resources: map[string]*fnv1.Resource{}}
	for _, w := range plan.adopt {
		spec := map[string]any{"keys": int64(0), "adopt": map[string]any{"name": w.Name, "mode": string(AdoptReview)}}
		if w.Size != "" {
			spec["size"] = w.Size
		}
		if len(w.Labels)+len(in.Labels) > 0 {
			labels := map[string]any{}
			for k, v := range w.Labels {
				labels[k] = v
			}
			for k, v := range in.Labels {
				labels[k] = v
			}
			spec["labels"] = labels
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": in.Composite.APIVersion,
			"kind":       in.Composite.Kind,
			"metadata":   map[string]any{"name": w.Name, "namespace": ns},
			"spec":       spec,
		}}
		r, err := resource.AsStruct(u)
		if err != nil {
			response.Fatal(rsp, errors.Wrapf(err, "cannot write the %s that adopts widget %s", in.Composite.Kind, w.Name))
			return rsp
		}
		rsp.Desired.Resources[ns+"/"+w.Name] = &fnv1.Resource{Resource: r}
	}
	out := map[string]any{
		"inventory":        ns + "/" + in.Inventory.Name,
		"written":          int64(len(plan.adopt)),
		"names":            toAny(names(plan.adopt)),
		"alreadyAdopting":  toAny(plan.adopting),
		"nameTaken":        toAny(plan.taken),
		"unownedUnlisted":  int64(plan.unlisted),
		"inventoryTrimmed": obs.Truncated,
	}
	if err := response.SetOutput(rsp, out); err != nil {
		response.Fatal(rsp, err)
		return rsp
	}
	msg := fmt.Sprintf("Wrote %d %s objects in %s that review the widgets they adopt (mode Review: nothing is changed until an app team sets mode Manage); skipped %d already adopted, %d whose name an object there has", len(plan.adopt), in.Composite.Kind, ns, len(plan.adopting), len(plan.taken))
	if plan.unlisted > 0 {
		msg += fmt.Sprintf("; %d more unowned widgets are beyond the inventory's limit: raise spec.forProvider.limit and run again", plan.unlisted)
	}
	response.Normal(rsp, msg)
	log.Info("Adopting widgets", "namespace", ns, "written", len(plan.adopt), "alreadyAdopting", len(plan.adopting), "nameTaken", len(plan.taken))
	return rsp
}

// An adoptionPlan is what an AdoptWidgets step writes and skips.
type adoptionPlan struct {
	adopt []nsv1beta1.InventoryWidget
	// adopting are widgets an existing object already adopts; taken are
	// widgets whose name an existing object has.
	adopting, taken []string
	// unlisted counts adoptable widgets the inventory counted but did not
	// list (its limit).
	unlisted int
}

// planAdoptions picks the inventory's widgets that no object of existing
// adopts and whose name none has, in the inventory's order.
func planAdoptions(obs nsv1beta1.WidgetInventoryObservation, existing []resource.Required) adoptionPlan {
	names := map[string]bool{}
	adopted := map[string]bool{}
	for _, e := range existing {
		names[e.Resource.GetName()] = true
		if a, _, _ := unstructured.NestedString(e.Resource.Object, "spec", "adopt", "name"); a != "" {
			adopted[a] = true
		}
	}
	var p adoptionPlan
	listed := 0
	for _, w := range obs.Widgets {
		if w.Owner != nsv1beta1.OwnerUnowned && w.Owner != nsv1beta1.OwnerReleasedHere {
			continue
		}
		listed++
		switch {
		case adopted[w.Name]:
			p.adopting = append(p.adopting, w.Name)
		case names[w.Name]:
			p.taken = append(p.taken, w.Name)
		default:
			p.adopt = append(p.adopt, w)
		}
	}
	p.unlisted = max(int(obs.Unowned+obs.ReleasedHere)-listed, 0)
	return p
}

// inventoryOf reads a WidgetInventory's status, which must be of a Ready
// inventory.
func inventoryOf(u *unstructured.Unstructured) (nsv1beta1.WidgetInventoryObservation, error) {
	inv := &nsv1beta1.WidgetInventory{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, inv); err != nil {
		return nsv1beta1.WidgetInventoryObservation{}, errors.Wrapf(err, "cannot read WidgetInventory %s/%s", u.GetNamespace(), u.GetName())
	}
	if c := inv.GetCondition("Ready"); c.Status != "True" {
		return nsv1beta1.WidgetInventoryObservation{}, errors.Errorf("WidgetInventory %s/%s is not Ready (%s %s: %s): it has not listed the project yet; run the operation again once it is", inv.Namespace, inv.Name, c.Status, c.Reason, c.Message)
	}
	return inv.Status.AtProvider, nil
}

// validateAdoptWidgets checks the input's fields a user may get wrong.
func validateAdoptWidgets(in *v1beta1.AdoptWidgets) error {
	var errs []string
	if len(validation.IsDNS1123Label(in.Inventory.Namespace)) > 0 {
		errs = append(errs, fmt.Sprintf("inventory.namespace %q is not a namespace name", in.Inventory.Namespace))
	}
	if len(validation.IsDNS1123Subdomain(in.Inventory.Name)) > 0 {
		errs = append(errs, fmt.Sprintf("inventory.name %q is not an object name", in.Inventory.Name))
	}
	if gv := strings.Split(in.Composite.APIVersion, "/"); len(gv) != 2 || gv[0] == "" || gv[1] == "" {
		errs = append(errs, fmt.Sprintf("composite.apiVersion %q must be group/version, such as platform.widgetco.io/v1alpha1", in.Composite.APIVersion))
	}
	if in.Composite.Kind == "" {
		errs = append(errs, "composite.kind must name the XRD's kind, such as XWidget")
	}
	for k, v := range in.Labels {
		if len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
			errs = append(errs, fmt.Sprintf("labels %s=%s is not a valid label", k, v))
		}
	}
	errs = append(errs, boundErrors("maxWidgets", in.MaxWidgets, v1beta1.MaxWidgets)...)
	if len(errs) > 0 {
		slices.Sort(errs)
		return errors.Errorf("invalid AdoptWidgets input: %s", strings.Join(errs, "; "))
	}
	return nil
}

// names returns the widgets' names.
func names(ws []nsv1beta1.InventoryWidget) []string {
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.Name)
	}
	return out
}
