// Package widgetkey reconciles WidgetKey managed resources of both scopes
// with access keys in the Widget API, and publishes each key's secret as
// connection details - the only place it ever appears.
package widgetkey

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/clients"
	"github.com/widgetco/crossplane-widget/provider/internal/mrsetup"
	"github.com/widgetco/crossplane-widget/provider/internal/names"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// Connection detail keys a WidgetKey publishes.
const (
	DetailKey      = "key"
	DetailKeyName  = "keyName"
	DetailWidget   = "widget"
	DetailEndpoint = "endpoint"
)

// ReasonRotated is the event reason when a key whose secret was lost is
// revoked so a new one can be created.
const ReasonRotated event.Reason = "RotatedKey"

// ReasonNotRevoked is the event reason when a namespaced WidgetKey is
// deleted and the key its external name names is not one it created: the key
// is left in the Widget API.
const ReasonNotRevoked event.Reason = "KeyNotRevoked"

// API is the part of the Widget API client the controller uses.
type API interface {
	GetWidget(ctx context.Context, name string) (*widgetapi.Widget, error)
	GetKey(ctx context.Context, widget, key string) (*widgetapi.Key, error)
	ListKeys(ctx context.Context, widget string) (*widgetapi.KeyList, error)
	CreateKey(ctx context.Context, widget string, req widgetapi.CreateKeyRequest) (*widgetapi.KeyWithSecret, error)
	DeleteKey(ctx context.Context, widget, key string) error
}

// A RecentReader returns a widget as the provider read it moments ago, or
// reads it (clients.Session.RecentWidget). Never use it to decide to create a
// key.
type RecentReader interface {
	RecentWidget(ctx context.Context, name string) (*widgetapi.Widget, error)
}

// A SecretReader reads connection Secrets.
type SecretReader interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
}

type connector[T commonv1beta1.WidgetKeyResource] struct {
	kind     string
	sessions *clients.Sessions
	delay    clients.Delayer
	cache    SecretReader
	live     SecretReader
	record   event.Recorder
	now      func() time.Time
	// cp is this provider's control plane (ownership.ControlPlaneLabel).
	cp string
}

// Connect resolves the ProviderConfig and returns a client for one reconcile.
func (c *connector[T]) Connect(ctx context.Context, mg T) (managed.TypedExternalClient[T], error) {
	s, err := c.sessions.Open(ctx, mg, c.delay, c.kind, mg.GetWidgetName())
	if err != nil {
		return nil, err
	}
	return &external[T]{api: s, recent: s, cache: c.cache, live: c.live, record: c.record, now: c.now, cp: c.cp}, nil
}

// external manages one WidgetKey's key. Its API is a clients.Session, which
// handles rate limiting for every call.
type external[T commonv1beta1.WidgetKeyResource] struct {
	api API
	// recent, when set, is how Observe reads the key's widget: a widget
	// read moments ago is not read again. Create always reads it.
	recent RecentReader
	// cache reads connection Secrets from the API server or from the
	// memory of recent reads and writes (mrsetup.Env.Secrets); live reads
	// the API server, to confirm a Secret cache does not show before
	// acting on it.
	cache, live SecretReader
	record      event.Recorder
	// now tells the time key rotations are scheduled by, and how old a
	// key whose secret is missing is (LostKeyWindow).
	now func() time.Time
	// cp is this provider's control plane: keys of widgets that another
	// control plane manages are left to it.
	cp string

	// lost is set by Observe when the key exists but its secret never
	// reached the connection Secret: Create revokes it first.
	lost bool
	// lostKeys, when set, are the keys Create revokes when lost is set,
	// instead of the external name's: a rotating key's family (see
	// rotation.go). clearPrevious: Create also removes the previous key's
	// entries from the connection Secret.
	lostKeys      []string
	clearPrevious bool
	// revocable is set by Observe when it read the key and found it this
	// resource's to revoke: Delete revokes no other.
	revocable bool
	// revoke, when set, are the keys Delete revokes instead of the
	// external name's: a rotating key's family.
	revoke []string
	// rot is what Observe found of a rotating key, for Update.
	rot *rotationPlan
}

// Observe reads the key's widget and the key. It acts only within the
// resource's tenancy (see ownership.InReach): a namespaced WidgetKey reads keys
// only of widgets that a managed resource in its own namespace manages, and
// manages only keys it created itself, which the Widget API reports carrying
// its owner marker (see createdBy). Being deleted, it reports any other key
// missing, so that the resource goes and the key stays, and records an event
// saying so. Observe never changes the Widget API: a key whose secret was
// lost (the provider stopped between creating it and saving it) is reported
// missing, and Create replaces it. A WidgetKey that rotates its key is
// observed as a family of keys against its connection Secret instead (see
// rotation.go).
//
//nolint:gocognit // One linear decision table of tenancy, deletion and rotation; split, the reader loses the order in which the cases are decided.
func (e *external[T]) Observe(ctx context.Context, mg T) (managed.ExternalObservation, error) {
	name, widget := meta.GetExternalName(mg), mg.GetWidgetName()
	if name == "" {
		return managed.ExternalObservation{}, nil
	}
	if !names.ValidWidgetName(name) {
		return managed.ExternalObservation{}, errors.Errorf("external name %q is not a valid key name: use at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit", name)
	}
	if widget == "" {
		if meta.WasDeleted(mg) {
			return managed.ExternalObservation{}, nil
		}
		return managed.ExternalObservation{}, errors.New("the key's widget is not known yet: set spec.forProvider.widgetName, or a widgetNameRef/widgetNameSelector that matches a Widget")
	}
	w, err := e.observeWidget(ctx, widget)
	if widgetapi.IsNotFound(err) {
		// A key does not outlive its widget.
		return managed.ExternalObservation{}, nil
	}
	if err != nil {
		return managed.ExternalObservation{}, errors.Wrap(err, "cannot get the key's widget")
	}
	reach := ownership.InReach(mg, w.Labels)
	if !reach && meta.WasDeleted(mg) && mg.GetWidgetKeyObservation().ID == "" {
		// Out of reach, and this resource never recorded a key: none of
		// the widget's keys can be its own. Read none. (A recorded ID only
		// makes the key worth reading: whether it is this resource's is
		// the owner marker's to say.)
		return e.notRevoked(mg, outOfReachNotRevoked(mg, widget))
	}
	if !reach && !meta.WasDeleted(mg) {
		return managed.ExternalObservation{}, outOfReach(mg, widget)
	}
	if other, ok := ownership.Elsewhere(w.Labels, e.cp); ok && reach && !observeOnly(mg) {
		// A restore or migration: the other control plane's WidgetKey
		// creates, rotates and revokes the widget's keys.
		if meta.WasDeleted(mg) {
			return e.notRevoked(mg, errors.Errorf("widget %s is managed by control plane %s, and this is control plane %s: left key %s in the Widget API for that control plane's WidgetKey", widget, other, e.cp, name))
		}
		return managed.ExternalObservation{}, otherControlPlane(widget, other, e.cp)
	}

	if reach && neverCreated(mg) {
		// Nothing to read: Create makes the key.
		return managed.ExternalObservation{}, nil
	}
	if rotates(mg) && (reach || meta.WasDeleted(mg)) {
		return e.observeRotating(ctx, mg, w)
	}

	k, err := e.api.GetKey(ctx, widget, name)
	if widgetapi.IsNotFound(err) && !reach {
		return e.notRevoked(mg, outOfReachNotRevoked(mg, widget))
	}
	if widgetapi.IsNotFound(err) {
		return managed.ExternalObservation{}, nil
	}
	if err != nil {
		return managed.ExternalObservation{}, errors.Wrap(err, "cannot get key")
	}
	if mg.GetNamespace() != "" && !createdBy(mg, k) {
		if meta.WasDeleted(mg) && !reach {
			// Said as when the key does not exist: whether another
			// tenant's widget has a key of that name is not this
			// tenant's to learn.
			return e.notRevoked(mg, outOfReachNotRevoked(mg, widget))
		}
		if meta.WasDeleted(mg) {
			return e.notRevoked(mg, errors.Errorf("key %s of widget %s does not carry this WidgetKey's owner marker (%s=%s), so this WidgetKey did not create it: left the key in the Widget API; revoke it where it was created if it should go", name, widget, ownership.OwnerLabel, ownership.Marker(mg)))
		}
		return managed.ExternalObservation{}, errors.Errorf("widget %s already has a key named %s that this WidgetKey did not create, and a namespaced WidgetKey manages only keys it created: choose another external name, or remove the %s annotation so that the provider names a new key", widget, name, meta.AnnotationKeyExternalName)
	}
	// The key is this resource's to revoke: a namespaced resource's carries
	// its owner marker; a cluster-scoped resource (the platform team's) may
	// revoke any key it names.
	e.revocable = true
	if !reach {
		// Being deleted, and the key is ours but its widget no longer is
		// in reach: revoke the key, and read nothing more of the widget.
		return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, nil
	}

	var recorded []byte
	if !meta.WasDeleted(mg) && !observeOnly(mg) {
		secret, has, err := e.secretRecorded(ctx, mg)
		if err != nil {
			return managed.ExternalObservation{}, err
		}
		recorded = secret
		if !has && names.Defaulted(mg) && createdBy(mg, k) {
			if err := e.mayReplaceLost(mg, k); err != nil {
				return managed.ExternalObservation{}, err
			}
			e.lost = true
			return managed.ExternalObservation{}, nil
		}
		if !has {
			return managed.ExternalObservation{}, errors.Errorf("key %s of widget %s exists but its secret is not in the connection Secret, and the Widget API reveals a secret only when a key is created: delete the key in the Widget API, or remove the %s annotation so a new key is created", name, widget, meta.AnnotationKeyExternalName)
		}
	}

	obs := commonv1beta1.WidgetKeyObservation{ID: k.ID, WidgetName: k.Widget, Description: k.Description}
	if !k.CreatedAt.IsZero() {
		t := metav1.NewTime(k.CreatedAt.Truncate(1e9))
		obs.CreatedAt = &t
	}
	mg.SetWidgetKeyObservation(obs)
	mg.SetConditions(xpv2.Available())

	cd := managed.ConnectionDetails{DetailKeyName: []byte(name), DetailWidget: []byte(widget)}
	if len(recorded) > 0 {
		// Published again as it is: crossplane-runtime rewrites a
		// connection Secret whose data differs at all from the details.
		cd[DetailKey] = recorded
	}
	if w.Endpoint != "" {
		cd[DetailEndpoint] = []byte(w.Endpoint)
	}
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true, ConnectionDetails: cd}, nil
}

// observeWidget reads the key's widget for Observe: from the memory of
// recent reads when there is one.
func (e *external[T]) observeWidget(ctx context.Context, name string) (*widgetapi.Widget, error) {
	if e.recent != nil {
		return e.recent.RecentWidget(ctx, name)
	}
	return e.api.GetWidget(ctx, name)
}

// notRevoked reports the key missing, so that deleting mg revokes nothing and
// the resource goes, and records why in an event. A namespaced WidgetKey
// revokes only keys it created; blocking its deletion would not help, since
// nothing its tenant can change makes another key its own.
func (e *external[T]) notRevoked(mg T, why error) (managed.ExternalObservation, error) {
	e.record.Event(mg, event.Warning(ReasonNotRevoked, why))
	return managed.ExternalObservation{}, nil
}

// outOfReachNotRevoked says why deleting a namespaced WidgetKey whose widget
// is out of its reach revoked nothing, in the same words whether or not the
// widget has a key of the resource's external name.
func outOfReachNotRevoked(mg resource.Managed, widget string) error {
	return errors.Errorf("widget %s is not managed by a Widget in namespace %s, and no key of it that this WidgetKey created was found: revoked none", widget, mg.GetNamespace())
}

// otherControlPlane is the error for a WidgetKey whose widget control plane
// other manages, when this provider's is cp.
func otherControlPlane(widget, other, cp string) error {
	return errors.Errorf("widget %s is managed by control plane %s (label %s), and this is control plane %s: this WidgetKey creates, rotates and revokes none of its keys. Once a Widget here takes the widget over (annotation %s), this WidgetKey manages its key again", widget, other, ownership.ControlPlaneLabel, cp, ownership.TakeOverAnnotation)
}

// outOfReach is the error for a namespaced WidgetKey whose widget no managed
// resource of its namespace manages.
func outOfReach(mg resource.Managed, widget string) error {
	return errors.Errorf("widget %s is not managed by a Widget in namespace %s, and a namespaced WidgetKey can hold keys only of widgets that a managed resource in its own namespace manages (an Observe-only import does not count): reference a Widget of this namespace with widgetNameRef or widgetNameSelector, or manage the widget with a Widget in this namespace first", widget, mg.GetNamespace())
}

// neverCreated reports whether mg is a new, fully managed key under the name the
// provider chose that has never asked for its key: no create was ever
// started for it (crossplane-runtime saves external-create-pending before
// every create) and no key was ever observed. It is created without reading
// it first, which saves a Widget API request per new WidgetKey (its widget
// is still read: that is the tenancy check). When the name is taken after
// all (the resource was deleted with deletionPolicy Orphan and made again),
// the create fails as already existing, and the retry, whose create is now
// pending, reads the key and decides as for any other.
func neverCreated(mg commonv1beta1.WidgetKeyResource) bool {
	p := mg.GetManagementPolicies()
	return names.Defaulted(mg) &&
		meta.GetExternalCreatePending(mg).IsZero() &&
		mg.GetWidgetKeyObservation().ID == "" &&
		!meta.WasDeleted(mg) &&
		(len(p) == 0 || len(p) == 1 && p[0] == xpv2.ManagementActionAll)
}

// createdBy reports whether mg created k: the Widget API reports k carrying
// mg's owner marker and namespace (see ownership.Owns; a key marked by an older
// provider keeps its marker, since keys cannot be relabelled). The key ID in
// mg's status is no proof: anyone who may edit mg may write its status too.
func createdBy(mg commonv1beta1.WidgetKeyResource, k *widgetapi.Key) bool {
	return ownership.Owns(mg, k.Labels)
}

// secretRecorded returns the key's secret as the resource's connection
// Secret holds it, and whether it holds it. Without a connection Secret there
// is nothing to recover: it is reported held, and no secret is returned.
func (e *external[T]) secretRecorded(ctx context.Context, mg T) ([]byte, bool, error) {
	var key types.NamespacedName
	switch m := any(mg).(type) {
	case resource.LocalConnectionSecretWriterTo:
		ref := m.GetWriteConnectionSecretToReference()
		if ref == nil {
			return nil, true, nil
		}
		key = types.NamespacedName{Namespace: mg.GetNamespace(), Name: ref.Name}
	case resource.ConnectionSecretWriterTo:
		ref := m.GetWriteConnectionSecretToReference()
		if ref == nil {
			return nil, true, nil
		}
		key = types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	default:
		return nil, true, nil
	}
	if secret, err := keyOf(ctx, e.cache, key); err != nil || len(secret) > 0 {
		return secret, len(secret) > 0, err
	}
	// The first reader may lag a Secret written moments ago; never revoke
	// a key on its word alone.
	secret, err := keyOf(ctx, e.live, key)
	return secret, len(secret) > 0, err
}

// keyOf returns the key's secret in the connection Secret key, if any.
func keyOf(ctx context.Context, r SecretReader, key types.NamespacedName) ([]byte, error) {
	s := &corev1.Secret{}
	if err := r.Get(ctx, key, s); err != nil {
		if kerrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, errors.Wrapf(err, "cannot get connection Secret %s", key)
	}
	return s.Data[DetailKey], nil
}

// LostKeyWindow is how long after its creation a key whose secret is in no
// connection Secret counts as lost by the provider itself: it stopped
// between creating the key and saving its secret, so nobody can hold the
// secret, and Create revokes the key and makes a new one. An older key's
// secret may well be in use: its Secret was deleted, or a control plane was
// restored without it (docs/restore.md). Then the provider revokes nothing
// and says what is missing; a person decides.
const LostKeyWindow = 10 * time.Minute

// mayReplaceLost returns nil when key k, whose secret is in no connection
// Secret of mg, may be revoked and replaced: it was created less than
// LostKeyWindow ago (by the Widget API's clock, against the provider's).
// Otherwise it returns the error that says what is missing and what to do.
func (e *external[T]) mayReplaceLost(mg T, keys ...*widgetapi.Key) error {
	now := e.clock()
	var old []string
	for _, k := range keys {
		if k.CreatedAt.IsZero() || now.Sub(k.CreatedAt) >= LostKeyWindow {
			old = append(old, fmt.Sprintf("%s (created %s)", k.Name, timeOrUnknown(k.CreatedAt)))
		}
	}
	if len(old) == 0 {
		return nil
	}
	where := "its connection Secret"
	if ref, ok := connectionSecretKey(mg); ok {
		where = "connection Secret " + ref.String()
	}
	return errors.Errorf("the secret of key %s of widget %s is not in %s, and the key is older than %s, so its secret may be in use: the Secret was deleted, or the control plane was restored without it. The Widget API reveals a secret only when a key is created, so nothing was revoked or created: restore %s, or delete this WidgetKey to revoke the key (a Composition then makes a new one)",
		strings.Join(old, ", "), mg.GetWidgetName(), where, LostKeyWindow, where)
}

func timeOrUnknown(t time.Time) string {
	if t.IsZero() {
		return "at an unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}

// Create creates the key, marked as this resource's, and returns its secret
// as connection details. It reads the widget from the Widget API first,
// never from memory, and creates the key only when the widget is within the
// resource's reach now: this is the check that hands out a secret. A key
// whose secret was lost is revoked first: the Widget API never reveals a
// secret again, so only a new key is of use.
func (e *external[T]) Create(ctx context.Context, mg T) (managed.ExternalCreation, error) {
	name, widget := meta.GetExternalName(mg), mg.GetWidgetName()
	w, err := e.api.GetWidget(ctx, widget)
	if widgetapi.IsNotFound(err) {
		return managed.ExternalCreation{}, errors.Errorf("widget %s does not exist (yet); the key is created once it does", widget)
	}
	if err != nil {
		return managed.ExternalCreation{}, errors.Wrap(err, "cannot get the key's widget")
	}
	if !ownership.InReach(mg, w.Labels) {
		return managed.ExternalCreation{}, outOfReach(mg, widget)
	}
	if other, ok := ownership.Elsewhere(w.Labels, e.cp); ok {
		return managed.ExternalCreation{}, otherControlPlane(widget, other, e.cp)
	}
	if e.lost && e.lostKeys != nil {
		for _, n := range e.lostKeys {
			if err := e.api.DeleteKey(ctx, widget, n); err != nil && !widgetapi.IsNotFound(err) {
				return managed.ExternalCreation{}, errors.Wrapf(err, "cannot revoke key %s whose secret was lost", n)
			}
		}
		e.record.Event(mg, event.Normal(ReasonRotated, "The connection Secret holds no valid key of this WidgetKey (it was deleted, or its key revoked outside Crossplane): revoked keys "+strings.Join(e.lostKeys, ", ")+", whose secrets are lost, to create a new one"))
	}
	if e.lost && e.lostKeys == nil {
		if err := e.api.DeleteKey(ctx, widget, name); err != nil && !widgetapi.IsNotFound(err) {
			return managed.ExternalCreation{}, errors.Wrap(err, "cannot revoke key whose secret was lost")
		}
		e.record.Event(mg, event.Normal(ReasonRotated, "Key "+name+" existed but its secret was never recorded (the provider stopped between creating it and saving it); revoked it to create a new one"))
	}
	desc := ""
	if p := mg.GetWidgetKeyInitParameters(); p.Description != nil {
		desc = *p.Description
	}
	k, err := e.api.CreateKey(ctx, widget, widgetapi.CreateKeyRequest{Name: name, Labels: ownership.Labels(mg, e.cp), Description: desc})
	if widgetapi.IsAlreadyExists(err) {
		return managed.ExternalCreation{}, errors.Errorf("widget %s already has a key named %s; retrying", widget, name)
	}
	if widgetapi.IsNotFound(err) {
		return managed.ExternalCreation{}, errors.Errorf("widget %s does not exist (yet); the key is created once it does", widget)
	}
	if err != nil {
		return managed.ExternalCreation{}, errors.Wrap(err, "cannot create key")
	}
	mg.SetConditions(xpv2.Creating())
	cd := managed.ConnectionDetails{
		DetailKey:     []byte(k.Secret),
		DetailKeyName: []byte(name),
		DetailWidget:  []byte(widget),
	}
	if w.Endpoint != "" {
		// As Observe publishes them: the next reconcile then finds the
		// Secret as it wants it, and does not write it again.
		cd[DetailEndpoint] = []byte(w.Endpoint)
	}
	if e.clearPrevious {
		cd[DetailPreviousKey], cd[DetailPreviousKeyName] = nil, nil
	}
	return managed.ExternalCreation{ConnectionDetails: cd}, nil
}

// Update rotates a rotating key (see rotation.go); for any other it does
// nothing: keys have no mutable fields (the CRD makes them immutable).
func (e *external[T]) Update(ctx context.Context, mg T) (managed.ExternalUpdate, error) {
	if e.rot != nil {
		return e.updateRotating(ctx, mg)
	}
	return managed.ExternalUpdate{}, nil
}

// Delete revokes the key, if Observe found it this resource's to revoke
// (the managed reconciler calls Delete only after Observe reported the key).
// A key that is already gone is success.
func (e *external[T]) Delete(ctx context.Context, mg T) (managed.ExternalDelete, error) {
	widget := mg.GetWidgetName()
	if widget == "" || !e.revocable {
		return managed.ExternalDelete{}, nil
	}
	for _, n := range e.revoke {
		if err := e.api.DeleteKey(ctx, widget, n); err != nil && !widgetapi.IsNotFound(err) {
			return managed.ExternalDelete{}, errors.Wrapf(err, "cannot revoke key %s", n)
		}
	}
	if e.revoke != nil {
		return managed.ExternalDelete{}, nil
	}
	err := e.api.DeleteKey(ctx, widget, meta.GetExternalName(mg))
	if err != nil && !widgetapi.IsNotFound(err) {
		return managed.ExternalDelete{}, errors.Wrap(err, "cannot revoke key")
	}
	return managed.ExternalDelete{}, nil
}

// Disconnect is a no-op: the HTTP client is shared.
func (e *external[T]) Disconnect(context.Context) error { return nil }

func observeOnly(mg resource.Managed) bool {
	p := mg.GetManagementPolicies()
	return len(p) == 1 && p[0] == xpv2.ManagementActionObserve
}

// Setup adds a controller that reconciles WidgetKeys of the kind gvk, whose
// Go type is T.
func Setup[T commonv1beta1.WidgetKeyResource](mgr ctrl.Manager, o controller.Options, d mrsetup.Deps, gvk schema.GroupVersionKind, newObj func() T, newList func() resource.ManagedList, newWidget func() client.Object) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), newObj(), indexController, controllerUID); err != nil {
		return errors.Wrap(err, "cannot index WidgetKeys by controller")
	}
	return mrsetup.Setup(mgr, o, d, gvk, newObj, newList, func(env mrsetup.Env) managed.TypedExternalConnector[T] {
		return &connector[T]{kind: env.Kind, sessions: d.Sessions, delay: env.Limiter, cache: env.Secrets, live: mgr.GetAPIReader(), record: env.Record, now: d.Clock(), cp: d.ControlPlane}
	}, mrsetup.WithWakeUp(func(mg resource.Managed) time.Time {
		if k, ok := mg.(commonv1beta1.WidgetKeyResource); ok {
			return NextWakeUp(k)
		}
		return time.Time{}
	}),
		// Composed with its Widget, a new key waits for the Widget's
		// external name without an event or a status write, and is
		// requeued as soon as the Widget has one.
		mrsetup.WithPendingReferences(mrsetup.PendingReferenceGrace),
		mrsetup.WithWatch(newWidget(), handler.EnqueueRequestsFromMapFunc(keysWaitingFor(mgr.GetClient(), newList)), named()))
}
