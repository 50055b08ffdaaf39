// Package diagnostics writes what is needed to debug a failed run of a
// cluster: its objects, events, Secrets' names, pods, refused requests and
// logs.
package diagnostics

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
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
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/test/lib/audit"
)

// A Source is what Dump reads: a cluster's API, its audit log and its logs.
type Source struct {
	// Config and Client are an admin's.
	Config *rest.Config
	Client client.Client
	// Audit, when set, is kube-apiserver's audit log.
	Audit *audit.Log
	// Pods, when set, describes the pods the node runs.
	Pods func(context.Context) string
	// Logs are directories whose files (at any depth) are copied, each
	// under logs/<its path below the directory, slashes as underscores>.
	Logs []string
	// More, when set, writes more files through write (name relative to
	// the diagnostics directory): containers' logs, say.
	More func(write func(name string, data []byte))
}

// Dump writes what is needed to debug a failure into dir and returns it:
//
//   - summary.txt: every custom resource with its status conditions;
//   - resources/<plural>.<group>.yaml: every object of every CRD-defined
//     type - Crossplane's packages, revisions, XRDs, compositions, MRDs and
//     activation policies, composites and claims, managed resources,
//     provider configs - discovered from the CRDs, without managedFields;
//   - events.txt: every event, oldest first;
//   - secrets.txt: Secret names, types and keys (never values);
//   - pods.txt: the pods the node runs, their state;
//   - forbidden.txt: requests of the package runtimes that RBAC refused
//     (from kube-apiserver's audit log), when there are any;
//   - logs/: each process's and container's log.
//
// It is best effort: what it cannot read is listed in errors.txt and the
// rest is still written. It returns an error only when it cannot create the
// directory.
func Dump(ctx context.Context, src Source, dir string) (string, error) {
	if err := os.MkdirAll(filepath.Join(dir, "resources"), 0o750); err != nil {
		return "", errors.Wrap(err, "cannot create diagnostics directory")
	}
	d := &dumper{dir: dir, src: src}
	if src.Client != nil {
		d.resources(ctx)
		d.events(ctx)
		d.secrets(ctx)
	}
	if src.Pods != nil {
		d.write("pods.txt", []byte(src.Pods(ctx)))
	}
	if src.Audit != nil {
		if fb, err := src.Audit.Forbidden(); err != nil {
			d.errorf("%v", err)
		} else if len(fb) > 0 {
			var b strings.Builder
			for _, f := range fb {
				b.WriteString(f.String() + "\n")
			}
			d.write("forbidden.txt", []byte(b.String()))
		}
	}
	for _, l := range src.Logs {
		d.logs(l)
	}
	if src.More != nil {
		if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o750); err != nil {
			d.errorf("cannot create logs directory: %v", err)
		}
		src.More(d.write)
	}
	if len(d.errs) > 0 {
		_ = os.WriteFile(filepath.Join(dir, "errors.txt"), []byte(strings.Join(d.errs, "\n")+"\n"), 0o600)
	}
	return dir, nil
}

type dumper struct {
	dir string
	src Source

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

func (d *dumper) resources(ctx context.Context) {
	crds := &extv1.CustomResourceDefinitionList{}
	if err := d.src.Client.List(ctx, crds); err != nil {
		d.errorf("cannot list CRDs: %v", err)
		return
	}
	dc, err := dynamic.NewForConfig(d.src.Config)
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

func (d *dumper) events(ctx context.Context) {
	l := &corev1.EventList{}
	if err := d.src.Client.List(ctx, l); err != nil {
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

func (d *dumper) secrets(ctx context.Context) {
	l := &corev1.SecretList{}
	if err := d.src.Client.List(ctx, l); err != nil {
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
	err := filepath.WalkDir(from, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		name := filepath.Join("logs", strings.ReplaceAll(rel, string(filepath.Separator), "_"))
		if err := os.MkdirAll(filepath.Join(d.dir, "logs"), 0o750); err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			d.errorf("cannot read log %s: %v", p, err)
			return nil
		}
		d.write(name, b)
		return nil
	})
	if err != nil {
		d.errorf("cannot read logs under %s: %v", from, err)
	}
}
