package fn

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/crossplane/function-sdk-go/errors"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
)

// The function is also an operation function (Crossplane's Operations,
// CronOperations and WatchOperations, alpha, core's --enable-operations):
// a step whose input is a RotateKeys asks for the keys of every XWidget or
// claim it selects to be rotated now; one whose input is an AdoptWidgets
// writes XWidgets that review the widgets a WidgetInventory lists
// (adoptwidgets.go); one whose input is a WidgetReport reports on them
// (report.go). It changes nothing in the Widget API
// itself: it sets each object's spec.rotation.requestedAt (and
// revokePreviousAt), which core applies with server-side apply, and the
// rotations run as any requested rotation does, through the composition and
// the provider, within the Widget API's rate limit.

// reqTargets names the objects a RotateKeys operation selects among the
// required resources; reqWatched is the object a WatchOperation injects.
const (
	reqTargets = "rotate-keys-targets"
	reqWatched = "ops.crossplane.io/watched-resource"
)

// isOperation reports whether req is an operation's: its input is a
// RotateKeys, an AdoptWidgets or a WidgetReport. A composition's has an observed composite
// resource instead.
func isOperation(req *fnv1.RunFunctionRequest) bool {
	in := req.GetInput().GetFields()
	k := in["kind"].GetStringValue()
	return req.GetObserved().GetComposite() == nil &&
		in["apiVersion"].GetStringValue() == v1beta1.APIVersion &&
		(k == v1beta1.KindRotateKeys || k == v1beta1.KindAdoptWidgets || k == v1beta1.KindWidgetReport)
}

// rotateKeys runs a RotateKeys operation step: it asks for the selected
// objects, then asks that each be rotated at now. A selection larger than
// the input's bound changes nothing and fails the step.
func rotateKeys(req *fnv1.RunFunctionRequest, now time.Time, log logging.Logger) *fnv1.RunFunctionResponse {
	rsp := response.To(req, response.DefaultTTL)
	in := &v1beta1.RotateKeys{}
	if err := readInput(req, in, validateRotateKeys); err != nil {
		response.Fatal(rsp, err)
		return rsp
	}
	targets, fetched, err := rotationTargets(req, in)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp
	}
	rsp.Requirements = &fnv1.Requirements{Resources: map[string]*fnv1.ResourceSelector{reqTargets: targetSelector(in.Target)}}
	if !fetched {
		// Core fetches the requirement and calls again.
		return rsp
	}
	limit := v1beta1.DefaultMaxTargets
	if in.MaxTargets != nil {
		limit = *in.MaxTargets
	}
	if len(targets) > int(limit) {
		response.Fatal(rsp, errors.Errorf("the target selects %d %s objects, more than maxTargets (%d): nothing was changed; narrow target.namespace or target.matchLabels, or raise maxTargets (at most %d)", len(targets), in.Target.Kind, limit, v1beta1.MaxTargets))
		return rsp
	}

	at := now.UTC().Truncate(time.Second).Format(time.RFC3339)
	rotation := map[string]any{"requestedAt": at}
	if in.RevokePrevious {
		rotation["revokePreviousAt"] = at
	}
	names := make([]string, 0, len(targets))
	rsp.Desired = &fnv1.State{Resources: map[string]*fnv1.Resource{}}
	for _, t := range targets {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": t.GetAPIVersion(),
			"kind":       t.GetKind(),
			"metadata":   map[string]any{"name": t.GetName(), "namespace": t.GetNamespace()},
			"spec":       map[string]any{"rotation": rotation},
		}}
		id := t.GetName()
		if ns := t.GetNamespace(); ns != "" {
			id = ns + "/" + id
		}
		names = append(names, id)
		r, err := resource.AsStruct(u)
		if err != nil {
			response.Fatal(rsp, errors.Wrapf(err, "cannot ask %s %s to rotate its keys", t.GetKind(), id))
			return rsp
		}
		rsp.Desired.Resources[id] = &fnv1.Resource{Resource: r}
	}
	slices.Sort(names)
	out := map[string]any{
		"requestedAt":    at,
		"revokePrevious": in.RevokePrevious,
		"targets":        int64(len(names)),
		"names":          toAny(names[:min(len(names), v1beta1.MaxTargetsListed)]),
	}
	if len(names) > v1beta1.MaxTargetsListed {
		out["namesOmitted"] = int64(len(names) - v1beta1.MaxTargetsListed)
	}
	if err := response.SetOutput(rsp, out); err != nil {
		response.Fatal(rsp, err)
		return rsp
	}
	how := "the replaced keys stay valid for their overlap"
	if in.RevokePrevious {
		how = "the replaced keys are revoked at once"
	}
	response.Normalf(rsp, "Asked %d %s objects to rotate their keys at %s; %s", len(names), in.Target.Kind, at, how)
	log.Info("Rotating keys", "targets", len(names), "kind", in.Target.Kind, "revokePrevious", in.RevokePrevious)
	return rsp
}

// validateRotateKeys checks the input's fields a user may get wrong.
func validateRotateKeys(in *v1beta1.RotateKeys) error {
	errs := targetErrors(in.Target)
	errs = append(errs, boundErrors("maxTargets", in.MaxTargets, v1beta1.MaxTargets)...)
	if len(errs) > 0 {
		slices.Sort(errs)
		return errors.Errorf("invalid RotateKeys input: %s", strings.Join(errs, "; "))
	}
	return nil
}

// readInput reads an operation step's input into in and checks it with
// validate. Either error is for the step's fatal result.
func readInput[T runtime.Object](req *fnv1.RunFunctionRequest, in T, validate func(T) error) error {
	if err := request.GetInput(req, in); err != nil {
		return errors.Wrapf(err, "cannot read the %s input", req.GetInput().GetFields()["kind"].GetStringValue())
	}
	return validate(in)
}

// boundErrors says what is wrong with an optional bound m of an input:
// nothing when unset or from 1 to most.
func boundErrors(field string, m *int32, most int32) []string {
	if m == nil || *m >= 1 && *m <= most {
		return nil
	}
	return []string{fmt.Sprintf("%s %d must be from 1 to %d", field, *m, most)}
}

// targetErrors are what is wrong with a target, for people.
func targetErrors(t v1beta1.RotationTarget) []string {
	var errs []string
	if gv := strings.Split(t.APIVersion, "/"); len(gv) != 2 || gv[0] == "" || gv[1] == "" {
		errs = append(errs, fmt.Sprintf("target.apiVersion %q must be group/version, such as platform.widgetco.io/v1alpha1", t.APIVersion))
	}
	if t.Kind == "" {
		errs = append(errs, "target.kind must name the XRD's kind (such as XWidget) or its claim's (such as WidgetClaim)")
	}
	if t.Namespace != "" && len(validation.IsDNS1123Label(t.Namespace)) > 0 {
		errs = append(errs, fmt.Sprintf("target.namespace %q is not a namespace name", t.Namespace))
	}
	for k, v := range t.MatchLabels {
		if len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
			errs = append(errs, fmt.Sprintf("target.matchLabels %s=%s is not a valid label", k, v))
		}
	}
	return errs
}

// rotationTargets returns the objects to rotate, and whether core has
// fetched them yet. A WatchOperation's watched object is the only target,
// when it is of the target's kind and matches its selector.
func rotationTargets(req *fnv1.RunFunctionRequest, in *v1beta1.RotateKeys) ([]*unstructured.Unstructured, bool, error) {
	if watched, ok, err := request.GetRequiredResource(req, reqWatched); err != nil {
		return nil, false, errors.Wrap(err, "cannot read the watched resource")
	} else if ok {
		var out []*unstructured.Unstructured
		for _, w := range watched {
			if selects(in.Target, w.Resource) {
				out = append(out, w.Resource)
			}
		}
		return out, true, nil
	}
	found, ok, err := request.GetRequiredResource(req, reqTargets)
	if err != nil {
		return nil, false, errors.Wrap(err, "cannot read the selected objects")
	}
	out := make([]*unstructured.Unstructured, 0, len(found))
	for _, f := range found {
		out = append(out, f.Resource)
	}
	return out, ok, nil
}

// selects reports whether target selects u.
func selects(t v1beta1.RotationTarget, u *unstructured.Unstructured) bool {
	if u.GetAPIVersion() != t.APIVersion || u.GetKind() != t.Kind || t.Namespace != "" && u.GetNamespace() != t.Namespace {
		return false
	}
	for k, v := range t.MatchLabels {
		if u.GetLabels()[k] != v {
			return false
		}
	}
	return true
}

// targetSelector asks core for the objects target selects.
func targetSelector(t v1beta1.RotationTarget) *fnv1.ResourceSelector {
	s := &fnv1.ResourceSelector{
		ApiVersion: t.APIVersion,
		Kind:       t.Kind,
		Match:      &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: t.MatchLabels}},
	}
	if t.Namespace != "" {
		s.Namespace = &t.Namespace
	}
	return s
}

// toAny converts names for the output's JSON.
func toAny(names []string) []any {
	out := make([]any, len(names))
	for i, n := range names {
		out[i] = n
	}
	return out
}

// runOperation runs an operation step (see isOperation).
func (f *Function) runOperation(_ context.Context, req *fnv1.RunFunctionRequest) *fnv1.RunFunctionResponse {
	kind := req.GetInput().GetFields()["kind"].GetStringValue()
	log := f.log.WithValues("tag", req.GetMeta().GetTag(), "operation", kind)
	switch kind {
	case v1beta1.KindAdoptWidgets:
		return adoptWidgets(req, log)
	case v1beta1.KindWidgetReport:
		return widgetReport(req, f.clock(), log)
	}
	return rotateKeys(req, f.clock(), log)
}
