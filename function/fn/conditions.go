package fn

import (
	"context"
	"fmt"
	"strings"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/crossplane/function-sdk-go/errors"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource/composite"
	corev1 "k8s.io/api/core/v1"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/function/internal/nspolicy"
	"github.com/widgetco/crossplane-widget/function/internal/text"
)

// Condition types the function sets on the XR and its claim. It never sets
// Crossplane's own types (Ready, Synced, Healthy, Responsive).
const (
	typePolicyCompliant = "PolicyCompliant"
	typeWidgetReady     = "WidgetReady"
	typeKeysReady       = "KeysReady"
)

// Condition reasons. They are stable: tools and people may match on them.
const (
	reasonCompliant            = "Compliant"
	reasonPolicyViolation      = "PolicyViolation"
	reasonInvalidFunctionInput = "InvalidFunctionInput"
	reasonInvalidRequest       = "InvalidRequest"
	reasonUnsupportedComposite = "UnsupportedComposite"

	reasonAvailable        = "Available"
	reasonCreating         = "Creating"
	reasonReconcileError   = "ReconcileError"
	reasonFailed           = "Failed"
	reasonUnavailable      = "Unavailable"
	reasonProvisioning     = "Provisioning"
	reasonResizing         = "Resizing"
	reasonDeleting         = "Deleting"
	reasonWaitingForWidget = "WaitingForWidget"
)

// warningReasons are the reasons of a condition that needs someone to act.
// A transition to one is reported as a warning, any other as normal.
var warningReasons = map[string]bool{
	reasonPolicyViolation:      true,
	reasonInvalidFunctionInput: true,
	reasonInvalidRequest:       true,
	reasonUnsupportedComposite: true,
	reasonAdoptionRefused:      true,
	reasonReconcileError:       true,
	reasonFailed:               true,
	reasonUnavailable:          true,

	nspolicy.ReasonQuotaExceeded:          true,
	nspolicy.ReasonInvalidNamespacePolicy: true,
	nspolicy.ReasonAdmittedOverLimit:      true,
}

// A condition of the XR and its claim.
type condition struct {
	Type    string
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

// observedConditions are the XR's current conditions, by type. It stops
// early once ctx is done, like readConditions.
func observedConditions(ctx context.Context, xr *composite.Unstructured) map[string]condition {
	// An XR whose conditions cannot be read is treated as one without
	// conditions: every condition then counts as a transition.
	cs := readConditions(ctx, xr.Object)
	out := make(map[string]condition, len(cs))
	for _, c := range cs {
		out[string(c.Type)] = condition{Type: string(c.Type), Status: c.Status, Reason: string(c.Reason), Message: c.Message}
	}
	return out
}

// setConditions adds the supplied conditions, targeted at the XR and its
// claim, to the response. For each condition whose status or reason differs
// from the XR's current one it also adds a result, which Crossplane emits as
// an event on the XR and the claim: events mark transitions only. It returns
// the conditions that changed.
func setConditions(rsp *fnv1.RunFunctionResponse, x xwidget, cs ...condition) []condition {
	changed := make([]condition, 0, len(cs))
	for _, c := range cs {
		rsp.Conditions = append(rsp.Conditions, &fnv1.Condition{
			Type:    c.Type,
			Status:  asStatus(c.Status),
			Reason:  c.Reason,
			Message: &c.Message,
			Target:  fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum(),
		})
		if prev, ok := x.conditions[c.Type]; ok && prev.Status == c.Status && prev.Reason == c.Reason {
			continue
		}
		changed = append(changed, c)
		severity := fnv1.Severity_SEVERITY_NORMAL
		if c.Status != corev1.ConditionTrue && warningReasons[c.Reason] {
			severity = fnv1.Severity_SEVERITY_WARNING
		}
		if c.Status == corev1.ConditionTrue && c.Reason == reasonReconcileError {
			severity = fnv1.Severity_SEVERITY_WARNING
		}
		rsp.Results = append(rsp.Results, &fnv1.Result{
			Severity: severity,
			Message:  c.Message,
			Reason:   &c.Reason,
			Target:   fnv1.Target_TARGET_COMPOSITE_AND_CLAIM.Enum(),
		})
	}
	return changed
}

func asStatus(s corev1.ConditionStatus) fnv1.Status {
	switch s {
	case corev1.ConditionTrue:
		return fnv1.Status_STATUS_CONDITION_TRUE
	case corev1.ConditionFalse:
		return fnv1.Status_STATUS_CONDITION_FALSE
	default:
		return fnv1.Status_STATUS_CONDITION_UNKNOWN
	}
}

// rejectedCondition is the PolicyCompliant condition of an XR the function
// cannot compose.
func rejectedCondition(x xwidget, err error) condition {
	r := &rejection{}
	if !errors.As(err, &r) {
		r = &rejection{reason: reasonInvalidRequest, message: fmt.Sprintf("cannot compose %s: %s", x, err)}
	}
	return condition{Type: typePolicyCompliant, Status: corev1.ConditionFalse, Reason: r.reason, Message: r.message}
}

// compliantCondition is the PolicyCompliant condition of an XR the function
// composes.
func compliantCondition(x xwidget) condition {
	return condition{
		Type:    typePolicyCompliant,
		Status:  corev1.ConditionTrue,
		Reason:  reasonCompliant,
		Message: x.owner() + " complies with the platform's widget policy.",
	}
}

// widgetCondition is the WidgetReady condition: whether the widget is ready
// and, when it is not, why, in the provider's own words when it has some.
func widgetCondition(w widgetObservation) condition {
	c := condition{Type: typeWidgetReady, Status: corev1.ConditionFalse}
	synced := w.synced.Status != corev1.ConditionFalse
	switch {
	case !w.exists:
		c.Reason, c.Message = reasonCreating, "Creating the widget."
	case w.deleting:
		c.Reason, c.Message = reasonDeleting, fmt.Sprintf("Widget %s is being deleted; Crossplane creates it again once it is gone.", w.name)
	case w.isReady() && !synced:
		c.Status, c.Reason = corev1.ConditionTrue, reasonReconcileError
		c.Message = fmt.Sprintf("Widget %s is ready%s, but the provider cannot apply the latest changes: %s", w.name, at(w.endpoint()), providerMessage(w.synced))
	case w.isReady():
		c.Status, c.Reason = corev1.ConditionTrue, reasonAvailable
		c.Message = fmt.Sprintf("Widget %s is ready%s.", w.name, at(w.endpoint()))
	case !synced:
		c.Reason = reasonReconcileError
		c.Message = fmt.Sprintf("The provider cannot reconcile Widget %s: %s", w.name, providerMessage(w.synced))
	case w.atProvider.State == commonv1beta1.WidgetStateFailed:
		msg := w.atProvider.Message
		if msg == "" {
			msg = providerMessage(w.ready)
		}
		c.Reason = reasonFailed
		c.Message = fmt.Sprintf("Widget %s failed: %s. Delete and recreate the XWidget to try again; ask the platform team if it fails again.", w.name, strings.TrimSuffix(text.Truncate(msg), "."))
	case w.atProvider.State == commonv1beta1.WidgetStateProvisioning:
		c.Reason, c.Message = reasonProvisioning, fmt.Sprintf("Widget %s is being provisioned.", w.name)
	case w.atProvider.State == commonv1beta1.WidgetStateResizing:
		c.Reason, c.Message = reasonResizing, fmt.Sprintf("Widget %s is being resized to %s.", w.name, w.atProvider.Size)
	case w.atProvider.State == commonv1beta1.WidgetStateDeleting:
		c.Reason, c.Message = reasonDeleting, fmt.Sprintf("The Widget API is deleting widget %s.", w.externalName)
	case w.ready.Status == corev1.ConditionFalse && w.ready.Message != "":
		c.Reason = reasonUnavailable
		c.Message = fmt.Sprintf("Widget %s is not ready: %s", w.name, providerMessage(w.ready))
	default:
		// The same message as before the Widget existed: each new message
		// is one more write of the XR's status, one more reconcile of the
		// XR and of its claim, and one more RunFunction call, for nothing
		// a team can act on.
		c.Reason, c.Message = reasonCreating, "Creating the widget."
	}
	return c
}

// keysCondition is the KeysReady condition: whether every access key the XR
// asks for is ready, and what the first one that is not waits for.
func keysCondition(obs observation) condition {
	c := condition{Type: typeKeysReady, Status: corev1.ConditionFalse}
	want, ready := len(obs.keys), obs.readyKeys()
	if ready == want {
		c.Status, c.Reason = corev1.ConditionTrue, reasonAvailable
		switch want {
		case 0:
			c.Message = "No access keys requested."
		case 1:
			c.Message = "The access key is ready."
		default:
			c.Message = fmt.Sprintf("All %d access keys are ready.", want)
		}
		return c
	}

	progress := fmt.Sprintf("%d of %d %s ready", ready, want, text.Plural(want, "access key", "access keys"))
	// While the widget cannot hold keys, that is what every key that is not
	// ready waits for, whatever its WidgetKey says: a WidgetKey composed
	// with its Widget reports an unresolved reference once it has waited a
	// minute for the widget's ID, and WidgetReady already says what the
	// widget waits for.
	wait := keysWaitFor(obs.widget)
	if wait == "" {
		for _, k := range obs.keys {
			if k.exists && k.synced.Status == corev1.ConditionFalse {
				c.Reason = reasonReconcileError
				c.Message = fmt.Sprintf("%s; the provider cannot reconcile access key %d (WidgetKey %s): %s", progress, k.index, k.name, providerMessage(k.synced))
				return c
			}
		}
	}
	for _, k := range obs.keys {
		switch {
		case k.isReady():
			continue
		case k.deleting:
			c.Reason = reasonDeleting
			c.Message = fmt.Sprintf("%s; access key %d (WidgetKey %s) is being deleted, and Crossplane creates it again once it is gone.", progress, k.index, k.name)
		case wait != "":
			// The same message before and after the key's WidgetKey
			// exists (see widgetCondition).
			c.Reason = reasonWaitingForWidget
			c.Message = progress + "; " + wait
		default:
			// Until the key publishes its connection details, the same
			// message as before its WidgetKey existed.
			c.Reason = reasonCreating
			c.Message = fmt.Sprintf("%s; creating access key %d.", progress, k.index)
		}
		return c
	}
	return c
}

// keysWaitFor says what the access keys of widget w wait for before they can
// be created, or is empty once w can hold keys.
func keysWaitFor(w widgetObservation) string {
	switch {
	case w.canHoldKeys():
		return ""
	case w.atProvider.State == commonv1beta1.WidgetStateFailed:
		return "no access key is created for a widget that failed."
	case w.exists && !w.deleting && w.synced.Status == corev1.ConditionFalse:
		return "access keys are created once the provider can reconcile the widget (WidgetReady says why it cannot)."
	}
	return "waiting for the widget to be created."
}

// providerMessage is a managed resource's own explanation of a condition.
func providerMessage(c xpv2.Condition) string {
	msg := strings.TrimSpace(c.Message)
	if msg == "" {
		msg = fmt.Sprintf("its %s condition is %s with reason %s and no message", c.Type, c.Status, c.Reason)
	}
	return text.Truncate(msg)
}

func at(endpoint string) string {
	if endpoint == "" {
		return ""
	}
	return " at " + endpoint
}

// replaceCondition replaces the condition of the same type as c in cs.
func replaceCondition(cs []condition, c condition) []condition {
	for i := range cs {
		if cs[i].Type == c.Type {
			cs[i] = c
			return cs
		}
	}
	return append(cs, c)
}
