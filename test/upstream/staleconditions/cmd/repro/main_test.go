package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/widgetco/crossplane-widget/test/upstream/staleconditions"
)

func TestRunCannotRun(t *testing.T) {
	dir := t.TempDir()
	unreachable := filepath.Join(dir, "unreachable")
	// A kubeconfig of a server nobody listens on: port 1 of loopback.
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(unreachable, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	o := staleconditions.Options{Namespace: "x", N: 1, Clients: 1, Quiet: time.Second, Timeout: time.Second}
	cases := map[string]struct {
		kubeconfig string
		apply      bool
	}{
		"NoKubeconfig": {kubeconfig: filepath.Join(dir, "missing")},
		"Unreachable":  {kubeconfig: unreachable, apply: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := run(tc.kubeconfig, tc.apply, o); got != 2 {
				t.Errorf("run(%s): want exit code 2 (could not run), got %d", name, got)
			}
		})
	}
}
