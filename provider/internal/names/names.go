// Package names derives the Widget API names of managed resources that name
// none. They are deterministic, so a provider that crashes between creating
// a widget and recording its name finds the same widget again. Which
// resource owns a widget is package ownership's.
package names

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// AnnotationDefaultExternalName records the external name the provider chose
// itself. A widget or key that already exists under a defaulted name was not
// asked for, so it is not adopted: adoption is explicit, by setting
// crossplane.io/external-name.
const AnnotationDefaultExternalName = commonv1beta1.OwnershipLabelPrefix + "default-external-name"

// MaxLength is the longest name or marker the provider makes: a widget or key
// name, or a label value.
const MaxLength = min(widgetapi.MaxNameLength, widgetapi.MaxLabelValueLength)

// ValidWidgetName reports whether s can name a widget or key: a DNS-1123
// label.
func ValidWidgetName(s string) bool { return widgetapi.ValidName(s) }

// Default returns the external name a managed resource gets when it names
// none. Different resources never get the same default:
//
//   - namespaced: "<namespace>-<name>-<hash>", the hash taken over
//     "<namespace>/<name>", since "team/a-web" and "team-a/web" would
//     otherwise both read "team-a-web";
//   - cluster-scoped: "<name>", or "<name>-<hash>" when the name holds
//     characters a widget name cannot (uppercase, '.'), which become '-'.
//
// Names longer than 63 characters are shortened, keeping the hash.
func Default(mg resource.Managed) string {
	if ns := mg.GetNamespace(); ns != "" {
		id := ns + "/" + mg.GetName()
		return withHash(sanitize(ns+"-"+mg.GetName()), id)
	}
	name := mg.GetName()
	if s := sanitize(name); s == name {
		return Fit(s, name)
	}
	return withHash(sanitize(name), name)
}

// withHash appends a short hash of id to s, shortening s to fit 63
// characters.
func withHash(s, id string) string {
	sum := sha256.Sum256([]byte(id))
	h := hex.EncodeToString(sum[:])[:8]
	keep := min(len(s), MaxLength-len(h)-1)
	head := strings.TrimRight(s[:keep], "-")
	if head == "" {
		return h
	}
	return head + "-" + h
}

func sanitize(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b), "-")
}

// Fit shortens s to 63 characters, replacing the tail with a hash of the
// original when it has to, and makes sure it ends with an alphanumeric.
func Fit(s, original string) string {
	if len(s) <= MaxLength && s != "" {
		return s
	}
	sum := sha256.Sum256([]byte(original))
	h := hex.EncodeToString(sum[:])[:10]
	keep := MaxLength - len(h) - 1
	if len(s) < keep {
		keep = len(s)
	}
	head := strings.TrimRight(s[:keep], "-._")
	if head == "" {
		return h
	}
	return head + "-" + h
}

// Defaulted reports whether mg's external name is the default the provider
// chose rather than one a user set to import an existing widget or key.
func Defaulted(mg resource.Managed) bool {
	v, ok := mg.GetAnnotations()[AnnotationDefaultExternalName]
	return ok && v == meta.GetExternalName(mg)
}

// Initializer gives a managed resource its default external name when it has
// none. It writes nothing: the name is deterministic, so a reconcile that
// stops before saving it chooses the same name next time, and the
// reconciler's external-create-pending update saves it (with the finalizer)
// before anything is created under it; a resource whose widget already exists
// saves it with the finalizer.
type Initializer struct{}

// NewInitializer returns an Initializer.
func NewInitializer() *Initializer { return &Initializer{} }

// Initialize implements managed.Initializer.
func (i *Initializer) Initialize(_ context.Context, mg resource.Managed) error {
	if meta.GetExternalName(mg) != "" {
		return nil
	}
	name := Default(mg)
	meta.SetExternalName(mg, name)
	meta.AddAnnotations(mg, map[string]string{AnnotationDefaultExternalName: name})
	return nil
}

var _ managed.Initializer = &Initializer{}
