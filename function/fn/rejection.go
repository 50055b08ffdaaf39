package fn

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/widgetco/crossplane-widget/function/internal/text"
)

// A rejection is why the function cannot compose an XR. It is a user-facing
// message: its reason and message become the PolicyCompliant condition of
// the XR and its claim, and the message the fatal result.
type rejection struct {
	reason  string
	message string

	// fields are the invalid fields, if the rejection is about fields.
	fields field.ErrorList
}

func (r *rejection) Error() string { return r.message }

// invalidInput rejects a function input that cannot be read.
func invalidInput(err error) error {
	return &rejection{
		reason:  reasonInvalidFunctionInput,
		message: "The platform's WidgetPolicy (the function input of the Composition) cannot be read, so no XWidget can be composed; the platform team must fix it: " + text.Truncate(err.Error()),
	}
}

// invalidInputFields rejects a function input with invalid fields.
func invalidInputFields(errs field.ErrorList) error {
	return &rejection{
		reason:  reasonInvalidFunctionInput,
		message: "The platform's WidgetPolicy (the function input of the Composition) is invalid, so no XWidget can be composed; the platform team must fix it: " + text.Join(errs),
		fields:  errs,
	}
}

// policyViolation rejects an XR that violates the policy.
func policyViolation(x xwidget, errs field.ErrorList) error {
	return &rejection{
		reason:  reasonPolicyViolation,
		message: fmt.Sprintf("%s violates the platform's widget policy; change these fields: %s", x.owner(), text.Join(errs)),
		fields:  errs,
	}
}

// unreadable rejects a request the function cannot make sense of.
func unreadable(err error, what string) error {
	return &rejection{reason: reasonInvalidRequest, message: what + ": " + text.Truncate(err.Error())}
}

// noComposite rejects a request without an observed XR: there is nothing to
// compose.
func noComposite() error {
	return &rejection{
		reason:  reasonInvalidRequest,
		message: "The request has no observed composite resource, so there is nothing to compose. Crossplane always sends the composite resource it reconciles: check what sent the request (crossplane render needs an XR).",
	}
}

// invalidComposite rejects an XR whose identity - name, namespace, kind or
// claim - no API server accepts: the function names and describes the
// resources it composes after it.
func invalidComposite(errs field.ErrorList) error {
	return &rejection{
		reason:  reasonInvalidRequest,
		message: "The composite resource cannot be composed because the request describes it with invalid fields; Crossplane sends only composite resources the API server accepted, so check what sent the request: " + text.Join(errs),
		fields:  errs,
	}
}

// invalidClaimReference rejects a legacy XR whose spec.claimRef does not
// name a claim the API server could hold.
func invalidClaimReference(x xwidget, errs field.ErrorList) error {
	return &rejection{
		reason:  reasonInvalidRequest,
		message: fmt.Sprintf("%s names its claim with invalid fields; Crossplane sets spec.claimRef of the composite resource of a claim, so remove or correct it: %s", x, text.Join(errs)),
		fields:  errs,
	}
}

// unsupported rejects an XR the function does not compose.
func unsupported(msg string) error {
	return &rejection{reason: reasonUnsupportedComposite, message: msg}
}
