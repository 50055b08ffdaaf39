package cluster

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestNodeCIDR(t *testing.T) {
	cases := map[string]struct {
		first   string
		i       int
		want    string
		wantErr bool
	}{
		"FirstNode":          {first: "10.213.0.0/24", i: 0, want: "10.213.0.0/24"},
		"SecondNode":         {first: "10.213.0.0/24", i: 1, want: "10.213.1.0/24"},
		"FourthNode":         {first: "10.213.5.0/24", i: 3, want: "10.213.8.0/24"},
		"OneNodeAnyPrefix":   {first: "10.213.0.0/16", i: 0, want: "10.213.0.0/16"},
		"SeveralNeedA24":     {first: "10.213.0.0/16", i: 1, wantErr: true},
		"NoRoomLeft":         {first: "10.213.254.0/24", i: 2, wantErr: true},
		"NotIPv4":            {first: "fd00::/64", i: 1, wantErr: true},
		"NotARange":          {first: "10.213.0.1", i: 1, wantErr: true},
		"LastRoomIsEnough":   {first: "10.213.253.0/24", i: 2, want: "10.213.255.0/24"},
		"HostBitsIgnored":    {first: "10.213.0.7/24", i: 1, want: "10.213.1.0/24"},
		"SecondOfAnotherNet": {first: "192.168.40.0/24", i: 1, want: "192.168.41.0/24"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := nodeCIDR(tc.first, tc.i)
			if (err != nil) != tc.wantErr {
				t.Fatalf("nodeCIDR(%q, %d): error %v, want error %t", tc.first, tc.i, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("nodeCIDR(%q, %d): -want, +got:\n%s", tc.first, tc.i, diff)
			}
		})
	}
}

func TestNodeLossGraceFlags(t *testing.T) {
	cases := map[string]struct {
		grace   time.Duration
		wantKCM []string
		wantAPI map[string]string
	}{
		"KubernetesDefaults": {},
		"TwentySeconds": {
			grace:   20 * time.Second,
			wantKCM: []string{"--node-monitor-grace-period=20s"},
			wantAPI: map[string]string{"default-not-ready-toleration-seconds": "20", "default-unreachable-toleration-seconds": "20"},
		},
		"RoundedToSeconds": {
			grace:   1500 * time.Millisecond,
			wantKCM: []string{"--node-monitor-grace-period=1.5s"},
			wantAPI: map[string]string{"default-not-ready-toleration-seconds": "2", "default-unreachable-toleration-seconds": "2"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantKCM, nodeMonitorGrace(tc.grace)); diff != "" {
				t.Errorf("kube-controller-manager flags: -want, +got:\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAPI, tolerations(tc.grace)); diff != "" {
				t.Errorf("kube-apiserver flags: -want, +got:\n%s", diff)
			}
		})
	}
}
