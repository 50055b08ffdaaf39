package mrsetup

import (
	"context"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// PendingReferenceGrace is how long a new resource waits quietly for what
// its references select to be created (WithPendingReferences). Past it, a
// reference that cannot be resolved is the error crossplane-runtime makes of
// it: an event and a ReconcileError condition.
const PendingReferenceGrace = time.Minute

// WithPendingReferences has a resource created less than grace ago wait
// quietly while its references select nothing yet, or select a resource
// without an external name yet: a composition that creates a Widget and its
// WidgetKeys at once, as function-patch-and-transform does, would otherwise
// give every new WidgetKey a warning event and a ReconcileError condition
// (one more status write, and one more reconcile of its XR) for what is
// only the order in which things are created.
func WithPendingReferences(grace time.Duration) Option {
	return func(o *options) { o.pendingGrace = grace }
}

// WithWatch has the controller also watch obj: a change h maps to resources
// of the kind, filtered by preds, requeues them. A WidgetKey that waits for
// its Widget's external name (WithPendingReferences) is requeued when the
// Widget gets one, rather than after its work queue's backoff.
func WithWatch(obj client.Object, h handler.EventHandler, preds ...predicate.Predicate) Option {
	return func(o *options) { o.watches = append(o.watches, watch{obj: obj, handler: h, preds: preds}) }
}

type watch struct {
	obj     client.Object
	handler handler.EventHandler
	preds   []predicate.Predicate
}

// pendingReferences wraps a ReferenceResolver: a failure to resolve that is
// only a referenced resource not created or not named yet, of a resource
// created less than grace ago, is returned as a Conflict. crossplane-runtime's
// managed reconciler requeues a resource whose references fail to resolve
// with a Conflict (with its work queue's backoff) without an event or a
// status write (TestRuntimeConflictResolvingReferencesIsQuiet).
type pendingReferences struct {
	next  managed.ReferenceResolver
	grace time.Duration
	now   func() time.Time
}

func (p pendingReferences) ResolveReferences(ctx context.Context, mg resource.Managed) error {
	err := p.next.ResolveReferences(ctx, mg)
	if err == nil || !referencePending(err) || p.now().Sub(mg.GetCreationTimestamp().Time) >= p.grace {
		return err
	}
	return kerrors.NewConflict(schema.GroupResource{}, mg.GetName(), errors.Wrap(err, "waiting for the referenced resource"))
}

// referencePending reports whether err, from crossplane-runtime's reference
// resolver, says only that the referenced resource does not exist or has no
// value yet. The resolver's errors have no types; their texts are pinned by
// TestRuntimeReferenceErrors.
func referencePending(err error) bool {
	if kerrors.IsNotFound(err) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, errRefNoMatches) || strings.Contains(msg, errRefNoValue)
}

// The texts of crossplane-runtime v2.4.0's reference errors
// (pkg/reference/reference.go).
const (
	errRefNoMatches = "no resources matched selector"
	errRefNoValue   = "referenced field was empty"
)
