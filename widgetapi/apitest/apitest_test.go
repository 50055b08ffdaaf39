package apitest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recordingTB collects errors instead of failing, to test the checker itself.
type recordingTB struct {
	testing.TB
	errs []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Helper() {}

func TestContractCheckerCatchesViolations(t *testing.T) {
	cases := map[string]struct {
		reason  string
		handler http.HandlerFunc
		method  string
		path    string
		body    string
		want    string
	}{
		"ResponseShape": {
			reason: "a widget without required fields breaks the contract",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"name":"x"}`))
			},
			method: "GET", path: "/v1/widgets/x",
			want: "breaks the contract",
		},
		"UndocumentedStatus": {
			reason:  "a status the operation does not declare breaks the contract",
			handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) },
			method:  "GET", path: "/v1/widgets/x",
			want: "breaks the contract",
		},
		"AcceptedInvalidRequest": {
			reason: "accepting a body the contract rejects is reported",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusCreated)
			},
			method: "POST", path: "/v1/widgets", body: `{"name":"NOT_A_LABEL"}`,
			want: "that the contract rejects",
		},
		"UnknownRoute": {
			reason:  "serving a route the contract lacks is reported",
			handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) },
			method:  "GET", path: "/v1/gadgets",
			want: "is not in the contract",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rt := &recordingTB{TB: t}
			h := ContractChecker(rt, tc.handler)
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer x")
			req.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(httptest.NewRecorder(), req)
			got := strings.Join(rt.errs, "\n")
			if !strings.Contains(got, tc.want) {
				t.Errorf("%s: got errors %q, want one containing %q", tc.reason, got, tc.want)
			}
		})
	}
}

// TestRoutesMatchContract checks the server serves exactly the operations the
// contract declares.
func TestRoutesMatchContract(t *testing.T) {
	doc := Contract(t)
	var declared []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			declared = append(declared, method+" "+path)
		}
	}
	served := Start(t).Server.Routes()
	slices.Sort(declared)
	slices.Sort(served)
	if diff := cmp.Diff(declared, served); diff != "" {
		t.Errorf("contract operations vs server routes: -contract, +server:\n%s", diff)
	}
}
