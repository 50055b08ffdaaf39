package widgetkey

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/provider/internal/names"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// A clock is a test's time: real time moved forward by what the test says.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time               { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration)      { c.off.Add(int64(d)) }
func (c *clock) serverOpts(o *server.Options) { o.Now = c.now }

// secretStore is a connection Secret as crossplane-runtime's publisher
// leaves it: connection details merged into its data, a nil detail removing
// its entry (the publisher merge-patches the Secret).
type secretStore struct {
	data map[string][]byte
	// stale, when set, is what a lagging reader finds instead.
	stale map[string][]byte
	// lagging makes Get answer stale.
	lagging bool
}

func (s *secretStore) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	d := s.data
	if s.lagging {
		d = s.stale
	}
	if d == nil {
		return kerrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
	}
	obj.(*corev1.Secret).Data = maps.Clone(d) //nolint:forcetypeassert // Only Secrets are read.
	return nil
}

func (s *secretStore) publish(cd managed.ConnectionDetails) {
	if len(cd) == 0 {
		return
	}
	if s.data == nil {
		s.data = map[string][]byte{}
	}
	for k, v := range cd {
		if v == nil {
			delete(s.data, k)
			continue
		}
		s.data[k] = v
	}
}

// world is a rotating WidgetKey, its widget in the reference server, its
// connection Secret and a clock, driven reconcile by reconcile as
// crossplane-runtime's managed reconciler drives a client.
type world struct {
	t   *testing.T
	env *apitest.Env
	api *widgetapi.Client
	// inspect reads what the test checks, with a token of its own: the
	// rate limit is per token.
	inspect *widgetapi.Client
	clock   *clock
	secret  *secretStore
	rec     *fakes.Recorder
	mg      *nsv1beta1WidgetKey
}

// tokenInspector is the test's own token for the project of apitest.TokenA.
const tokenInspector = "inspector-token-for-project-a"

// nsv1beta1WidgetKey is the namespaced kind, named for the generic tests.
type nsv1beta1WidgetKey = nsv1beta1.WidgetKey

func newWorld(t *testing.T, r *commonv1beta1.KeyRotation, opts ...apitest.Option) *world {
	t.Helper()
	c := &clock{}
	inspector := apitest.WithOptions(func(o *server.Options) { o.Tokens[tokenInspector] = apitest.ProjectA })
	env := apitest.Start(t, append([]apitest.Option{apitest.WithOptions(c.serverOpts), inspector}, opts...)...)
	w := &world{t: t, env: env, api: env.Client(t, apitest.TokenA), inspect: env.Client(t, tokenInspector), clock: c, secret: &secretStore{}, rec: &fakes.Recorder{}, mg: newNamespaced()}
	for _, m := range []mod{chosenName(), forWidget(widgetName), writesSecret(), described("ci")} {
		m(w.mg)
	}
	w.mg.Spec.ForProvider.Rotation = r
	seedWidget(t, w.api, widgetapi.StateReady, ownedWidget(w.mg))
	return w
}

func (w *world) external(api API) *external[*nsv1beta1WidgetKey] {
	return &external[*nsv1beta1WidgetKey]{api: api, cache: w.secret, live: w.secret, record: w.rec, now: w.clock.now}
}

// step says where a reconcile stops, as a provider that crashes there.
type step int

const (
	complete step = iota
	// crashBeforePublish stops after Create or Update returned, before
	// their connection details are published.
	crashBeforePublish
)

// reconcile runs one reconcile: Observe, publish, then Create or Update
// and publish, unless it stops at stop. It returns the first error.
func (w *world) reconcile(stop step) (managed.ExternalObservation, error) {
	w.t.Helper()
	return w.reconcileWith(w.api, stop)
}

func (w *world) reconcileWith(api API, stop step) (managed.ExternalObservation, error) {
	w.t.Helper()
	e := w.external(api)
	obs, err := e.Observe(w.t.Context(), w.mg)
	if err != nil {
		return obs, err
	}
	w.secret.publish(obs.ConnectionDetails)
	var cd managed.ConnectionDetails
	switch {
	case !obs.ResourceExists:
		// As the managed reconciler records before every create.
		meta.SetExternalCreatePending(w.mg, w.clock.now())
		c, err := e.Create(w.t.Context(), w.mg)
		if err != nil {
			return obs, err
		}
		cd = c.ConnectionDetails
	case !obs.ResourceUpToDate:
		u, err := e.Update(w.t.Context(), w.mg)
		if err != nil {
			return obs, err
		}
		cd = u.ConnectionDetails
	default:
		return obs, nil
	}
	if stop == crashBeforePublish {
		return obs, nil
	}
	w.secret.publish(cd)
	return obs, nil
}

// must runs a complete reconcile that must succeed.
func (w *world) must() managed.ExternalObservation {
	w.t.Helper()
	obs, err := w.reconcile(complete)
	if err != nil {
		w.t.Fatalf("reconcile: %v", err)
	}
	return obs
}

// keys returns the names of the widget's keys.
func (w *world) keys() []string {
	w.t.Helper()
	l, err := w.inspect.ListKeys(w.t.Context(), widgetName)
	if err != nil {
		w.t.Fatal(err)
	}
	out := make([]string, 0, len(l.Items))
	for _, k := range l.Items {
		out = append(out, k.Name)
	}
	slices.Sort(out)
	return out
}

// secretNames returns what the connection Secret names: key and previous
// key, and whether each secret is set.
func (w *world) secretNames() []string {
	d := w.secret.data
	out := []string{}
	if len(d[DetailKey]) > 0 {
		out = append(out, "key="+string(d[DetailKeyName]))
	}
	if len(d[DetailPreviousKey]) > 0 {
		out = append(out, "previousKey="+string(d[DetailPreviousKeyName]))
	}
	return out
}

// checkValid fails unless the Secret's key names a key that exists.
func (w *world) checkValid(when string) {
	w.t.Helper()
	cur := string(w.secret.data[DetailKeyName])
	if len(w.secret.data[DetailKey]) == 0 || !slices.Contains(w.keys(), cur) {
		w.t.Errorf("%s: the connection Secret's key %q is not a valid key (keys %v)", when, cur, w.keys())
	}
}

func (w *world) expect(when string, keys, secret []string) {
	w.t.Helper()
	if diff := cmp.Diff(keys, w.keys()); diff != "" {
		w.t.Errorf("%s: keys in the Widget API: -want, +got:\n%s", when, diff)
	}
	if diff := cmp.Diff(secret, w.secretNames()); diff != "" {
		w.t.Errorf("%s: connection Secret: -want, +got:\n%s", when, diff)
	}
}

func (w *world) reasons() []event.Reason {
	out := []event.Reason{}
	for _, e := range w.rec.Events() {
		out = append(out, e.Reason)
	}
	return out
}

func rotation(period, overlap time.Duration) *commonv1beta1.KeyRotation {
	return &commonv1beta1.KeyRotation{Period: &metav1.Duration{Duration: period}, Overlap: metav1.Duration{Duration: overlap}}
}

// TestRotationTimeline: create, rotate after the period with both keys in
// the Secret, revoke the previous key after the overlap, with status and
// events saying so.
func TestRotationTimeline(t *testing.T) {
	w := newWorld(t, rotation(24*time.Hour, time.Hour))
	w.must() // creates the key
	w.must() // observes it
	base := w.mg.GetAnnotations()[names.AnnotationDefaultExternalName]
	w.expect("created", []string{base}, []string{"key=" + base})
	first := w.secret.data[DetailKey]
	o := w.mg.GetWidgetKeyObservation()
	if o.Name != base || o.CreatedAt == nil || o.NextRotationAt == nil || !o.NextRotationAt.Equal(ptr.To(metav1.NewTime(o.CreatedAt.Add(24*time.Hour)))) {
		t.Errorf("status after create: want name %s and the next rotation a period after createdAt, got %+v", base, o)
	}

	w.clock.advance(23 * time.Hour)
	if obs := w.must(); !obs.ResourceUpToDate {
		t.Errorf("before the period: want the key up to date")
	}
	w.clock.advance(time.Hour)
	w.must()
	r1 := base + "-r1"
	w.expect("rotated", []string{base, r1}, []string{"key=" + r1, "previousKey=" + base})
	if string(w.secret.data[DetailPreviousKey]) != string(first) {
		t.Errorf("rotated: previousKey must be the first key's secret")
	}
	o = w.mg.GetWidgetKeyObservation()
	if o.Name != r1 || o.Previous == nil || o.Previous.Name != base || o.Previous.RevokeAt == nil {
		t.Errorf("status after rotation: want current %s and previous %s with a revocation time, got %+v", r1, base, o)
	}

	w.clock.advance(59 * time.Minute)
	if obs := w.must(); !obs.ResourceUpToDate {
		t.Errorf("during the overlap: want the key up to date")
	}
	w.expect("in the overlap", []string{base, r1}, []string{"key=" + r1, "previousKey=" + base})
	w.clock.advance(time.Minute)
	w.must()
	w.expect("overlap over", []string{r1}, []string{"key=" + r1})
	if o := w.mg.GetWidgetKeyObservation(); o.Previous != nil || o.NextRotationAt == nil {
		t.Errorf("status after the overlap: want no previous key and a next rotation, got %+v", o)
	}
	if diff := cmp.Diff([]event.Reason{ReasonKeyRotated, ReasonPreviousKeyRevoked}, w.reasons()); diff != "" {
		t.Errorf("events: -want, +got:\n%s", diff)
	}
	for _, e := range w.rec.Events() {
		for _, s := range [][]byte{first, w.secret.data[DetailKey]} {
			if strings.Contains(e.Message, string(s)) {
				t.Errorf("event %s holds a key secret", e.Reason)
			}
		}
	}

	// A second period later, the next rotation.
	w.clock.advance(23 * time.Hour)
	w.must()
	w.expect("second rotation", []string{r1, base + "-r2"}, []string{"key=" + base + "-r2", "previousKey=" + r1})
}

// TestRotationCrashes stops a rotation at each point a provider can crash
// and checks that the next reconcile finishes it, that the Secret's key is
// valid throughout, and that at most one key is extra.
func TestRotationCrashes(t *testing.T) {
	t.Run("AfterCreateBeforeSecret", func(t *testing.T) {
		w := newWorld(t, rotation(24*time.Hour, time.Hour))
		w.must()
		w.must()
		base := string(w.secret.data[DetailKeyName])
		w.clock.advance(24 * time.Hour)
		if _, err := w.reconcile(crashBeforePublish); err != nil {
			t.Fatal(err)
		}
		w.expect("crashed after the create", []string{base, base + "-r1"}, []string{"key=" + base})
		w.checkValid("crashed after the create")
		w.must()
		w.expect("recovered", []string{base, base + "-r1"}, []string{"key=" + base + "-r1", "previousKey=" + base})
		w.checkValid("recovered")
		if diff := cmp.Diff([]event.Reason{ReasonKeyRotated, ReasonUnusedKeyRevoked, ReasonKeyRotated}, w.reasons()); diff != "" {
			t.Errorf("events: -want, +got:\n%s", diff)
		}
	})
	t.Run("AfterRevokeBeforeSecret", func(t *testing.T) {
		w := newWorld(t, rotation(24*time.Hour, time.Hour))
		w.must()
		w.must()
		base := string(w.secret.data[DetailKeyName])
		w.clock.advance(24 * time.Hour)
		w.must()
		w.clock.advance(time.Hour)
		if _, err := w.reconcile(crashBeforePublish); err != nil {
			t.Fatal(err)
		}
		w.expect("crashed after the revoke", []string{base + "-r1"}, []string{"key=" + base + "-r1", "previousKey=" + base})
		w.checkValid("crashed after the revoke")
		if obs := w.must(); !obs.ResourceUpToDate {
			t.Errorf("after the crash: a previous key that is gone needs no Update, only the Secret changed")
		}
		w.expect("recovered", []string{base + "-r1"}, []string{"key=" + base + "-r1"})
	})
	t.Run("SecretLaggingAfterRotation", func(t *testing.T) {
		w := newWorld(t, rotation(24*time.Hour, time.Hour))
		w.must()
		w.must()
		base := string(w.secret.data[DetailKeyName])
		w.secret.stale = maps.Clone(w.secret.data)
		w.clock.advance(24 * time.Hour)
		w.must()
		// A cached copy from before the rotation names the new key in
		// neither entry: acting on it would revoke the Secret's key.
		w.secret.lagging = true
		e := w.external(w.api)
		e.live = &secretStore{data: w.secret.data}
		if _, err := e.Observe(t.Context(), w.mg); err != nil {
			t.Fatal(err)
		}
		if e.rot == nil || len(e.rot.unused) != 0 || e.rot.rotate {
			t.Errorf("Observe with a lagging cache: want nothing to revoke or rotate (the live Secret says so), got %+v", e.rot)
		}
		w.secret.lagging = false
		w.expect("after", []string{base, base + "-r1"}, []string{"key=" + base + "-r1", "previousKey=" + base})
	})
	t.Run("SecretDeletedAtOnce", func(t *testing.T) {
		// Within LostKeyWindow of the key's creation: nobody can hold
		// its secret yet, so the family is replaced.
		w := newWorld(t, rotation(24*time.Hour, time.Hour))
		w.must()
		w.must()
		base := string(w.secret.data[DetailKeyName])
		w.secret.data = nil
		w.must()
		w.expect("Secret deleted at once", []string{base}, []string{"key=" + base})
		w.checkValid("Secret deleted at once")
	})
	t.Run("SecretDeletedLater", func(t *testing.T) {
		// After a rotation the previous key is a day old and consumers
		// may hold either key: the Secret's loss is reported, nothing
		// is revoked or created.
		w := newWorld(t, rotation(24*time.Hour, time.Hour))
		w.must()
		w.must()
		base := string(w.secret.data[DetailKeyName])
		w.clock.advance(24 * time.Hour)
		w.must()
		w.secret.data = nil
		_, err := w.reconcile(complete)
		if err == nil || !strings.Contains(err.Error(), "nothing was revoked") || !strings.Contains(err.Error(), base+" (created") {
			t.Fatalf("reconcile after the Secret was deleted: got %v, want an error naming key %s and saying nothing was revoked", err, base)
		}
		w.expect("Secret deleted later", []string{base, base + "-r1"}, []string{})
	})
}

// TestRotateNow: a requestedAt rotates at once, once.
func TestRotateNow(t *testing.T) {
	w := newWorld(t, rotation(720*time.Hour, time.Hour))
	w.must()
	w.must()
	base := string(w.secret.data[DetailKeyName])
	w.clock.advance(time.Minute)
	req := metav1.NewTime(w.clock.now().Truncate(time.Second))
	w.mg.Spec.ForProvider.Rotation.RequestedAt = &req
	w.must()
	w.expect("rotated on request", []string{base, base + "-r1"}, []string{"key=" + base + "-r1", "previousKey=" + base})
	if got := w.mg.GetWidgetKeyObservation().RotationRequestedAt; got == nil || !got.Equal(&req) {
		t.Errorf("status.atProvider.rotationRequestedAt: want %v, got %v", req, got)
	}
	w.clock.advance(2 * time.Hour)
	w.must()
	w.must()
	w.expect("once", []string{base + "-r1"}, []string{"key=" + base + "-r1"})
}

// TestRotationRateLimited: a 429 in the middle of a rotation (the reference
// server's own, after its burst) fails the reconcile with the API's error
// and changes nothing the Secret relies on; the retry, once the server's
// limit allows, finishes it.
func TestRotationRateLimited(t *testing.T) {
	w := newWorld(t, rotation(24*time.Hour, time.Hour), apitest.WithOptions(apitest.RateLimited))
	w.must()
	w.must()
	base := string(w.secret.data[DetailKeyName])
	// Rotate on request, not by moving the clock: the reference server's
	// limiter cancels a refused reservation by the real clock, which a
	// clock moved by a day makes refill.
	w.clock.advance(time.Second)
	w.mg.Spec.ForProvider.Rotation.RequestedAt = ptr.To(metav1.NewTime(w.clock.now()))
	w.clock.advance(time.Second)
	e := w.external(w.api)
	obs, err := e.Observe(t.Context(), w.mg)
	if err != nil || obs.ResourceUpToDate {
		t.Fatalf("Observe: want a rotation due, got %+v, %v", obs, err)
	}
	apitest.Exhaust(t, w.api)
	if _, err := e.Update(t.Context(), w.mg); !isRateLimited(err) {
		t.Fatalf("Update: want the 429 back, got %v", err)
	}
	w.expect("throttled", []string{base}, []string{"key=" + base})
	// The server allows a call per 1000 s, by its clock: retry as the
	// reconciler does, after Retry-After, until the rotation is through.
	for i := 0; ; i++ {
		w.clock.advance(1000 * time.Second)
		_, err := w.reconcile(complete)
		if err == nil {
			break
		}
		if !isRateLimited(err) || i == 100 {
			t.Fatalf("retry %d: want success or a 429, got %v", i, err)
		}
		w.checkValid("between retries")
	}
	w.expect("retried", []string{base, base + "-r1"}, []string{"key=" + base + "-r1", "previousKey=" + base})
}

// TestRotationDelete: deleting a rotating WidgetKey during an overlap
// revokes both its keys, and no key it did not create.
func TestRotationDelete(t *testing.T) {
	w := newWorld(t, rotation(24*time.Hour, time.Hour))
	w.must()
	w.must()
	base := string(w.secret.data[DetailKeyName])
	w.clock.advance(24 * time.Hour)
	w.must()
	seedKey(t, w.api, base+"-r7", "", map[string]string{ownership.OwnerLabel: "n_team-b.other"})
	deleted()(w.mg)
	e := w.external(w.api)
	obs, err := e.Observe(t.Context(), w.mg)
	if err != nil || !obs.ResourceExists {
		t.Fatalf("Observe while deleting: want the keys found, got %+v, %v", obs, err)
	}
	if _, err := e.Delete(t.Context(), w.mg); err != nil {
		t.Fatal(err)
	}
	w.expect("deleted", []string{base + "-r7"}, []string{"key=" + base + "-r1", "previousKey=" + base})
}

// TestRotationRefusals: a rotating WidgetKey that cannot rotate safely
// says why and revokes nothing.
func TestRotationRefusals(t *testing.T) {
	t.Run("ExternalNameTakenByAnother", func(t *testing.T) {
		w := newWorld(t, rotation(24*time.Hour, time.Hour))
		explicitName("shared")(w.mg)
		meta.SetExternalCreatePending(w.mg, w.clock.now())
		seedKey(t, w.api, "shared", "", map[string]string{ownership.OwnerLabel: "n_team-b.other"})
		w.secret.data = map[string][]byte{DetailKey: []byte("wks_x"), DetailKeyName: []byte("shared")}
		w.clock.advance(48 * time.Hour)
		_, err := w.reconcile(complete)
		if err == nil || !strings.Contains(err.Error(), "did not create") {
			t.Errorf("reconcile: want an error saying the key is not this WidgetKey's, got %v", err)
		}
		if diff := cmp.Diff([]string{"shared"}, w.keys()); diff != "" {
			t.Errorf("keys: -want, +got:\n%s", diff)
		}
	})
	t.Run("NoConnectionSecret", func(t *testing.T) {
		w := newWorld(t, rotation(24*time.Hour, time.Hour))
		w.must()
		base := string(w.secret.data[DetailKeyName])
		// As a v1alpha1 write could leave it: rotation without a
		// connection Secret, which v1beta1's schema refuses.
		w.mg.SetWriteConnectionSecretToReference(nil)
		w.clock.advance(48 * time.Hour)
		_, err := w.reconcile(complete)
		if err == nil || !strings.Contains(err.Error(), "writeConnectionSecretToRef") {
			t.Errorf("reconcile: want an error naming writeConnectionSecretToRef, got %v", err)
		}
		if diff := cmp.Diff([]string{base}, w.keys()); diff != "" {
			t.Errorf("keys: -want, +got:\n%s", diff)
		}
	})
}
