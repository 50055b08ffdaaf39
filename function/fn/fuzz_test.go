package fn

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// The fuzz targets below feed RunFunction what it parses from outside: the
// observed XR, the function's input (a WidgetPolicy), and a whole request in
// protobuf wire format, which adds the observed composed resources, their
// connection details and the desired state of earlier pipeline steps. Their
// seeds run with every go test; explore further with, for example,
//
//	go test ./function -run '^$' -fuzz '^FuzzRunFunctionComposite$' -fuzztime 1m
//
// Each call must satisfy checkCall: it returns a response, within a
// deadline, never changes its request, and either composes resources that
// the API server and the Widget API accept or answers with a fatal result
// that composes nothing.

// fuzzDeadline is the deadline of each fuzzed call. A call that takes
// fuzzTooLong has ignored it.
const (
	fuzzDeadline = 2 * time.Second
	fuzzTooLong  = 10 * time.Second
)

// maxMessage is the most bytes a condition's or result's message may have:
// what Kubernetes allows a condition's message (metav1.Condition).
const maxMessage = 32768

func FuzzRunFunctionComposite(f *testing.F) {
	for _, xr := range []map[string]any{
		nsXR(),
		legacyXR(),
		nsXR(set("spec.keys", 1000000000), set("spec.writeConnectionSecretToRef", map[string]any{"name": "my-secret"})),
		nsXR(set("spec.keys", -1)),
		nsXR(set("spec.keys", 1e30)),
		nsXR(set("spec.keys", 2.5)),
		nsXR(set("metadata.name", strings.Repeat("a", 219))),
		nsXR(set("metadata.name", strings.Repeat("a", 253))),
		nsXR(set("metadata.name", strings.Repeat("a", 254))),
		legacyXR(set("spec.claimRef.name", strings.Repeat("b", 253))),
		legacyXR(set("spec.claimRef", "web")),
		nsXR(set("spec.description", strings.Repeat("é", 256))),
		nsXR(set("spec.description", "nul\x00")),
		nsXR(set("spec.labels", map[string]any{"team": "a\x1b", strings.Repeat("k", 100): "v"})),
		nsXR(set("spec.writeConnectionSecretToRef.name", "web-key-1")),
		nsXR(set("spec.size", 5), set("spec.labels", "team")),
		nsXR(set("status.conditions", []any{1, "x", map[string]any{"type": 5, "status": true}})),
		nsXR(unset("metadata.namespace")),
		nsXR(set("metadata", "web")),
		{},
	} {
		b, err := json.Marshal(xr)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
	// No observed composite resource at all.
	f.Add([]byte{}, false)

	fn := newFuzzFunction(f)
	f.Fuzz(func(t *testing.T, xr []byte, widgetIsReady bool) {
		req := testRequest{input: policyInput()}.build()
		req.Observed = nil
		if len(xr) > 0 {
			s := &structpb.Struct{}
			if err := protojson.Unmarshal(xr, s); err != nil {
				t.Skip("not a JSON object")
			}
			req.Observed = &fnv1.State{Composite: &fnv1.Resource{Resource: s}}
		}
		if widgetIsReady {
			// With a ready widget the function composes the keys too.
			req.Observed = &fnv1.State{Composite: req.GetObserved().GetComposite(), Resources: map[string]*fnv1.Resource{
				"widget": observed(nsWidget(widgetReady(nsEndpoint)), nil),
			}}
		}
		checkCall(t, fn, req)
	})
}

func FuzzRunFunctionInput(f *testing.F) {
	for _, in := range []map[string]any{
		policyInput(),
		{},
		policyInput(set("kind", "Input")),
		policyInput(set("rules.maxKeys", 11), set("defaults.keys", -1)),
		policyInput(set("rules.maxKeys", 1e30)),
		policyInput(set("ttl.converging", "-1s"), set("ttl.ready", "soon")),
		policyInput(set("rules.allowedRegions", []any{"us-east-1", "Moon", 5})),
		policyInput(set("rules.requiredLabels", []any{"team", strings.Repeat("k", 100)})),
		policyInput(set("defaults.labels", map[string]any{"widgetco.io/owner": "me"})),
		policyInput(set("namespaced.providerConfigRef", map[string]any{"kind": "Secret", "name": "Default"})),
		policyInput(set("legacy.connectionSecretNamespace", "Crossplane_System")),
		policyInput(set("unknownField", true)),
	} {
		b, err := json.Marshal(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// No input: the built-in defaults.
	f.Add([]byte{})

	fn := newFuzzFunction(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		req := testRequest{xr: nsXR(), observed: map[string]*fnv1.Resource{
			"widget": observed(nsWidget(widgetReady(nsEndpoint)), nil),
		}}.build()
		if len(in) > 0 {
			s := &structpb.Struct{}
			if err := protojson.Unmarshal(in, s); err != nil {
				t.Skip("not a JSON object")
			}
			req.Input = s
		}
		checkCall(t, fn, req)
	})
}

func FuzzRunFunctionRequest(f *testing.F) {
	seeds := []*fnv1.RunFunctionRequest{
		{},
		{Meta: &fnv1.RequestMeta{Tag: "tag"}, Observed: &fnv1.State{Composite: &fnv1.Resource{}}},
		testRequest{xr: nsXR(set("spec.keys", 1000000000)), input: policyInput()}.build(),
		testRequest{xr: legacyXR(), input: policyInput(), observed: map[string]*fnv1.Resource{
			"widget": observed(legacyWidget(set("status.atProvider.region", "Moon"), unset("spec.initProvider.region")), nil),
			"key-0":  observed(legacyKey(set("status.conditions", "none")), map[string][]byte{"key": {0xff, 0}}),
			"key-9":  observed(legacyKey(), nil),
		}}.build(),
	}
	for _, req := range requests() {
		seeds = append(seeds, req)
	}
	for _, req := range seeds {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}

	fn := newFuzzFunction(f)
	f.Fuzz(func(t *testing.T, wire []byte) {
		req := &fnv1.RunFunctionRequest{}
		if err := proto.Unmarshal(wire, req); err != nil {
			t.Skip("not a RunFunctionRequest")
		}
		checkCall(t, fn, req)
	})
}

func newFuzzFunction(f *testing.F) *Function {
	f.Helper()
	fn, err := NewFunction()
	if err != nil {
		f.Fatalf("NewFunction(): %v", err)
	}
	return fn
}

// checkCall calls RunFunction with req and checks what any call must do,
// whatever it is sent.
func checkCall(t *testing.T, fn *Function, req *fnv1.RunFunctionRequest) {
	t.Helper()
	before := proto.Clone(req)

	ctx, cancel := context.WithTimeout(context.Background(), fuzzDeadline)
	defer cancel()
	start := time.Now()
	rsp, err := fn.RunFunction(ctx, req)
	if took := time.Since(start); took > fuzzTooLong {
		t.Errorf("RunFunction() took %s with a deadline of %s", took, fuzzDeadline)
	}
	if err != nil {
		t.Fatalf("RunFunction() should answer with a response, never an error: %v", err)
	}
	if rsp == nil {
		t.Fatal("RunFunction() returned no response")
	}
	if !proto.Equal(before, req) {
		t.Error("RunFunction() changed its request")
	}
	if _, err := proto.Marshal(rsp); err != nil {
		t.Errorf("the response cannot be sent: %v", err)
	}
	if got, want := rsp.GetMeta().GetTag(), req.GetMeta().GetTag(); got != want {
		t.Errorf("the response's tag is %q, want the request's %q", got, want)
	}
	for _, c := range rsp.GetConditions() {
		checkMessage(t, "condition "+c.GetType(), c.GetMessage())
	}
	for _, r := range rsp.GetResults() {
		checkMessage(t, "result "+r.GetSeverity().String(), r.GetMessage())
	}

	if isFatal(rsp) {
		if !proto.Equal(req.GetDesired(), rsp.GetDesired()) {
			t.Error("a fatal result should compose nothing: the desired state should be the request's")
		}
		for _, c := range rsp.GetConditions() {
			if c.GetType() == typePolicyCompliant && c.GetStatus() == fnv1.Status_STATUS_CONDITION_TRUE {
				t.Error("a fatal result should not say the XR complies")
			}
		}
		return
	}
	if req.GetObserved().GetComposite().GetResource() == nil {
		t.Fatal("a request without an observed composite resource should get a fatal result")
	}
	checkComposed(t, req, rsp)
}

func isFatal(rsp *fnv1.RunFunctionResponse) bool {
	for _, r := range rsp.GetResults() {
		if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
			return true
		}
	}
	return false
}

func checkMessage(t *testing.T, what, msg string) {
	t.Helper()
	if len(msg) > maxMessage {
		t.Errorf("%s: the message has %d bytes; at most %d fit a condition", what, len(msg), maxMessage)
	}
}

// Limits the Widget and WidgetKey CRDs and the Widget API set, written out
// again here rather than taken from the function.
var (
	fuzzLabelKey   = regexp.MustCompile(`^[a-z0-9]([a-z0-9._/-]{0,61}[a-z0-9])?$`)
	fuzzRegion     = regexp.MustCompile(`^[a-z]+(-[a-z]+)*-[0-9]+$`)
	fuzzKeyName    = regexp.MustCompile(`^key-[0-9]$`)
	fuzzComposable = map[string]bool{"widget": true, "connection-secret": true}
)

// checkComposed checks every resource the function composed - every desired
// resource that differs from the request's - and the desired XR's status
// against what the API server and the Widget API accept.
func checkComposed(t *testing.T, req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse) {
	t.Helper()
	keys := 0
	for name, r := range rsp.GetDesired().GetResources() {
		if proto.Equal(r, req.GetDesired().GetResources()[name]) {
			continue
		}
		if !fuzzComposable[name] && !fuzzKeyName.MatchString(name) {
			t.Errorf("composed resource %q: the function composes only widget, connection-secret and key-0 to key-9", name)
		}
		if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
			t.Errorf("composed resource %q: the name is not a DNS-1123 label: %v", name, msgs)
		}
		o := fieldpath.Pave(r.GetResource().AsMap())
		kind, _ := o.GetString("kind")
		if kind != "Secret" {
			if n, _ := o.GetString("metadata.name"); n != "" {
				t.Errorf("composed resource %q: the function must leave the name of a managed resource to Crossplane, got %q", name, n)
			}
		}
		if kind == "Widget" || kind == "WidgetKey" {
			checkFields(t, name, r.GetResource().AsMap())
		}
		switch kind {
		case "Widget":
			checkWidget(t, name, o)
		case "WidgetKey":
			keys++
			checkText(t, name, o, "spec.initProvider.description")
			checkName(t, name, o, "spec.writeConnectionSecretToRef.name", validation.IsDNS1123Subdomain)
			if ns, err := o.GetString("spec.writeConnectionSecretToRef.namespace"); err == nil {
				checkDNS(t, name, "spec.writeConnectionSecretToRef.namespace", ns, validation.IsDNS1123Label)
			}
		case "Secret":
			checkName(t, name, o, "metadata.name", validation.IsDNS1123Subdomain)
		default:
			t.Errorf("composed resource %q: unexpected kind %q", name, kind)
		}
	}
	if keys > 10 {
		t.Errorf("the function composed %d WidgetKeys; an XR has at most 10", keys)
	}
	xr := fieldpath.Pave(rsp.GetDesired().GetComposite().GetResource().AsMap())
	if n, err := xr.GetString("status.connectionSecretName"); err == nil {
		checkDNS(t, "the XR", "status.connectionSecretName", n, validation.IsDNS1123Subdomain)
	}
}

func checkWidget(t *testing.T, name string, o *fieldpath.Paved) {
	t.Helper()
	checkText(t, name, o, "spec.forProvider.description")
	if size, _ := o.GetString("spec.forProvider.size"); size != "small" && size != "medium" && size != "large" {
		t.Errorf("composed resource %q: size %q is not small, medium or large", name, size)
	}
	if r, err := o.GetString("spec.initProvider.region"); err == nil && (len(r) > 32 || !fuzzRegion.MatchString(r)) {
		t.Errorf("composed resource %q: region %q is not a region", name, r)
	}
	labels := map[string]string{}
	if err := o.GetValueInto("spec.forProvider.labels", &labels); err != nil && !fieldpath.IsNotFound(err) {
		t.Errorf("composed resource %q: labels: %v", name, err)
	}
	if len(labels) > 31 {
		t.Errorf("composed resource %q: %d labels; a Widget may have 31", name, len(labels))
	}
	for k, v := range labels {
		if !fuzzLabelKey.MatchString(k) || strings.HasPrefix(k, "widgetco.io/") {
			t.Errorf("composed resource %q: label key %q is not allowed", name, k)
		}
		if len(v) > 63 || !isText(v, false) {
			t.Errorf("composed resource %q: label value %q is not at most 63 bytes of printable characters", name, v)
		}
	}
}

// fuzzCRDVersion is the version of the provider's CRDs that the function
// composes: v1beta1, the storage version, which the provider reconciles.
const fuzzCRDVersion = "v1beta1"

// fuzzSchemas returns the schemas of version fuzzCRDVersion of the
// provider's CRDs, by apiVersion and kind ("widget.widgetco.io/v1beta1
// Widget"). It picks the version by name: the CRDs serve more than one.
var fuzzSchemas = sync.OnceValues(func() (map[string]*apiextensionsv1.JSONSchemaProps, error) {
	files, err := filepath.Glob(filepath.Join("..", "..", "package", "provider", "crds", "*.yaml"))
	if err != nil {
		return nil, err
	}
	schemas := map[string]*apiextensionsv1.JSONSchemaProps{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(b, crd); err != nil {
			return nil, fmt.Errorf("cannot parse %s: %w", f, err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == fuzzCRDVersion && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				schemas[crd.Spec.Group+"/"+v.Name+" "+crd.Spec.Names.Kind] = v.Schema.OpenAPIV3Schema
			}
		}
	}
	return schemas, nil
})

// checkFields checks that a composed managed resource is of version
// fuzzCRDVersion and that its CRD's schema of that version has every field
// it sets, with the type it has there. The API server drops a field its
// schema does not have, so the provider would never see it.
func checkFields(t *testing.T, name string, o map[string]any) {
	t.Helper()
	schemas, err := fuzzSchemas()
	if err != nil {
		t.Fatalf("cannot read the provider's CRDs: %v", err)
	}
	apiVersion, _ := o["apiVersion"].(string)
	kind, _ := o["kind"].(string)
	s, ok := schemas[apiVersion+" "+kind]
	if !ok {
		t.Errorf("composed resource %q: %s %s is not a kind of version %s of the provider's CRDs", name, apiVersion, kind, fuzzCRDVersion)
		return
	}
	// The API server validates metadata itself; a CRD's schema does not
	// describe it.
	withoutMetadata := make(map[string]any, len(o))
	for k, v := range o {
		if k != "metadata" {
			withoutMetadata[k] = v
		}
	}
	checkSchema(t, name, "", withoutMetadata, s)
}

// checkSchema checks that value v at path has the type schema s gives it,
// and that s has each of its fields.
func checkSchema(t *testing.T, name, path string, v any, s *apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		if s.Type != "object" {
			t.Errorf("composed resource %q: %s is an object; the schema has %q", name, path, s.Type)
			return
		}
		for k, fv := range v {
			fp := strings.TrimPrefix(path+"."+k, ".")
			switch p, ok := s.Properties[k]; {
			case ok:
				checkSchema(t, name, fp, fv, &p)
			case s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
				checkSchema(t, name, fp, fv, s.AdditionalProperties.Schema)
			case s.AdditionalProperties != nil && s.AdditionalProperties.Allows:
				// additionalProperties: true allows any field.
			default:
				t.Errorf("composed resource %q: %s is not a field of the %s schema", name, fp, fuzzCRDVersion)
			}
		}
	case []any:
		if s.Type != "array" || s.Items == nil || s.Items.Schema == nil {
			t.Errorf("composed resource %q: %s is an array; the schema has %q", name, path, s.Type)
			return
		}
		for i, iv := range v {
			checkSchema(t, name, fmt.Sprintf("%s[%d]", path, i), iv, s.Items.Schema)
		}
	case string:
		if s.Type != "string" {
			t.Errorf("composed resource %q: %s is a string; the schema has %q", name, path, s.Type)
		}
	case bool:
		if s.Type != "boolean" {
			t.Errorf("composed resource %q: %s is a boolean; the schema has %q", name, path, s.Type)
		}
	}
}

// checkText checks that the string at path is a description: at most 256
// characters, printable, spaces, tabs and newlines.
func checkText(t *testing.T, name string, o *fieldpath.Paved, path string) {
	t.Helper()
	d, err := o.GetString(path)
	if err != nil {
		t.Errorf("composed resource %q: %s: %v", name, path, err)
		return
	}
	if n := utf8.RuneCountInString(d); n > 256 || !isText(d, true) {
		t.Errorf("composed resource %q: %s has %d characters, or characters that are not printable: %q", name, path, n, d)
	}
}

func checkName(t *testing.T, name string, o *fieldpath.Paved, path string, valid func(string) []string) {
	t.Helper()
	v, err := o.GetString(path)
	if err != nil {
		t.Errorf("composed resource %q: %s: %v", name, path, err)
		return
	}
	checkDNS(t, name, path, v, valid)
}

func checkDNS(t *testing.T, name, path, v string, valid func(string) []string) {
	t.Helper()
	if msgs := valid(v); len(msgs) > 0 {
		t.Errorf("%s: %s %q is invalid: %v", name, path, v, msgs)
	}
}

// isText reports whether s is valid UTF-8 of printable characters and, when
// newlines is true, tabs and newlines too.
func isText(s string, newlines bool) bool {
	if !utf8.ValidString(s) {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool {
		allowed := unicode.IsPrint(r) || newlines && (r == '\t' || r == '\n')
		return !allowed
	})
}
