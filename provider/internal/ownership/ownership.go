// Package ownership decides which managed resource owns a widget or key:
// the ownership labels a resource puts on what it creates (its marker, and
// its namespace where the marker cannot spell it, and its control plane),
// whether labels name a resource as the owner, what a namespaced resource
// may reach, the reservation a released widget keeps for the scope that
// released it, and what a second control plane with a resource for the same
// widget says on it (contest.go).
package ownership

import (
	"crypto/sha256"
	"encoding/base32"
	"maps"
	"slices"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/names"
)

// OwnerLabel marks the managed resource that manages a widget. Its prefix is
// reserved: users cannot set labels under it (the CRD rejects them).
const OwnerLabel = commonv1beta1.OwnershipLabelPrefix + "owner"

// NamespaceLabel records the namespace of the namespaced managed
// resource that manages a widget or created a key when OwnerLabel cannot say:
// a marker longer than a label value is shortened with a hash, which cuts
// namespaces of more than 33 characters. It holds the whole namespace (a
// namespace fits a label value). Other resources do not set it, so they keep
// a label to spare for users (the Widget API allows 32).
const NamespaceLabel = commonv1beta1.OwnershipLabelPrefix + "owner-namespace"

// ReleasedByLabel reserves a released widget (see ReleasedBy) for the scope of
// the resource that released it: the namespace of a namespaced resource, or
// ReleasedByCluster. It stays until a resource that may adopt the widget
// (see ReservedAgainst) does, or the platform team removes it in the Widget
// API.
const ReleasedByLabel = commonv1beta1.OwnershipLabelPrefix + "released-by"

// ReleasedByCluster is ReleasedByLabel's value on a widget a cluster-scoped
// resource released. It cannot be a namespace's name (a DNS label), so no
// namespace matches it.
const ReleasedByCluster = "_cluster-scoped"

// Marker returns the ownership marker value of a managed resource: which
// resource, in which scope, manages a widget. It is stable across a delete
// and re-create of the same resource, so re-importing an orphaned widget
// with the same resource works, while any other resource is refused.
//
// The marker is "n_<namespace>.<name>" or "c_<name>" when that fits a label
// value. A longer one keeps its first 36 characters and appends 128 bits of
// a SHA-256 of the whole, so no resource can search for a name whose marker
// equals another's, however long their shared prefix.
func Marker(mg resource.Managed) string {
	id := markerID(mg)
	if len(id) <= names.MaxLength {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	h := markerHash.EncodeToString(sum[:markerHashBytes])
	head := strings.TrimRight(id[:names.MaxLength-len(h)-1], "-._")
	return head + "-" + h
}

// markerHashBytes is how much of a hash a shortened marker keeps: 128 bits,
// 26 characters of markerHash.
const markerHashBytes = 16

// markerHash spells a shortened marker's hash: lowercase, no padding, and
// no '-', '.' or '_', so a marker's hash never looks like its head.
var markerHash = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// legacyMarker returns the marker that provider versions before 128-bit
// markers wrote: the same as Marker when it fits a label value, else a
// 52-character head and a 40-bit hash. Owns accepts it, with the namespace
// the widget's labels record, so that widgets and keys marked by those
// versions keep their owner; the Widget controller rewrites a widget's to
// Marker's (keys cannot be relabelled).
func legacyMarker(mg resource.Managed) string {
	id := markerID(mg)
	return names.Fit(id, id)
}

// markerID is the unshortened marker of mg.
func markerID(mg resource.Managed) string {
	if ns := mg.GetNamespace(); ns != "" {
		return "n_" + ns + "." + mg.GetName()
	}
	return "c_" + mg.GetName()
}

// Owns reports whether labels mark mg as the owner of a widget or key: its
// marker (Marker's, or legacyMarker's from an older provider) and the
// namespace the labels record (see Namespace) is mg's, or, for a
// cluster-scoped mg, none. Checking the namespace too means that a marker
// equal to mg's is not enough: a widget another namespace owns, whatever
// its marker, is never mg's.
func Owns(mg resource.Managed, labels map[string]string) bool {
	v := labels[OwnerLabel]
	if v == "" || v != Marker(mg) && v != legacyMarker(mg) {
		return false
	}
	ns, ok := Namespace(labels)
	if mg.GetNamespace() == "" {
		_, labelled := labels[NamespaceLabel]
		return !ok && !labelled
	}
	return ok && ns == mg.GetNamespace()
}

// Migrates reports whether labels mark mg as the owner with a marker of an
// older format, which mg should rewrite to Labels(mg).
func Migrates(mg resource.Managed, labels map[string]string) bool {
	return Owns(mg, labels) && labels[OwnerLabel] != Marker(mg)
}

// Labels returns the ownership labels mg puts on every widget and key it
// creates: OwnerLabel; for a namespaced resource whose marker does not
// spell out its namespace, NamespaceLabel; and, when the provider knows
// its control plane (cp is not empty), ControlPlaneLabel.
func Labels(mg resource.Managed, cp string) map[string]string {
	m := map[string]string{OwnerLabel: Marker(mg)}
	if ns := mg.GetNamespace(); ns != "" {
		if got, ok := Namespace(m); !ok || got != ns {
			m[NamespaceLabel] = ns
		}
	}
	if cp != "" {
		m[ControlPlaneLabel] = cp
	}
	return m
}

// Of returns the ownership markers among labels: OwnerLabel,
// NamespaceLabel, ReleasedByLabel and ControlPlaneLabel, where set. A
// widget a resource manages carries exactly that resource's Labels. A
// contest's labels (see Contest) are not markers: the owner leaves them as
// they are.
func Of(labels map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		if v, ok := labels[k]; ok {
			out[k] = v
		}
	}
	return out
}

// keys are the labels Of returns.
var keys = []string{OwnerLabel, NamespaceLabel, ReleasedByLabel, ControlPlaneLabel}

// Without returns labels without the ownership markers (those of Of) and
// without a contest's labels (those of ContestOf); other labels under the
// reserved prefix stay.
func Without(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		if !slices.Contains(keys, k) && !slices.Contains(contestKeys, k) {
			out[k] = v
		}
	}
	return out
}

// With returns a copy of labels with extra's set over them.
func With(labels, extra map[string]string) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, extra)
	return out
}

// Namespace returns the namespace of the managed resource that labels
// say owns a widget or key. Only a namespaced marker ("n_...") has one: the
// namespace it spells out before its first '.' (namespaces hold no '.'), or
// NamespaceLabel when the marker was shortened before its '.'. When
// both say and disagree, or neither says, ok is false: such labels were not
// written by the provider, and name no namespace.
func Namespace(labels map[string]string) (ns string, ok bool) {
	rest, namespaced := strings.CutPrefix(labels[OwnerLabel], "n_")
	if !namespaced {
		return "", false
	}
	spelled, _, spells := strings.Cut(rest, ".")
	label, labelled := labels[NamespaceLabel]
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

// InReach reports whether mg may act on a widget or key that carries labels.
// A cluster-scoped resource is the platform team's and reaches anything its
// ProviderConfig reaches. A namespaced resource (a tenant's) reaches only
// what a managed resource in its own namespace owns, by the namespace the
// labels record (see Namespace), never by the marker alone: everything
// else - an unowned widget, a cluster-scoped resource's, another
// namespace's - is out of its reach. (Adopting or observing an unowned
// widget is a separate decision, made by the Widget controller.)
func InReach(mg resource.Managed, labels map[string]string) bool {
	ns := mg.GetNamespace()
	if ns == "" {
		return true
	}
	owner, ok := Namespace(labels)
	return ok && owner == ns
}

// ReleasedBy returns the ReleasedByLabel value that reserves a widget mg
// releases: mg's namespace, or ReleasedByCluster.
func ReleasedBy(mg resource.Managed) string {
	if ns := mg.GetNamespace(); ns != "" {
		return ns
	}
	return ReleasedByCluster
}

// ReservedAgainst reports whether labels reserve an unowned widget for
// another scope than mg's: it was released (see ReleasedBy) by a resource of
// another namespace, or by a cluster-scoped resource, and mg is namespaced.
// A cluster-scoped resource (the platform team's) may adopt any released
// widget.
func ReservedAgainst(mg resource.Managed, labels map[string]string) bool {
	by, ok := labels[ReleasedByLabel]
	return ok && mg.GetNamespace() != "" && by != mg.GetNamespace()
}

// Describe turns a marker back into words for error messages.
func Describe(v string) string {
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
