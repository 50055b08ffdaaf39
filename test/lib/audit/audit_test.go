package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestAuditChecks reads an audit log written here: what kube-apiserver
// refused, how many Event creates each ServiceAccount had refused as already
// existing, and which requests one ServiceAccount made.
func TestAuditChecks(t *testing.T) {
	lines := []string{
		`{"verb":"create","user":{"username":"sa:provider"},"objectRef":{"resource":"events","namespace":"a","name":"w.1"},"responseStatus":{"code":201},"requestReceivedTimestamp":"2026-11-26T04:00:00Z"}`,
		`{"verb":"create","user":{"username":"sa:provider"},"objectRef":{"resource":"events","namespace":"a","name":"w.1"},"responseStatus":{"code":409},"requestReceivedTimestamp":"2026-11-26T04:00:00Z"}`,
		`{"verb":"create","user":{"username":"sa:provider"},"objectRef":{"resource":"events","namespace":"a","name":"w.2"},"responseStatus":{"code":201},"requestReceivedTimestamp":"2026-11-26T04:00:01Z"}`,
		`{"verb":"create","user":{"username":"sa:core"},"objectRef":{"resource":"events","namespace":"a","name":"x.1"},"responseStatus":{"code":201},"requestReceivedTimestamp":"2026-11-26T04:00:01Z"}`,
		`{"verb":"patch","user":{"username":"sa:core"},"objectRef":{"resource":"events","namespace":"a","name":"x.1"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-26T04:00:02Z"}`,
		`{"verb":"list","user":{"username":"sa:provider"},"objectRef":{"resource":"secrets","namespace":"b"},"responseStatus":{"code":403},"requestReceivedTimestamp":"2026-11-26T04:00:02Z"}`,
		`{"verb":"list","user":{"username":"sa:provider"},"objectRef":{"resource":"secrets","namespace":"b"},"responseStatus":{"code":403},"requestReceivedTimestamp":"2026-11-26T04:00:03Z"}`,
		`{"verb":"get","requestURI":"/apis?timeout=32s","user":{"username":"sa:provider"},"objectRef":{},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-26T04:00:04Z"}`,
		`{"verb":"list","requestURI":"/apis/widget.m.widgetco.io/v1beta1/widgetkeys","user":{"username":"sa:provider"},"objectRef":{"resource":"widgetkeys","apiGroup":"widget.m.widgetco.io"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-26T04:00:04Z"}`,
		`{"verb":"update","user":{"username":"sa:provider"},"objectRef":{"resource":"widgetkeys","subresource":"status","apiGroup":"widget.m.widgetco.io","namespace":"a","name":"k"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-26T04:00:05Z"}`,
		`{"auditID":"w1","stage":"ResponseStarted","verb":"watch","user":{"username":"sa:provider"},"objectRef":{"resource":"widgets","apiGroup":"widget.m.widgetco.io"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-26T04:00:06Z"}`,
		`{"auditID":"w1","stage":"ResponseComplete","verb":"watch","user":{"username":"sa:provider"},"objectRef":{"resource":"widgets","apiGroup":"widget.m.widgetco.io"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-26T04:00:06Z"}`,
		`{"auditID":"w2","stage":"ResponseStarted","verb":"watch","user":{"username":"sa:provider"},"objectRef":{"resource":"widgets","apiGroup":"widget.m.widgetco.io"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-26T04:00:07Z"}`,
		`{"verb":"create","user":{"username":"sa:core"},"objectRef":{"resource":"events","namespace":"gone","name":"x.2"},"responseStatus":{"code":403},"requestReceivedTimestamp":"2026-11-26T04:00:08Z","annotations":{"authorization.k8s.io/decision":"allow"}}`,
		`not an audit event, "code":403 "resource":"events" "verb":"create"`,
	}
	dir := t.TempDir()
	h := &Log{Path: filepath.Join(dir, "kube-apiserver-audit.log")}
	// The first lines went to a file kube-apiserver rotated.
	rotated := filepath.Join(dir, "kube-apiserver-audit-2026-11-26T04-00-01.500.log")
	if err := os.WriteFile(rotated, []byte(strings.Join(lines[:2], "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.Path, []byte(strings.Join(lines[2:], "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	ev, err := h.EventCreates()
	if err != nil {
		t.Fatal(err)
	}
	wantEv := []EventCreates{{User: "sa:core", Created: 1}, {User: "sa:provider", Created: 2, Conflicts: 1}}
	if diff := cmp.Diff(wantEv, ev); diff != "" {
		t.Errorf("EventCreates(): -want, +got:\n%s", diff)
	}

	fb, err := h.Forbidden()
	if err != nil {
		t.Fatal(err)
	}
	wantFb := []Forbidden{{User: "sa:provider", Verb: "list", Resource: "secrets", Namespace: "b", Count: 2}}
	if diff := cmp.Diff(wantFb, fb); diff != "" {
		t.Errorf("Forbidden(): -want, +got:\n%s", diff)
	}

	rq, err := h.Requests("sa:prov")
	if err != nil {
		t.Fatal(err)
	}
	wantRq := []Request{
		{User: "sa:provider", Verb: "get", Resource: "/apis", Count: 1},
		{User: "sa:provider", Verb: "create", Resource: "events", Namespaced: true, Count: 3},
		{User: "sa:provider", Verb: "list", Resource: "secrets", Namespaced: true, Count: 2},
		{User: "sa:provider", Verb: "list", Resource: "widgetkeys.widget.m.widgetco.io", Count: 1},
		{User: "sa:provider", Verb: "update", Resource: "widgetkeys/status.widget.m.widgetco.io", Namespaced: true, Count: 1},
		// One watch that ended (two stages, counted once), one still open.
		{User: "sa:provider", Verb: "watch", Resource: "widgets.widget.m.widgetco.io", Count: 2},
	}
	if diff := cmp.Diff(wantRq, rq); diff != "" {
		t.Errorf("Requests(%q): -want, +got:\n%s", "sa:prov", diff)
	}

	// Writes in namespace a from 04:00:01 to 04:00:05 (exclusive): not
	// the first Event (too early), not the status update (at the end), not
	// core's, not reads.
	from, _ := time.Parse(time.RFC3339, "2026-11-26T04:00:01Z")
	to, _ := time.Parse(time.RFC3339, "2026-11-26T04:00:05Z")
	wi, err := h.WritesIn("sa:prov", "a", from, to)
	if err != nil {
		t.Fatal(err)
	}
	wantWi := []Request{{User: "sa:provider", Verb: "create", Resource: "events", Namespaced: true, Count: 1}}
	if diff := cmp.Diff(wantWi, wi); diff != "" {
		t.Errorf("WritesIn(%q, %q, ...): -want, +got:\n%s", "sa:prov", "a", diff)
	}
	wi, err = h.WritesIn("sa:prov", "a", from, to.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	wantWi = append(wantWi, Request{User: "sa:provider", Verb: "update", Resource: "widgetkeys/status.widget.m.widgetco.io", Namespaced: true, Count: 1})
	if diff := cmp.Diff(wantWi, wi); diff != "" {
		t.Errorf("WritesIn(%q, %q, ...) to 04:00:06: -want, +got:\n%s", "sa:prov", "a", diff)
	}

	if _, err := (&Log{Path: filepath.Join(t.TempDir(), "audit.log")}).EventCreates(); err == nil {
		t.Error("EventCreates() without an audit log: no error")
	}
}

// TestWrites reads writes recorded with their bodies: which changed their
// object and which left it as it was, across a rotated file.
func TestWrites(t *testing.T) {
	w := func(user, verb, name, sub string, code int, rv string) string {
		body := ""
		if rv != "" {
			body = `,"responseObject":{"metadata":{"name":"` + name + `","resourceVersion":"` + rv + `"}}`
		}
		ref := `"resource":"widgetkeys","apiGroup":"widget.m.widgetco.io","namespace":"a"`
		if name != "" && verb != "create" {
			ref += `,"name":"` + name + `"`
		}
		if sub != "" {
			ref += `,"subresource":"` + sub + `"`
		}
		return `{"level":"RequestResponse","verb":"` + verb + `","user":{"username":"` + user + `"},"objectRef":{` + ref + `},"responseStatus":{"code":` + fmt.Sprint(code) + `}` + body + `}`
	}
	rotated := []string{
		w("core", "create", "k1", "", 201, "10"),
		w("core", "patch", "k1", "", 200, "10"), // the same again: nothing changed
		w("provider", "update", "k1", "status", 200, "11"),
	}
	current := []string{
		w("core", "patch", "k1", "", 200, "11"),
		w("provider", "update", "k1", "status", 409, ""),
		w("provider", "update", "k1", "status", 200, "12"),
		w("core", "patch", "k2", "", 200, "20"), // first seen: counted as a change
		`{"level":"Metadata","verb":"patch","user":{"username":"core"},"objectRef":{"resource":"widgetkeys","name":"k1"},"responseStatus":{"code":200}}`,
		w("core", "get", "k1", "", 200, "12"),
	}
	dir := t.TempDir()
	h := &Log{Path: filepath.Join(dir, "kube-apiserver-audit.log")}
	if err := os.WriteFile(filepath.Join(dir, "kube-apiserver-audit-2026-11-26T04-00-01.500.log"), []byte(strings.Join(rotated, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.Path, []byte(strings.Join(current, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := h.Writes()
	if err != nil {
		t.Fatal(err)
	}
	want := []Writes{
		{User: "core", Resource: "widget.m.widgetco.io/widgetkeys", Verb: "patch", Changed: 1, Unchanged: 2},
		{User: "provider", Resource: "widget.m.widgetco.io/widgetkeys", Subresource: "status", Verb: "update", Changed: 2, Failed: 1},
		{User: "core", Resource: "widget.m.widgetco.io/widgetkeys", Verb: "create", Changed: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Writes(): -want, +got:\n%s", diff)
	}
}
