package provider_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// pastLostKeyWindow is older than the provider's LostKeyWindow (10 minutes,
// provider/internal/controller/widgetkey), which docs/restore.md states.
const pastLostKeyWindow = 11 * time.Minute

// TestMissingKeySecretIsReported: the connection Secret of a WidgetKey
// whose keys are older than the provider's LostKeyWindow is deleted, as a restore
// without its Secrets leaves it. The provider, as it runs, revokes and
// creates nothing: the WidgetKey reports Synced=False naming the key, and
// the key keeps working for whoever holds its secret. Once the Secret is
// back, the WidgetKey is Ready again with the same key.
func TestMissingKeySecretIsReported(t *testing.T) {
	e, c, _ := rotatingEnv(t, "2s")
	e.rotatingKey("kept", 24*time.Hour, time.Hour)
	base := defaultName(e.ns, "kept")
	e.waitState("kept", "the first key", "key="+base, []string{base})
	backup := &corev1.Secret{}
	if err := e.kube.Get(e.ctx(), types.NamespacedName{Namespace: e.ns, Name: "kept-conn"}, backup); err != nil {
		t.Fatal(err)
	}
	saved := backup.Data

	c.advance(pastLostKeyWindow)
	if err := e.kube.Delete(e.ctx(), backup.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, "Synced=False naming the key", func() (bool, string) {
		sc := e.getKey("kept").GetCondition(xpv2.TypeSynced)
		return sc.Status == corev1.ConditionFalse && strings.Contains(sc.Message, base+" (created") && strings.Contains(sc.Message, "nothing was revoked"), fmt.Sprintf("Synced %s: %s", sc.Status, sc.Message)
	})
	if got := e.apiKeys(); !slices.Equal(got, []string{base}) {
		t.Errorf("keys in the Widget API with the Secret missing: %v, want %s alone", got, base)
	}
	if k, err := e.client().VerifyKey(e.ctx(), defaultName(e.ns, "rw"), string(saved["key"])); err != nil || k.Name != base {
		t.Errorf("the key whose Secret is missing: %v, %v; want it still valid", k, err)
	}

	// The Secret restored from a backup (as docs/restore.md says: its
	// type and data, not its owner, whose uid a restore cannot keep):
	// Ready again, with the same key.
	restored := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "kept-conn"}, Type: backup.Type, Data: saved}
	if err := e.kube.Create(e.ctx(), restored); err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, "Synced and Ready with the Secret back", func() (bool, string) {
		k := e.getKey("kept")
		sc, rc := k.GetCondition(xpv2.TypeSynced), k.GetCondition(xpv2.TypeReady)
		return sc.Status == corev1.ConditionTrue && rc.Status == corev1.ConditionTrue, fmt.Sprintf("Synced %s (%s), Ready %s", sc.Status, sc.Message, rc.Status)
	})
	e.waitState("kept", "the same key", "key="+base, []string{base})
}
