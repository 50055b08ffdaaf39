// Command repro runs the stale-conditions reproduction (package
// staleconditions) against the cluster of the current kubeconfig: Crossplane
// v2 and function-patch-and-transform installed, nothing else needed. It
// exits 1 when any XR lost Ready after its first Ready, 0 when none did,
// and 2 when it could not run.
//
//	go run ./test/upstream/staleconditions/cmd/repro -n 60
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/test/upstream/staleconditions"
)

func main() {
	var (
		kubeconfig = flag.String("kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG, then ~/.kube/config)")
		o          staleconditions.Options
		apply      = flag.Bool("apply", true, "create the XRD, the Composition and the ClusterRole first (manifests/)")
	)
	flag.StringVar(&o.Namespace, "namespace", "stale-conditions", "namespace for the XRs; it must hold no XRepro yet")
	flag.IntVar(&o.N, "n", 60, "XRs to create")
	flag.IntVar(&o.Clients, "clients", 8, "clients creating them at once")
	flag.DurationVar(&o.Quiet, "quiet", 30*time.Second, "how long to keep watching after all are Ready")
	flag.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "how long to wait for all to be Ready")
	flag.Parse()
	o.Progress = func(ready, n int, elapsed time.Duration) {
		fmt.Fprintf(os.Stderr, "%d of %d XRepros Ready after %s\n", ready, n, elapsed.Round(time.Second))
	}
	os.Exit(run(*kubeconfig, *apply, o))
}

func run(kubeconfig string, apply bool, o staleconditions.Options) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "repro: cannot load a kubeconfig (pass -kubeconfig or set KUBECONFIG):", err)
		return 2
	}
	kube, err := client.New(cfg, client.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "repro: cannot reach the cluster:", err)
		return 2
	}
	if apply {
		actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := staleconditions.Apply(actx, kube)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "repro:", err)
			return 2
		}
	}
	fmt.Fprintf(os.Stderr, "Creating %d XRepros in %s with %d clients\n", o.N, o.Namespace, o.Clients)
	res, err := staleconditions.Run(ctx, cfg, kube, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "repro:", err)
		return 2
	}
	fmt.Printf("%d XRepros Ready %s after the first create; %d losses of Ready on %d XRs until %s after all were Ready, %d of them after\n",
		res.N, res.ReadyAfter.Round(100*time.Millisecond), len(res.Losses), res.LostXRs(), o.Quiet, res.LostAfterAllReady())
	for _, r := range res.Reasons() {
		fmt.Println("  " + r)
	}
	if len(res.Losses) > 0 {
		return 1
	}
	return 0
}
