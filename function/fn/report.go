package fn

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/crossplane/function-sdk-go/errors"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
	"github.com/widgetco/crossplane-widget/function/internal/text"
)

// A WidgetReport operation step (see operation.go) reports, in the
// Operation's output, on the XWidgets or claims a selector matches: what is
// not Ready, what the policy or a quota refuses, which key rotations are
// overdue, which widgets the provider restored lately after a change made
// outside Crossplane, and how many widgets the namespaces' WidgetInventories found
// unowned. It changes nothing.

// reqInventories names the WidgetInventories among the required resources.
const reqInventories = "widget-report-inventories"

// WidgetReport's overdueAfter and driftWithin when unset.
const (
	defaultOverdueAfter = time.Hour
	defaultDriftWithin  = 24 * time.Hour
)

// A finding is one thing a report says about one object.
type finding struct {
	Object    string `json:"object"`
	Condition string `json:"condition"`
	Reason    string `json:"reason"`
	Message   string `json:"message,omitempty"`
}

// widgetReport runs a WidgetReport operation step.
func widgetReport(req *fnv1.RunFunctionRequest, now time.Time, log logging.Logger) *fnv1.RunFunctionResponse {
	rsp := response.To(req, response.DefaultTTL)
	in := &v1beta1.WidgetReport{}
	if err := readInput(req, in, validateWidgetReport); err != nil {
		response.Fatal(rsp, err)
		return rsp
	}
	invSel := &fnv1.ResourceSelector{
		ApiVersion: nsv1beta1.SchemeGroupVersion.String(), Kind: nsv1beta1.WidgetInventoryKind,
		Match: &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{}},
	}
	if in.Target.Namespace != "" {
		invSel.Namespace = &in.Target.Namespace
	}
	rsp.Requirements = &fnv1.Requirements{Resources: map[string]*fnv1.ResourceSelector{reqTargets: targetSelector(in.Target), reqInventories: invSel}}
	targets, okTargets, err := request.GetRequiredResource(req, reqTargets)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot read the selected objects"))
		return rsp
	}
	inventories, okInv, err := request.GetRequiredResource(req, reqInventories)
	if err != nil {
		response.Fatal(rsp, errors.Wrap(err, "cannot read the WidgetInventories"))
		return rsp
	}
	if !okTargets || !okInv {
		return rsp
	}
	w := window{overdue: defaultOverdueAfter, drift: defaultDriftWithin}
	if in.OverdueAfter != nil {
		w.overdue = in.OverdueAfter.Duration
	}
	if in.DriftWithin != nil {
		w.drift = in.DriftWithin.Duration
	}
	var found []finding
	ready := 0
	for _, t := range targets {
		f := findings(t.Resource, now, w)
		if len(f) == 0 || f[0].Condition != "Ready" {
			ready++
		}
		found = append(found, f...)
	}
	counts := map[string]any{}
	for _, f := range found {
		k := f.Condition + "/" + f.Reason
		n, _ := counts[k].(int64)
		counts[k] = n + 1
	}
	limit := int(v1beta1.DefaultMaxEntries)
	if in.MaxEntries != nil {
		limit = int(*in.MaxEntries)
	}
	slices.SortFunc(found, func(a, b finding) int {
		return cmp.Or(cmp.Compare(a.Object, b.Object), cmp.Compare(a.Condition, b.Condition))
	})
	listed := make([]any, 0, min(len(found), limit))
	for _, f := range found[:min(len(found), limit)] {
		listed = append(listed, map[string]any{"object": f.Object, "condition": f.Condition, "reason": f.Reason, "message": f.Message})
	}
	unowned, invs := inventoryCounts(inventories, limit)
	out := map[string]any{
		"kind":            in.Target.Kind,
		"objects":         int64(len(targets)),
		"ready":           int64(ready),
		"counts":          counts,
		"findings":        listed,
		"findingsOmitted": int64(len(found) - len(listed)),
		"unownedWidgets":  unowned,
		"inventories":     invs,
	}
	if err := response.SetOutput(rsp, out); err != nil {
		response.Fatal(rsp, err)
		return rsp
	}
	response.Normalf(rsp, "Reported on %d %s objects: %d Ready, %d findings; %d unowned widgets in %d WidgetInventories", len(targets), in.Target.Kind, ready, len(found), unowned, len(inventories))
	log.Info("Reported", "objects", len(targets), "findings", len(found))
	return rsp
}

// validateWidgetReport checks the input's fields a user may get wrong.
func validateWidgetReport(in *v1beta1.WidgetReport) error {
	errs := append(targetErrors(in.Target), boundErrors("maxEntries", in.MaxEntries, v1beta1.MaxEntries)...)
	if len(errs) > 0 {
		slices.Sort(errs)
		return errors.Errorf("invalid WidgetReport input: %s", strings.Join(errs, "; "))
	}
	return nil
}

// A window says how far back a report looks.
type window struct {
	// overdue: how long after it was due a rotation counts as overdue.
	overdue time.Duration
	// drift: how recent a drift repair must be to be reported.
	drift time.Duration
}

// findings are what a report says about one object u: that it is not
// Ready, that its PolicyCompliant condition is False, that its next key
// rotation is overdue by more than w.overdue, that the provider restored
// its widget within w.drift.
func findings(u *unstructured.Unstructured, now time.Time, w window) []finding {
	id := u.GetName()
	if ns := u.GetNamespace(); ns != "" {
		id = ns + "/" + id
	}
	out := make([]finding, 0, 4)
	for _, ct := range []string{"Ready", "PolicyCompliant"} {
		status, reason, msg := conditionOf(u, ct)
		if status == "True" || ct == "PolicyCompliant" && status == "" {
			continue
		}
		if reason == "" {
			reason = "Unknown"
		}
		out = append(out, finding{Object: id, Condition: ct, Reason: reason, Message: shortMessage(msg)})
	}
	next, _, _ := unstructured.NestedString(u.Object, "status", "rotation", "nextRotationAt")
	if t, err := time.Parse(time.RFC3339, next); err == nil && now.Sub(t) > w.overdue {
		out = append(out, finding{Object: id, Condition: "Rotation", Reason: "Overdue", Message: fmt.Sprintf("the next rotation was due at %s, %s ago", next, now.Sub(t).Round(time.Minute))})
	}
	last, _, _ := unstructured.NestedString(u.Object, "status", "drift", "lastRepairAt")
	if t, err := time.Parse(time.RFC3339, last); err == nil && now.Sub(t) <= w.drift {
		repairs, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "drift", "repairs")
		change, _, _ := unstructured.NestedString(u.Object, "status", "drift", "lastChange")
		msg := fmt.Sprintf("the widget was changed outside Crossplane and restored at %s (%d repairs in all)", last, number(repairs))
		if change != "" {
			msg += ": " + change
		}
		out = append(out, finding{Object: id, Condition: "Drift", Reason: "Repaired", Message: shortMessage(msg)})
	}
	return out
}

// shortMessage is a condition message as a finding quotes it: at most
// v1beta1.MaxMessageLength characters.
func shortMessage(s string) string {
	if head, cut := text.FirstRunes(s, v1beta1.MaxMessageLength); cut {
		return head + "..."
	}
	return s
}

// conditionOf returns the status, reason and message of u's condition ct.
func conditionOf(u *unstructured.Unstructured, ct string) (status, reason, message string) {
	cs, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range cs {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != ct {
			continue
		}
		status, _ = m["status"].(string)
		reason, _ = m["reason"].(string)
		message, _ = m["message"].(string)
		return status, reason, message
	}
	return "", "", ""
}

// inventoryCounts sums the unowned widgets the inventories found and lists
// at most limit of them, with their counts.
func inventoryCounts(inventories []resource.Required, limit int) (int64, []any) {
	var total int64
	listed := make([]any, 0, min(len(inventories), limit))
	slices.SortFunc(inventories, func(a, b resource.Required) int {
		return cmp.Or(cmp.Compare(a.Resource.GetNamespace(), b.Resource.GetNamespace()), cmp.Compare(a.Resource.GetName(), b.Resource.GetName()))
	})
	for _, r := range inventories {
		u := r.Resource
		v, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "atProvider", "unowned")
		n := number(v)
		total += n
		if len(listed) < limit {
			listed = append(listed, map[string]any{"inventory": u.GetNamespace() + "/" + u.GetName(), "unowned": n})
		}
	}
	return total, listed
}

// number is v as an integer: numbers from a protobuf Struct are float64.
// Anything else is 0.
func number(v any) int64 {
	switch x := v.(type) {
	case float64:
		return int64(x)
	case int64:
		return x
	}
	return 0
}
