package mrsetup

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// driftFirst is layer 3 (see the package comment). It applies the global
// reconcile rate limit to every request except
// those the change feed made because a resource's widget changed: drift is
// repaired at once instead of queueing behind the token bucket with polls
// and new resources. Those requests are still bounded by the controller's
// concurrent reconciles, the feed's dedup of a resource's own writes, and
// the Widget API's own limits (429s and the per-host connection cap).
type driftFirst struct {
	kind    string
	feed    FeedSource
	direct  reconcile.Reconciler
	limited reconcile.Reconciler
}

func (d *driftFirst) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if d.feed.Changed(d.kind, req.NamespacedName) {
		return d.direct.Reconcile(ctx, req)
	}
	return d.limited.Reconcile(ctx, req)
}
