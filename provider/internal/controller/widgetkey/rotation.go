package widgetkey

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// Key rotation (spec.forProvider.rotation).
//
// A rotating WidgetKey owns a family of keys in the Widget API: the key named
// by its external name (generation 0) and the keys its rotations created,
// "<external name>-r<n>" (see rotatedName), each carrying the resource's
// owner marker. Which of them are in use is written in one place, the
// connection Secret: key and keyName are the current key, previousKey and
// previousKeyName the key the last rotation replaced, until it is revoked.
// When each key was created is the Widget API's word (createdAt). Status only
// reports; no decision to revoke rests on it.
//
// A reconcile compares the two (Observe) and takes at most these steps, in
// this order (Update), each idempotent:
//
//  1. revoke every owned key of the family that the Secret names in neither
//     entry ("unused": created by a rotation whose Secret write never
//     happened);
//  2. revoke the previous key once the overlap after the current key's
//     creation has passed, and drop it from the Secret;
//  3. when a rotation is due and no previous key is left, create the next
//     key of the family, and write it to the Secret as key, with the
//     current key as previousKey (one Secret update).
//
// Invariant: the Secret's key names a key that exists, except when someone
// revokes it outside Crossplane; a crash at any point leaves at most one key
// the Secret does not name, which step 1 of the next reconcile revokes.
// Crash by crash:
//
//   - after step 1 or 2's revoke, before the Secret is written: the Secret
//     still names the revoked previous key as previousKey; key is untouched
//     and valid. The next Observe finds previousKeyName gone from the API and
//     drops it from the Secret.
//   - after step 3's create, before the Secret is written: the new key exists
//     and its secret is lost; the Secret still holds the current key, valid
//     (it is revoked only after a later rotation's overlap). The next
//     reconcile revokes the new key (step 1) and, the rotation still due,
//     creates it again under the same name.
//   - after the Secret is written, before the status is: the Secret and the
//     API already say everything; the next Observe rebuilds the status.
//
// Every revocation is decided on the Secret as the API server has it (never
// on a cached copy alone: a copy that lags the provider's own last write
// could name the previous key as current), and on the owner marker: a
// namespaced WidgetKey never revokes a key it did not create.

// Connection detail keys a rotating WidgetKey adds during an overlap.
const (
	DetailPreviousKey     = "previousKey"
	DetailPreviousKeyName = "previousKeyName"
)

// Event reasons of key rotation.
const (
	// ReasonKeyRotated: a rotation created a new key.
	ReasonKeyRotated event.Reason = "KeyRotated"
	// ReasonPreviousKeyRevoked: the previous key was revoked after its
	// overlap.
	ReasonPreviousKeyRevoked event.Reason = "PreviousKeyRevoked"
	// ReasonUnusedKeyRevoked: a key a rotation created, whose secret never
	// reached the connection Secret, was revoked.
	ReasonUnusedKeyRevoked event.Reason = "UnusedKeyRevoked"
)

// rotatedSuffix separates a key family's base name from a generation.
const rotatedSuffix = "-r"

// rotatedName returns the name of the n-th rotated key (n >= 1) of the
// family base: "<base>-r<n>", base shortened to keep within 63 characters.
func rotatedName(base string, n int) string {
	suffix := rotatedSuffix + strconv.Itoa(n)
	keep := min(len(base), widgetapi.MaxNameLength-len(suffix))
	return strings.TrimRight(base[:keep], "-") + suffix
}

// generation returns n when name is rotatedName(base, n), 0 when it is base,
// and -1 when it is no key of the family.
func generation(base, name string) int {
	if name == base {
		return 0
	}
	i := strings.LastIndex(name, rotatedSuffix)
	if i < 0 {
		return -1
	}
	n, err := strconv.Atoi(name[i+len(rotatedSuffix):])
	if err != nil || n < 1 || rotatedName(base, n) != name {
		return -1
	}
	return n
}

// rotates reports whether mg's keys are handled as a family (see above): it
// asks for rotation, or an earlier rotation left it with a key other than
// its external name's, or a previous key.
func rotates(mg commonv1beta1.WidgetKeyResource) bool {
	if observeOnly(mg) {
		return false
	}
	if mg.GetKeyRotation() != nil {
		return true
	}
	o := mg.GetWidgetKeyObservation()
	return o.Previous != nil || o.Name != "" && o.Name != meta.GetExternalName(mg)
}

// A rotationPlan is what Observe found of a rotating WidgetKey's keys and
// what Update must do about them.
type rotationPlan struct {
	widget, endpoint string
	// secret is the connection Secret's data as the API server holds it.
	secret map[string][]byte
	// current and previous are the keys the Secret names, as the Widget
	// API reports them; previous is nil when there is none, or it is gone.
	current, previous *widgetapi.Key
	// unused are owned keys of the family the Secret does not name.
	unused []string
	// revokePrevious: the overlap has passed.
	revokePrevious bool
	revokeAt       time.Time
	// rotate: a rotation is due now; next is when one is due.
	rotate bool
	next   time.Time
	// honours is the requestedAt the rotation honours, if it does.
	honours *metav1.Time
}

// String describes the plan without the connection Secret's data: a plan
// holds key secrets, which must not reach a log or an error.
func (p *rotationPlan) String() string {
	var b strings.Builder
	b.WriteString("rotation plan for widget " + p.widget)
	if p.current != nil {
		b.WriteString(": current key " + p.current.Name)
	}
	if p.previous != nil {
		b.WriteString(", previous key " + p.previous.Name)
	}
	if len(p.unused) > 0 {
		b.WriteString(", unused keys " + strings.Join(p.unused, " "))
	}
	b.WriteString(", revoke previous " + strconv.FormatBool(p.revokePrevious) + ", rotate " + strconv.FormatBool(p.rotate) + " (secrets redacted)")
	return b.String()
}

// GoString implements fmt.GoStringer so that %#v redacts too.
func (p *rotationPlan) GoString() string { return p.String() }

// upToDate reports whether the plan has nothing for Update to do.
func (p *rotationPlan) upToDate() bool {
	return len(p.unused) == 0 && !p.revokePrevious && !p.rotate
}

// ownedFamily returns the keys of widget that belong to mg's family and
// carry its owner marker, by name, and the key of mg's external name,
// whoever created it (nil when there is none).
func (e *external[T]) ownedFamily(ctx context.Context, mg T) (map[string]*widgetapi.Key, *widgetapi.Key, error) {
	base := meta.GetExternalName(mg)
	l, err := e.api.ListKeys(ctx, mg.GetWidgetName())
	if err != nil {
		return nil, nil, err
	}
	owned := map[string]*widgetapi.Key{}
	var named *widgetapi.Key
	for i := range l.Items {
		k := &l.Items[i]
		if k.Name == base {
			named = k
		}
		if generation(base, k.Name) >= 0 && createdBy(mg, k) {
			owned[k.Name] = k
		}
	}
	return owned, named, nil
}

// observeRotating is Observe for a WidgetKey whose keys are a family (see
// rotates). w is the key's widget, within the resource's reach unless it is
// being deleted.
func (e *external[T]) observeRotating(ctx context.Context, mg T, w *widgetapi.Widget) (managed.ExternalObservation, error) {
	owned, named, err := e.ownedFamily(ctx, mg)
	if widgetapi.IsNotFound(err) {
		return managed.ExternalObservation{}, nil
	}
	if err != nil {
		return managed.ExternalObservation{}, errors.Wrap(err, "cannot list the widget's keys")
	}
	if meta.WasDeleted(mg) {
		// Delete revokes every key of the family this resource created,
		// and no other.
		e.revoke = sortedNames(owned)
		if len(e.revoke) == 0 {
			return managed.ExternalObservation{}, nil
		}
		e.revocable = true
		return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, nil
	}
	if mg.GetNamespace() != "" && named != nil && !createdBy(mg, named) {
		return managed.ExternalObservation{}, errors.Errorf("widget %s already has a key named %s that this WidgetKey did not create, and a namespaced WidgetKey manages only keys it created: choose another external name, or remove the %s annotation so that the provider names a new key", mg.GetWidgetName(), named.Name, meta.AnnotationKeyExternalName)
	}

	key, ok := connectionSecretKey(mg)
	if !ok {
		return managed.ExternalObservation{}, errors.New("spec.forProvider.rotation needs spec.writeConnectionSecretToRef: a rotated key's secret is published only in the connection Secret; nothing was rotated or revoked")
	}
	data, err := secretData(ctx, e.cache, key)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	now := e.clock()
	p := e.plan(mg, owned, data, now)
	if p.current == nil || !p.upToDate() {
		// About to act, or to call the keys lost: only on the Secret as
		// the API server holds it.
		if data, err = secretData(ctx, e.live, key); err != nil {
			return managed.ExternalObservation{}, err
		}
		p = e.plan(mg, owned, data, now)
	}
	if p.current == nil {
		// The Secret holds no valid key (it was deleted, or its key was
		// revoked outside Crossplane): Create revokes whatever is left of
		// the family, whose secrets are lost, and creates a new key;
		// unless one of them is old enough to be in use (mayReplaceLost).
		if err := e.mayReplaceLost(mg, sortedKeys(owned)...); err != nil {
			return managed.ExternalObservation{}, err
		}
		e.lost = len(owned) > 0
		e.lostKeys = sortedNames(owned)
		e.clearPrevious = len(data[DetailPreviousKey]) > 0 || len(data[DetailPreviousKeyName]) > 0
		return managed.ExternalObservation{}, nil
	}
	p.widget = mg.GetWidgetName()
	p.endpoint = w.Endpoint
	e.rot = p
	e.revocable = true

	mg.SetWidgetKeyObservation(p.observation(mg))
	mg.SetConditions(xpv2.Available())
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: p.upToDate(), ConnectionDetails: p.published()}, nil
}

// plan compares the owned keys of mg's family with the connection Secret's
// data at now.
func (e *external[T]) plan(mg T, owned map[string]*widgetapi.Key, data map[string][]byte, now time.Time) *rotationPlan {
	p := &rotationPlan{secret: data}
	cur := string(data[DetailKeyName])
	if cur == "" {
		cur = meta.GetExternalName(mg)
	}
	if len(data[DetailKey]) > 0 {
		p.current = owned[cur]
	}
	prev := string(data[DetailPreviousKeyName])
	if len(data[DetailPreviousKey]) > 0 && prev != cur {
		p.previous = owned[prev]
	}
	for _, n := range sortedNames(owned) {
		if (p.current != nil && n == cur) || (p.previous != nil && n == prev) {
			continue
		}
		p.unused = append(p.unused, n)
	}
	if p.current == nil {
		return p
	}

	r := mg.GetKeyRotation()
	obs := mg.GetWidgetKeyObservation()
	if p.previous != nil {
		switch {
		case r != nil:
			p.revokeAt = p.current.CreatedAt.Add(r.Overlap.Duration)
		case obs.Previous != nil && obs.Previous.RevokeAt != nil:
			// Rotation was turned off during an overlap: keep the
			// schedule it had.
			p.revokeAt = obs.Previous.RevokeAt.Time
		default:
			p.revokeAt = p.current.CreatedAt.Add(minOverlap)
		}
		p.revokeAt = cutShort(r, p.previous.CreatedAt, p.revokeAt)
		p.revokePrevious = !now.Before(p.revokeAt)
	}
	if r == nil {
		return p
	}
	if r.Period != nil {
		p.next = p.current.CreatedAt.Add(r.Period.Duration)
	}
	if q := r.RequestedAt; q != nil && q.After(p.current.CreatedAt) && (obs.RotationRequestedAt == nil || q.After(obs.RotationRequestedAt.Time)) {
		if p.next.IsZero() || !q.After(p.next) {
			p.next = q.Time
		}
		if !now.Before(q.Time) {
			p.honours = q.DeepCopy()
		}
	}
	if p.previous != nil && !p.revokePrevious && !p.next.IsZero() && p.next.Before(p.revokeAt) {
		// One rotation at a time: the next waits for the previous key
		// to be revoked.
		p.next = p.revokeAt
	}
	p.rotate = !p.next.IsZero() && !now.Before(p.next) && (p.previous == nil || p.revokePrevious)
	return p
}

// cutShort returns when a previous key created at created is revoked, given
// the end of its overlap: r.RevokePreviousAt when the key existed then and
// it is earlier (an emergency revocation), else the end of the overlap.
func cutShort(r *commonv1beta1.KeyRotation, created, overlapEnd time.Time) time.Time {
	if r == nil || r.RevokePreviousAt == nil {
		return overlapEnd
	}
	at := r.RevokePreviousAt.Time
	if created.After(at) || !at.Before(overlapEnd) {
		return overlapEnd
	}
	return at
}

// clock returns the time rotations are scheduled by: e.now's, or the
// system's when e.now is not set.
func (e *external[T]) clock() time.Time {
	if e.now != nil {
		return e.now()
	}
	return time.Now()
}

// minOverlap is commonv1beta1.MinRotationOverlap.
var minOverlap = func() time.Duration {
	d, _ := time.ParseDuration(commonv1beta1.MinRotationOverlap)
	return d
}()

// observation is the status the plan shows.
func (p *rotationPlan) observation(mg commonv1beta1.WidgetKeyResource) commonv1beta1.WidgetKeyObservation {
	old := mg.GetWidgetKeyObservation()
	o := commonv1beta1.WidgetKeyObservation{
		ID:                  p.current.ID,
		Name:                p.current.Name,
		WidgetName:          p.current.Widget,
		Description:         p.current.Description,
		CreatedAt:           timeOf(p.current.CreatedAt),
		NextRotationAt:      timeOf(p.next),
		RotationRequestedAt: old.RotationRequestedAt,
	}
	if p.previous != nil {
		o.Previous = &commonv1beta1.PreviousKeyObservation{
			Name:      p.previous.Name,
			ID:        p.previous.ID,
			CreatedAt: timeOf(p.previous.CreatedAt),
			RevokeAt:  timeOf(p.revokeAt),
		}
	}
	return o
}

// published returns the connection details as the plan finds them: the
// Secret's key and previous key, the latter only while it is valid. A
// previous key that is gone is published as nil, which removes it from the
// Secret (crossplane-runtime merge-patches the Secret's data).
func (p *rotationPlan) published() managed.ConnectionDetails {
	cd := managed.ConnectionDetails{
		DetailKey:     p.secret[DetailKey],
		DetailKeyName: []byte(p.current.Name),
		DetailWidget:  []byte(p.widget),
	}
	if p.endpoint != "" {
		cd[DetailEndpoint] = []byte(p.endpoint)
	}
	if p.previous != nil {
		cd[DetailPreviousKey] = p.secret[DetailPreviousKey]
		cd[DetailPreviousKeyName] = []byte(p.previous.Name)
		return cd
	}
	clearPrevious(cd, p.secret)
	return cd
}

// clearPrevious sets the previous key's entries to nil in cd where secret
// holds them, so that publishing cd removes them.
func clearPrevious(cd managed.ConnectionDetails, secret map[string][]byte) {
	for _, k := range []string{DetailPreviousKey, DetailPreviousKeyName} {
		if _, ok := secret[k]; ok {
			cd[k] = nil
		}
	}
}

// updateRotating takes the plan's steps (see the top of this file).
func (e *external[T]) updateRotating(ctx context.Context, mg T) (managed.ExternalUpdate, error) {
	p := e.rot
	for _, n := range p.unused {
		if err := e.api.DeleteKey(ctx, p.widget, n); err != nil && !widgetapi.IsNotFound(err) {
			return managed.ExternalUpdate{}, errors.Wrapf(err, "cannot revoke unused key %s", n)
		}
		e.record.Event(mg, event.Normal(ReasonUnusedKeyRevoked, "Revoked key "+n+": a rotation created it but its secret never reached the connection Secret (the provider stopped in between); the connection Secret's key "+p.current.Name+" is unchanged"))
	}
	cd := p.published()
	if p.revokePrevious {
		if err := e.api.DeleteKey(ctx, p.widget, p.previous.Name); err != nil && !widgetapi.IsNotFound(err) {
			return managed.ExternalUpdate{}, errors.Wrapf(err, "cannot revoke previous key %s", p.previous.Name)
		}
		why := "after its overlap"
		if r := mg.GetKeyRotation(); r != nil && r.RevokePreviousAt != nil && p.revokeAt.Equal(r.RevokePreviousAt.Time) {
			why = "before the end of its overlap, as spec.forProvider.rotation.revokePreviousAt asked"
		}
		e.record.Event(mg, event.Normal(ReasonPreviousKeyRevoked, "Revoked previous key "+p.previous.Name+" "+why+"; the connection Secret holds only key "+p.current.Name))
		delete(cd, DetailPreviousKey)
		delete(cd, DetailPreviousKeyName)
		clearPrevious(cd, p.secret)
		p.previous = nil
	}
	if p.rotate {
		k, err := e.createNext(ctx, mg, p)
		if err != nil {
			// What was revoked is published; the rotation is retried.
			mg.SetWidgetKeyObservation(p.observation(mg))
			return managed.ExternalUpdate{ConnectionDetails: cd}, err
		}
		r := mg.GetKeyRotation()
		cd[DetailKey] = []byte(k.Secret)
		cd[DetailKeyName] = []byte(k.Name)
		cd[DetailPreviousKey] = p.secret[DetailKey]
		cd[DetailPreviousKeyName] = []byte(p.current.Name)
		cur := k.Key
		p.previous, p.current = p.current, &cur
		p.revokeAt = cutShort(r, p.previous.CreatedAt, cur.CreatedAt.Add(r.Overlap.Duration))
		p.next = time.Time{}
		if r.Period != nil {
			p.next = cur.CreatedAt.Add(r.Period.Duration)
		}
		if p.next.Before(p.revokeAt) {
			p.next = p.revokeAt
		}
		o := p.observation(mg)
		if p.honours != nil {
			o.RotationRequestedAt = p.honours
		}
		mg.SetWidgetKeyObservation(o)
		e.record.Event(mg, event.Normal(ReasonKeyRotated, "Rotated the key: created key "+cur.Name+" and published it as key in the connection Secret; the previous key "+p.previous.Name+" stays valid as previousKey until "+p.revokeAt.UTC().Format(time.RFC3339)+" (the overlap, "+r.Overlap.Duration.String()+")"))
		return managed.ExternalUpdate{ConnectionDetails: cd}, nil
	}
	mg.SetWidgetKeyObservation(p.observation(mg))
	return managed.ExternalUpdate{ConnectionDetails: cd}, nil
}

// createNext creates the family's next key. It reads the widget from the
// Widget API first and creates the key only when the widget is within the
// resource's reach now, as Create does: this hands out a secret.
func (e *external[T]) createNext(ctx context.Context, mg T, p *rotationPlan) (*widgetapi.KeyWithSecret, error) {
	w, err := e.api.GetWidget(ctx, p.widget)
	if err != nil {
		return nil, errors.Wrap(err, "cannot get the key's widget")
	}
	if !ownership.InReach(mg, w.Labels) {
		return nil, outOfReach(mg, p.widget)
	}
	if other, ok := ownership.Elsewhere(w.Labels, e.cp); ok {
		return nil, otherControlPlane(p.widget, other, e.cp)
	}
	name := rotatedName(meta.GetExternalName(mg), generation(meta.GetExternalName(mg), p.current.Name)+1)
	desc := ""
	if d := mg.GetWidgetKeyInitParameters().Description; d != nil {
		desc = *d
	}
	k, err := e.api.CreateKey(ctx, p.widget, widgetapi.CreateKeyRequest{Name: name, Labels: ownership.Labels(mg, e.cp), Description: desc})
	if widgetapi.IsAlreadyExists(err) {
		return nil, errors.Errorf("cannot rotate: widget %s already has a key named %s that this WidgetKey did not create; revoke it where it was created, or give this WidgetKey another external name", p.widget, name)
	}
	if err != nil {
		return nil, errors.Wrap(err, "cannot create the rotated key")
	}
	return k, nil
}

// NextWakeUp returns when mg next needs a reconcile for its rotation: its
// next rotation, or its previous key's revocation, whichever is first; zero
// when neither is scheduled.
func NextWakeUp(mg commonv1beta1.WidgetKeyResource) time.Time {
	o := mg.GetWidgetKeyObservation()
	var t time.Time
	if o.NextRotationAt != nil {
		t = o.NextRotationAt.Time
	}
	if o.Previous != nil && o.Previous.RevokeAt != nil && (t.IsZero() || o.Previous.RevokeAt.Time.Before(t)) {
		t = o.Previous.RevokeAt.Time
	}
	return t
}

// connectionSecretKey returns where mg's connection Secret is, if it has one.
func connectionSecretKey(mg resource.Managed) (types.NamespacedName, bool) {
	switch m := any(mg).(type) {
	case resource.LocalConnectionSecretWriterTo:
		if ref := m.GetWriteConnectionSecretToReference(); ref != nil {
			return types.NamespacedName{Namespace: mg.GetNamespace(), Name: ref.Name}, true
		}
	case resource.ConnectionSecretWriterTo:
		if ref := m.GetWriteConnectionSecretToReference(); ref != nil {
			return types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, true
		}
	}
	return types.NamespacedName{}, false
}

// secretData returns the data of the Secret key, or nil when there is none.
func secretData(ctx context.Context, r SecretReader, key types.NamespacedName) (map[string][]byte, error) {
	s := &corev1.Secret{}
	if err := r.Get(ctx, key, s); err != nil {
		if kerrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, errors.Wrapf(err, "cannot get connection Secret %s", key)
	}
	return s.Data, nil
}

func sortedNames(m map[string]*widgetapi.Key) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// sortedKeys are m's keys by name.
func sortedKeys(m map[string]*widgetapi.Key) []*widgetapi.Key {
	out := make([]*widgetapi.Key, 0, len(m))
	for _, n := range sortedNames(m) {
		out = append(out, m[n])
	}
	return out
}

func timeOf(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	m := metav1.NewTime(t.Truncate(time.Second))
	return &m
}
