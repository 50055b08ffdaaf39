package platform

import (
	"bytes"
	"io"
	"os"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// ReadObjects reads every object of a (multi-document) YAML file.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errors.Wrap(err, "cannot read objects")
	}
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := d.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, errors.Wrapf(err, "cannot parse %s", path)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// Name is an object's namespace/name, or its name when it is cluster scoped.
func Name(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

// A Condition is a status condition of an object.
type Condition struct {
	Type    string
	Status  string
	Reason  string
	Message string
}

// String is the condition in a status line: Ready=True, or
// Ready=False(Creating) when the reason helps.
func (c Condition) String() string {
	if c.Status == "True" || c.Reason == "" {
		return c.Type + "=" + c.Status
	}
	return c.Type + "=" + c.Status + "(" + c.Reason + ")"
}

// conditionOrder puts Crossplane's conditions first, then the function's.
var conditionOrder = map[string]int{"Synced": 1, "Ready": 2, "PolicyCompliant": 3, "WidgetReady": 4, "KeysReady": 5}

// Conditions returns u's status conditions: Synced and Ready first, then
// function-widget's, then any others by type.
func Conditions(u *unstructured.Unstructured) []Condition {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	out := make([]Condition, 0, len(raw))
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		out = append(out, Condition{Type: str("type"), Status: str("status"), Reason: str("reason"), Message: str("message")})
	}
	rank := func(t string) int {
		if r, ok := conditionOrder[t]; ok {
			return r
		}
		return len(conditionOrder) + 1
	}
	sort.SliceStable(out, func(i, j int) bool {
		if ri, rj := rank(out[i].Type), rank(out[j].Type); ri != rj {
			return ri < rj
		}
		return out[i].Type < out[j].Type
	})
	return out
}

// GetCondition returns u's condition of type t, with Status Unknown when u
// has none.
func GetCondition(u *unstructured.Unstructured, t string) Condition {
	for _, c := range Conditions(u) {
		if c.Type == t {
			return c
		}
	}
	return Condition{Type: t, Status: "Unknown"}
}

// StatusLine summarises u in one line:
//
//	XWidget team-a/web: Synced=True Ready=False(Creating) WidgetReady=False(Provisioning) state=Provisioning keys=0/2
func StatusLine(u *unstructured.Unstructured) string {
	var b strings.Builder
	b.WriteString(u.GetKind() + " " + Name(u) + ":")
	cs := Conditions(u)
	if len(cs) == 0 {
		b.WriteString(" no conditions yet")
	}
	for _, c := range cs {
		b.WriteString(" " + c.String())
	}
	for _, f := range []struct{ label, field string }{{"state", "widgetState"}, {"keys", "keysReady"}} {
		if v, _, _ := unstructured.NestedString(u.Object, "status", f.field); v != "" {
			b.WriteString(" " + f.label + "=" + v)
		}
	}
	return b.String()
}

// Problems returns the messages of u's conditions that are not True, as
// "Type: message", for explaining why u is not ready.
func Problems(u *unstructured.Unstructured) []string {
	var out []string
	for _, c := range Conditions(u) {
		if c.Status != "True" && c.Message != "" {
			out = append(out, c.Type+": "+c.Message)
		}
	}
	return out
}
