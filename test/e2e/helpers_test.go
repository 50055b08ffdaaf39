//go:build linux

package e2e_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/lib/wait"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// The kinds app teams use.
const (
	xwidgetAPIVersion = "platform.widgetco.io/v1alpha1"
	claimAPIVersion   = "legacy.platform.widgetco.io/v1alpha1"
	legacyXRKind      = "XWidget"
)

// labelScenario marks every widget a scenario asks for, so the scenario can
// list exactly its widgets in the Widget API.
const labelScenario = "e2e-scenario"

// eventually polls fn until it returns nil and returns how long that took.
// After waitTimeout it fails the test with fn's last error.
func (s *scenario) eventually(what string, fn func() error) time.Duration {
	s.t.Helper()
	return s.eventuallyWithin(waitTimeout, what, fn)
}

// eventuallyWithin is eventually with a bound of its own.
func (s *scenario) eventuallyWithin(bound time.Duration, what string, fn func() error) time.Duration {
	s.t.Helper()
	begin := time.Now()
	ctx, cancel := context.WithTimeout(s.ctx, bound)
	defer cancel()
	var last error
	err := wait.Poll(ctx, 250*time.Millisecond, func(context.Context) (bool, error) {
		last = fn()
		return last == nil, nil
	})
	switch {
	case err == nil:
		return time.Since(begin)
	case suite.ctx.Err() != nil:
		s.t.Fatalf("%s: interrupted: the control plane was torn down (last: %v)", what, last)
	default:
		s.t.Fatalf("%s: gave up after %s: %v", what, time.Since(begin).Round(time.Second), last)
	}
	return 0
}

// example reads an app team's object from examples/composition and moves it
// to the scenario's namespace, with the scenario's label on its widget.
func (s *scenario) example(file string) *unstructured.Unstructured {
	s.t.Helper()
	objs, err := platform.ReadObjects(filepath.Join(suite.root, "examples", "composition", file))
	if err != nil {
		s.t.Fatal(err)
	}
	if len(objs) != 1 {
		s.t.Fatalf("%s holds %d objects, want 1", file, len(objs))
	}
	u := objs[0]
	u.SetNamespace(s.ns)
	s.set(u, s.ns, "spec", "labels", labelScenario)
	return u
}

// xwidget returns a v2 XWidget in the scenario's namespace.
func (s *scenario) xwidget(name string, spec map[string]any) *unstructured.Unstructured {
	return s.appObject(xwidgetAPIVersion, "XWidget", name, spec)
}

// claim returns a WidgetClaim in the scenario's namespace.
func (s *scenario) claim(name string, spec map[string]any) *unstructured.Unstructured {
	return s.appObject(claimAPIVersion, "WidgetClaim", name, spec)
}

func (s *scenario) appObject(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(s.ns)
	u.SetName(name)
	s.set(u, "payments", "spec", "labels", "team")
	s.set(u, s.ns, "spec", "labels", labelScenario)
	return u
}

func (s *scenario) set(u *unstructured.Unstructured, v any, fields ...string) {
	s.t.Helper()
	if err := unstructured.SetNestedField(u.Object, v, fields...); err != nil {
		s.t.Fatal(err)
	}
}

func (s *scenario) create(objs ...client.Object) {
	s.t.Helper()
	for _, o := range objs {
		if err := suite.kube.Create(s.ctx, o); err != nil {
			s.t.Fatalf("cannot create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// createConcurrently creates objs with the supplied number of concurrent
// clients, as many app teams at once would, and fails the test if any
// create fails.
func (s *scenario) createConcurrently(clients int, objs ...client.Object) {
	s.t.Helper()
	work := make(chan client.Object)
	errs := make(chan error, len(objs))
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for o := range work {
				if err := suite.kube.Create(s.ctx, o); err != nil {
					errs <- errors.Wrapf(err, "cannot create %s", o.GetName())
				}
			}
		})
	}
	for _, o := range objs {
		work <- o
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		s.t.Fatal(err)
	}
}

// get refreshes o.
func (s *scenario) get(o client.Object) error {
	return suite.kube.Get(s.ctx, client.ObjectKeyFromObject(o), o)
}

// mergePatch applies a JSON merge patch to o.
func (s *scenario) mergePatch(o client.Object, patch string) {
	s.t.Helper()
	if err := suite.kube.Patch(s.ctx, o, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		s.t.Fatalf("cannot patch %s: %v", o.GetName(), err)
	}
}

// isReady returns nil when u is Synced and Ready, or its status line and
// problems.
func isReady(u *unstructured.Unstructured) error {
	if platform.GetCondition(u, "Synced").Status == "True" && platform.GetCondition(u, "Ready").Status == "True" {
		return nil
	}
	return notYet(u)
}

// notYet explains u's state.
func notYet(u *unstructured.Unstructured) error {
	msg := platform.StatusLine(u)
	if p := platform.Problems(u); len(p) > 0 {
		msg += " [" + strings.Join(p, "; ") + "]"
	}
	return errors.New(msg)
}

// waitReady waits for u to be Synced and Ready and leaves its latest state
// in u.
func (s *scenario) waitReady(u *unstructured.Unstructured) time.Duration {
	s.t.Helper()
	return s.eventually(u.GetKind()+" "+platform.Name(u)+" Ready", func() error {
		if err := s.get(u); err != nil {
			return err
		}
		return isReady(u)
	})
}

// status returns a string field of u's status.
func status(u *unstructured.Unstructured, field string) string {
	v, _, _ := unstructured.NestedString(u.Object, "status", field)
	return v
}

// apiWidget gets a widget from the Widget API.
func (s *scenario) apiWidget(name string) (*widgetapi.Widget, error) {
	return suite.api.GetWidget(s.ctx, name)
}

// scenarioWidgets lists the widgets in the Widget API that carry the
// scenario's label.
func (s *scenario) scenarioWidgets() ([]widgetapi.Widget, error) {
	var out []widgetapi.Widget
	o := widgetapi.ListWidgetsOptions{Labels: map[string]string{labelScenario: s.ns}}
	for {
		l, err := suite.api.ListWidgets(s.ctx, o)
		if err != nil {
			return nil, err
		}
		out = append(out, l.Items...)
		if l.NextPageToken == "" {
			return out, nil
		}
		o.PageToken = l.NextPageToken
	}
}

// keyNames lists the names of a widget's keys in the Widget API.
func (s *scenario) keyNames(widget string) ([]string, error) {
	l, err := suite.api.ListKeys(s.ctx, widget)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(l.Items))
	for _, k := range l.Items {
		names = append(names, k.Name)
	}
	slices.Sort(names)
	return names, nil
}

// widgetState returns nil when the API reports widget name Ready with the
// given size.
func (s *scenario) widgetState(name, size string) error {
	w, err := s.apiWidget(name)
	if err != nil {
		return err
	}
	if w.Size != size || w.State != widgetapi.StateReady {
		return errors.Errorf("widget %s is %s and %s, want %s and Ready", name, w.Size, w.State, size)
	}
	return nil
}

// connectionSecret waits for the Secret ns/name to hold the endpoint, the
// widget's name and n access keys, and returns its data.
func (s *scenario) connectionSecret(ns, name string, keys int) map[string][]byte {
	s.t.Helper()
	want := []string{"endpoint", "widget"}
	for i := range keys {
		want = append(want, fmt.Sprintf("key-%d", i), fmt.Sprintf("key-%d-name", i))
	}
	sec := &corev1.Secret{}
	s.eventually("connection Secret "+ns+"/"+name, func() error {
		if err := suite.kube.Get(s.ctx, types.NamespacedName{Namespace: ns, Name: name}, sec); err != nil {
			return err
		}
		var missing []string
		for _, k := range want {
			if len(sec.Data[k]) == 0 {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			return errors.Errorf("Secret %s/%s lacks %s", ns, name, strings.Join(missing, ", "))
		}
		return nil
	})
	return sec.Data
}

// checkConnectionDetails checks a connection Secret's data against the
// widget in the Widget API: the same endpoint and name, and key names that
// are the widget's keys.
func (s *scenario) checkConnectionDetails(data map[string][]byte, w *widgetapi.Widget, keys int) {
	s.t.Helper()
	if got := string(data["endpoint"]); got != w.Endpoint {
		s.t.Errorf("connection Secret endpoint = %q, want the widget's %q", got, w.Endpoint)
	}
	if got := string(data["widget"]); got != w.Name {
		s.t.Errorf("connection Secret widget = %q, want %q", got, w.Name)
	}
	apiKeys, err := s.keyNames(w.Name)
	if err != nil {
		s.t.Fatalf("cannot list keys of widget %s: %v", w.Name, err)
	}
	if len(apiKeys) != keys {
		s.t.Errorf("widget %s has keys %v in the Widget API, want %d", w.Name, apiKeys, keys)
	}
	for i := range keys {
		if n := string(data[fmt.Sprintf("key-%d-name", i)]); !slices.Contains(apiKeys, n) {
			s.t.Errorf("connection Secret key-%d-name = %q, not among the widget's keys %v", i, n, apiKeys)
		}
	}
}

// gone returns nil when o no longer exists.
func (s *scenario) gone(o client.Object) error {
	err := s.get(o)
	if kerrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return errors.Errorf("%T %s still exists (deletion requested at %v, finalizers %v)", o, o.GetName(), o.GetDeletionTimestamp(), o.GetFinalizers())
}

// event returns nil when an event with the reason was recorded about the
// object named name in namespace ns (the default namespace for cluster
// scoped objects).
func (s *scenario) event(ns, name, reason string) error {
	l := &corev1.EventList{}
	if err := suite.kube.List(s.ctx, l, client.InNamespace(ns)); err != nil {
		return err
	}
	seen := make([]string, 0, len(l.Items))
	for _, e := range l.Items {
		if e.InvolvedObject.Name != name {
			continue
		}
		if e.Reason == reason {
			return nil
		}
		seen = append(seen, e.Reason)
	}
	return errors.Errorf("no %s event about %s yet (saw %v)", reason, name, seen)
}
