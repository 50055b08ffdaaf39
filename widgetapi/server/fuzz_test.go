package server

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// FuzzCreateWidget feeds arbitrary bodies through the create decoder and
// validator. Whatever the input: no panic, and anything accepted satisfies
// the contract's constraints and survives a JSON round trip unchanged.
func FuzzCreateWidget(f *testing.F) {
	for _, seed := range []string{
		`{"name":"a"}`,
		`{"name":"web-1","size":"large","region":"eu-west-1","labels":{"team":"x"},"description":"d"}`,
		`{"name":"A"}`, `{"name":""}`, `{}`, `[]`, `null`, `{"name":"a","x":1}`,
		`{"name":"a","labels":{"":""}}`, `{"name":"a","size":7}`, `{"name":"a"} trailing`,
		`{"name":"a","description":"\u0000"}`, `{"name":"a-","region":"-1"}`,
	} {
		f.Add([]byte(seed))
	}
	s := &Server{opts: Options{Regions: nil}}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := widgetapi.CreateWidgetRequest{}
		ferrs, err := decode(bytes.NewReader(body), &req)
		if err != nil || len(ferrs) > 0 {
			return
		}
		if errs := s.validateCreate(&req); len(errs) > 0 {
			for _, e := range errs {
				if e.Field == "" || e.Message == "" {
					t.Fatalf("field error without path or message: %+v", e)
				}
			}
			return
		}
		if !nameRE.MatchString(req.Name) || len(req.Name) > maxNameLength {
			t.Fatalf("accepted invalid name %q", req.Name)
		}
		if len(req.Labels) > maxLabels {
			t.Fatalf("accepted %d labels", len(req.Labels))
		}
		for k, v := range req.Labels {
			if !labelKeyRE.MatchString(k) || len(v) > maxLabelValueLength {
				t.Fatalf("accepted label %q=%q", k, v)
			}
		}
		out, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		again := widgetapi.CreateWidgetRequest{}
		if _, err := decode(bytes.NewReader(out), &again); err != nil {
			t.Fatalf("accepted request does not round-trip: %v", err)
		}
	})
}
