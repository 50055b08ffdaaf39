package config

import (
	"context"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// crossplane-runtime's ProviderConfig reconciler ends every recount with an
// update of the ProviderConfig (to add its finalizer, which is there after the
// first) and an update of its status (the number of users, which a burst of
// new managed resources changes once, not at every recount). At the
// 1,000-claim load that was 1,506 writes, most of which changed nothing. The
// reconciler reads the ProviderConfig at the start of each recount; the
// client below remembers what it read and does not send a write of an object
// equal to it (layer unchangedRecount; its assumptions are pinned by
// TestRuntimeRecountReadsBeforeItWrites and
// TestRuntimeRecountWritesWhatItReadWhenNothingChanged).

// unchangedSkipped is a client that does not send an update, or a status
// update, of an object equal to the object it last read or wrote under the
// same name and Go type, and lists without copies.
type unchangedSkipped struct {
	client.Client

	mu   sync.Mutex
	last map[objectKey]client.Object
}

type objectKey struct {
	t reflect.Type
	types.NamespacedName
}

func newUnchangedSkipped(c client.Client) *unchangedSkipped {
	return &unchangedSkipped{Client: c, last: map[objectKey]client.Object{}}
}

func keyOf(o client.Object) objectKey {
	return objectKey{t: reflect.TypeOf(o), NamespacedName: client.ObjectKeyFromObject(o)}
}

func (c *unchangedSkipped) Get(ctx context.Context, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, o, opts...); err != nil {
		c.forget(o, key)
		return err
	}
	c.remember(o)
	return nil
}

// List lists without copying the cached objects (layer copyFreeRecount,
// safe while TestRuntimeRecountOnlyReadsItsUsages holds). The reconciler lists all
// the usages of a ProviderConfig at each recount (10,000 at 10,000 managed
// resources, once a UsageDebounce while they are being created), and only
// reads them or deletes one; copies of them all were megabytes of heap per
// recount.
func (c *unchangedSkipped) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	return c.Client.List(ctx, l, append(opts, client.UnsafeDisableDeepCopy)...)
}

func (c *unchangedSkipped) Update(ctx context.Context, o client.Object, opts ...client.UpdateOption) error {
	if len(opts) == 0 && c.unchanged(o) {
		return nil
	}
	if err := c.Client.Update(ctx, o, opts...); err != nil {
		c.forget(o, client.ObjectKeyFromObject(o))
		return err
	}
	c.remember(o)
	return nil
}

func (c *unchangedSkipped) Delete(ctx context.Context, o client.Object, opts ...client.DeleteOption) error {
	c.forget(o, client.ObjectKeyFromObject(o))
	return c.Client.Delete(ctx, o, opts...)
}

func (c *unchangedSkipped) Status() client.SubResourceWriter {
	return unchangedStatusSkipped{SubResourceWriter: c.Client.Status(), c: c}
}

type unchangedStatusSkipped struct {
	client.SubResourceWriter
	c *unchangedSkipped
}

func (s unchangedStatusSkipped) Update(ctx context.Context, o client.Object, opts ...client.SubResourceUpdateOption) error {
	if len(opts) == 0 && s.c.unchanged(o) {
		return nil
	}
	if err := s.SubResourceWriter.Update(ctx, o, opts...); err != nil {
		s.c.forget(o, client.ObjectKeyFromObject(o))
		return err
	}
	s.c.remember(o)
	return nil
}

// unchanged reports whether o equals the object last read or written under
// its name: an update would change nothing.
func (c *unchangedSkipped) unchanged(o client.Object) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	last, ok := c.last[keyOf(o)]
	return ok && last.GetResourceVersion() == o.GetResourceVersion() && equality.Semantic.DeepEqual(last, o)
}

func (c *unchangedSkipped) remember(o client.Object) {
	cp, ok := o.DeepCopyObject().(client.Object)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last[keyOf(o)] = cp
}

func (c *unchangedSkipped) forget(o client.Object, key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, objectKey{t: reflect.TypeOf(o), NamespacedName: key})
}
