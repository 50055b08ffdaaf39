package node_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/widgetco/crossplane-widget/test/harness"
)

// keySecretShape is what an access key secret looks like.
var keySecretShape = regexp.MustCompile(`wks_[A-Za-z0-9_-]{43}`)

// keyField matches the connection details that hold an access key secret.
var keyField = regexp.MustCompile(`^(key|key-[0-9]+|previousKey|previousKey-[0-9]+)$`)

// checkSecrets is the suite's canary check, after every scenario: the
// Widget API token, the registry's password, every access key secret the
// cluster's Secrets hold and every ServiceAccount token kubelet projected
// into a pod appear in no log (the control plane's, the Widget API's,
// kubelet's and containerd's, every container's) and in no object but
// Secrets.
func checkSecrets(ctx context.Context) error {
	c := env.c
	canaries := []harness.Canary{
		{Kind: "key-shaped string", Pattern: keySecretShape},
		{Kind: "Widget API token", Value: token},
		{Kind: "registry password", Value: c.Registry.Auth.Password},
	}
	secrets := &corev1.SecretList{}
	if err := c.Client().List(ctx, secrets); err != nil {
		return err
	}
	keys := 0
	for _, s := range secrets.Items {
		for k, v := range s.Data {
			if keyField.MatchString(k) && len(v) > 0 {
				canaries = append(canaries, harness.Canary{Kind: "access key secret", Value: string(v)})
				keys++
			}
		}
	}
	projected := 0
	_ = filepath.WalkDir(filepath.Join(c.Node.KubeletRootDir(), "pods"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "token" || !d.Type().IsRegular() || !strings.Contains(p, "kubernetes.io~projected") {
			return nil //nolint:nilerr // volumes come and go
		}
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			canaries = append(canaries, harness.Canary{Kind: "projected ServiceAccount token", Value: string(b)})
			projected++
		}
		return nil
	})
	logs := []string{filepath.Join(env.dir, "logs"), filepath.Join(env.dir, "node", "logs"), c.Node.PodLogsDir()}
	scan, err := harness.ScanForLeaks(ctx, c.Kube.Config, logs, harness.NewLeakScanner(canaries...))
	fmt.Printf("NODE SECRETS: looked for %d access key secrets, the Widget API token, the registry password, %d projected ServiceAccount tokens and key-shaped strings in %d logs and %d objects (every type but Secrets): %d leaks\n",
		keys, projected, scan.Logs, scan.Objects, len(scan.Leaks))
	if err != nil {
		return fmt.Errorf("cannot look everywhere for leaked secrets: %w", err)
	}
	if projected == 0 {
		return fmt.Errorf("found no projected ServiceAccount token under %s: the scan would miss them", c.Node.KubeletRootDir())
	}
	if len(scan.Leaks) == 0 {
		return nil
	}
	b := &strings.Builder{}
	fmt.Fprintf(b, "SECRET LEAKS: %d places hold a secret they must not (named by the first 12 hex digits of their SHA-256):", len(scan.Leaks))
	for i, l := range scan.Leaks {
		if i == 20 {
			fmt.Fprintf(b, "\n  ... and %d more", len(scan.Leaks)-i)
			break
		}
		fmt.Fprintf(b, "\n  %s", l)
	}
	return fmt.Errorf("%s", b.String())
}
