package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// controlPlaneConfigMap keeps, in the provider's namespace, the name of the
// control plane the provider runs in when --control-plane names none.
// It is made once, at random: every replica and every later version of the
// provider in this cluster reads the same name, and another cluster makes
// its own. A backup that restores it makes the restored cluster the same
// control plane as the original (docs/restore.md).
const (
	controlPlaneConfigMap = "widget-control-plane"
	controlPlaneKey       = "name"
)

// controlPlaneName returns the control plane this provider runs in: name,
// when the operator gave one; else the one kept in namespace ns's
// ConfigMap, made now if there is none. Outside a cluster with no
// namespace, it returns none: the provider then writes no control plane
// label and tells no control plane from another.
func controlPlaneName(ctx context.Context, cms typedcorev1.ConfigMapsGetter, ns, name string) (string, error) {
	if name != "" {
		if errs := validation.IsValidLabelValue(name); len(errs) > 0 {
			return "", fmt.Errorf("--control-plane %q is not a valid label value: %s", name, strings.Join(errs, "; "))
		}
		return name, nil
	}
	if ns == "" {
		return "", nil
	}
	for range 2 {
		cm, err := cms.ConfigMaps(ns).Get(ctx, controlPlaneConfigMap, metav1.GetOptions{})
		if err == nil {
			return keptName(cm)
		}
		if !kerrors.IsNotFound(err) {
			return "", fmt.Errorf("cannot read ConfigMap %s/%s, which names this control plane: %w", ns, controlPlaneConfigMap, err)
		}
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controlPlaneConfigMap},
			Data:       map[string]string{controlPlaneKey: "cp-" + strings.ToLower(rand.Text()[:12])},
		}
		made, err := cms.ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		if err == nil {
			return keptName(made)
		}
		if !kerrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("cannot create ConfigMap %s/%s to name this control plane: %w", ns, controlPlaneConfigMap, err)
		}
		// Another replica made it first: read its name.
	}
	return "", fmt.Errorf("ConfigMap %s/%s, which names this control plane, was made and deleted again while the provider started; start it again", ns, controlPlaneConfigMap)
}

// logControlPlane says at start which control plane the provider runs in.
func logControlPlane(log logging.Logger, cp string) {
	if cp == "" {
		log.Info("No control plane name (no --control-plane, and no namespace to keep one in): widgets are not labelled with one, and a second control plane managing them would not be detected")
		return
	}
	log.Info("Control plane", "name", cp)
}

// keptName returns the control plane name a ConfigMap keeps.
func keptName(cm *corev1.ConfigMap) (string, error) {
	name := cm.Data[controlPlaneKey]
	errs := validation.IsValidLabelValue(name)
	if name == "" {
		errs = append(errs, "it is empty")
	}
	if len(errs) > 0 {
		return "", fmt.Errorf("ConfigMap %s/%s names this control plane %q, which is not a valid label value (%s): set data.%s to at most 63 letters, digits, '-', '_' or '.', or delete the ConfigMap to have a new name made; every widget labelled with the old name is then another control plane's until taken over (docs/restore.md)", cm.Namespace, cm.Name, name, strings.Join(errs, "; "), controlPlaneKey)
	}
	return name, nil
}
