package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/widgetco/crossplane-widget/test/lib/proc"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestRender with the current output")

// Paths relative to the repository root, where the Crossplane CLI runs, so
// that paths in its messages do not depend on the clone's location.
const (
	repoRoot    = ".."
	examples    = "examples/composition"
	functions   = examples + "/functions.yaml"
	goldenDir   = "testdata/render"
	renderTries = 50
)

// A renderCase is one `crossplane render` of an example.
type renderCase struct {
	reason      string
	xr          string
	composition string
	xrd         string
	observed    string
	// required are the resources that `crossplane render` fetches for the
	// function's requirements (--required-resources): a file or directory.
	required string
	wantErr  bool
}

func renderCases() map[string]renderCase {
	ns := func(f string) string { return examples + "/namespaced/" + f }
	lg := func(f string) string { return examples + "/legacy/" + f }
	ad := func(f string) string { return "function/testdata/adopt/" + f }
	pl := func(f string) string { return "function/testdata/policy/" + f }
	rt := func(f string) string { return "function/testdata/rotation/" + f }
	return map[string]renderCase{
		"namespaced-new": {
			reason: "A new namespaced XWidget gets a namespaced Widget and a connection Secret; keys wait for the widget.",
			xr:     ns("xr.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"),
		},
		"namespaced-provisioning": {
			reason: "While the widget is provisioned, the XWidget says so and shows its name, state and region; its access keys are composed.",
			xr:     ns("xr.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), observed: ns("observed-provisioning.yaml"),
		},
		"namespaced-ready": {
			reason: "Once the widget is ready its keys are composed and the endpoint reaches the status and the Secret.",
			xr:     ns("xr.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), observed: ns("observed-ready.yaml"),
		},
		"namespaced-policy-violation": {
			reason: "An XWidget that violates the platform's policy is not composed; the fatal result names each field and what is allowed.",
			xr:     "function/testdata/xr-policy-violation.yaml", composition: ns("composition.yaml"), xrd: ns("definition.yaml"),
			wantErr: true,
		},
		"namespaced-keep": {
			reason: "An XWidget kept on delete composes its Widget and WidgetKeys with management policies without Delete.",
			xr:     "function/testdata/xr-keep.yaml", composition: ns("composition.yaml"), xrd: ns("definition.yaml"), observed: ns("observed-ready.yaml"),
		},
		"adopt-review-new": {
			reason: "An XWidget that adopts a widget first composes an observe-only Widget that names it, without the fields the XR leaves unset, and no keys.",
			xr:     ad("xr-review.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"),
		},
		"adopt-review": {
			reason: "In review the XWidget reports the provider's review in its Adopted condition and status.adoption; nothing is taken over and no key is composed.",
			xr:     ad("xr-review.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), observed: ad("observed-review.yaml"),
		},
		"adopt-manage": {
			reason: "Switching to Manage after a review that found the widget adoptable gives the Widget full management policies; keys wait for the takeover.",
			xr:     ad("xr-manage.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), observed: ad("observed-review.yaml"),
		},
		"adopt-managed": {
			reason: "Once the widget is taken over the XWidget says so and composes its own keys.",
			xr:     ad("xr-manage.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), observed: ad("observed-managed.yaml"),
		},
		"adopt-size-not-allowed": {
			reason: "Adopting without spec.size a widget of a size the policy does not allow is a fatal result on spec.size.",
			xr:     ad("xr-review-no-size.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), observed: ad("observed-large.yaml"),
			wantErr: true,
		},
		"adopt-not-found": {
			reason: "Adopting a name no widget has is a fatal result on spec.adopt.name.",
			xr:     ad("xr-review.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), observed: ad("observed-not-found.yaml"),
			wantErr: true,
		},
		"adopt-out-of-reach": {
			reason: "Adopting another namespace's widget is a fatal result on spec.adopt.name that names neither the owner nor its namespace.",
			xr:     ad("xr-review.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), observed: ad("observed-out-of-reach.yaml"),
			wantErr: true,
		},
		"legacy-adopt-owned": {
			reason: "A claim adopting a widget another resource manages is refused without passing on who, which its cluster-scoped Widget sees.",
			xr:     ad("xr-legacy.yaml"), composition: lg("composition.yaml"), xrd: lg("definition.yaml"), observed: ad("observed-legacy-owned.yaml"),
			wantErr: true,
		},
		"rotation": {
			reason: "An XWidget's rotation, with the policy's defaults, becomes the rotation of every WidgetKey it composes.",
			xr:     rt("xr-rotation.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), observed: ns("observed-ready.yaml"),
		},
		"rotation-leaked": {
			reason: "Rotate now and revoke at once: requestedAt and revokePreviousAt reach every WidgetKey, with the policy's default overlap.",
			xr:     rt("xr-leaked.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), observed: ns("observed-ready.yaml"),
		},
		"rotation-period-too-short": {
			reason: "A period below the policy's minimum is a fatal result on spec.rotation.period; nothing is changed or revoked.",
			xr:     rt("xr-period-too-short.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), observed: ns("observed-ready.yaml"),
			wantErr: true,
		},
		"rotation-period-too-long": {
			reason: "A period above the policy's maximum is a fatal result on spec.rotation.period.",
			xr:     rt("xr-period-too-long.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), observed: ns("observed-ready.yaml"),
			wantErr: true,
		},
		"rotation-overlap-too-long": {
			reason: "An overlap not shorter than the period is a fatal result on spec.rotation.overlap.",
			xr:     rt("xr-overlap-too-long.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), observed: ns("observed-ready.yaml"),
			wantErr: true,
		},
		"rotation-overlap-above-max": {
			reason: "An overlap above the policy's maximum is a fatal result on spec.rotation.overlap.",
			xr:     rt("xr-overlap-above-max.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), observed: ns("observed-ready.yaml"),
			wantErr: true,
		},
		"legacy-new": {
			reason: "A new legacy XWidget (of a claim) gets a cluster-scoped Widget and no Secret.",
			xr:     lg("xr.yaml"), composition: lg("composition.yaml"), xrd: lg("definition.yaml"),
		},
		"legacy-ready": {
			reason: "Once the widget of a legacy XWidget is ready its key is composed, with a connection secret in the policy's namespace.",
			xr:     lg("xr.yaml"), composition: lg("composition.yaml"), xrd: lg("definition.yaml"), observed: lg("observed-ready.yaml"),
		},
		"policy-team-a": {
			reason: "With the two teams' namespace policies, team-a's XWidget is admitted; PolicyCompliant names team-a's EnvironmentConfig and its limits.",
			xr:     ns("xr.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), required: "examples/policy",
		},
		"policy-team-b-rejected": {
			reason: "The same XWidget in team-b is rejected: team-b's EnvironmentConfig allows only small widgets with one key.",
			xr:     pl("xr-team-b.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), required: "examples/policy",
			wantErr: true,
		},
		"policy-team-b-admitted": {
			reason: "A small XWidget with one key fits team-b's policy.",
			xr:     pl("xr-team-b-small.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), required: "examples/policy",
		},
		"policy-quota-exceeded": {
			reason: "team-b already has 3 of 3 widgets, one of them a claim's: the XWidget is rejected on the quota, with who has them.",
			xr:     pl("xr-team-b-small.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), required: pl("required-quota-full.yaml"),
			wantErr: true,
		},
		"policy-admitted-over-limit": {
			reason: "An XWidget admitted before team-b's policy narrowed stays as it is: it is composed unchanged, and PolicyCompliant=False says what it exceeds.",
			xr:     pl("xr-team-b.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), observed: pl("observed-team-b.yaml"), required: "examples/policy",
		},
		"policy-invalid": {
			reason: "A malformed namespace policy blocks new XWidgets in the namespaces it may select with a message that names the object and the field.",
			xr:     pl("xr-team-b-small.yaml"), composition: ns("composition.yaml"), xrd: ns("definition.yaml"), required: pl("required-invalid.yaml"),
			wantErr: true,
		},
		"legacy-failing": {
			reason: "The provider's own error about the Widget reaches the XWidget's (and so the claim's) WidgetReady condition, with a warning.",
			xr:     lg("xr.yaml"), composition: lg("composition.yaml"), xrd: lg("definition.yaml"), observed: lg("observed-failing.yaml"),
		},
	}
}

// TestRender renders every example with the Crossplane CLI against the real
// function binary, and compares the output with golden files in
// testdata/render. Run it with -update to rewrite them. It needs the
// Crossplane CLI (CRANK_BIN, from hack/tools.sh); without it, it is skipped.
func TestRender(t *testing.T) {
	crank := os.Getenv("CRANK_BIN")
	if crank == "" {
		t.Skip(`CRANK_BIN is not set: run eval "$(bash hack/tools.sh env)" (after make tools) to render the examples with the Crossplane CLI`)
	}
	addr := startFunction(t)

	for name, tc := range renderCases() {
		t.Run(name, func(t *testing.T) {
			args := []string{"render", tc.xr, tc.composition, functions, "--xrd", tc.xrd, "--include-full-xr", "--include-function-results",
				"--function-annotations", "render.crossplane.io/runtime-development-target=" + addr}
			if tc.observed != "" {
				args = append(args, "--observed-resources", tc.observed)
			}
			if tc.required != "" {
				args = append(args, "--required-resources", tc.required)
			}
			cmd := exec.CommandContext(t.Context(), crank, args...)
			cmd.Dir = repoRoot
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()

			got := stdout.Bytes()
			switch {
			case tc.wantErr && err == nil:
				t.Fatalf("%s\ncrossplane render should fail, but succeeded:\n%s", tc.reason, got)
			case tc.wantErr:
				got = stderr.Bytes()
			case err != nil:
				t.Fatalf("%s\ncrossplane render %v: %v\n%s", tc.reason, args, err, stderr.Bytes())
			}

			golden := filepath.Join(goldenDir, name+".yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o600); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("cannot read golden file (run go test ./function -run TestRender -update to write it): %v", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s\ncrossplane render: -%s, +got (if the change is intended, run go test ./function -run TestRender -update):\n%s", tc.reason, golden, diff)
			}
		})
	}
}

// startFunction builds the function and runs it with --insecure on a free
// loopback port, the way `crossplane render` expects a function of the
// Development runtime. It returns the function's address once it serves.
func startFunction(t *testing.T) string {
	t.Helper()
	bin, err := proc.Build(t.Context(), "github.com/widgetco/crossplane-widget/function")
	if err != nil {
		t.Fatal(err)
	}

	addr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	fn := exec.CommandContext(t.Context(), bin, "--insecure", "--address="+addr, "--metrics-address=", "--health-probe-address=", "--debug")
	fn.Stdout, fn.Stderr = &logs, &logs
	if err := fn.Start(); err != nil {
		t.Fatalf("cannot start the function: %v", err)
	}
	t.Cleanup(func() {
		_ = fn.Process.Kill()
		_ = fn.Wait()
		if t.Failed() {
			t.Logf("function logs:\n%s", logs.String())
		}
	})

	if err := waitServing(t.Context(), addr); err != nil {
		t.Fatalf("the function does not serve at %s: %v\n%s", addr, err, logs.String())
	}
	return addr
}

// waitServing waits until the gRPC health service at addr reports SERVING.
func waitServing(ctx context.Context, addr string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	hc := healthpb.NewHealthClient(conn)
	var last error
	for range renderTries {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		rsp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && rsp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return errors.Join(errors.New("not serving after 5s"), last)
}
