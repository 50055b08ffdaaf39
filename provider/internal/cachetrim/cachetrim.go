// Package cachetrim makes the objects the provider caches smaller.
//
// At 10,000 Widgets the informer caches hold 10,000 Widgets and 10,000
// ProviderConfigUsages, and they are most of the provider's heap. Each
// decoded object has its own copy of every string in it, yet most strings are
// the same in every object: annotation and label keys, the API version and
// kind, the namespace, condition types, statuses and reasons, the
// ProviderConfig reference, finalizers. Transform, the cache's transform,
// replaces each of those with one shared copy. Label maps that many objects
// have with equal content share one map too: the labels of the
// ProviderConfigUsages of one ProviderConfig, and the labels in a Widget's
// spec (one team's widgets usually carry the same). Strings
// that differ between objects (names, UIDs, external names, messages, label
// values) are left alone: sharing them would save nothing and cost an entry
// each.
//
// The cache hands out deep copies (controller-runtime's cache reader copies
// every object it returns), so nothing that reads a cached object can change
// what another shares with it.
package cachetrim

import (
	"hash/maphash"
	"maps"
	"strings"
	"sync"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

// Transform drops an object's managed fields (the provider never reads them)
// and shares the strings it has in common with other objects. It changes
// nothing an equality check would see. Objects that are not Kubernetes
// objects (a cache's DeletedFinalStateUnknown) pass unchanged.
func Transform(in any) (any, error) {
	o, ok := in.(client.Object)
	if !ok {
		return in, nil
	}
	o.SetManagedFields(nil)
	if tm, ok := o.GetObjectKind().(*metav1.TypeMeta); ok {
		tm.APIVersion, tm.Kind = intern(tm.APIVersion), intern(tm.Kind)
	}
	slimMeta(o)
	switch x := o.(type) {
	case resource.ModernManaged:
		slimManaged(x)
		if ref := x.GetProviderConfigReference(); ref != nil {
			ref.Name, ref.Kind = intern(ref.Name), intern(ref.Kind)
		}
	case resource.LegacyManaged: //nolint:staticcheck // cluster-scoped MRs exist for legacy claims on purpose
		slimManaged(x)
		if ref := x.GetProviderConfigReference(); ref != nil {
			ref.Name = intern(ref.Name)
		}
	case *nsv1alpha1.ProviderConfigUsage:
		ref := &x.ProviderConfigReference
		ref.Name, ref.Kind = intern(ref.Name), intern(ref.Kind)
		slimTypedRef(&x.ResourceReference)
		x.Labels = labelMaps.share(x.Labels)
	case *clusterv1alpha1.ProviderConfigUsage:
		x.ProviderConfigReference.Name = intern(x.ProviderConfigReference.Name)
		slimTypedRef(&x.ResourceReference)
		x.Labels = labelMaps.share(x.Labels)
	}
	return in, nil
}

// slimMeta shares the object's namespace, its label and annotation keys, its
// finalizers and its owners' API versions and kinds.
func slimMeta(o metav1.Object) {
	o.SetNamespace(intern(o.GetNamespace()))
	if l := o.GetLabels(); len(l) > 0 {
		o.SetLabels(internKeys(l))
	}
	if a := o.GetAnnotations(); len(a) > 0 {
		o.SetAnnotations(internKeys(a))
	}
	f := o.GetFinalizers()
	for i := range f {
		f[i] = intern(f[i])
	}
	refs := o.GetOwnerReferences()
	for i := range refs {
		refs[i].APIVersion, refs[i].Kind = intern(refs[i].APIVersion), intern(refs[i].Kind)
	}
}

// slimManaged shares what managed resources have in common: their
// conditions' types, statuses and reasons, their management policies, and a
// Widget's size, region and observed state, the keys of its labels, and its
// spec's label maps when other Widgets have equal ones (the observed labels
// include the widget's own ownership marker, so they never equal another's).
func slimManaged(mg resource.Managed) {
	if cs := conditions(mg); cs != nil {
		for i := range cs {
			c := &cs[i]
			c.Type, c.Status, c.Reason = intern(c.Type), intern(c.Status), intern(c.Reason)
		}
	}
	p := mg.GetManagementPolicies()
	for i := range p {
		p[i] = intern(p[i])
	}
	w, ok := mg.(commonv1beta1.WidgetResource)
	if !ok {
		return
	}
	fp := w.GetWidgetParameters()
	internPtr(fp.Size)
	fp.Labels = labelMaps.share(internKeys(fp.Labels))
	ip := w.GetWidgetInitParameters()
	internPtr(ip.Region)
	internPtr(ip.Size)
	ip.Labels = labelMaps.share(internKeys(ip.Labels))
	at := w.GetWidgetObservation()
	at.State, at.Size, at.Region = intern(at.State), intern(at.Size), intern(at.Region)
	at.Labels = internKeys(at.Labels)
}

// conditions returns the conditions of the managed resource kinds the
// provider caches (the versions it reads: v1beta1).
func conditions(mg resource.Managed) []xpv2.Condition {
	switch x := mg.(type) {
	case *nsv1beta1.Widget:
		return x.Status.Conditions
	case *nsv1beta1.WidgetKey:
		return x.Status.Conditions
	case *clusterv1beta1.Widget:
		return x.Status.Conditions
	case *clusterv1beta1.WidgetKey:
		return x.Status.Conditions
	}
	return nil
}

func slimTypedRef(r *xpv2.TypedReference) {
	r.APIVersion, r.Kind = intern(r.APIVersion), intern(r.Kind)
}

// maxStrings and maxStringLen bound the shared strings. Only strings of
// which a cluster has few are shared (keys, kinds, reasons), so the bounds
// are never reached in practice; they keep objects with, say, annotation keys
// made unique on purpose from growing the table beyond 4 MiB. Strings beyond
// them are not shared.
const (
	maxStrings   = 1 << 16
	maxStringLen = 64
)

var strs = newInterner(maxStrings)

// intern returns the shared copy of s.
func intern[S ~string](s S) S { return S(strs.intern(string(s))) }

// An interner hands out one shared copy of each string it is given, for up
// to limit strings.
type interner struct {
	mu    sync.RWMutex
	m     map[string]string
	limit int
}

func newInterner(limit int) *interner { return &interner{m: map[string]string{}, limit: limit} }

func (in *interner) intern(s string) string {
	if s == "" || len(s) > maxStringLen {
		return s
	}
	in.mu.RLock()
	c, ok := in.m[s]
	in.mu.RUnlock()
	if ok {
		return c
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if c, ok := in.m[s]; ok {
		return c
	}
	if len(in.m) >= in.limit {
		return s
	}
	// A copy: s may share memory with something larger.
	c = strings.Clone(s)
	in.m[c] = c
	return c
}

func internPtr(p *string) {
	if p != nil {
		*p = intern(*p)
	}
}

// internKeys gives m shared keys, in place (values are left alone: they
// are often unique), and returns it. Assigning to a key a map already holds
// stores the key given, so no map is rebuilt: the informer runs Transform on
// every watch event, and a rebuilt map was most of its garbage.
func internKeys(m map[string]string) map[string]string {
	for k, v := range m {
		m[intern(k)] = v
	}
	return m
}

// maxMaps bounds the shared label maps, maxMapLen the entries of each: a
// map is shared only with maps of equal content, so only a cluster with
// more distinct label sets than this stops sharing new ones. The table's
// maps are the cached objects' own; only those whose objects are gone cost
// memory: at most maxMaps maps of maxMapLen entries of maxStringLen bytes,
// under 6 MiB, however many label sets objects are made with.
const (
	maxMaps   = 4096
	maxMapLen = 8
)

var labelMaps = newMapTable(maxMaps)

// A mapTable hands out one shared copy of each small string map it is
// given, by content, for up to limit maps.
type mapTable struct {
	mu    sync.Mutex
	seed  maphash.Seed
	m     map[uint64][]map[string]string
	n     int
	limit int
}

func newMapTable(limit int) *mapTable {
	return &mapTable{seed: maphash.MakeSeed(), m: map[uint64][]map[string]string{}, limit: limit}
}

// share returns the shared map equal to m, or m itself (then shared from
// now on, unless the table is full). Maps that are empty or larger than
// maxMapLen, or have a key or value longer than maxStringLen, are returned
// as they are.
func (t *mapTable) share(m map[string]string) map[string]string {
	if len(m) == 0 || len(m) > maxMapLen {
		return m
	}
	var sum uint64
	for k, v := range m {
		if len(k) > maxStringLen || len(v) > maxStringLen {
			return m
		}
		// Summed, so the order of the entries does not matter.
		sum += maphash.String(t.seed, k) ^ (maphash.String(t.seed, v) * 31)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.m[sum] {
		if maps.Equal(c, m) {
			return c
		}
	}
	if t.n >= t.limit {
		return m
	}
	t.m[sum] = append(t.m[sum], m)
	t.n++
	return m
}
