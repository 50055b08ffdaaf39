package harness

import (
	"context"
	"net"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/proc"
)

// environment is the container's environment: the image's, what a kubelet
// adds (HOSTNAME, the kubernetes Service), then the container's env in
// order, with $(VAR) references and downward API fields resolved.
func (p *pod) environment(ctx context.Context, c corev1.Container, img *image) ([]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, kv := range img.config.Env {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	set("HOSTNAME", p.name)
	set("KUBERNETES_SERVICE_HOST", p.env.apiHost)
	set("KUBERNETES_SERVICE_PORT", p.env.apiPort)
	set("KUBERNETES_SERVICE_PORT_HTTPS", p.env.apiPort)
	set("KUBERNETES_PORT", "tcp://"+net.JoinHostPort(p.env.apiHost, p.env.apiPort))
	if len(c.EnvFrom) > 0 {
		return nil, errors.New("CreateContainerConfigError: the harness's node does not support envFrom")
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expandOne(e.Value, vars))
			continue
		}
		v, err := p.valueFrom(ctx, e)
		if err != nil {
			return nil, err
		}
		set(e.Name, v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

var labelPath = regexp.MustCompile(`^metadata\.(labels|annotations)\['([^']+)'\]$`)

func (p *pod) valueFrom(ctx context.Context, e corev1.EnvVar) (string, error) {
	vf := e.ValueFrom
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: p.env.namespace, Name: n} }
	switch {
	case vf.FieldRef != nil:
		f := vf.FieldRef.FieldPath
		switch f {
		case "metadata.name":
			return p.name, nil
		case "metadata.namespace":
			return p.env.namespace, nil
		case "spec.serviceAccountName":
			return p.spec.ServiceAccountName, nil
		case "spec.nodeName":
			return "harness", nil
		case "status.podIP", "status.hostIP":
			return "127.0.0.1", nil
		}
		if m := labelPath.FindStringSubmatch(f); m != nil && m[1] == "labels" {
			return p.labels[m[2]], nil
		}
		return "", errors.Errorf("CreateContainerConfigError: env %s: the harness's node does not support field %s", e.Name, f)
	case vf.SecretKeyRef != nil:
		s := &corev1.Secret{}
		if err := p.env.kube.Get(ctx, key(vf.SecretKeyRef.Name), s); err != nil {
			return "", errors.Wrapf(err, "CreateContainerConfigError: env %s: cannot get Secret %s", e.Name, vf.SecretKeyRef.Name)
		}
		return string(s.Data[vf.SecretKeyRef.Key]), nil
	case vf.ConfigMapKeyRef != nil:
		cm := &corev1.ConfigMap{}
		if err := p.env.kube.Get(ctx, key(vf.ConfigMapKeyRef.Name), cm); err != nil {
			return "", errors.Wrapf(err, "CreateContainerConfigError: env %s: cannot get ConfigMap %s", e.Name, vf.ConfigMapKeyRef.Name)
		}
		return cm.Data[vf.ConfigMapKeyRef.Key], nil
	}
	return "", errors.Errorf("CreateContainerConfigError: env %s: unsupported valueFrom", e.Name)
}

var varRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// expandOne resolves $(VAR) as Kubernetes does: known variables expand,
// unknown ones stay as written, $$ escapes.
func expandOne(s string, vars map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

func expand(in []string, vars map[string]string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		out = append(out, expandOne(s, vars))
	}
	return out
}

// runAs resolves the container's user as a kubelet does: the container's
// securityContext, then the pod's, then the image's numeric USER. It refuses
// root when runAsNonRoot is set.
func runAs(pod *corev1.PodSecurityContext, c *corev1.SecurityContext, imageUser string) (*proc.User, error) {
	var uid, gid *int64
	nonRoot := false
	if pod != nil {
		uid, gid, nonRoot = pod.RunAsUser, pod.RunAsGroup, ptr.Deref(pod.RunAsNonRoot, false)
	}
	if c != nil {
		if c.RunAsUser != nil {
			uid = c.RunAsUser
		}
		if c.RunAsGroup != nil {
			gid = c.RunAsGroup
		}
		if c.RunAsNonRoot != nil {
			nonRoot = *c.RunAsNonRoot
		}
	}
	if uid == nil || gid == nil {
		u, g, _ := strings.Cut(imageUser, ":")
		if uid == nil {
			n, err := strconv.ParseInt(u, 10, 64)
			if err != nil && u != "" {
				return nil, errors.Errorf("CreateContainerConfigError: image user %q is not numeric and the pod sets no runAsUser", imageUser)
			}
			uid = &n
		}
		if gid == nil {
			n, _ := strconv.ParseInt(g, 10, 64)
			gid = &n
		}
	}
	if nonRoot && *uid == 0 {
		return nil, errors.New("CreateContainerConfigError: container has runAsNonRoot and image will run as root")
	}
	return &proc.User{UID: uint32(*uid), GID: uint32(*gid)}, nil //nolint:gosec // IDs are small.
}
