package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
)

const (
	// tick is how often the demo looks at the objects.
	tick = 2 * time.Second
	// heartbeat is how often it repeats an unchanged status line while
	// waiting.
	heartbeat = 6 * time.Second
)

// providerEvents are the events worth showing as they happen once the
// objects are Ready: provider-widget acting on a change.
var providerEvents = map[string]bool{"DriftRepaired": true, "UpdatedWidget": true, "AdoptedWidget": true, "RotatedKey": true}

// applyExamples creates the example XWidget and WidgetClaim, and their
// namespaces.
func applyExamples(ctx context.Context, kc client.Client, root string) ([]*unstructured.Unstructured, error) {
	files := []string{"namespaced/xr.yaml", "legacy/claim.yaml"}
	objs := make([]*unstructured.Unstructured, 0, len(files))
	for _, f := range files {
		o, err := platform.ReadObjects(filepath.Join(root, "examples", "composition", f))
		if err != nil {
			return nil, err
		}
		if len(o) != 1 {
			return nil, errors.Errorf("examples/composition/%s holds %d objects, want 1", f, len(o))
		}
		if err := platform.EnsureNamespace(ctx, kc, o[0].GetNamespace()); err != nil {
			return nil, err
		}
		objs = append(objs, o[0])
	}
	return objs, platform.Create(ctx, kc, objs...)
}

// A watcher shows the example objects' progress.
type watcher struct {
	kc    client.Client
	dir   string
	objs  []*unstructured.Unstructured
	begin time.Time

	lines    map[string]string
	printed  map[string]time.Time
	problems map[string]string
	events   map[types.UID]bool
}

func newWatcher(kc client.Client, dir string, objs []*unstructured.Unstructured) *watcher {
	return &watcher{
		kc: kc, dir: dir, objs: objs, begin: time.Now(),
		lines: map[string]string{}, printed: map[string]time.Time{}, problems: map[string]string{}, events: map[types.UID]bool{},
	}
}

// untilReady shows a status line per object every few seconds, and the
// messages of conditions that are not True whenever they change, until
// every object is Synced and Ready. It returns how long that took.
func (w *watcher) untilReady(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		ready := true
		for _, o := range w.objs {
			if err := w.kc.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
				ready = false
				w.show(platform.Name(o), o.GetKind()+" "+platform.Name(o)+": cannot get it: "+err.Error(), nil, true)
				continue
			}
			ok := isReady(o)
			ready = ready && ok
			w.show(platform.Name(o), platform.StatusLine(o), platform.Problems(o), !ok)
		}
		if ready {
			return time.Since(w.begin), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-deadline.C:
			return 0, errors.Errorf("not Ready after %s", timeout)
		case <-t.C:
		}
	}
}

// show prints an object's status line when it changed, or when it has not
// been printed for a while and repeat is true, and its problems when they
// changed.
func (w *watcher) show(key, line string, problems []string, repeat bool) {
	if line != w.lines[key] || (repeat && time.Since(w.printed[key]) >= heartbeat) {
		fmt.Printf("[%5s] %s\n", time.Since(w.begin).Round(time.Second), line)
		w.lines[key] = line
		w.printed[key] = time.Now()
	}
	p := strings.Join(problems, "\n")
	if p != w.problems[key] {
		for _, m := range problems {
			fmt.Printf("          %s\n", m)
		}
		w.problems[key] = p
	}
}

// explain says why the objects are not Ready: their conditions and those
// of the managed resources composed for them, and writes diagnostics.
func (w *watcher) explain(ctx context.Context, cause error) {
	fmt.Printf("\nThe example XWidget and WidgetClaim are %v. What they and their managed resources report:\n", cause)
	for _, o := range w.objs {
		w.describe(o)
	}
	for _, l := range w.composed(ctx) {
		for i := range l.Items {
			w.describe(&l.Items[i])
		}
	}
	fmt.Printf("\nLogs: the control plane's in %s, kubelet's and containerd's in %s; kubectl logs -n %s <pod> for Crossplane and the packages.\n",
		filepath.Join(w.dir, "logs"), filepath.Join(w.dir, "node", "logs"), cluster.CrossplaneNamespace)
}

func (w *watcher) describe(u *unstructured.Unstructured) {
	fmt.Println("  " + platform.StatusLine(u))
	for _, p := range platform.Problems(u) {
		fmt.Println("      " + p)
	}
}

// composed lists the managed resources composed for the objects: the
// XWidget's namespaced ones and the claim's cluster-scoped ones.
func (w *watcher) composed(ctx context.Context) []*unstructured.UnstructuredList {
	var out []*unstructured.UnstructuredList
	for _, o := range w.objs {
		for _, kind := range []string{"WidgetList", "WidgetKeyList"} {
			l := &unstructured.UnstructuredList{}
			var opts []client.ListOption
			if o.GetKind() == "WidgetClaim" {
				l.SetAPIVersion("widget.widgetco.io/v1beta1")
				opts = append(opts, client.MatchingLabels{"crossplane.io/claim-namespace": o.GetNamespace(), "crossplane.io/claim-name": o.GetName()})
			} else {
				l.SetAPIVersion("widget.m.widgetco.io/v1beta1")
				opts = append(opts, client.InNamespace(o.GetNamespace()), client.MatchingLabels{"crossplane.io/composite": o.GetName()})
			}
			l.SetKind(kind)
			if err := w.kc.List(ctx, l, opts...); err == nil {
				out = append(out, l)
			}
		}
	}
	return out
}

// follow keeps showing status changes, and provider-widget's events about
// repairs and updates, until ctx is done.
func (w *watcher) follow(ctx context.Context) {
	// Events from before now are old news.
	w.newEvents(ctx)
	go func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, o := range w.objs {
				if err := w.kc.Get(ctx, client.ObjectKeyFromObject(o), o); err == nil {
					w.show(platform.Name(o), platform.StatusLine(o), platform.Problems(o), false)
				}
			}
			for _, e := range w.newEvents(ctx) {
				fmt.Printf("[%5s] event %s on %s %s: %s\n", time.Since(w.begin).Round(time.Second), e.Reason, e.InvolvedObject.Kind, eventObject(e), e.Message)
			}
		}
	}()
}

// newEvents returns provider-widget's events not seen before.
func (w *watcher) newEvents(ctx context.Context) []corev1.Event {
	var out []corev1.Event
	for _, ns := range w.eventNamespaces() {
		l := &corev1.EventList{}
		if err := w.kc.List(ctx, l, client.InNamespace(ns)); err != nil {
			continue
		}
		for _, e := range l.Items {
			if w.events[e.UID] || !providerEvents[e.Reason] {
				continue
			}
			w.events[e.UID] = true
			out = append(out, e)
		}
	}
	return out
}

// eventNamespaces are the objects' namespaces and "default", where events
// about cluster-scoped managed resources go.
func (w *watcher) eventNamespaces() []string {
	out := []string{corev1.NamespaceDefault}
	for _, o := range w.objs {
		out = append(out, o.GetNamespace())
	}
	return out
}

func eventObject(e corev1.Event) string {
	if e.InvolvedObject.Namespace == "" {
		return e.InvolvedObject.Name
	}
	return e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
}

func isReady(u *unstructured.Unstructured) bool {
	return platform.GetCondition(u, "Synced").Status == "True" && platform.GetCondition(u, "Ready").Status == "True"
}

// tryThis is what the demo prints once the objects are Ready.
var tryThis = template.Must(template.New("try").Parse(`
{{.XR}} and {{.Claim}} are Ready ({{.Took}} after they were applied).

  export KUBECONFIG={{.Kubeconfig}}
{{- if .Kubectl}}
  alias kubectl={{.Kubectl}}   # built by hack/tools.sh at the version of go.mod's kube libraries
{{- else if .NoKubectl}}
  (kubectl is not in your PATH; any kubectl works with this kubeconfig.)
{{- end}}
{{- if .Crank}}
  alias crossplane={{.Crank}}   # the Crossplane CLI (crank)
{{- end}}

Look around:
  kubectl get pods -A -o wide   # core, the RBAC manager, CoreDNS, the provider and the function, run by kubelet
  kubectl get xwidgets.platform.widgetco.io,widgetclaims,widgets.widget.m.widgetco.io,widgets.widget.widgetco.io -A
  kubectl get widget -A      # the category: claims, both kinds of XWidget, managed resources
  kubectl get xwidgets.platform.widgetco.io -n {{.XRNamespace}} {{.XRName}} -o yaml
{{- if .Crank}}
  crossplane beta trace xwidgets.platform.widgetco.io/{{.XRName}} -n {{.XRNamespace}}   # and docs/troubleshooting.md
{{- end}}
  kubectl get secret -n {{.XRNamespace}} {{.XRSecret}} -o go-template='{{.SecretTemplate}}'
  kubectl get secret -n {{.ClaimNamespace}} {{.ClaimSecret}} -o go-template='{{.SecretTemplate}}'

Change the XWidget's widget behind Crossplane's back, through the Widget API at
{{.URL}} (token {{.Token}}: a local demo token), and watch
provider-widget put it back; this terminal shows its DriftRepaired event:
  curl -s -X PATCH -H 'Authorization: Bearer {{.Token}}' -H 'Content-Type: application/json' -d '{"size":"large"}' {{.URL}}/v1/widgets/{{.Widget}}
  curl -s -H 'Authorization: Bearer {{.Token}}' {{.URL}}/v1/widgets/{{.Widget}}     # size is {{.Size}} again
  kubectl get events -n {{.XRNamespace}} --field-selector reason=DriftRepaired
{{- if .Metrics}}

Metrics, at the pods' addresses on the node's bridge (only the provider's
leader reconciles: kubectl get lease -n crossplane-system names it):
{{- range .Metrics}}
  curl -s http://{{.Addr}}/metrics | grep -E '{{.Match}}'   # {{.Pod}}
{{- end}}
{{- end}}

Logs: {{.Dir}}/logs. Press Ctrl-C to stop and tear everything down.
`))

// printTryThis prints the KUBECONFIG, the cached kubectl and Crossplane CLI
// (so that every command it suggests works with only Go and make), and what
// to try.
func printTryThis(kubeconfig, apiURL string, objs []*unstructured.Unstructured, took time.Duration, dir, crank string, metrics []metricsEndpoint) error {
	xr, claim := objs[0], objs[1]
	str := func(u *unstructured.Unstructured, fields ...string) string {
		v, _, _ := unstructured.NestedString(u.Object, fields...)
		return v
	}
	_, lookErr := exec.LookPath("kubectl")
	values := shellValues(kubeconfig, os.Getenv("KUBECTL_BIN"), crank, lookErr == nil)
	maps.Copy(values, map[string]any{
		"XR":             "XWidget " + platform.Name(xr),
		"Claim":          "WidgetClaim " + platform.Name(claim),
		"Took":           took.Round(time.Second),
		"XRNamespace":    xr.GetNamespace(),
		"XRName":         xr.GetName(),
		"XRSecret":       str(xr, "status", "connectionSecretName"),
		"ClaimNamespace": claim.GetNamespace(),
		"ClaimSecret":    str(claim, "spec", "writeConnectionSecretToRef", "name"),
		"URL":            apiURL,
		"Token":          demoToken,
		"Widget":         str(xr, "status", "externalName"),
		"Size":           str(xr, "spec", "size"),
		"Dir":            dir,
		"Metrics":        metrics,
		// kubectl's go-template printing a Secret's decoded data.
		"SecretTemplate": `{{range $k, $v := .data}}{{$k}}: {{$v | base64decode}}{{"\n"}}{{end}}`,
	})
	return tryThis.Execute(os.Stdout, values)
}

// shellValues are tryThis's values for the reader's shell: the kubeconfig,
// the kubectl hack/tools.sh built ($KUBECTL_BIN, "" when none) or whether
// one is in PATH, and the Crossplane CLI ($CRANK_BIN).
func shellValues(kubeconfig, kubectl, crank string, kubectlInPath bool) map[string]any {
	return map[string]any{
		"Kubeconfig": kubeconfig,
		"Kubectl":    kubectl,
		"NoKubectl":  kubectl == "" && !kubectlInPath,
		"Crank":      crank,
	}
}

// A metricsEndpoint is a pod's metrics address.
type metricsEndpoint struct {
	Addr  string // host:port
	Pod   string // what serves it
	Match string // a grep -E pattern for its own metrics
}

// metricsEndpoints are the metrics ports (8080) of the provider's and the
// function's pods, at their addresses on the node's bridge, which this
// machine reaches (kubectl port-forward works too).
func metricsEndpoints(ctx context.Context, kc client.Client) ([]metricsEndpoint, error) {
	const port = "8080"
	pods := &corev1.PodList{}
	if err := kc.List(ctx, pods, client.InNamespace(cluster.CrossplaneNamespace)); err != nil {
		return nil, errors.Wrap(err, "cannot list Crossplane's pods")
	}
	var out []metricsEndpoint
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		addr := net.JoinHostPort(p.Status.PodIP, port)
		switch {
		case strings.HasPrefix(p.Name, platform.ProviderName+"-"):
			out = append(out, metricsEndpoint{Addr: addr, Pod: "provider-widget pod " + p.Name, Match: "^(widget_|crossplane_managed_resource_)"})
		case strings.HasPrefix(p.Name, platform.FunctionName+"-"):
			out = append(out, metricsEndpoint{Addr: addr, Pod: "function-widget pod " + p.Name, Match: "^function_widget_"})
		}
	}
	return out, nil
}
