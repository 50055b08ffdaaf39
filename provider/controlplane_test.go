package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestControlPlaneName(t *testing.T) {
	kept := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "crossplane-system", Name: controlPlaneConfigMap}, Data: map[string]string{controlPlaneKey: name}}
	}
	cases := map[string]struct {
		reason string
		flag   string
		ns     string
		objs   []runtime.Object
		// raced makes the first create fail as another replica's would.
		raced bool
		want  string
		// made says the name was made at random (want is then unused).
		made    bool
		wantErr string
	}{
		"Flag":         {reason: "A name on the command line wins, and nothing is read.", flag: "prod-eu-1", ns: "crossplane-system", objs: []runtime.Object{kept("cp-other")}, want: "prod-eu-1"},
		"BadFlag":      {reason: "A flag that is no label value is refused at start.", flag: "prod eu", ns: "crossplane-system", wantErr: "not a valid label value"},
		"Kept":         {reason: "The ConfigMap's name is this control plane's.", ns: "crossplane-system", objs: []runtime.Object{kept("cp-abc")}, want: "cp-abc"},
		"Made":         {reason: "A first start makes a name at random and keeps it.", ns: "crossplane-system", made: true},
		"Raced":        {reason: "Another replica that made the ConfigMap first wins: its name is read.", ns: "crossplane-system", raced: true, want: "cp-winner"},
		"BadKept":      {reason: "A kept name that is no label value is refused, saying how to fix it.", ns: "crossplane-system", objs: []runtime.Object{kept("no spaces allowed")}, wantErr: "delete the ConfigMap"},
		"EmptyKept":    {reason: "An empty kept name is refused.", ns: "crossplane-system", objs: []runtime.Object{kept("")}, wantErr: "it is empty"},
		"NoNamespace":  {reason: "Outside a cluster, with no namespace and no flag, there is no name.", want: ""},
		"FlagNoNSSame": {reason: "Outside a cluster the flag still names the control plane.", flag: "dev", want: "dev"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cs := fake.NewClientset(tc.objs...)
			if tc.raced {
				cs.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
					// The winner's ConfigMap lands, and this create loses.
					_ = cs.Tracker().Add(kept("cp-winner"))
					return true, nil, kerrors.NewAlreadyExists(schema.GroupResource{Resource: "configmaps"}, controlPlaneConfigMap)
				})
			}
			got, err := controlPlaneName(context.Background(), cs.CoreV1(), tc.ns, tc.flag)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nwant an error mentioning %q, got %v", tc.reason, tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\n%v", tc.reason, err)
			}
			if !tc.made {
				if got != tc.want {
					t.Errorf("%s\nwant %q, got %q", tc.reason, tc.want, got)
				}
				return
			}
			if !strings.HasPrefix(got, "cp-") || len(validation.IsValidLabelValue(got)) > 0 {
				t.Errorf("%s\nmade name %q is not cp-... and a valid label value", tc.reason, got)
			}
			again, err := controlPlaneName(context.Background(), cs.CoreV1(), tc.ns, "")
			if err != nil || again != got {
				t.Errorf("%s\na second start got %q (%v), want the kept %q", tc.reason, again, err, got)
			}
		})
	}
}
