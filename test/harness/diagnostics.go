package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// DumpDiagnostics writes what is needed to debug a failure into dir (default:
// a new timestamped directory under <Dir>/diagnostics) and returns the
// directory:
//
//   - summary.txt: every custom resource with its status conditions;
//   - resources/<plural>.<group>.yaml: every object of every CRD-defined
//     type - Crossplane's packages, revisions, XRDs, compositions, MRDs and
//     activation policies, composites and claims, managed resources,
//     provider configs - discovered from the CRDs, without managedFields;
//   - events.txt: every event, oldest first;
//   - secrets.txt: Secret names, types and keys (never values);
//   - pods.txt: the pods the node runs for each Deployment, their state;
//   - forbidden.txt: requests of the package runtimes that RBAC refused
//     (from kube-apiserver's audit log), when there are any;
//   - logs/: each process's log (Crossplane core, runtimes, registry...).
//
// It is best effort: what it cannot read is listed in errors.txt and the
// rest is still written. It returns an error only when it cannot create the
// directory.
func (h *Harness) DumpDiagnostics(ctx context.Context, dir string) (string, error) {
	if dir == "" {
		dir = filepath.Join(h.dir, "diagnostics", time.Now().Format("20060102-150405.000"))
	}
	if err := os.MkdirAll(filepath.Join(dir, "resources"), 0o750); err != nil {
		return "", errors.Wrap(err, "cannot create diagnostics directory")
	}
	d := &dumper{dir: dir}
	if h.kube != nil {
		d.resources(ctx, h)
		d.events(ctx, h)
		d.secrets(ctx, h)
	}
	if h.node != nil {
		d.write("pods.txt", []byte(h.node.describe()))
	}
	if fb, err := h.Forbidden(); err != nil {
		d.errorf("%v", err)
	} else if len(fb) > 0 {
		var b strings.Builder
		for _, f := range fb {
			b.WriteString(f.String() + "\n")
		}
		d.write("forbidden.txt", []byte(b.String()))
	}
	d.logs(filepath.Join(h.dir, "logs"))
	if len(d.errs) > 0 {
		_ = os.WriteFile(filepath.Join(dir, "errors.txt"), []byte(strings.Join(d.errs, "\n")+"\n"), 0o600)
	}
	return dir, nil
}

type dumper struct {
	dir string

	mu   sync.Mutex
	errs []string
}

func (d *dumper) errorf(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.errs = append(d.errs, fmt.Sprintf(format, args...))
}

func (d *dumper) write(name string, data []byte) {
	if err := os.WriteFile(filepath.Join(d.dir, name), data, 0o600); err != nil {
		d.errorf("cannot write %s: %v", name, err)
	}
}

func (d *dumper) resources(ctx context.Context, h *Harness) {
	crds := &extv1.CustomResourceDefinitionList{}
	if err := h.kube.List(ctx, crds); err != nil {
		d.errorf("cannot list CRDs: %v", err)
		return
	}
	dc, err := dynamic.NewForConfig(h.cfg)
	if err != nil {
		d.errorf("cannot create dynamic client: %v", err)
		return
	}
	sort.Slice(crds.Items, func(i, j int) bool { return crds.Items[i].Name < crds.Items[j].Name })
	crdList := &bytes.Buffer{}
	for i := range crds.Items {
		fmt.Fprintf(crdList, "%s\t%s\n", crds.Items[i].Name, crdStatus(&crds.Items[i]))
	}
	d.write("crds.txt", crdList.Bytes())

	// Listing ~50 types one by one takes seconds; list a few at a time.
	summaries := make([]bytes.Buffer, len(crds.Items))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range crds.Items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			d.resource(ctx, dc, &crds.Items[i], &summaries[i])
		}()
	}
	wg.Wait()
	summary := &bytes.Buffer{}
	for i := range summaries {
		summary.Write(summaries[i].Bytes())
	}
	d.write("summary.txt", summary.Bytes())
}

// resource writes every object of one CRD-defined type, and their
// conditions to summary.
func (d *dumper) resource(ctx context.Context, dc dynamic.Interface, crd *extv1.CustomResourceDefinition, summary *bytes.Buffer) {
	version := servedVersion(crd)
	if version == "" {
		return
	}
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Spec.Names.Plural}
	l, err := dc.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		d.errorf("cannot list %s: %v", gvr, err)
		return
	}
	if len(l.Items) == 0 {
		return
	}
	docs := &bytes.Buffer{}
	for i := range l.Items {
		u := &l.Items[i]
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			d.errorf("cannot marshal %s %s: %v", u.GetKind(), u.GetName(), err)
			continue
		}
		docs.WriteString("---\n")
		docs.Write(b)
		summarize(summary, u)
	}
	d.write(filepath.Join("resources", crd.Name+".yaml"), docs.Bytes())
}

// servedVersion is the storage version of a CRD, or its first served one.
func servedVersion(crd *extv1.CustomResourceDefinition) string {
	v := ""
	for _, cv := range crd.Spec.Versions {
		if cv.Served && cv.Storage {
			return cv.Name
		}
		if cv.Served && v == "" {
			v = cv.Name
		}
	}
	return v
}

func crdStatus(crd *extv1.CustomResourceDefinition) string {
	for _, c := range crd.Status.Conditions {
		if c.Type == extv1.Established {
			return "Established=" + string(c.Status)
		}
	}
	return "Established=Unknown"
}

// summarize writes one line per object, then one per status condition.
func summarize(w *bytes.Buffer, u *unstructured.Unstructured) {
	id := u.GetKind() + "/" + u.GetName()
	if ns := u.GetNamespace(); ns != "" {
		id = u.GetKind() + "/" + ns + "/" + u.GetName()
	}
	if u.GetDeletionTimestamp() != nil {
		id += " (deleting, finalizers " + strings.Join(u.GetFinalizers(), ",") + ")"
	}
	fmt.Fprintln(w, id)
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		fmt.Fprintf(w, "    %v=%v", m["type"], m["status"])
		if r, ok := m["reason"]; ok {
			fmt.Fprintf(w, " (%v)", r)
		}
		if msg, ok := m["message"]; ok {
			fmt.Fprintf(w, ": %v", msg)
		}
		fmt.Fprintln(w)
	}
}

func (d *dumper) events(ctx context.Context, h *Harness) {
	l := &corev1.EventList{}
	if err := h.kube.List(ctx, l); err != nil {
		d.errorf("cannot list events: %v", err)
		return
	}
	when := func(e *corev1.Event) time.Time {
		switch {
		case !e.LastTimestamp.IsZero():
			return e.LastTimestamp.Time
		case !e.EventTime.IsZero():
			return e.EventTime.Time
		default:
			return e.CreationTimestamp.Time
		}
	}
	sort.SliceStable(l.Items, func(i, j int) bool { return when(&l.Items[i]).Before(when(&l.Items[j])) })
	b := &bytes.Buffer{}
	for i := range l.Items {
		e := &l.Items[i]
		obj := e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name
		if e.InvolvedObject.Namespace != "" {
			obj = e.InvolvedObject.Kind + "/" + e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
		}
		fmt.Fprintf(b, "%s\t%s\t%s\t%s\tx%d\t%s\n", when(e).Format(time.RFC3339), e.Type, obj, e.Reason, max(e.Count, 1), e.Message)
	}
	d.write("events.txt", b.Bytes())
}

func (d *dumper) secrets(ctx context.Context, h *Harness) {
	l := &corev1.SecretList{}
	if err := h.kube.List(ctx, l); err != nil {
		d.errorf("cannot list secrets: %v", err)
		return
	}
	b := &bytes.Buffer{}
	for _, s := range l.Items {
		keys := make([]string, 0, len(s.Data))
		for k := range s.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(b, "%s/%s\t%s\t[%s]\n", s.Namespace, s.Name, s.Type, strings.Join(keys, ","))
	}
	d.write("secrets.txt", b.Bytes())
}

func (d *dumper) logs(from string) {
	ents, err := os.ReadDir(from)
	if err != nil {
		d.errorf("cannot read logs: %v", err)
		return
	}
	if err := os.MkdirAll(filepath.Join(d.dir, "logs"), 0o750); err != nil {
		d.errorf("cannot create logs directory: %v", err)
		return
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			d.errorf("cannot read log %s: %v", e.Name(), err)
			continue
		}
		d.write(filepath.Join("logs", e.Name()), b)
	}
}
