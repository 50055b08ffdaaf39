package kube

import (
	"context"
	"fmt"
	"strings"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PackageRunning reports whether pkg, a Provider or a Function that names
// its own object, runs its current revision in Crossplane's namespace ns:
// the package Healthy; its revision of source and of DeploymentRuntimeConfig
// config (either unchecked when empty) RevisionHealthy and RuntimeHealthy;
// the revision's Deployment rolled out with every replica ready and
// available; and no pod of another revision left (until those are gone they
// run with a ServiceAccount whose binding may be gone). When it does not
// run yet, why says what is missing. It refreshes pkg.
func PackageRunning(ctx context.Context, c client.Reader, ns string, pkg pkgv1.PackageWithRuntime, source, config string) (running bool, why string) {
	if err := c.Get(ctx, types.NamespacedName{Name: pkg.GetName()}, pkg); err != nil {
		return false, err.Error()
	}
	if hl := pkg.GetCondition(pkgv1.TypeHealthy); hl.Status != corev1.ConditionTrue {
		return false, "Healthy=" + string(hl.Status) + " " + hl.Message
	}
	rev := pkg.GetCurrentRevision()
	var r pkgv1.PackageRevisionWithRuntime = &pkgv1.ProviderRevision{}
	label := "pkg.crossplane.io/provider"
	if _, ok := pkg.(*pkgv1.Function); ok {
		r, label = &pkgv1.FunctionRevision{}, "pkg.crossplane.io/function"
	}
	if err := c.Get(ctx, types.NamespacedName{Name: rev}, r); err != nil {
		return false, "revision " + rev + ": " + err.Error()
	}
	if source != "" && r.GetSource() != source {
		return false, "revision " + rev + " is of " + r.GetSource() + ", not " + source + " yet"
	}
	if ref := r.GetRuntimeConfigRef(); config != "" && (ref == nil || ref.Name != config) {
		return false, "revision " + rev + " is not of DeploymentRuntimeConfig " + config + " yet"
	}
	for _, t := range []xpv2.ConditionType{pkgv1.TypeRevisionHealthy, pkgv1.TypeRuntimeHealthy} {
		if cd := r.GetCondition(t); cd.Status != corev1.ConditionTrue {
			return false, "revision " + rev + " " + string(t) + "=" + string(cd.Status) + " " + cd.Message
		}
	}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: rev}, d); err != nil {
		return false, "Deployment " + rev + ": " + err.Error()
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	if s := d.Status; s.ObservedGeneration < d.Generation || s.UpdatedReplicas != want || s.ReadyReplicas != want ||
		s.AvailableReplicas != want || s.Replicas != want {
		return false, fmt.Sprintf("Deployment %s: %d of %d replicas updated, %d ready, %d available", rev, s.UpdatedReplicas, want, s.ReadyReplicas, s.AvailableReplicas)
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{label: pkg.GetName()}); err != nil {
		return false, err.Error()
	}
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Name, rev+"-") {
			return false, "pod " + p.Name + " of another revision still runs"
		}
	}
	return true, ""
}
