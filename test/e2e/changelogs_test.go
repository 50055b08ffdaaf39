//go:build linux

package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
	"github.com/widgetco/crossplane-widget/test/lib/cluster"
	"github.com/widgetco/crossplane-widget/test/lib/platform"
	"github.com/widgetco/crossplane-widget/test/lib/prom"
	"github.com/widgetco/crossplane-widget/widgetapi"
)

// A changeLogEntry is one line of the change logs sidecar's log: a
// ChangeLogEntry of crossplane-runtime's changelogs proto, as protojson.
type changeLogEntry struct {
	Timestamp         string            `json:"timestamp"`
	Provider          string            `json:"provider"`
	APIVersion        string            `json:"apiVersion"`
	Kind              string            `json:"kind"`
	Name              string            `json:"name"`
	ExternalName      string            `json:"externalName"`
	Operation         string            `json:"operation"`
	Snapshot          map[string]any    `json:"snapshot"`
	ErrorMessage      *string           `json:"errorMessage"`
	AdditionalDetails map[string]string `json:"additionalDetails"`

	// line is the entry as the sidecar logged it.
	line string
}

func (e changeLogEntry) namespace() string {
	md, _ := e.Snapshot["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	return ns
}

func (e changeLogEntry) String() string {
	s := fmt.Sprintf("%s %s %s %s/%s %s", e.Timestamp, e.Provider, e.Operation, e.Kind, e.Name, e.ExternalName)
	if len(e.AdditionalDetails) > 0 {
		keys := make([]string, 0, len(e.AdditionalDetails))
		for k := range e.AdditionalDetails {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			s += fmt.Sprintf(" %s=%q", k, e.AdditionalDetails[k])
		}
	}
	if e.ErrorMessage != nil {
		s += " error=" + *e.ErrorMessage
	}
	return s
}

// TestChangeLogs creates a Widget and a WidgetKey, changes the widget
// behind Crossplane's back, and deletes both. The change logs sidecar's log
// (the stand-in's, in every provider pod the suite ran) then holds one
// entry for each create, for the drift repair (with the diff it repaired,
// and a snapshot of the resource before the repair), and for each delete -
// and the key's secret in none.
func TestChangeLogs(t *testing.T) {
	needsNode(t, "reads the change logs sidecar's log across restarts, and the provider's metrics at its pod's address")
	s := newScenario(t, true)
	w := &namespacedv1beta1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "audited"},
		Spec: namespacedv1beta1.WidgetSpec{
			ManagedResourceSpec: defaultMRSpec(""),
			ForProvider:         commonv1beta1.WidgetParameters{Size: ptr.To(widgetapi.SizeSmall), Labels: map[string]string{labelScenario: s.ns}},
			InitProvider:        commonv1beta1.WidgetInitParameters{Region: ptr.To("us-east-1")},
		},
	}
	k := &namespacedv1beta1.WidgetKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "audited-ci"},
		Spec: namespacedv1beta1.WidgetKeySpec{
			ManagedResourceSpec: defaultMRSpec("audited-ci"),
			ForProvider:         namespacedv1beta1.WidgetKeyParameters{WidgetNameRef: &xpv2.NamespacedReference{Name: w.Name}},
		},
	}
	s.create(w, k)
	s.eventually("Widget and WidgetKey Ready", func() error {
		if err := s.managedReady(w); err != nil {
			return err
		}
		if err := s.get(k); err != nil {
			return err
		}
		if c := k.GetCondition(xpv2.TypeReady); c.Status != corev1.ConditionTrue {
			return errors.Errorf("WidgetKey %s is not Ready: %s %s", k.Name, c.Reason, c.Message)
		}
		return nil
	})
	name := meta.GetExternalName(w)
	secret := &corev1.Secret{}
	s.eventually("the key's connection Secret", func() error {
		if err := suite.kube.Get(s.ctx, types.NamespacedName{Namespace: s.ns, Name: "audited-ci"}, secret); err != nil {
			return err
		}
		if len(secret.Data["key"]) == 0 {
			return errors.New("no key in the connection Secret yet")
		}
		return nil
	})

	// Drift: the provider puts the widget back, and says why.
	if _, err := suite.api.PatchWidget(s.ctx, name, widgetapi.PatchWidgetRequest{Size: ptr.To(widgetapi.SizeLarge)}); err != nil {
		t.Fatalf("cannot change widget %s out of band: %v", name, err)
	}
	s.eventually("drift repaired", func() error { return s.widgetState(name, widgetapi.SizeSmall) })

	if err := suite.kube.Delete(s.ctx, k); err != nil {
		t.Fatal(err)
	}
	s.eventually("WidgetKey gone", func() error { return s.gone(k) })
	if err := suite.kube.Delete(s.ctx, w); err != nil {
		t.Fatal(err)
	}
	s.eventually("Widget gone", func() error { return s.gone(w) })

	var entries []changeLogEntry
	s.eventually("change log entries of every create, the drift repair and every delete", func() error {
		var err error
		if entries, err = s.changeLog(); err != nil {
			return err
		}
		return checkChangeLog(entries, name)
	})
	for _, e := range entries {
		t.Logf("CHANGE LOG: %s", e)
		if e.Operation == "OPERATION_TYPE_UPDATE" && e.AdditionalDetails["cause"] == "drift" {
			t.Logf("CHANGE LOG ENTRY of the drift repair, as the sidecar logged it: %s", e.line)
			size := nestedString(e.Snapshot, "status", "atProvider", "size")
			if size != widgetapi.SizeLarge {
				t.Errorf("The drift repair's snapshot shows the widget's size as %q, want %q: the snapshot is the resource before the change", size, widgetapi.SizeLarge)
			}
		}
	}
	for _, e := range entries {
		if strings.Contains(e.line, string(secret.Data["key"])) {
			t.Errorf("The change log entry %s holds the key's secret", e)
		}
	}
	s.logChangeLogMetrics()
}

// checkChangeLog returns nil when entries (the scenario's) hold exactly one
// successful create of the Widget and of the WidgetKey, exactly one
// successful update of the Widget, repairing the drift, and at least one
// successful delete of each (a delete that takes time is requested again
// until the widget is gone, and each request is an entry).
func checkChangeLog(entries []changeLogEntry, widget string) error {
	count := map[string]int{}
	var problems []string
	for _, e := range entries {
		if e.ErrorMessage != nil {
			// A failed attempt (a key before its widget is ready) is
			// logged too, with its error; it changed nothing.
			continue
		}
		count[e.Kind+" "+e.Operation]++
		if e.Kind == "Widget" && e.Operation == "OPERATION_TYPE_UPDATE" {
			want := map[string]string{"cause": "drift", "diff": `size: want "small", have "large"`}
			if fmt.Sprint(e.AdditionalDetails) != fmt.Sprint(want) {
				problems = append(problems, fmt.Sprintf("the Widget's update has details %v, want %v", e.AdditionalDetails, want))
			}
			if e.ExternalName != widget {
				problems = append(problems, "the Widget's update names widget "+e.ExternalName+", want "+widget)
			}
		}
	}
	for what, want := range map[string]int{"Widget OPERATION_TYPE_CREATE": 1, "WidgetKey OPERATION_TYPE_CREATE": 1, "Widget OPERATION_TYPE_UPDATE": 1} {
		if count[what] != want {
			problems = append(problems, fmt.Sprintf("%d entries %s, want %d", count[what], what, want))
		}
	}
	for _, what := range []string{"Widget OPERATION_TYPE_DELETE", "WidgetKey OPERATION_TYPE_DELETE"} {
		if count[what] == 0 {
			problems = append(problems, "no entry "+what)
		}
	}
	if len(problems) > 0 {
		return errors.Errorf("the change log of the scenario (%d entries): %s", len(entries), strings.Join(problems, "; "))
	}
	return nil
}

// changeLog returns the entries about the scenario's namespace in every
// change logs sidecar's log, oldest first.
func (s *scenario) changeLog() ([]changeLogEntry, error) {
	files, err := suite.c.ContainerLogs(platform.ChangeLogsSidecar)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.Errorf("no %s container has logged anything (is the suite's provider running with examples/runtime/changelogs.yaml?)", platform.ChangeLogsSidecar)
	}
	var out []changeLogEntry
	for _, f := range files {
		b, err := cluster.ReadContainerLog(f)
		if err != nil {
			return nil, errors.Wrapf(err, "cannot read %s", f)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if !bytes.HasPrefix(line, []byte("{")) {
				// The sidecar's own lines.
				continue
			}
			var e changeLogEntry
			if err := json.Unmarshal(line, &e); err != nil {
				return nil, errors.Wrapf(err, "%s holds a line that is not a change log entry", filepath.Base(f))
			}
			if e.namespace() == s.ns {
				e.line = string(line)
				out = append(out, e)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Timestamp < out[j].Timestamp })
	return out, nil
}

// logChangeLogMetrics logs the leader's change log counters.
func (s *scenario) logChangeLogMetrics() {
	p := s.leader()
	sent, dropped := s.changeLogCounters(p, s.metricsAddr(p))
	s.t.Logf("MEASURED change log entries of the leader %s so far (all scenarios): %.0f sent, dropped by reason %v", p.Name(), sent, dropped)
}

// changeLogCounters returns a provider pod's counts of change log entries
// sent and dropped (by reason), from its metrics at addr (see metricsAddr).
func (s *scenario) changeLogCounters(p *cluster.Pod, addr string) (sent float64, dropped map[string]float64) {
	ss := s.scrape(p, addr)
	return ss.Sum("widget_changelog_entries_sent_total", nil), ss.Of("widget_changelog_entries_dropped_total").By("reason")
}

// scrape returns a provider pod's metrics, served at addr (see
// metricsAddr).
func (s *scenario) scrape(p *cluster.Pod, addr string) prom.Samples {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	ss, err := prom.Scrape(ctx, &http.Client{Timeout: 10 * time.Second}, "http://"+addr+"/metrics")
	if err != nil {
		s.t.Fatalf("cannot scrape pod %s's metrics: %v", p.Name(), err)
	}
	return ss
}

// metricsAddr returns the address of p's metrics port: its pod IP's.
func (s *scenario) metricsAddr(p *cluster.Pod) string {
	s.t.Helper()
	addr, err := p.Forward(platform.MetricsPort)
	if err != nil {
		s.t.Fatal(err)
	}
	return addr
}

// stuckWidgets is how many Widgets TestChangeLogsStuckSidecar creates with
// the sidecar working, and again with it stuck.
const stuckWidgets = 10

// TestChangeLogsStuckSidecar stops (SIGSTOP) the change logs sidecar of
// every provider pod: it still takes connections but answers nothing, like
// a hung sidecar. Widgets created meanwhile go Ready as they do with a
// working sidecar; entries the sidecar does not take within the send
// timeout are dropped and counted; once it runs again, it gets the entries
// queued meanwhile. It runs alone: it stops the sidecar for everyone.
func TestChangeLogsStuckSidecar(t *testing.T) {
	needsNode(t, "stops the change logs sidecar's process")
	s := newScenario(t, false)
	leader := s.leader()
	addr := s.metricsAddr(leader)
	_, before := s.changeLogCounters(leader, addr)
	// Reconciles the provider put off for its cache, and gave up waiting
	// for (5 s): the other way a Widget's Ready is late.
	expired := func() float64 {
		return s.scrape(leader, addr).Sum("widget_stale_cache_waits_total", map[string]string{"outcome": "expired"})
	}
	e0 := expired()
	fine := s.readyWidgets("fine", stuckWidgets)
	e1 := expired()

	pods := suite.provider.Pods()
	pids := make([]int, 0, len(pods))
	for _, p := range pods {
		pid := p.ContainerPID(platform.ChangeLogsSidecar)
		if pid == 0 {
			t.Fatalf("pod %s runs no %s container", p.Name(), platform.ChangeLogsSidecar)
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	resume := func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	stuck := s.readyWidgets("stuck", stuckWidgets)
	t.Logf("MEASURED %d new Widgets to all Ready: %s with the change logs sidecar working, %s with it stuck (SIGSTOP); stale-cache waits that expired meanwhile: %.0f and %.0f",
		stuckWidgets, fine.Round(time.Millisecond), stuck.Round(time.Millisecond), e1-e0, expired()-e1)

	var dropped map[string]float64
	s.eventually("an entry dropped after the send timeout", func() error {
		_, dropped = s.changeLogCounters(leader, addr)
		if dropped["send_failed"] <= before["send_failed"] {
			return errors.Errorf("no entry dropped yet (dropped by reason: %v)", dropped)
		}
		return nil
	})
	if dropped["queue_full"] != before["queue_full"] {
		t.Errorf("%.0f entries dropped because the queue was full; %d changes fit in it", dropped["queue_full"]-before["queue_full"], stuckWidgets)
	}
	resume()
	lost := dropped["send_failed"] - before["send_failed"]
	s.eventually("the entries queued while the sidecar was stuck reach it once it runs", func() error {
		entries, err := s.changeLog()
		if err != nil {
			return err
		}
		created := 0
		for _, e := range entries {
			if e.Operation == "OPERATION_TYPE_CREATE" && e.ErrorMessage == nil && strings.HasPrefix(e.Name, "stuck-") {
				created++
			}
		}
		if float64(created)+lost < stuckWidgets {
			return errors.Errorf("%d create entries of the %d Widgets created while the sidecar was stuck, and %.0f entries dropped", created, stuckWidgets, lost)
		}
		t.Logf("MEASURED while the sidecar was stuck: %d of %d creates reached it once it ran again, %.0f entries dropped after the send timeout", created, stuckWidgets, lost)
		return nil
	})
}

// TestChangeLogsSidecarRestart kills (SIGKILL) the leader's change logs
// sidecar, as an out-of-memory kill would: kubelet restarts it, it listens
// on the shared volume again, and the provider's next entries reach it. It
// runs alone: entries are dropped while the sidecar is away.
func TestChangeLogsSidecarRestart(t *testing.T) {
	needsNode(t, "kills the change logs sidecar's process")
	s := newScenario(t, false)
	leader := s.leader()
	addr := s.metricsAddr(leader)
	old := leader.ContainerPID(platform.ChangeLogsSidecar)
	if old == 0 {
		t.Fatalf("pod %s runs no %s container", leader.Name(), platform.ChangeLogsSidecar)
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	restarted := s.eventually("kubelet restarts the sidecar", func() error {
		if pid := leader.ContainerPID(platform.ChangeLogsSidecar); pid == 0 || pid == old {
			return errors.Errorf("the sidecar of %s is not running again yet", leader.Name())
		}
		return nil
	})
	_, before := s.changeLogCounters(leader, addr)
	s.readyWidgets("restarted", 3)
	took := s.eventually("the creates reach the restarted sidecar", func() error {
		entries, err := s.changeLog()
		if err != nil {
			return err
		}
		created := 0
		for _, e := range entries {
			if e.Operation == "OPERATION_TYPE_CREATE" && e.ErrorMessage == nil && strings.HasPrefix(e.Name, "restarted-") {
				created++
			}
		}
		if created != 3 {
			_, dropped := s.changeLogCounters(leader, addr)
			return errors.Errorf("%d of 3 create entries in the sidecars' logs (dropped since the sidecar restarted, by reason: before %v, now %v)", created, before, dropped)
		}
		return nil
	})
	_, after := s.changeLogCounters(leader, addr)
	t.Logf("MEASURED sidecar killed: running again after %s; the 3 creates after that reached it %s after the Widgets were Ready; entries dropped meanwhile by reason: before the restart %v, after %v",
		restarted.Round(time.Millisecond), took.Round(time.Millisecond), before, after)
}

// readyWidgets creates n Widgets named prefix-<i> and returns how long they
// took to all be Ready.
func (s *scenario) readyWidgets(prefix string, n int) time.Duration {
	s.t.Helper()
	ws := make([]*namespacedv1beta1.Widget, 0, n)
	for i := range n {
		ws = append(ws, &namespacedv1beta1.Widget{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: fmt.Sprintf("%s-%d", prefix, i)},
			Spec: namespacedv1beta1.WidgetSpec{
				ManagedResourceSpec: defaultMRSpec(""),
				ForProvider:         commonv1beta1.WidgetParameters{Size: ptr.To(widgetapi.SizeSmall), Labels: map[string]string{labelScenario: s.ns}},
				InitProvider:        commonv1beta1.WidgetInitParameters{Region: ptr.To("us-east-1")},
			},
		})
	}
	begin := time.Now()
	for _, w := range ws {
		s.create(w)
	}
	s.eventually(fmt.Sprintf("%d Widgets %s-* Ready", n, prefix), func() error {
		for _, w := range ws {
			if err := s.managedReady(w); err != nil {
				return err
			}
		}
		return nil
	})
	return time.Since(begin)
}

// nestedString returns the string at path in m, or "".
func nestedString(m map[string]any, path ...string) string {
	var cur any = m
	for _, p := range path {
		mm, _ := cur.(map[string]any)
		cur = mm[p]
	}
	v, _ := cur.(string)
	return v
}
