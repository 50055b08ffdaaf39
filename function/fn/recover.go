package fn

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/crossplane/function-sdk-go/errors"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/response"

	"github.com/widgetco/crossplane-widget/function/input/v1beta1"
)

// errInternal is the Fatal result of a call that panicked. It says nothing
// of the panic: the XR's owner reads it, and the panic's value may hold
// what the request held.
var errInternal = errors.New("function-widget hit an internal error composing this XR; this is a bug: report it to your platform team, who will find the details in function-widget's log at this time")

// PanicCounter counts calls that panicked. Implementations must be safe for
// concurrent use.
type PanicCounter interface {
	Panicked()
}

// Recover wraps next so that a call that panics ends with a Fatal result
// for its XR, instead of ending the process and every other tenant's calls
// with it: grpc-go does not recover panics in handlers, and the function
// SDK installs no interceptor that does. The panic and its stack go to log,
// and c counts it. The wrapper sits around the service rather than in a
// gRPC interceptor because only the service has the request from which a
// response for the XR is built, and because the SDK's Serve installs extra
// interceptors only when metrics are served.
func Recover(next fnv1.FunctionRunnerServiceServer, log logging.Logger, c PanicCounter) fnv1.FunctionRunnerServiceServer {
	return &recoverer{next: next, log: log, panics: c}
}

type recoverer struct {
	fnv1.UnimplementedFunctionRunnerServiceServer

	next   fnv1.FunctionRunnerServiceServer
	log    logging.Logger
	panics PanicCounter
}

// RunFunction calls the wrapped RunFunction and turns a panic into a Fatal
// result.
func (r *recoverer) RunFunction(ctx context.Context, req *fnv1.RunFunctionRequest) (rsp *fnv1.RunFunctionResponse, err error) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		meta := req.GetObserved().GetComposite().GetResource().GetFields()["metadata"].GetStructValue().GetFields()
		r.log.Info("RunFunction panicked: answering with a Fatal result",
			"xr-namespace", meta["namespace"].GetStringValue(), "xr-name", meta["name"].GetStringValue(),
			"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		r.panics.Panicked()
		rsp = response.To(req, v1beta1.DefaultConvergingTTL)
		response.Fatal(rsp, errInternal)
		err = nil
	}()
	return r.next.RunFunction(ctx, req)
}
