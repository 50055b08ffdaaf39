//go:build linux

package cluster

import (
	"bytes"
	"context"
	"io"
	"strings"
	"text/template"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// dnsPullSecret is the pull Secret CoreDNS's pod uses.
const dnsPullSecret = "registry"

// coreDNSObjects are what the usual CoreDNS add-on installs, with an image
// from the cluster's registry: it serves cluster.local from the API and
// answers nothing else (there is no upstream resolver to forward to). It
// listens on 1053 as a non-root user; the Service maps 53 to it.
var coreDNSObjects = template.Must(template.New("coredns").Parse(`
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
imagePullSecrets: [{name: {{.PullSecret}}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:1053 {
        errors
        health 127.0.0.1:8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        cache 30
        loop
        reload
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      containers:
      - name: coredns
        image: {{.Image}}
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 1053, protocol: UDP}
        - {name: dns-tcp, containerPort: 1053, protocol: TCP}
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 2
        resources:
          limits: {memory: 170Mi}
          requests: {cpu: 50m, memory: 70Mi}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          runAsNonRoot: true
          capabilities: {drop: [ALL]}
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
      volumes:
      - name: config
        configMap: {name: coredns, items: [{key: Corefile, path: Corefile}]}
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: {{.IP}}
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, targetPort: 1053, protocol: UDP}
  - {name: dns-tcp, port: 53, targetPort: 1053, protocol: TCP}
`))

// startCoreDNS builds CoreDNS's image, pushes it to the registry and
// installs CoreDNS, then waits until its pod is ready.
func (c *Cluster) startCoreDNS(ctx context.Context) error {
	img, err := BuildImage(c.opts.Tools.CoreDNS, "/coredns", nil)
	if err != nil {
		return err
	}
	ref, err := c.Push(ctx, img, "coredns/coredns:v1.12.1")
	if err != nil {
		return err
	}
	if err := c.CreatePullSecret(ctx, "kube-system", dnsPullSecret); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := coreDNSObjects.Execute(&buf, map[string]string{"Image": ref, "IP": c.dnsIP, "PullSecret": dnsPullSecret}); err != nil {
		return errors.Wrap(err, "cannot render CoreDNS's objects")
	}
	if err := Apply(ctx, c.Kube.Client, buf.Bytes()); err != nil {
		return err
	}
	return WaitAvailable(ctx, c.Kube.Client, "kube-system", "coredns", 3*time.Minute)
}

// Apply creates each object of a multi-document YAML stream.
func Apply(ctx context.Context, kc client.Client, yaml []byte) error {
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(yaml), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return errors.Wrap(err, "cannot decode an object")
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := kc.Create(ctx, u); err != nil {
			return errors.Wrapf(err, "cannot create %s %s", u.GetKind(), u.GetName())
		}
	}
}

// WaitAvailable waits until the Deployment namespace/name has all its
// replicas updated and available.
func WaitAvailable(ctx context.Context, kc client.Client, namespace, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		d := &appsv1.Deployment{}
		err := kc.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, d)
		switch {
		case err != nil:
			last = err.Error()
		case d.Spec.Replicas != nil && d.Status.ObservedGeneration >= d.Generation &&
			d.Status.UpdatedReplicas == *d.Spec.Replicas && d.Status.AvailableReplicas == *d.Spec.Replicas &&
			d.Status.Replicas == *d.Spec.Replicas:
			return nil
		default:
			var conds []string
			for _, c := range d.Status.Conditions {
				conds = append(conds, string(c.Type)+"="+string(c.Status)+" "+c.Message)
			}
			last = "available " + itoa(d.Status.AvailableReplicas) + "; " + strings.Join(conds, "; ")
		}
		select {
		case <-ctx.Done():
			return errors.Errorf("deployment %s/%s not available within %s: %s", namespace, name, timeout, last)
		case <-time.After(time.Second):
		}
	}
}
