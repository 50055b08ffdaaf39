package mrsetup

import (
	"context"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/provider/internal/ttlmap"
)

// Layer 8, secretMemo (see the package comment;
// TestRuntimeReadsConnectionSecretsWithAPlainGet pins what it assumes of
// crossplane-runtime's publisher).
//
// Connection Secrets are read from the API server, never from an informer
// cache (main.go: a cluster holds many Secrets that are not the provider's).
// crossplane-runtime's connection publisher reads the resource's connection
// Secret on every reconcile, and the WidgetKey controller reads it once more
// to check that the key's secret is there; while a control plane converges a
// resource is reconciled many times a minute, and those reads were a tenth of
// all Secret reads at the 1,000-claim load (notes/convergence-log.md#next-2026-11-25). So the
// connection Secrets the managed reconciler reads and writes are remembered
// for a while: a reconcile soon after the last one reads the Secret from
// memory.
//
// The memory holds the API server's answer to this process's own last read or
// write of the Secret, so it can only be stale by a change someone else made
// since. Such a change is seen when the entry expires: secretMemoTTL is half
// the poll interval at most, so every poll still reads the Secret from the
// API server, as crossplane-runtime does; only the reconciles in between
// (status changes, the change feed, retries) are served from memory.

// secretMemoMaxTTL bounds how long a remembered Secret is used.
const secretMemoMaxTTL = 5 * time.Minute

// secretMemoTTL is how long a connection Secret is remembered when
// resources are polled every poll.
func secretMemoTTL(poll time.Duration) time.Duration {
	return min(secretMemoMaxTTL, poll/2)
}

// secretMemo is a client that remembers the connection Secrets (of
// crossplane-runtime's connection Secret type) it reads and writes for ttl,
// and answers Gets of them from memory meanwhile. Any other object, or a Get
// with options, goes to the wrapped client.
type secretMemo struct {
	client.Client
	// saved, when set, is told of each read answered from memory.
	saved func()

	// m holds the API server's answers, never changed once kept: they are
	// copied in and out.
	m *ttlmap.Map[types.NamespacedName, *corev1.Secret]
}

func newSecretMemo(c client.Client, ttl time.Duration) *secretMemo {
	return &secretMemo{Client: c, m: ttlmap.New[types.NamespacedName, *corev1.Secret](ttl)}
}

func (c *secretMemo) Get(ctx context.Context, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
	s, ok := o.(*corev1.Secret)
	if !ok || len(opts) > 0 {
		return c.Client.Get(ctx, key, o, opts...)
	}
	// crossplane-runtime's publisher reads into the Secret it wants, owner
	// reference and all: a Secret remembered with another controller is
	// not used (a resource deleted and made again under the same name has
	// a new UID, and its old Secret is being garbage collected).
	var owner types.UID
	if ref := metav1.GetControllerOf(s); ref != nil {
		owner = ref.UID
	}
	if c.recall(key, owner, s) {
		if c.saved != nil {
			c.saved()
		}
		return nil
	}
	if err := c.Client.Get(ctx, key, o, opts...); err != nil {
		c.forget(key)
		return err
	}
	c.remember(s)
	return nil
}

func (c *secretMemo) Create(ctx context.Context, o client.Object, opts ...client.CreateOption) error {
	return c.wrote(o, c.Client.Create(ctx, o, opts...))
}

func (c *secretMemo) Update(ctx context.Context, o client.Object, opts ...client.UpdateOption) error {
	return c.wrote(o, c.Client.Update(ctx, o, opts...))
}

func (c *secretMemo) Patch(ctx context.Context, o client.Object, p client.Patch, opts ...client.PatchOption) error {
	return c.wrote(o, c.Client.Patch(ctx, o, p, opts...))
}

func (c *secretMemo) Delete(ctx context.Context, o client.Object, opts ...client.DeleteOption) error {
	if _, ok := o.(*corev1.Secret); ok {
		c.forget(client.ObjectKeyFromObject(o))
	}
	return c.Client.Delete(ctx, o, opts...)
}

// wrote remembers the Secret o as the API server returned it after a write,
// or forgets it when the write failed: its state is then not known.
func (c *secretMemo) wrote(o client.Object, err error) error {
	s, ok := o.(*corev1.Secret)
	if !ok {
		return err
	}
	if err != nil {
		// A create that found the Secret already there says nothing
		// about its contents either.
		c.forget(client.ObjectKeyFromObject(o))
		return err
	}
	c.remember(s)
	return nil
}

// recall copies the remembered Secret key into s, if it was remembered less
// than ttl ago and, when owner is set, is controlled by owner.
func (c *secretMemo) recall(key types.NamespacedName, owner types.UID, s *corev1.Secret) bool {
	kept, ok := c.m.Get(key)
	if !ok {
		return false
	}
	if ref := metav1.GetControllerOf(kept); owner != "" && (ref == nil || ref.UID != owner) {
		return false
	}
	kept.DeepCopyInto(s)
	return true
}

func (c *secretMemo) remember(s *corev1.Secret) {
	key := client.ObjectKeyFromObject(s)
	if s.Type != resource.SecretTypeConnection {
		c.forget(key)
		return
	}
	cp := s.DeepCopy()
	cp.ManagedFields = nil
	c.m.Put(key, cp)
}

func (c *secretMemo) forget(key types.NamespacedName) {
	c.m.Delete(key)
}
