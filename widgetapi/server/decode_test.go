package server_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// TestStrictDecoding: request bodies mean exactly what the contract says.
// Names that encoding/json would fold, duplicates it would let the last win,
// invalid UTF-8 it would rewrite and data after the object are all refused
// (422 with the field path, 400 for the object itself), on every endpoint
// that takes a body.
func TestStrictDecoding(t *testing.T) {
	type want struct {
		status int
		fields []string
	}
	cases := map[string]struct {
		reason       string
		method, path string
		body         string
		want         want
	}{
		"CaseVariantName":     {"a name in another case is unknown", "POST", "/v1/widgets", `{"NAME":"a"}`, want{422, []string{"NAME"}}},
		"CaseVariantBeside":   {"even beside the right one", "POST", "/v1/widgets", `{"name":"a","Name":"b"}`, want{422, []string{"Name"}}},
		"UnicodeFolding":      {"U+017F folds to s in encoding/json; not here", "POST", "/v1/widgets", `{"name":"a","ſize":"large"}`, want{422, []string{"ſize"}}},
		"DuplicateName":       {"a name given twice", "POST", "/v1/widgets", `{"name":"a","name":"b"}`, want{422, []string{"name"}}},
		"DuplicateLabelKey":   {"a label key given twice", "POST", "/v1/widgets", `{"name":"a","labels":{"k":"1","k":"2"}}`, want{422, []string{"labels[k]"}}},
		"InvalidUTF8Value":    {"a string that is not UTF-8", "POST", "/v1/widgets", "{\"name\":\"a\",\"description\":\"x\xffy\"}", want{422, []string{"description"}}},
		"InvalidUTF8Name":     {"a field name that is not UTF-8", "POST", "/v1/widgets", "{\"name\":\"a\",\"\xfe\":\"x\"}", want{422, []string{"\uFFFD"}}},
		"InvalidUTF8Label":    {"a label value that is not UTF-8", "POST", "/v1/widgets", "{\"name\":\"a\",\"labels\":{\"k\":\"\xc3\"}}", want{422, []string{"labels[k]"}}},
		"LoneLowSurrogate":    {"an escaped lone surrogate is not UTF-8 either", "POST", "/v1/widgets", `{"name":"a","description":"\udc00"}`, want{422, []string{"description"}}},
		"LoneHighSurrogate":   {"nor is a high surrogate without its pair", "POST", "/v1/widgets", `{"name":"a","description":"\ud800x"}`, want{422, []string{"description"}}},
		"SurrogatePair":       {"an escaped pair is fine", "POST", "/v1/widgets", `{"name":"pair","description":"\ud83d\ude00"}`, want{201, nil}},
		"EscapedBackslashU":   {"an escaped backslash before u is no escape", "POST", "/v1/widgets", `{"name":"slash","description":"\\udc00"}`, want{201, nil}},
		"TrailingBrace":       {"a stray closing brace after the object", "POST", "/v1/widgets", `{"name":"a"}}`, want{400, nil}},
		"TrailingValue":       {"a second value after the object", "POST", "/v1/widgets", `{"name":"a"}"b"`, want{400, nil}},
		"TrailingSpace":       {"white space after the object is fine", "POST", "/v1/widgets", "{\"name\":\"space\"} \r\n\t", want{201, nil}},
		"NullBody":            {"null is not an object", "POST", "/v1/widgets", `null`, want{400, nil}},
		"EmptyBody":           {"nothing is not an object", "POST", "/v1/widgets", ``, want{400, nil}},
		"LabelsNotObject":     {"labels is an object", "POST", "/v1/widgets", `{"name":"a","labels":["k"]}`, want{422, []string{"labels"}}},
		"LabelValueNotString": {"label values are strings", "POST", "/v1/widgets", `{"name":"a","labels":{"k":1}}`, want{422, []string{"labels[k]"}}},
		"NestedUnknown":       {"an unknown field is named whatever it holds", "POST", "/v1/widgets", `{"name":"a","x":{"y":[1,{"z":[]}]}}`, want{422, []string{"x"}}},
		"EmptyFieldName":      {"the empty name shows as \"\"", "POST", "/v1/widgets", `{"name":"a","":1}`, want{422, []string{`""`}}},
		"Several":             {"every problem is listed in order", "POST", "/v1/widgets", `{"NAME":"a","name":"b","name":"c","description":"\udc00"}`, want{422, []string{"NAME", "name", "description"}}},
		"ReplaceDuplicate":    {"PUT is strict too", "PUT", "/v1/widgets/existing", `{"labels":{"a":"1","a":"1"}}`, want{422, []string{"labels[a]"}}},
		"ReplaceCase":         {"PUT names are case-sensitive", "PUT", "/v1/widgets/existing", `{"Size":"large"}`, want{422, []string{"Size"}}},
		"PatchCase":           {"PATCH names are case-sensitive", "PATCH", "/v1/widgets/existing", `{"DESCRIPTION":"x"}`, want{422, []string{"DESCRIPTION"}}},
		"PatchInvalidUTF8":    {"PATCH strings are UTF-8", "PATCH", "/v1/widgets/existing", "{\"description\":\"\xff\"}", want{422, []string{"description"}}},
		"PatchTrailing":       {"PATCH has nothing after the object", "PATCH", "/v1/widgets/existing", `{}[]`, want{400, nil}},
		"KeyDuplicate":        {"key bodies are strict too", "POST", "/v1/widgets/existing/keys", `{"name":"k","name":"k2"}`, want{422, []string{"name"}}},
		"KeyCase":             {"key names are case-sensitive", "POST", "/v1/widgets/existing/keys", `{"Name":"k"}`, want{422, []string{"Name"}}},
	}
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) { o.ProvisionDelay = 0 }))
	if _, err := env.Client(t, apitest.TokenA).CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: "existing"}); err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			status, p := raw(t, env, tc.method, tc.path, tc.body)
			var fields []string
			for _, e := range p.Errors {
				fields = append(fields, e.Field)
			}
			if diff := cmp.Diff(tc.want, want{status, fields}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s: -want, +got:\n%s\n(detail %q)", tc.reason, diff, p.Detail)
			}
		})
	}
}
