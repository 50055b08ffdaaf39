package harness

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// chartRBAC are the templates of Crossplane's Helm chart that give core and
// the RBAC manager their ServiceAccounts and permissions, and create the
// aggregated crossplane-admin, -edit, -view and -browse ClusterRoles.
var chartRBAC = []string{
	"serviceaccount.yaml",
	"clusterrole.yaml",
	"clusterrolebinding.yaml",
	"rbac-manager-serviceaccount.yaml",
	"rbac-manager-clusterrole.yaml",
	"rbac-manager-clusterrolebinding.yaml",
	"rbac-manager-managed-clusterroles.yaml",
	"rbac-manager-allowed-provider-permissions.yaml",
}

// Names the chart gives with its default values.
const (
	coreServiceAccount = "crossplane"
	rbacServiceAccount = "rbac-manager"
)

// renderChartRBAC renders chartRBAC from the chart in dir (Crossplane's
// cluster/charts/crossplane) with its default values, as `helm install
// crossplane --namespace ns` would, and returns the objects. It implements
// the few template functions those templates use; any other makes it fail.
func renderChartRBAC(dir, ns string) ([]*unstructured.Unstructured, error) {
	values := map[string]any{}
	if err := readYAML(filepath.Join(dir, "values.yaml"), &values); err != nil {
		return nil, err
	}
	chart := map[string]any{}
	if err := readYAML(filepath.Join(dir, "Chart.yaml"), &chart); err != nil {
		return nil, err
	}
	data := map[string]any{
		"Values":  values,
		"Chart":   map[string]any{"Name": chart["name"], "Version": chart["version"], "AppVersion": chart["appVersion"]},
		"Release": map[string]any{"Name": "crossplane", "Namespace": ns, "Service": "Helm"},
	}
	root := template.New("chart").Option("missingkey=zero")
	root.Funcs(chartFuncs(root))
	files := append([]string{"_helpers.tpl"}, chartRBAC...)
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, "templates", f))
		if err != nil {
			return nil, errors.Wrapf(err, "cannot read Crossplane's Helm chart template %s", f)
		}
		if _, err := root.New(f).Parse(string(b)); err != nil {
			return nil, errors.Wrapf(err, "cannot parse Crossplane's Helm chart template %s", f)
		}
	}
	var out []*unstructured.Unstructured
	for _, f := range chartRBAC {
		buf := &bytes.Buffer{}
		if err := root.ExecuteTemplate(buf, f, data); err != nil {
			return nil, errors.Wrapf(err, "cannot render Crossplane's Helm chart template %s", f)
		}
		for _, doc := range strings.Split(buf.String(), "\n---") {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				return nil, errors.Wrapf(err, "cannot parse what Crossplane's Helm chart template %s rendered", f)
			}
			if len(u.Object) == 0 {
				continue
			}
			out = append(out, u)
		}
	}
	return out, nil
}

// chartFuncs are the Helm (sprig) functions the RBAC templates use.
func chartFuncs(root *template.Template) template.FuncMap {
	return template.FuncMap{
		"include": func(name string, data any) (string, error) {
			buf := &bytes.Buffer{}
			err := root.ExecuteTemplate(buf, name, data)
			return buf.String(), err
		},
		"indent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
		},
		"nindent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return "\n" + pad + strings.ReplaceAll(s, "\n", "\n"+pad)
		},
		"toYaml": func(v any) (string, error) {
			b, err := yaml.Marshal(v)
			return strings.TrimSuffix(string(b), "\n"), err
		},
		"default": func(def, v any) any {
			if v == nil || v == "" {
				return def
			}
			return v
		},
		"trunc": func(n int, s string) string {
			if len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"replace":    func(old, replacement, s string) string { return strings.ReplaceAll(s, old, replacement) },
		"quote":      func(v any) string { return `"` + strings.ReplaceAll(toString(v), `"`, `\"`) + `"` },
	}
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := yaml.Marshal(v)
	return strings.TrimSpace(string(b))
}

func readYAML(path string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return errors.Wrapf(err, "cannot read %s", path)
	}
	return errors.Wrapf(yaml.Unmarshal(b, into), "cannot parse %s", path)
}

// applyChartRBAC creates what renderChartRBAC renders, keeping objects that
// exist.
func (h *Harness) applyChartRBAC(ctx context.Context) error {
	objs, err := renderChartRBAC(h.tools.CrossplaneChart, h.opts.Namespace)
	if err != nil {
		return err
	}
	for _, u := range objs {
		if err := h.kube.Create(ctx, u); err != nil && !kerrors.IsAlreadyExists(err) {
			return errors.Wrapf(err, "cannot create %s %s from Crossplane's Helm chart", u.GetKind(), u.GetName())
		}
	}
	return nil
}
