package mrsetup

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/apis"
	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

// The fakes the contract and layer tests drive crossplane-runtime's managed
// reconciler with: an API server in memory that logs every call in order
// (fakeKube), an external client that logs its calls in the same log
// (fakeWidgets), and a manager that hands out the fake API server.

// fakeKube is an API server in memory: a store of typed objects with
// resource versions, conflicts on stale updates, and a status subresource
// (an update ignores the status; a status update changes nothing else). The
// object a write was given is replaced with the server's copy, as a real
// client does. Every call is appended to log as "kube <verb> <Kind>".
// Calls it does not implement panic.
type fakeKube struct {
	client.Client
	scheme *runtime.Scheme
	log    *[]string
	objs   map[objKey]client.Object
	rv     int
	// writes holds a copy of the object each successful write stored.
	writes []client.Object
	// onUpdate, when set, is called with the old and new version of each
	// object a write changed, like a watch.
	onUpdate func(old, updated client.Object)
}

type objKey struct {
	kind string
	types.NamespacedName
}

func newFakeKube(log *[]string) *fakeKube {
	s := runtime.NewScheme()
	if err := apis.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	return &fakeKube{scheme: s, log: log, objs: map[objKey]client.Object{}}
}

func (k *fakeKube) kindOf(o runtime.Object) string {
	gvks, _, err := k.scheme.ObjectKinds(o)
	if err != nil || len(gvks) == 0 {
		return reflect.TypeOf(o).Elem().Name()
	}
	return gvks[0].Kind
}

func (k *fakeKube) key(o client.Object) objKey {
	return objKey{kind: k.kindOf(o), NamespacedName: client.ObjectKeyFromObject(o)}
}

func (k *fakeKube) record(verb string, o runtime.Object) {
	*k.log = append(*k.log, "kube "+verb+" "+k.kindOf(o))
}

// put stores a copy of o as it is (the test's starting state).
func (k *fakeKube) put(o client.Object) {
	k.rv++
	o.SetResourceVersion(strconv.Itoa(k.rv))
	k.objs[k.key(o)] = o.DeepCopyObject().(client.Object)
}

// stored returns a copy of the stored object of o's kind and name.
func (k *fakeKube) stored(o client.Object) client.Object {
	s, ok := k.objs[k.key(o)]
	if !ok {
		return nil
	}
	return s.DeepCopyObject().(client.Object)
}

func (k *fakeKube) Get(_ context.Context, key client.ObjectKey, o client.Object, _ ...client.GetOption) error {
	k.record("Get", o)
	s, ok := k.objs[objKey{kind: k.kindOf(o), NamespacedName: key}]
	if !ok {
		return kerrors.NewNotFound(schema.GroupResource{Resource: k.kindOf(o)}, key.Name)
	}
	copyInto(o, s)
	return nil
}

func (k *fakeKube) Create(_ context.Context, o client.Object, _ ...client.CreateOption) error {
	k.record("Create", o)
	if _, ok := k.objs[k.key(o)]; ok {
		return kerrors.NewAlreadyExists(schema.GroupResource{Resource: k.kindOf(o)}, o.GetName())
	}
	k.store(o)
	return nil
}

func (k *fakeKube) Update(_ context.Context, o client.Object, _ ...client.UpdateOption) error {
	k.record("Update", o)
	s, err := k.current(o)
	if err != nil {
		return err
	}
	n := o.DeepCopyObject().(client.Object)
	setStatus(n, s) // the main resource ignores the status
	if n.GetDeletionTimestamp() != nil && len(n.GetFinalizers()) == 0 {
		delete(k.objs, k.key(o))
		k.writes = append(k.writes, n)
		return nil
	}
	return k.replace(o, n)
}

// Patch applies a JSON merge patch of o's fields (what crossplane-runtime's
// patching applicator sends: the whole desired object).
func (k *fakeKube) Patch(_ context.Context, o client.Object, p client.Patch, _ ...client.PatchOption) error {
	k.record("Patch", o)
	s, ok := k.objs[k.key(o)]
	if !ok {
		return kerrors.NewNotFound(schema.GroupResource{Resource: k.kindOf(o)}, o.GetName())
	}
	data, err := p.Data(o)
	if err != nil {
		return err
	}
	n := s.DeepCopyObject().(client.Object)
	if err := json.Unmarshal(data, n); err != nil {
		return err
	}
	n.SetResourceVersion(s.GetResourceVersion())
	return k.replace(o, n)
}

func (k *fakeKube) Delete(_ context.Context, o client.Object, _ ...client.DeleteOption) error {
	k.record("Delete", o)
	delete(k.objs, k.key(o))
	return nil
}

func (k *fakeKube) Status() client.SubResourceWriter { return fakeStatus{k: k} }

// current returns the stored object o updates, or a conflict.
func (k *fakeKube) current(o client.Object) (client.Object, error) {
	s, ok := k.objs[k.key(o)]
	if !ok {
		return nil, kerrors.NewNotFound(schema.GroupResource{Resource: k.kindOf(o)}, o.GetName())
	}
	if o.GetResourceVersion() != s.GetResourceVersion() {
		return nil, kerrors.NewConflict(schema.GroupResource{Resource: k.kindOf(o)}, o.GetName(), fmt.Errorf("stale resource version %s", o.GetResourceVersion()))
	}
	return s, nil
}

// replace stores n as the new version of o, and gives o the server's copy.
func (k *fakeKube) replace(o, n client.Object) error {
	k.store(n)
	copyInto(o, n)
	return nil
}

func (k *fakeKube) store(o client.Object) {
	k.rv++
	o.SetResourceVersion(strconv.Itoa(k.rv))
	cp := o.DeepCopyObject().(client.Object)
	if old, ok := k.objs[k.key(o)]; ok && k.onUpdate != nil {
		k.onUpdate(old.DeepCopyObject().(client.Object), cp.DeepCopyObject().(client.Object))
	}
	k.objs[k.key(o)] = cp
	k.writes = append(k.writes, cp.DeepCopyObject().(client.Object))
}

type fakeStatus struct {
	client.SubResourceWriter
	k *fakeKube
}

func (s fakeStatus) Update(_ context.Context, o client.Object, _ ...client.SubResourceUpdateOption) error {
	s.k.record("Status().Update", o)
	cur, err := s.k.current(o)
	if err != nil {
		return err
	}
	n := cur.DeepCopyObject().(client.Object)
	setStatus(n, o) // only the status changes
	return s.k.replace(o, n)
}

// copyInto sets *dst to a copy of *src; both point to the same struct type.
func copyInto(dst, src client.Object) {
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src.DeepCopyObject()).Elem())
}

// setStatus sets dst's Status field to a copy of src's, if they have one.
func setStatus(dst, src client.Object) {
	d, ok := statusField(dst)
	if !ok {
		return
	}
	s, _ := statusField(src.DeepCopyObject().(client.Object))
	d.Set(s)
}

// fakeManager is a manager that hands out only a client and a scheme: what
// crossplane-runtime's reconcilers take from it. Anything else panics, so a
// reconciler that took another client from the manager fails the tests.
type fakeManager struct {
	ctrl.Manager
	k *fakeKube
}

func (m fakeManager) GetClient() client.Client   { return m.k }
func (m fakeManager) GetScheme() *runtime.Scheme { return m.k.scheme }

func (m fakeManager) GetEventRecorderFor(string) record.EventRecorder {
	return fakeEvents{log: m.k.log}
}

// fakeEvents is an event recorder that logs "event <type> <reason>".
type fakeEvents struct{ log *[]string }

func (e fakeEvents) Event(_ runtime.Object, eventtype, reason, _ string) {
	*e.log = append(*e.log, "event "+eventtype+" "+reason)
}

func (e fakeEvents) Eventf(o runtime.Object, eventtype, reason, _ string, _ ...any) {
	e.Event(o, eventtype, reason, "")
}

func (e fakeEvents) AnnotatedEventf(o runtime.Object, _ map[string]string, eventtype, reason, _ string, _ ...any) {
	e.Event(o, eventtype, reason, "")
}

// fakeWidgets is the external system: one widget, which exists or not,
// matches the spec or not, and is Ready or not. Its calls are appended to
// the same log as the API server's, as "ext <Method>".
type fakeWidgets struct {
	log       *[]string
	exists    bool
	upToDate  bool
	ready     bool
	createErr error
	// details are the connection details every call returns.
	details managed.ConnectionDetails
}

func (f *fakeWidgets) Connect(context.Context, *nsv1beta1.Widget) (managed.TypedExternalClient[*nsv1beta1.Widget], error) {
	return f, nil
}

func (f *fakeWidgets) Observe(_ context.Context, mg *nsv1beta1.Widget) (managed.ExternalObservation, error) {
	*f.log = append(*f.log, "ext Observe")
	if f.exists {
		mg.SetConditions(readyCondition(f.ready))
	}
	return managed.ExternalObservation{ResourceExists: f.exists, ResourceUpToDate: f.upToDate, ConnectionDetails: f.details}, nil
}

func (f *fakeWidgets) Create(_ context.Context, mg *nsv1beta1.Widget) (managed.ExternalCreation, error) {
	*f.log = append(*f.log, "ext Create")
	if f.createErr != nil {
		return managed.ExternalCreation{}, f.createErr
	}
	f.exists, f.upToDate = true, true
	mg.Status.AtProvider.ID = "w-1"
	mg.Status.AtProvider.State = "Provisioning"
	mg.SetConditions(readyCondition(false))
	return managed.ExternalCreation{ConnectionDetails: f.details}, nil
}

func (f *fakeWidgets) Update(_ context.Context, mg *nsv1beta1.Widget) (managed.ExternalUpdate, error) {
	*f.log = append(*f.log, "ext Update")
	f.upToDate = true
	mg.SetConditions(readyCondition(f.ready))
	return managed.ExternalUpdate{ConnectionDetails: f.details}, nil
}

func (f *fakeWidgets) Delete(context.Context, *nsv1beta1.Widget) (managed.ExternalDelete, error) {
	*f.log = append(*f.log, "ext Delete")
	f.exists = false
	return managed.ExternalDelete{}, nil
}

func (f *fakeWidgets) Disconnect(context.Context) error { return nil }

func readyCondition(ready bool) xpv2.Condition {
	if ready {
		return xpv2.Available()
	}
	return xpv2.Creating()
}

// calls returns the log's entries that start with one of prefixes, in
// order; all of them without prefixes.
func calls(log []string, prefixes ...string) []string {
	out := []string{}
	for _, l := range log {
		if len(prefixes) == 0 {
			out = append(out, l)
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}
