package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAuditChecks reads an audit log written here: what kube-apiserver
// refused, and how many Event creates each ServiceAccount had refused as
// already existing.
func TestAuditChecks(t *testing.T) {
	lines := []string{
		`{"verb":"create","user":{"username":"sa:provider"},"objectRef":{"resource":"events","namespace":"a","name":"w.1"},"responseStatus":{"code":201},"requestReceivedTimestamp":"2026-11-26T04:00:00Z"}`,
		`{"verb":"create","user":{"username":"sa:provider"},"objectRef":{"resource":"events","namespace":"a","name":"w.1"},"responseStatus":{"code":409},"requestReceivedTimestamp":"2026-11-26T04:00:00Z"}`,
		`{"verb":"create","user":{"username":"sa:provider"},"objectRef":{"resource":"events","namespace":"a","name":"w.2"},"responseStatus":{"code":201},"requestReceivedTimestamp":"2026-11-26T04:00:01Z"}`,
		`{"verb":"create","user":{"username":"sa:core"},"objectRef":{"resource":"events","namespace":"a","name":"x.1"},"responseStatus":{"code":201},"requestReceivedTimestamp":"2026-11-26T04:00:01Z"}`,
		`{"verb":"patch","user":{"username":"sa:core"},"objectRef":{"resource":"events","namespace":"a","name":"x.1"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-26T04:00:02Z"}`,
		`{"verb":"list","user":{"username":"sa:provider"},"objectRef":{"resource":"secrets","namespace":"b"},"responseStatus":{"code":403},"requestReceivedTimestamp":"2026-11-26T04:00:02Z"}`,
		`{"verb":"list","user":{"username":"sa:provider"},"objectRef":{"resource":"secrets","namespace":"b"},"responseStatus":{"code":403},"requestReceivedTimestamp":"2026-11-26T04:00:03Z"}`,
		`not an audit event, "code":403 "resource":"events" "verb":"create"`,
	}
	h := &Harness{dir: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(h.dir, "logs"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.auditLog(), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
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

	if _, err := (&Harness{dir: t.TempDir()}).EventCreates(); err == nil {
		t.Error("EventCreates() without an audit log: no error")
	}
}
