// Package fn is function-widget, a Crossplane composition function. It
// composes an XWidget - a Crossplane v2 namespaced XR, or a legacy XR behind
// a WidgetClaim - into a Widget and its WidgetKeys from provider-widget,
// decides the XR's readiness, reports conditions on the XR and its claim,
// writes the widget's endpoint and state to the XR's status, and makes the
// endpoint and keys available as connection details. The namespace's
// policies and quotas are applied by package nspolicy.
//
// The command in the parent directory serves a Function over gRPC.
package fn

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/crossplane/function-sdk-go/errors"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"

	"github.com/widgetco/crossplane-widget/apis"
	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
	"github.com/widgetco/crossplane-widget/function/internal/nspolicy"
)

// Function composes an XWidget into a Widget, its WidgetKeys and, for a
// namespaced XWidget, a connection Secret. It is safe for concurrent use.
type Function struct {
	fnv1.UnimplementedFunctionRunnerServiceServer

	log     logging.Logger
	metrics Metrics
	// clock tells the time a new XR has waited for its place in its
	// namespace's quotas (internal/nspolicy/admission.go).
	clock func() time.Time
}

// An Option configures a Function.
type Option func(f *Function)

// WithLogger makes the Function log to l. By default it does not log.
func WithLogger(l logging.Logger) Option {
	return func(f *Function) { f.log = l }
}

// WithMetrics makes the Function record the outcome of every call in m. By
// default it records nothing.
func WithMetrics(m Metrics) Option {
	return func(f *Function) { f.metrics = m }
}

var registerSchemes = sync.OnceValue(func() error {
	// composed.From looks up the kind of a typed object in composed.Scheme.
	// It is process-wide state, so it is written once, before any request.
	if err := apis.AddToScheme(composed.Scheme); err != nil {
		return errors.Wrap(err, "cannot register the Widget API types")
	}
	return errors.Wrap(corev1.AddToScheme(composed.Scheme), "cannot register the core/v1 API types")
})

// NewFunction returns a Function. The first call registers the kinds the
// function composes with the function SDK; later calls reuse them.
func NewFunction(o ...Option) (*Function, error) {
	if err := registerSchemes(); err != nil {
		return nil, err
	}
	f := &Function{log: logging.NewNopLogger(), metrics: NopMetrics{}, clock: time.Now}
	for _, fn := range o {
		fn(f)
	}
	return f, nil
}

// RunFunction composes the observed XWidget. A problem the XWidget's owner or
// the platform team must fix is returned as a fatal result, never as an
// error. RunFunction does not modify req.
//
// The work RunFunction does is bounded by the size of req, never by the
// numbers req holds: every number and collection that decides how much work
// or output there is, such as spec.keys, is checked against its limit before
// it is used. Once ctx is done, RunFunction stops as soon as it can and
// answers with a fatal result; it never returns what it composed until then.
func (f *Function) RunFunction(ctx context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	if isOperation(req) {
		return f.runOperation(ctx, req), nil
	}
	log := f.log.WithValues("tag", req.GetMeta().GetTag())

	rsp := response.To(req, v1beta1.DefaultConvergingTTL)
	rsp.Desired = shallowCopy(req.GetDesired())

	s, err := readState(ctx, req)
	if err != nil {
		return f.refuse(ctx, rsp, log, s, err), nil
	}
	log = log.WithValues("xr", s.xr.String(), "flavour", s.xr.flavour)

	pol, err := newPolicy(s.input)
	if err != nil {
		return f.refuse(ctx, rsp, log, s, err), nil
	}

	want, err := resolve(s.xr, pol, s.widget)
	if err == nil {
		err = checkAdoption(ctx, s.xr, want, s.observed)
	}
	if err == nil {
		err = checkAdoptedSize(s.xr, want, pol, s.widget)
	}
	if err != nil {
		return f.refuse(ctx, rsp, log, s, err), nil
	}

	// The namespace's policies and quotas can only narrow what the
	// Composition's policy allows (package nspolicy).
	v, err := nspolicy.Admit(req, admission(s, pol, want), f.clock())
	rsp.Requirements = v.Requirements
	if err != nil {
		return f.refuse(ctx, rsp, log, s, fromAdmission(err)), nil
	}
	if v.Pending != nil {
		return f.wait(rsp, log, s, condition(*v.Pending)), nil
	}

	out, err := compose(ctx, s, pol, want)
	if err == nil {
		err = applyOnDelete(out, want, s.observed)
	}
	if err == nil {
		err = applyAdoption(ctx, out, s.xr, want, s.observed)
	}
	if err == nil {
		err = applyRotation(out, want, s.observed)
	}
	if err == nil {
		// Work that ctx cut short returns partial results without an
		// error. ctx stays done once it is, so this catches all of them.
		err = ctx.Err()
	}
	if err != nil {
		return f.refuse(ctx, rsp, log, s, err), nil
	}
	out.conditions = replaceCondition(out.conditions, condition(v.Condition()))
	if err := out.writeTo(rsp); err != nil {
		return f.fail(rsp, log, s, err), nil
	}
	for _, c := range setConditions(rsp, s.xr, out.conditions...) {
		log.Info("Condition changed", "type", c.Type, "status", c.Status, "reason", c.Reason, "message", c.Message)
	}
	rsp.Meta.Ttl = ttlFor(pol, out.ready, out.creates(s.observed))
	f.metrics.Observe(s.xr.flavour, outcomeOf(out.ready))
	log.Debug("Composed XWidget", "ready", out.ready, "ttl", rsp.GetMeta().GetTtl().AsDuration().String())
	return rsp, nil
}

// shallowCopy copies the desired state of earlier pipeline steps, which
// response.To shares with the request, so that the response can be built
// without changing the request. The function replaces the desired XR and adds
// or replaces desired composed resources, but never changes a Resource
// message, so the copy shares them with the request instead of cloning every
// resource of every earlier step.
func shallowCopy(d *fnv1.State) *fnv1.State {
	if d == nil {
		return nil
	}
	out := &fnv1.State{Composite: d.GetComposite(), Resources: maps.Clone(d.GetResources())}
	out.ProtoReflect().SetUnknown(d.ProtoReflect().GetUnknown())
	return out
}

// wait answers for a new XR whose place in its namespace's quotas is not
// decided yet (internal/nspolicy/admission.go): it composes nothing, keeps the
// XR not ready, and asks to be called again in nspolicy.PendingTTL. It keeps the requirements, so that
// Crossplane fetches the namespace's XRs again.
func (f *Function) wait(rsp *fnv1.RunFunctionResponse, log logging.Logger, s *state, c condition) *fnv1.RunFunctionResponse {
	s.dxr.Ready = resource.ReadyFalse
	if err := response.SetDesiredCompositeResource(rsp, s.dxr); err != nil {
		return f.fail(rsp, log, s, errors.Wrap(err, "cannot set the desired composite resource"))
	}
	for _, c := range setConditions(rsp, s.xr, c) {
		log.Info("Condition changed", "type", c.Type, "status", c.Status, "reason", c.Reason, "message", c.Message)
	}
	rsp.Meta.Ttl = durationpb.New(nspolicy.PendingTTL)
	f.metrics.Observe(s.xr.flavour, OutcomeConverging)
	return rsp
}

// reject answers a request that cannot be composed with a fatal result, so
// that Crossplane changes nothing that exists. The PolicyCompliant condition
// of the XR and its claim says why. When that condition changes, a warning
// result targeted at both precedes the fatal one (which Crossplane emits on
// the XR only), so that the claim's owner gets an event too.
func (f *Function) reject(rsp *fnv1.RunFunctionResponse, log logging.Logger, s *state, err error) *fnv1.RunFunctionResponse {
	c := rejectedCondition(s.xr, err)
	setConditions(rsp, s.xr, c)
	response.Fatal(rsp, errors.New(c.Message))
	f.metrics.Observe(s.xr.flavour, OutcomeFatal)
	log.Info("Cannot compose XWidget", "reason", c.Reason, "error", c.Message)
	return rsp
}

// refuse answers a request the function does not compose with a fatal
// result: a call that ctx ended before it finished fails (it is nobody's
// fault, and the XR's conditions stay as they are), a rejection is rejected,
// and any other error fails.
func (f *Function) refuse(ctx context.Context, rsp *fnv1.RunFunctionResponse, log logging.Logger, s *state, err error) *fnv1.RunFunctionResponse {
	// Crossplane does not call a function again after a fatal result, so a
	// refusal asks for nothing.
	rsp.Requirements = nil
	if cerr := ctx.Err(); cerr != nil {
		return f.fail(rsp, log, s, errors.Wrap(cerr, "the call was cancelled or timed out before the function finished"))
	}
	if r := (&rejection{}); errors.As(err, &r) {
		return f.reject(rsp, log, s, err)
	}
	return f.fail(rsp, log, s, err)
}

// fail answers a request the function validated but still cannot compose,
// which only a bug or an ended ctx causes, with a fatal result.
func (f *Function) fail(rsp *fnv1.RunFunctionResponse, log logging.Logger, s *state, err error) *fnv1.RunFunctionResponse {
	err = errors.Wrapf(err, "cannot compose %s", s.xr)
	response.Fatal(rsp, err)
	f.metrics.Observe(s.xr.flavour, OutcomeFatal)
	log.Info("Cannot compose XWidget", "error", err)
	return rsp
}
