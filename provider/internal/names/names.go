// Package names derives Widget API names and ownership markers from managed
// resources. Both are deterministic, so a provider that crashes between
// creating a widget and recording its name finds the same widget again.
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

// OwnerLabel marks the managed resource that manages a widget. Its prefix is
// reserved: users cannot set labels under it (the CRD rejects them).
const OwnerLabel = commonv1beta1.OwnershipLabelPrefix + "owner"

// OwnerNamespaceLabel records the namespace of the namespaced managed
// resource that manages a widget or created a key when OwnerLabel cannot say:
// a marker longer than a label value is shortened with a hash, which cuts
// namespaces of more than 49 characters. Other resources do not set it, so
// they keep a label to spare for users (the Widget API allows 32).
const OwnerNamespaceLabel = commonv1beta1.OwnershipLabelPrefix + "owner-namespace"

// AnnotationDefaultExternalName records the external name the provider chose
// itself. A widget or key that already exists under a defaulted name was not
// asked for, so it is not adopted: adoption is explicit, by setting
// crossplane.io/external-name.
const AnnotationDefaultExternalName = commonv1beta1.OwnershipLabelPrefix + "default-external-name"

// maxLabel is the longest name or marker the provider makes: a widget or key
// name, or a label value.
const maxLabel = min(widgetapi.MaxNameLength, widgetapi.MaxLabelValueLength)

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
		return fit(s, name)
	}
	return withHash(sanitize(name), name)
}

// withHash appends a short hash of id to s, shortening s to fit 63
// characters.
func withHash(s, id string) string {
	sum := sha256.Sum256([]byte(id))
	h := hex.EncodeToString(sum[:])[:8]
	keep := min(len(s), maxLabel-len(h)-1)
	head := strings.TrimRight(s[:keep], "-")
	if head == "" {
		return h
	}
	return head + "-" + h
}

// Owner returns the ownership marker value of a managed resource: which
// resource, in which scope, manages a widget. It is stable across a delete
// and re-create of the same resource, so re-importing an orphaned widget
// with the same resource works, while any other resource is refused.
func Owner(mg resource.Managed) string {
	id := "c_" + mg.GetName()
	if ns := mg.GetNamespace(); ns != "" {
		id = "n_" + ns + "." + mg.GetName()
	}
	return fit(id, id)
}

// Markers returns the ownership labels mg puts on every widget and key it
// creates: OwnerLabel and, for a namespaced resource whose marker does not
// spell out its namespace, OwnerNamespaceLabel.
func Markers(mg resource.Managed) map[string]string {
	m := map[string]string{OwnerLabel: Owner(mg)}
	if ns := mg.GetNamespace(); ns != "" {
		if got, ok := OwnerNamespace(m); !ok || got != ns {
			m[OwnerNamespaceLabel] = ns
		}
	}
	return m
}

// Ownership returns the ownership markers among labels: OwnerLabel and
// OwnerNamespaceLabel, where set.
func Ownership(labels map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{OwnerLabel, OwnerNamespaceLabel} {
		if v, ok := labels[k]; ok {
			out[k] = v
		}
	}
	return out
}

// OwnerNamespace returns the namespace of the managed resource that labels
// say owns a widget or key: OwnerNamespaceLabel when it is set, else the
// namespace a namespaced marker ("n_<namespace>.<name>") spells out.
// Namespaces hold no '.', so the marker's first '.' ends the namespace; a
// marker shortened before its '.' cannot say, and neither can a
// cluster-scoped or foreign one: ok is false then.
func OwnerNamespace(labels map[string]string) (ns string, ok bool) {
	if ns, ok := labels[OwnerNamespaceLabel]; ok && ns != "" {
		return ns, true
	}
	rest, namespaced := strings.CutPrefix(labels[OwnerLabel], "n_")
	if !namespaced {
		return "", false
	}
	ns, _, ok = strings.Cut(rest, ".")
	if !ok || ns == "" {
		return "", false
	}
	return ns, true
}

// Reaches reports whether mg may act on a widget or key that carries labels.
// A cluster-scoped resource is the platform team's and reaches anything its
// ProviderConfig reaches. A namespaced resource (a tenant's) reaches only
// what a managed resource in its own namespace owns: everything else - an
// unowned widget, a cluster-scoped resource's, another namespace's - is out
// of its reach. (Adopting or observing an unowned widget is a separate
// decision, made by the Widget controller.)
func Reaches(mg resource.Managed, labels map[string]string) bool {
	ns := mg.GetNamespace()
	if ns == "" {
		return true
	}
	if labels[OwnerLabel] == Owner(mg) {
		return true
	}
	owner, ok := OwnerNamespace(labels)
	return ok && owner == ns
}

// DescribeOwner turns a marker back into words for error messages.
func DescribeOwner(v string) string {
	switch {
	case strings.HasPrefix(v, "n_"):
		ns, name, _ := strings.Cut(strings.TrimPrefix(v, "n_"), ".")
		return "namespaced managed resource " + ns + "/" + name
	case strings.HasPrefix(v, "c_"):
		return "cluster-scoped managed resource " + strings.TrimPrefix(v, "c_")
	default:
		return "another owner (" + v + ")"
	}
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

// fit shortens s to 63 characters, replacing the tail with a hash of the
// original when it has to, and makes sure it ends with an alphanumeric.
func fit(s, original string) string {
	if len(s) <= maxLabel && s != "" {
		return s
	}
	sum := sha256.Sum256([]byte(original))
	h := hex.EncodeToString(sum[:])[:10]
	keep := maxLabel - len(h) - 1
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
