package main

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTryThisShell pins the shell lines the demo prints once the objects are
// Ready: with only Go and make, every command it suggests must work through
// the kubectl and the Crossplane CLI that make demo built.
func TestTryThisShell(t *testing.T) {
	cases := map[string]struct {
		reason        string
		kubectl       string
		crank         string
		kubectlInPath bool
		want          []string
	}{
		"BuiltTools": {
			reason:  "The kubectl and the Crossplane CLI hack/tools.sh built are offered as aliases, and trace is suggested.",
			kubectl: "/cache/kubectl-v1.35.3-0123abcd/bin/kubectl",
			crank:   "/cache/crank-v2.2.1-4f591fe3/bin/crank",
			want: []string{
				"  export KUBECONFIG=/clone/_output/demo/kubeconfig",
				"  alias kubectl=/cache/kubectl-v1.35.3-0123abcd/bin/kubectl   # built by hack/tools.sh at the version of go.mod's kube libraries",
				"  alias crossplane=/cache/crank-v2.2.1-4f591fe3/bin/crank   # the Crossplane CLI (crank)",
				"  crossplane beta trace xwidgets.platform.widgetco.io/web -n team-a   # and docs/troubleshooting.md",
			},
		},
		"NoKubectlAnywhere": {
			reason: "Without a built kubectl or one in PATH the demo says that any kubectl works.",
			want: []string{
				"  export KUBECONFIG=/clone/_output/demo/kubeconfig",
				"  (kubectl is not in your PATH; any kubectl works with this kubeconfig.)",
			},
		},
		"KubectlInPath": {
			reason:        "A kubectl in PATH needs no words.",
			kubectlInPath: true,
			want:          []string{"  export KUBECONFIG=/clone/_output/demo/kubeconfig"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			values := shellValues("/clone/_output/demo/kubeconfig", tc.kubectl, tc.crank, tc.kubectlInPath)
			maps.Copy(values, map[string]any{"XRNamespace": "team-a", "XRName": "web"})
			var b strings.Builder
			if err := tryThis.Execute(&b, values); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range strings.Split(b.String(), "\n") {
				if strings.Contains(l, "KUBECONFIG") || strings.Contains(l, "alias ") ||
					strings.Contains(l, "any kubectl") || strings.Contains(l, "beta trace") {
					got = append(got, l)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ntryThis shell lines: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestTryThisMetrics pins the metrics lines: one curl per forwarded pod.
func TestTryThisMetrics(t *testing.T) {
	values := shellValues("/clone/_output/demo/kubeconfig", "", "", true)
	maps.Copy(values, map[string]any{"Metrics": []metricsEndpoint{
		{Addr: "127.0.0.1:40001", Pod: "provider-widget pod p-1", Match: "^widget_"},
		{Addr: "127.0.0.1:40002", Pod: "function-widget", Match: "^function_widget_"},
	}})
	var b strings.Builder
	if err := tryThis.Execute(&b, values); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, "/metrics") {
			got = append(got, l)
		}
	}
	want := []string{
		"  curl -s http://127.0.0.1:40001/metrics | grep -E '^widget_'   # provider-widget pod p-1",
		"  curl -s http://127.0.0.1:40002/metrics | grep -E '^function_widget_'   # function-widget",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tryThis metrics lines: -want, +got:\n%s", diff)
	}
}
