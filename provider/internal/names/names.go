// Package names derives Widget API names and ownership markers from managed
// resources. Both are deterministic, so a provider that crashes between
// creating a widget and recording its name finds the same widget again.
package names

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"slices"
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
// namespaces of more than 33 characters. It holds the whole namespace (a
// namespace fits a label value). Other resources do not set it, so they keep
// a label to spare for users (the Widget API allows 32).
const OwnerNamespaceLabel = commonv1beta1.OwnershipLabelPrefix + "owner-namespace"

// ReleasedByLabel reserves a released widget (see Released) for the scope of
// the resource that released it: the namespace of a namespaced resource, or
// ReleasedByCluster. It stays until a resource that may adopt the widget
// (see ReservedAgainst) does, or the platform team removes it in the Widget
// API.
const ReleasedByLabel = commonv1beta1.OwnershipLabelPrefix + "released-by"

// ReleasedByCluster is ReleasedByLabel's value on a widget a cluster-scoped
// resource released. It cannot be a namespace's name (a DNS label), so no
// namespace matches it.
const ReleasedByCluster = "_cluster-scoped"

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
//
// The marker is "n_<namespace>.<name>" or "c_<name>" when that fits a label
// value. A longer one keeps its first 36 characters and appends 128 bits of
// a SHA-256 of the whole, so no resource can search for a name whose marker
// equals another's, however long their shared prefix.
func Owner(mg resource.Managed) string {
	id := ownerID(mg)
	if len(id) <= maxLabel {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	h := markerHash.EncodeToString(sum[:markerHashBytes])
	head := strings.TrimRight(id[:maxLabel-len(h)-1], "-._")
	return head + "-" + h
}

// markerHashBytes is how much of a hash a shortened marker keeps: 128 bits,
// 26 characters of markerHash.
const markerHashBytes = 16

// markerHash spells a shortened marker's hash: lowercase, no padding, and
// no '-', '.' or '_', so a marker's hash never looks like its head.
var markerHash = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// legacyOwner returns the marker that provider versions before 128-bit
// markers wrote: the same as Owner when it fits a label value, else a
// 52-character head and a 40-bit hash. Owns accepts it, with the namespace
// the widget's labels record, so that widgets and keys marked by those
// versions keep their owner; the Widget controller rewrites a widget's to
// Owner's (keys cannot be relabelled).
func legacyOwner(mg resource.Managed) string {
	id := ownerID(mg)
	return fit(id, id)
}

// ownerID is the unshortened marker of mg.
func ownerID(mg resource.Managed) string {
	if ns := mg.GetNamespace(); ns != "" {
		return "n_" + ns + "." + mg.GetName()
	}
	return "c_" + mg.GetName()
}

// Owns reports whether labels mark mg as the owner of a widget or key: its
// marker (Owner's, or legacyOwner's from an older provider) and the
// namespace the labels record (see OwnerNamespace) is mg's, or, for a
// cluster-scoped mg, none. Checking the namespace too means that a marker
// equal to mg's is not enough: a widget another namespace owns, whatever
// its marker, is never mg's.
func Owns(mg resource.Managed, labels map[string]string) bool {
	v := labels[OwnerLabel]
	if v == "" || v != Owner(mg) && v != legacyOwner(mg) {
		return false
	}
	ns, ok := OwnerNamespace(labels)
	if mg.GetNamespace() == "" {
		_, labelled := labels[OwnerNamespaceLabel]
		return !ok && !labelled
	}
	return ok && ns == mg.GetNamespace()
}

// Migrates reports whether labels mark mg as the owner with a marker of an
// older format, which mg should rewrite to Markers(mg).
func Migrates(mg resource.Managed, labels map[string]string) bool {
	return Owns(mg, labels) && labels[OwnerLabel] != Owner(mg)
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

// Ownership returns the ownership markers among labels: OwnerLabel,
// OwnerNamespaceLabel and ReleasedByLabel, where set. A widget a resource
// manages carries exactly that resource's Markers.
func Ownership(labels map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range ownershipKeys {
		if v, ok := labels[k]; ok {
			out[k] = v
		}
	}
	return out
}

// ownershipKeys are the labels Ownership returns.
var ownershipKeys = []string{OwnerLabel, OwnerNamespaceLabel, ReleasedByLabel}

// WithoutOwnership returns labels without the ownership markers (those of
// Ownership); other labels under the reserved prefix stay.
func WithoutOwnership(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		if !slices.Contains(ownershipKeys, k) {
			out[k] = v
		}
	}
	return out
}

// OwnerNamespace returns the namespace of the managed resource that labels
// say owns a widget or key. Only a namespaced marker ("n_...") has one: the
// namespace it spells out before its first '.' (namespaces hold no '.'), or
// OwnerNamespaceLabel when the marker was shortened before its '.'. When
// both say and disagree, or neither says, ok is false: such labels were not
// written by the provider, and name no namespace.
func OwnerNamespace(labels map[string]string) (ns string, ok bool) {
	rest, namespaced := strings.CutPrefix(labels[OwnerLabel], "n_")
	if !namespaced {
		return "", false
	}
	spelled, _, spells := strings.Cut(rest, ".")
	label, labelled := labels[OwnerNamespaceLabel]
	switch {
	case spells && labelled && spelled != label:
		return "", false
	case spells:
		return spelled, spelled != ""
	case labelled:
		return label, label != ""
	}
	return "", false
}

// Reaches reports whether mg may act on a widget or key that carries labels.
// A cluster-scoped resource is the platform team's and reaches anything its
// ProviderConfig reaches. A namespaced resource (a tenant's) reaches only
// what a managed resource in its own namespace owns, by the namespace the
// labels record (see OwnerNamespace), never by the marker alone: everything
// else - an unowned widget, a cluster-scoped resource's, another
// namespace's - is out of its reach. (Adopting or observing an unowned
// widget is a separate decision, made by the Widget controller.)
func Reaches(mg resource.Managed, labels map[string]string) bool {
	ns := mg.GetNamespace()
	if ns == "" {
		return true
	}
	owner, ok := OwnerNamespace(labels)
	return ok && owner == ns
}

// Released returns the ReleasedByLabel value that reserves a widget mg
// releases: mg's namespace, or ReleasedByCluster.
func Released(mg resource.Managed) string {
	if ns := mg.GetNamespace(); ns != "" {
		return ns
	}
	return ReleasedByCluster
}

// ReservedAgainst reports whether labels reserve an unowned widget for
// another scope than mg's: it was released (see Released) by a resource of
// another namespace, or by a cluster-scoped resource, and mg is namespaced.
// A cluster-scoped resource (the platform team's) may adopt any released
// widget.
func ReservedAgainst(mg resource.Managed, labels map[string]string) bool {
	by, ok := labels[ReleasedByLabel]
	return ok && mg.GetNamespace() != "" && by != mg.GetNamespace()
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
