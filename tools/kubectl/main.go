// Command kubectl is kubectl: k8s.io/kubernetes' cmd/kubectl main, built
// against k8s.io/kubectl at the version of the kube libraries in the
// product's go.mod, so that the quick start needs only Go and make. The
// Kubernetes module itself is not required: its main is these few lines.
// Built by hack/tools.sh; see tools/README.md.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"

	// Client auth plugins (exec, OIDC), as upstream's kubectl links them.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
