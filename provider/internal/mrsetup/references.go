package mrsetup

import (
	"context"
	"slices"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
)

// A NamespaceReferencer names the namespaces its references and selectors
// point into.
type NamespaceReferencer interface {
	// ReferencedNamespaces returns, by field path, each namespace a
	// reference or selector names explicitly.
	ReferencedNamespaces() map[string]string
}

// LocalReferences wraps a ReferenceResolver so that a namespaced managed
// resource resolves references only within its own namespace: one that names
// another namespace fails before anything is read there. The CRDs refuse such
// references too; this also covers objects stored before they did.
// Cluster-scoped resources are the platform team's and are not confined.
func LocalReferences(r managed.ReferenceResolver) managed.ReferenceResolver {
	return localReferences{next: r}
}

type localReferences struct{ next managed.ReferenceResolver }

func (l localReferences) ResolveReferences(ctx context.Context, mg resource.Managed) error {
	ns := mg.GetNamespace()
	if r, ok := mg.(NamespaceReferencer); ok && ns != "" {
		refs := r.ReferencedNamespaces()
		paths := make([]string, 0, len(refs))
		for p := range refs {
			paths = append(paths, p)
		}
		slices.Sort(paths)
		for _, p := range paths {
			if refs[p] != ns {
				return errors.Errorf("%s is %q, but a namespaced resource can reference only resources in its own namespace %q: remove %s", p, refs[p], ns, p)
			}
		}
	}
	return l.next.ResolveReferences(ctx, mg)
}
