package fn

import "testing"

// TestRejectionTypes checks that each way the function rejects a request has
// its own reason.
func TestRejectionTypes(t *testing.T) {
	cases := map[string]struct {
		reason string
		err    error
		want   string
	}{
		"InvalidInput":   {reason: "Unreadable input is the platform's to fix.", err: invalidInput(errBoom), want: reasonInvalidFunctionInput},
		"InvalidRequest": {reason: "An unreadable request is invalid.", err: unreadable(errBoom, "cannot read"), want: reasonInvalidRequest},
		"Unsupported":    {reason: "An unsupported XR is unsupported.", err: unsupported("no"), want: reasonUnsupportedComposite},
		"Violation":      {reason: "A policy violation is a violation.", err: policyViolation(xwidget{}, nil), want: reasonPolicyViolation},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := rejectedCondition(xwidget{}, tc.err).Reason; got != tc.want {
				t.Errorf("%s\nwant reason %q, got %q", tc.reason, tc.want, got)
			}
		})
	}
}
