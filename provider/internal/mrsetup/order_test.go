package mrsetup

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/crossplane-runtime/v2/pkg/statemetrics"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/metrics"
)

// only returns the layers with only the field name switched on.
func only(name string) layers {
	var l layers
	f := reflect.ValueOf(&l).Elem().FieldByName(name)
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().SetBool(true)
	return l
}

// numbered returns the "n. name" entries of text, by number, from the lines
// that match re (whose groups are the number and the name).
func numbered(t *testing.T, text string, re *regexp.Regexp) []string {
	t.Helper()
	ms := re.FindAllStringSubmatch(text, -1)
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		n, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strconv.Itoa(n)+". "+m[2])
	}
	return out
}

// TestLayerOrder: order is the index of the layers. It lists the layers of
// the package comment and of docs/reconciler.md's table, by the same numbers
// and names and in the same order, each switched on by its own field of
// layers, whose fields are in that order too.
func TestLayerOrder(t *testing.T) {
	all := order[*nsv1beta1.Widget]()
	got := make([]string, 0, len(all))
	for i, l := range all {
		if l.n != i+1 {
			t.Errorf("layer %s is number %d, at place %d of order", l.name, l.n, i+1)
		}
		got = append(got, strconv.Itoa(l.n)+". "+l.name)
	}

	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	comment := numbered(t, string(doc), regexp.MustCompile(`(?m)^//\s+(\d+)\. (\w+) \(`))
	if diff := cmp.Diff(comment, got); diff != "" {
		t.Errorf("order and the package comment's list of layers: -comment, +order:\n%s", diff)
	}

	md, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "reconciler.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(md)
	if i := strings.Index(section, "### Managed resources"); i >= 0 {
		section = section[i:]
		if j := strings.Index(section[1:], "\n### "); j >= 0 {
			section = section[:j+1]
		}
	}
	table := numbered(t, section, regexp.MustCompile("(?m)^\\| (\\d+) \\| `(\\w+)` \\|"))
	if diff := cmp.Diff(table, got); diff != "" {
		t.Errorf("order and docs/reconciler.md's table of managed resource layers: -table, +order:\n%s", diff)
	}

	fields := reflect.TypeOf(layers{})
	names := make([]string, 0, fields.NumField())
	for i := range fields.NumField() {
		names = append(names, strconv.Itoa(i+1)+". "+fields.Field(i).Name)
	}
	if diff := cmp.Diff(names, got); diff != "" {
		t.Errorf("order and the fields of layers: -fields, +order:\n%s", diff)
	}
	for _, l := range all {
		var on []string
		for _, o := range switchedOn[*nsv1beta1.Widget](only(l.name)) {
			on = append(on, o.name)
		}
		if diff := cmp.Diff([]string{l.name}, on); diff != "" {
			t.Errorf("layers switched on by the field %s alone: -want, +got:\n%s", l.name, diff)
		}
		if l.clients == nil && l.pieces == nil && l.watch == nil {
			t.Errorf("layer %s has no hook", l.name)
		}
	}
	var leanOn []string
	for _, o := range switchedOn[*nsv1beta1.Widget](lean) {
		leanOn = append([]string{strconv.Itoa(o.n) + ". " + o.name}, leanOn...)
	}
	if diff := cmp.Diff(got, leanOn); diff != "" {
		t.Errorf("layers lean switches on, last first, reversed: -order, +lean:\n%s", diff)
	}
}

// addingManager is a fakeManager that also takes runnables (the state
// metrics recorder) and has no cache.
type addingManager struct {
	fakeManager
	added []manager.Runnable
}

func (m *addingManager) Add(r manager.Runnable) error { m.added = append(m.added, r); return nil }
func (m *addingManager) GetCache() cache.Cache        { return nil }

// releasingWidgets are fakeWidgets that can release a widget.
type releasingWidgets struct{ *fakeWidgets }

func (releasingWidgets) Release(context.Context, *nsv1beta1.Widget) error { return nil }

// TestEachLayerAlone builds the reconciler with each layer alone switched
// on, with every dependency a layer may use, and drives a Widget through
// its life with it.
func TestEachLayerAlone(t *testing.T) {
	for _, l := range order[*nsv1beta1.Widget]() {
		t.Run(l.name, func(t *testing.T) {
			var log []string
			k := newFakeKube(&log)
			m := &addingManager{fakeManager: fakeManager{k: k}}
			o := controller.Options{
				Logger: logging.NewNopLogger(), PollInterval: time.Minute,
				MetricOptions: &controller.MetricOptions{MRMetrics: managed.NewMRMetricRecorder(), MRStateMetrics: statemetrics.NewMRStateMetrics(), PollStateMetricInterval: time.Minute},
			}
			d := Deps{Feed: &fakeFeed{}, Metrics: metrics.New(), Recorders: fakeManager{k: k}}
			ext := releasingWidgets{&fakeWidgets{log: &log}}
			s, err := build(m, o, d, nsv1beta1.WidgetGroupVersionKind, func() resource.ManagedList { return &nsv1beta1.WidgetList{} },
				func(Env) managed.TypedExternalConnector[*nsv1beta1.Widget] { return ext }, only(l.name))
			if err != nil {
				t.Fatal(err)
			}
			if len(m.added) != 1 {
				t.Errorf("state metrics recorders added: want 1, got %d", len(m.added))
			}
			if s.reconciler == nil || s.handler == nil || len(s.predicates) == 0 {
				t.Errorf("an incomplete stack: %+v", s)
			}

			lf := newLife(t, only(l.name))
			lf.live()
		})
	}
}
