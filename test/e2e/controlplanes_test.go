//go:build linux

package e2e_test

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/test/lib/providerenv"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// TestSecondControlPlane: while a migration runs, a second control plane
// (another kube-apiserver with this build's provider binary, as a copy
// restored elsewhere would be) holds a copy of an XWidget's Widget, wanting
// another size. Against the provider running as pods on the node, the
// widget is never fought over (docs/restore.md#two-control-planes-at-once):
// the copy writes only its contest label and says how to take over; the
// node's Widget reports the contest; deleting the copy leaves the widget,
// and the app team's XWidget stays Ready throughout.
func TestSecondControlPlane(t *testing.T) {
	s := newScenario(t, true)
	xr := s.xwidget("migrating", map[string]any{"size": "small", "keys": int64(0)})
	s.create(xr)
	s.waitReady(xr)
	mr := s.composedWidget(xr)
	ext := meta.GetExternalName(mr)
	s.checkControlPlane(ext)
	cm := &corev1.ConfigMap{}
	if err := suite.kube.Get(s.ctx, types.NamespacedName{Namespace: "crossplane-system", Name: "widget-control-plane"}, cm); err != nil {
		t.Fatal(err)
	}
	here := cm.Data["name"]
	before, err := s.apiWidget(ext)
	if err != nil {
		t.Fatal(err)
	}

	// The second control plane: its own kube-apiserver, the same
	// namespace, project and Widget (by name and external name), and the
	// provider binary of the package the node runs.
	bin := filepath.Join(suite.root, "_output", "bin", "linux_"+runtime.GOARCH, "provider-widget")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the provider binary of the installed package is missing (make xpkg builds it): %v", err)
	}
	kb, err := providerenv.StartKube(providerenv.Options{Root: suite.root, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kb.Stop() })
	if err := kb.Client.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}); err != nil {
		t.Fatal(err)
	}
	if err := providerenv.Project(s.ctx, kb.Client, s.ns, suite.widgets.URL, apiToken); err != nil {
		t.Fatal(err)
	}
	copyOf := &namespacedv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: mr.Name, Annotations: map[string]string{meta.AnnotationKeyExternalName: ext}}}
	copyOf.Spec.ForProvider = *mr.Spec.ForProvider.DeepCopy()
	copyOf.Spec.ForProvider.Size = ptr.To(widgetapi.SizeLarge)
	copyOf.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "ProviderConfig", Name: "default"}
	if err := kb.Client.Create(s.ctx, copyOf); err != nil {
		t.Fatal(err)
	}
	other := "cp-b-" + strings.ToLower(rand.Text()[:6])
	p, err := providerenv.StartProvider(bin, kb.Kubeconfig, filepath.Join(t.TempDir(), "provider-b.log"), "--control-plane", other, "--poll-interval", "1m", "--feed-wait", "5s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop()
		if t.Failed() {
			t.Logf("provider log (second control plane):\n%s", p.Logs())
		}
	})

	// The copy leaves the widget alone and says how to take it over.
	s.eventually("the copy Synced=False, naming this control plane and the take-over", func() error {
		if err := kb.Client.Get(s.ctx, client.ObjectKeyFromObject(copyOf), copyOf); err != nil {
			return err
		}
		c := copyOf.GetCondition(xpv2.TypeSynced)
		if c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "managed by control plane "+here) || !strings.Contains(c.Message, "widgetco.io/take-over-from="+here) {
			return errors.Errorf("the copy's Synced=%s (%s): %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	// The node's provider reports the contest on its Widget.
	s.eventually("the node's Widget ControlPlane=False (Contested), naming the other control plane", func() error {
		if err := s.get(mr); err != nil {
			return err
		}
		c := mr.GetCondition("ControlPlane")
		if c.Status != corev1.ConditionFalse || c.Reason != "Contested" || !strings.Contains(c.Message, other) {
			return errors.Errorf("ControlPlane=%s (%s): %q", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	contested, err := s.apiWidget(ext)
	if err != nil {
		t.Fatal(err)
	}
	if contested.Size != widgetapi.SizeSmall || contested.Labels["widgetco.io/contender"] != other || contested.Generation != before.Generation+1 {
		t.Errorf("the contest: want one write, of the contender label; size %s -> %s, generation %d -> %d, labels %v",
			before.Size, contested.Size, before.Generation, contested.Generation, contested.Labels)
	}

	// Deleting the copy (deletion policy Delete) leaves the widget.
	if err := kb.Client.Delete(s.ctx, copyOf); err != nil {
		t.Fatal(err)
	}
	s.eventually("the copy deleted", func() error {
		err := kb.Client.Get(s.ctx, client.ObjectKeyFromObject(copyOf), copyOf)
		if kerrors.IsNotFound(err) {
			return nil
		}
		return errors.Errorf("the copy is still there (%v): %s", err, copyOf.GetCondition(xpv2.TypeSynced).Message)
	})
	time.Sleep(2 * time.Second) // a stray write would show by now
	after, err := s.apiWidget(ext)
	if err != nil {
		t.Fatalf("the widget is gone after the copy was deleted: %v", err)
	}
	if after.State == widgetapi.StateDeleting || after.Generation != contested.Generation || after.Labels["widgetco.io/control-plane"] != here {
		t.Errorf("deleting the copy touched the widget: state %s, generation %d -> %d, labels %v", after.State, contested.Generation, after.Generation, after.Labels)
	}
	s.waitReady(xr)
	t.Logf("MEASURED second control plane: the copy refused and the contest reported; %d write to the widget (the contest label), none by the deletion", after.Generation-before.Generation)
}
