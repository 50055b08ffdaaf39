package fn

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
)

// These tests send RunFunction requests that try to make it misbehave: work
// without bound, compose what the API server rejects, or compose without an
// XR.

// callWithin calls RunFunction and fails the test unless it returns within
// limit. A call that does not return is left running: the test binary ends
// it.
func callWithin(t *testing.T, f *Function, ctx context.Context, req *fnv1.RunFunctionRequest, limit time.Duration) *fnv1.RunFunctionResponse {
	t.Helper()
	type answer struct {
		rsp *fnv1.RunFunctionResponse
		err error
	}
	done := make(chan answer, 1)
	go func() {
		rsp, err := f.RunFunction(ctx, req)
		done <- answer{rsp, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			t.Fatalf("RunFunction(): %v", a.err)
		}
		return a.rsp
	case <-time.After(limit):
		t.Fatalf("RunFunction() did not return within %s", limit)
		return nil
	}
}

func TestRunFunctionRejectsAbuse(t *testing.T) {
	converging := durationpb.New(time.Minute)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	const (
		keysViolation = "XWidget team-a/web violates the platform's widget policy; change these fields: spec.keys: Invalid value: 1000000000: the platform allows 0 to 3 access keys"
		noXR          = "The request has no observed composite resource, so there is nothing to compose. Crossplane always sends the composite resource it reconciles: check what sent the request (crossplane render needs an XR)."
		noName        = "The composite resource cannot be composed because the request describes it with invalid fields; Crossplane sends only composite resources the API server accepted, so check what sent the request: metadata.name: Required value: Crossplane always sends the name of the composite resource"
		badClaim      = "XWidget web-5t2xq names its claim with invalid fields; Crossplane sets spec.claimRef of the composite resource of a claim, so remove or correct it: spec.claimRef.namespace: Invalid value: \"Team B\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
		stopped       = "cannot compose the composite resource: the call was cancelled or timed out before the function finished: context canceled"
	)
	rejected := func(reason, msg string) *fnv1.RunFunctionResponse {
		return &fnv1.RunFunctionResponse{
			Meta:       &fnv1.ResponseMeta{Tag: "tag", Ttl: converging},
			Conditions: []*fnv1.Condition{wantCondition("PolicyCompliant", condFalse, reason, msg)},
			Results:    []*fnv1.Result{result(sevWarning, reason, msg), fatal(msg)},
		}
	}

	cases := map[string]struct {
		reason string
		ctx    context.Context
		req    *fnv1.RunFunctionRequest
		want   *fnv1.RunFunctionResponse
	}{
		"KeysFarAboveTheMaximum": {
			reason: "An XR asking for a billion keys, with a connection Secret of its own, from an XRD without a maximum, should be rejected at once: the keys are checked before anything loops over them.",
			ctx:    context.Background(),
			req: testRequest{xr: nsXR(
				set("spec.keys", 1000000000),
				set("spec.writeConnectionSecretToRef", map[string]any{"name": "my-secret"}),
			)}.build(),
			want: rejected("PolicyViolation", keysViolation),
		},
		"NoObservedComposite": {
			reason: "A request without an observed XR should be a fatal result, composing nothing.",
			ctx:    context.Background(),
			req:    &fnv1.RunFunctionRequest{Meta: &fnv1.RequestMeta{Tag: "tag"}},
			want:   rejected("InvalidRequest", noXR),
		},
		"ObservedCompositeWithoutResource": {
			reason: "An observed XR without its resource is no XR: a fatal result, composing nothing.",
			ctx:    context.Background(),
			req:    &fnv1.RunFunctionRequest{Meta: &fnv1.RequestMeta{Tag: "tag"}, Observed: &fnv1.State{Composite: &fnv1.Resource{}}},
			want:   rejected("InvalidRequest", noXR),
		},
		"CompositeWithoutName": {
			reason: "An XR without a name, which no API server holds, should be a fatal result: the function names the connection Secret after it.",
			ctx:    context.Background(),
			req:    testRequest{xr: nsXR(unset("metadata.name")), input: policyInput()}.build(),
			want:   rejected("InvalidRequest", noName),
		},
		"InvalidClaimReference": {
			reason: "A legacy XR whose spec.claimRef names no claim the API server could hold should be a fatal result that says what to fix: composed resources are described by the claim.",
			ctx:    context.Background(),
			req:    testRequest{xr: legacyXR(set("spec.claimRef.namespace", "Team B")), input: policyInput()}.build(),
			want:   rejected("InvalidRequest", badClaim),
		},
		"CancelledContext": {
			reason: "A call whose context is done should compose nothing and change no condition: a fatal result says it was cut short.",
			ctx:    cancelled,
			req:    testRequest{xr: nsXR(), input: policyInput()}.build(),
			want: &fnv1.RunFunctionResponse{
				Meta:    &fnv1.ResponseMeta{Tag: "tag", Ttl: converging},
				Results: []*fnv1.Result{fatal(stopped)},
			},
		},
	}

	f, err := NewFunction()
	if err != nil {
		t.Fatalf("NewFunction(): %v", err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := callWithin(t, f, tc.ctx, tc.req, 5*time.Second)
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("%s\nf.RunFunction(...): -want rsp, +got rsp:\n%s", tc.reason, diff)
			}
		})
	}
}

// A countdownContext is done once its Err method has been called n times. It
// ends a call at a chosen point of its work, the same point on every run.
type countdownContext struct {
	context.Context

	left atomic.Int64
}

func newCountdownContext(n int64) *countdownContext {
	c := &countdownContext{Context: context.Background()}
	c.left.Store(n)
	return c
}

func (c *countdownContext) Err() error {
	if c.left.Add(-1) < 0 {
		return context.DeadlineExceeded
	}
	return nil
}

// TestRunFunctionStopsWhenContextEnds ends a call at every point at which
// RunFunction looks at its context, one call per point, starting with a
// context that is done before the call. Each call should answer either with
// a fatal result that composes nothing, or, once the context lasts long
// enough, exactly as a call whose context never ends: never with work that
// was cut short.
func TestRunFunctionStopsWhenContextEnds(t *testing.T) {
	f, err := NewFunction()
	if err != nil {
		t.Fatalf("NewFunction(): %v", err)
	}
	// The fatal result names the XR once the function has read it.
	stopped := func(xr string) string {
		return "cannot compose " + xr + ": the call was cancelled or timed out before the function finished: context deadline exceeded"
	}
	xrOf := map[string]string{"LegacyReady": "XWidget web-5t2xq"}

	for name, req := range requests() {
		t.Run(name, func(t *testing.T) {
			complete, err := f.RunFunction(context.Background(), proto.CloneOf(req))
			if err != nil {
				t.Fatalf("RunFunction(): %v", err)
			}
			xr := xrOf[name]
			if xr == "" {
				xr = "XWidget team-a/web"
			}
			for n := int64(0); ; n++ {
				if n > 1000 {
					t.Fatalf("RunFunction() still stops after %d checks of its context; it should look at it a few times per key at most", n)
				}
				got, err := f.RunFunction(newCountdownContext(n), proto.CloneOf(req))
				if err != nil {
					t.Fatalf("RunFunction(): %v", err)
				}
				if proto.Equal(complete, got) {
					if n == 0 {
						t.Fatal("a call whose context is done from the start should compose nothing, but it composed as if its context never ended")
					}
					break
				}
				msg := stopped(xr)
				if got.GetResults()[0].GetMessage() == stopped("the composite resource") {
					// Cut short before the XR was read.
					msg = stopped("the composite resource")
				}
				want := &fnv1.RunFunctionResponse{
					Meta:    &fnv1.ResponseMeta{Tag: "tag", Ttl: durationpb.New(time.Minute)},
					Desired: req.GetDesired(),
					Results: []*fnv1.Result{fatal(msg)},
				}
				if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
					t.Fatalf("a call whose context ends after %d checks should either be complete or compose nothing: -want cut short, +got:\n%s", n, diff)
				}
			}
		})
	}
}

// TestRunFunctionLongNames composes XRs whose names make the descriptions
// the function writes longer than the 256 characters a Widget or WidgetKey
// may have. The descriptions should be shortened to fit, on a character
// boundary; everything else should be as for a short name.
func TestRunFunctionLongNames(t *testing.T) {
	ns230 := strings.Repeat("a", 230)
	claim240 := strings.Repeat("b", 240)
	nsReady := map[string]*fnv1.Resource{
		"widget":            observed(nsWidget(widgetReady(nsEndpoint)), nil),
		"connection-secret": observed(map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": ns230 + "-connection"}}, nil),
	}
	nsKeyWant := func(i int) map[string]any {
		return build(wantNSKey(i),
			set("spec.initProvider.description", "Access key "+[]string{"0", "1"}[i]+" of XWidget team-a/"+strings.Repeat("a", 199)+"..., managed by Crossplane"),
			set("spec.writeConnectionSecretToRef.name", ns230+"-key-"+[]string{"0", "1"}[i]),
		)
	}

	cases := map[string]struct {
		reason string
		req    testRequest
		want   map[string]*fnv1.Resource
	}{
		"NamespacedXRNameOf230": {
			reason: "A namespaced XR of a 230-character name should get a Widget and WidgetKeys whose descriptions are shortened to 256 characters, keeping what they say of the XR's owner: its kind, namespace and the start of its name.",
			req:    testRequest{xr: nsXR(set("metadata.name", ns230)), input: policyInput(), observed: nsReady},
			want: map[string]*fnv1.Resource{
				"widget": desired(build(wantNSWidget(), set("spec.forProvider.description", "XWidget team-a/"+strings.Repeat("a", 215)+"..., managed by Crossplane")), readyTrue),
				"key-0":  desired(nsKeyWant(0), readyFalse),
				"key-1":  desired(nsKeyWant(1), readyFalse),
				"connection-secret": desired(build(wantNSSecret(map[string]any{"endpoint": b64(nsEndpoint), "widget": b64("team-a-web-8k2mz")}),
					set("metadata.name", ns230+"-connection")), readyTrue),
			},
		},
		"LegacyClaimNameOf240": {
			reason: "A legacy XR whose claim has a 240-character name should get a Widget and WidgetKey whose descriptions are shortened to 256 characters.",
			req: testRequest{xr: legacyXR(set("spec.claimRef.name", claim240)), input: policyInput(), observed: map[string]*fnv1.Resource{
				"widget": observed(legacyWidget(), nil),
			}},
			want: map[string]*fnv1.Resource{
				"widget": desired(build(wantLegacyWidget(), set("spec.forProvider.description", "WidgetClaim team-b/"+strings.Repeat("b", 211)+"..., managed by Crossplane")), readyTrue),
				"key-0":  desired(build(wantLegacyKey(), set("spec.initProvider.description", "Access key 0 of WidgetClaim team-b/"+strings.Repeat("b", 195)+"..., managed by Crossplane")), readyFalse),
			},
		},
	}

	f, err := NewFunction()
	if err != nil {
		t.Fatalf("NewFunction(): %v", err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rsp, err := f.RunFunction(context.Background(), tc.req.build())
			if err != nil {
				t.Fatalf("RunFunction(): %v", err)
			}
			if c := rsp.GetConditions(); len(c) == 0 || c[0].GetType() != "PolicyCompliant" || c[0].GetStatus() != condTrue {
				t.Errorf("%s\nthe XR should be PolicyCompliant, got conditions %v", tc.reason, c)
			}
			if diff := cmp.Diff(tc.want, rsp.GetDesired().GetResources(), protocmp.Transform()); diff != "" {
				t.Errorf("%s\nf.RunFunction(...): -want desired resources, +got:\n%s", tc.reason, diff)
			}
			// A Widget's description is managed (spec.forProvider); a
			// WidgetKey's is set once, when the key is created
			// (spec.initProvider).
			descriptionPath := map[string]string{"Widget": "spec.forProvider.description", "WidgetKey": "spec.initProvider.description"}
			for name, r := range rsp.GetDesired().GetResources() {
				o := fieldpath.Pave(r.GetResource().AsMap())
				kind, _ := o.GetString("kind")
				path, ok := descriptionPath[kind]
				if !ok {
					continue
				}
				d, err := o.GetString(path)
				if err != nil {
					t.Errorf("%s\n%s: a %s should have %s: %v", tc.reason, name, kind, path, err)
				}
				if n := len([]rune(d)); n > 256 {
					t.Errorf("%s\n%s: the description has %d characters; a Widget or WidgetKey may have 256", tc.reason, name, n)
				}
			}
		})
	}
}
