package fn

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestReadXWidgetIdentity(t *testing.T) {
	const (
		subdomain = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
		label     = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
		kind      = "must be a kind: at most 63 letters, digits and '-', starting with a letter and ending with a letter or digit"
	)
	claimRef := field.NewPath("spec", "claimRef")

	cases := map[string]struct {
		reason string
		xr     map[string]any
		want   field.ErrorList
	}{
		"Namespaced": {
			reason: "A namespaced XR the API server could hold is read.",
			xr:     nsXR(),
		},
		"Legacy": {
			reason: "A legacy XR the API server could hold, naming its claim, is read.",
			xr:     legacyXR(),
		},
		"LongestName": {
			reason: "A name of 253 characters, the most an object's name may have, is read.",
			xr:     nsXR(set("metadata.name", strings.Repeat("a", 253))),
		},
		"NoName": {
			reason: "An XR without a name is rejected.",
			xr:     nsXR(unset("metadata.name")),
			want:   field.ErrorList{field.Required(field.NewPath("metadata", "name"), "Crossplane always sends the name of the composite resource")},
		},
		"NameTooLong": {
			reason: "A name longer than 253 characters is rejected, and the message repeats only its start.",
			xr:     nsXR(set("metadata.name", strings.Repeat("a", 254))),
			want:   field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), strings.Repeat("a", 64)+"...", "must be no more than 253 characters")},
		},
		"BadNameNamespaceAndKind": {
			reason: "A name, namespace and kind the API server does not allow are rejected.",
			xr:     nsXR(set("metadata.name", "Web"), set("metadata.namespace", "Team-A"), set("kind", "X Widget")),
			want: field.ErrorList{
				field.Invalid(field.NewPath("metadata", "name"), "Web", subdomain),
				field.Invalid(field.NewPath("metadata", "namespace"), "Team-A", label),
				field.Invalid(field.NewPath("kind"), "X Widget", kind),
			},
		},
		"BadClaimReference": {
			reason: "A legacy XR whose spec.claimRef names no claim the API server could hold is rejected.",
			xr:     legacyXR(unset("spec.claimRef.kind"), set("spec.claimRef.namespace", ""), set("spec.claimRef.name", "Web")),
			want: field.ErrorList{
				field.Required(claimRef.Child("kind"), "a kind is required"),
				field.Invalid(claimRef.Child("namespace"), "", label),
				field.Invalid(claimRef.Child("name"), "Web", subdomain),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := readXWidget(context.Background(), compositeOf(tc.xr))
			if diff := cmp.Diff(tc.want, fieldErrors(t, err)); diff != "" {
				t.Errorf("%s\nreadXWidget(...): -want errors, +got errors:\n%s", tc.reason, diff)
			}
		})
	}
}
