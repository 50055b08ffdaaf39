package mrsetup

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The client the managed reconciler of each kind uses: it records the
// controller's writes for freshness (fresh.go) and the statuses the API
// server has for statusMemo (status.go).

// writeRecorder is a client that records in fresh (when set) every
// successful write of a managed resource of the controller's kind (isKind),
// and in status (when set) the status the API server has of each (see
// status.go), so that status updates that change nothing are not sent.
type writeRecorder struct {
	client.Client
	fresh  *freshness
	status *statusMemo
	isKind func(client.Object) bool
	// skipped, when set, is told of each status update not sent.
	skipped func()
}

func (c writeRecorder) Update(ctx context.Context, o client.Object, opts ...client.UpdateOption) error {
	before := o.GetResourceVersion()
	if err := c.Client.Update(ctx, o, opts...); err != nil {
		return err
	}
	c.record(o, before)
	return nil
}

func (c writeRecorder) Patch(ctx context.Context, o client.Object, p client.Patch, opts ...client.PatchOption) error {
	before := o.GetResourceVersion()
	if err := c.Client.Patch(ctx, o, p, opts...); err != nil {
		return err
	}
	c.record(o, before)
	return nil
}

func (c writeRecorder) Status() client.SubResourceWriter {
	return statusRecorder{SubResourceWriter: c.Client.Status(), c: c}
}

func (c writeRecorder) record(o client.Object, before string) {
	if !c.isKind(o) {
		return
	}
	if c.fresh != nil {
		c.fresh.wrote(o, before)
	}
	if c.status != nil {
		c.status.remember(o)
	}
}

type statusRecorder struct {
	client.SubResourceWriter
	c writeRecorder
}

func (s statusRecorder) Update(ctx context.Context, o client.Object, opts ...client.SubResourceUpdateOption) error {
	if s.c.status != nil && s.c.isKind(o) && s.c.status.unchanged(o) {
		if s.c.skipped != nil {
			s.c.skipped()
		}
		return nil
	}
	before := o.GetResourceVersion()
	if err := s.SubResourceWriter.Update(ctx, o, opts...); err != nil {
		return err
	}
	s.c.record(o, before)
	return nil
}

func (s statusRecorder) Patch(ctx context.Context, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	before := o.GetResourceVersion()
	if err := s.SubResourceWriter.Patch(ctx, o, p, opts...); err != nil {
		return err
	}
	s.c.record(o, before)
	return nil
}

// WithClient returns mgr with c as its client: crossplane-runtime's
// reconcilers (managed.NewReconciler, providerconfig.NewReconciler) take
// their client from the manager.
func WithClient(mgr ctrl.Manager, c client.Client) ctrl.Manager {
	return clientManager{Manager: mgr, c: c}
}

type clientManager struct {
	ctrl.Manager
	c client.Client
}

func (m clientManager) GetClient() client.Client { return m.c }

// Get reads o and remembers its status.
func (c writeRecorder) Get(ctx context.Context, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, o, opts...); err != nil {
		return err
	}
	if c.status != nil && c.isKind(o) {
		c.status.remember(o)
	}
	return nil
}
