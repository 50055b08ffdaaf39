package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
)

// badLabels is a create body with n invalid label keys ("Bad-0000"...), each
// with a valid value.
func badLabels(n int) string {
	var b strings.Builder
	b.WriteString(`{"name":"many","labels":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"Bad-%04d":"%s"`, i, strings.Repeat("v", 40))
	}
	b.WriteString("}}")
	return b.String()
}

// TestErrorResponsesAreBounded: however much is wrong with a request, and
// whatever it repeats back, an error response stays small: at most 20 field
// errors plus a count of the rest, each echoed value clipped.
func TestErrorResponsesAreBounded(t *testing.T) {
	type want struct {
		Status        int
		Errors        int
		ErrorsOmitted int
		FirstField    string
		Detail        string
	}
	cases := map[string]struct {
		reason       string
		method, path string
		body         string
		want         want
		maxBytes     int
	}{
		"ManyFieldErrors": {
			reason: "1000 bad label keys and too many labels: 1001 problems, 20 listed",
			method: "POST", path: "/v1/widgets", body: badLabels(1000),
			want:     want{Status: 422, Errors: 20, ErrorsOmitted: 981, FirstField: "labels", Detail: "the request has invalid fields; see errors"},
			maxBytes: 4 << 10,
		},
		"LongLabelKey": {
			reason: "a 10 KB label key is clipped in the field path",
			method: "POST", path: "/v1/widgets", body: `{"name":"a","labels":{"` + strings.Repeat("x", 10000) + `":"v"}}`,
			want:     want{Status: 422, Errors: 1, FirstField: "labels[" + strings.Repeat("x", 86) + "…", Detail: "the request has invalid fields; see errors"},
			maxBytes: 1 << 10,
		},
		"LongUnknownField": {
			reason: "a 10 KB unknown field name is clipped",
			method: "POST", path: "/v1/widgets", body: `{"name":"a","` + strings.Repeat("y", 10000) + `":1}`,
			want:     want{Status: 422, Errors: 1, FirstField: strings.Repeat("y", 93) + "…", Detail: "the request has invalid fields; see errors"},
			maxBytes: 1 << 10,
		},
		"LongPathName": {
			reason: "a 100 KB widget name in the path is clipped in the detail",
			method: "GET", path: "/v1/widgets/" + strings.Repeat("n", 100000),
			want:     want{Status: 404, Detail: "widget " + strings.Repeat("n", 502) + "…"},
			maxBytes: 1 << 10,
		},
	}
	env := apitest.Start(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx(t), tc.method, env.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+apitest.TokenA)
			rsp, err := env.HTTP.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer rsp.Body.Close()
			data, err := io.ReadAll(rsp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if len(data) > tc.maxBytes {
				t.Errorf("%s: %d-byte request answered with %d bytes, want at most %d", tc.reason, len(tc.body)+len(tc.path), len(data), tc.maxBytes)
			}
			p := widgetapi.Problem{}
			if err := json.Unmarshal(data, &p); err != nil {
				t.Fatalf("%s: not a problem document: %v", tc.reason, err)
			}
			got := want{Status: p.Status, Errors: len(p.Errors), ErrorsOmitted: p.ErrorsOmitted, Detail: p.Detail}
			if len(p.Errors) > 0 {
				got.FirstField = p.Errors[0].Field
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestClientErrorCountsOmittedFieldErrors: the Go client's error says how
// many field problems the server left out.
func TestClientErrorCountsOmittedFieldErrors(t *testing.T) {
	env := apitest.Start(t)
	labels := map[string]string{}
	for i := range 30 {
		labels[fmt.Sprintf("Bad-%02d", i)] = "v"
	}
	_, err := env.Client(t, apitest.TokenA).CreateWidget(context.Background(), widgetapi.CreateWidgetRequest{Name: "a", Labels: labels})
	fields, ok := widgetapi.IsInvalid(err)
	if !ok {
		t.Fatalf("CreateWidget with 30 bad label keys: %v, want invalid", err)
	}
	if len(fields) != 20 || !strings.HasSuffix(err.Error(), "; and 10 more") {
		t.Errorf("CreateWidget with 30 bad label keys: %d field errors, message ending %q; want 20 and \"; and 10 more\"", len(fields), err.Error()[max(len(err.Error())-30, 0):])
	}
}
