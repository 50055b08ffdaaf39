package main

import (
	"testing"

	"github.com/alecthomas/kong"
	"github.com/google/go-cmp/cmp"
)

func TestCLI(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   []string
		env    map[string]string
		want   CLI
	}{
		"Defaults": {
			reason: "Without flags the function serves mTLS gRPC on :9443 and metrics on :8080, as Crossplane's function runtime expects, and health probes on :8081 as examples/runtime's DeploymentRuntimeConfig expects.",
			want:   CLI{Network: "tcp", Address: ":9443", MaxRecvMessageSize: 16, MetricsAddress: ":8080", HealthProbeAddress: ":8081"},
		},
		"Flags": {
			reason: "Every flag of the function spec should be accepted.",
			args:   []string{"--insecure", "--address=127.0.0.1:9444", "--debug", "--tls-certs-dir=/certs", "--metrics-address=", "--health-probe-address=127.0.0.1:8082"},
			want:   CLI{Debug: true, Network: "tcp", Address: "127.0.0.1:9444", TLSCertsDir: "/certs", Insecure: true, MaxRecvMessageSize: 16, HealthProbeAddress: "127.0.0.1:8082"},
		},
		"CertsFromEnvironment": {
			reason: "The function runtime passes the certificates' directory in TLS_SERVER_CERTS_DIR.",
			env:    map[string]string{"TLS_SERVER_CERTS_DIR": "/tls/server"},
			want:   CLI{Network: "tcp", Address: ":9443", TLSCertsDir: "/tls/server", MaxRecvMessageSize: 16, MetricsAddress: ":8080", HealthProbeAddress: ":8081"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			got := CLI{}
			p, err := kong.New(&got, kong.Vars{"version": version})
			if err != nil {
				t.Fatalf("kong.New(): %v", err)
			}
			if _, err := p.Parse(tc.args); err != nil {
				t.Fatalf("%s\nParse(%v): %v", tc.reason, tc.args, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nParse(%v): -want, +got:\n%s", tc.reason, tc.args, diff)
			}
		})
	}
}
