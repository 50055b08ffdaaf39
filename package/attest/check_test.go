package attest

import (
	"bytes"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	sbom, err := SBOM(SBOMInput{Name: "configuration-widget", Version: "v0.3.1", Created: commitTime})
	if err != nil {
		t.Fatal(err)
	}
	prov, err := Provenance(build())
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason        string
		predicateType string
		b             []byte
		// want is a part of the error, or "" for none.
		want string
	}{
		"SBOM": {
			reason:        "An SBOM from SBOM is a valid SPDX predicate.",
			predicateType: PredicateSPDX,
			b:             sbom,
		},
		"SBOMCosignType": {
			reason:        "cosign's --type name is accepted too.",
			predicateType: CosignTypeSPDX,
			b:             sbom,
		},
		"Provenance": {
			reason:        "A provenance from Provenance is a valid SLSA predicate.",
			predicateType: PredicateSLSAProvenanceV1,
			b:             prov,
		},
		"ProvenanceCosignType": {
			reason:        "cosign's --type name is accepted too.",
			predicateType: CosignTypeSLSAProvenanceV1,
			b:             prov,
		},
		"ProvenanceAsSPDX": {
			reason:        "A provenance is not an SBOM.",
			predicateType: PredicateSPDX,
			b:             prov,
			want:          "spdxVersion",
		},
		"SBOMAsProvenance": {
			reason:        "An SBOM is not a provenance.",
			predicateType: PredicateSLSAProvenanceV1,
			b:             sbom,
			want:          "buildType",
		},
		"NotJSON": {
			reason:        "A predicate must be JSON.",
			predicateType: PredicateSPDX,
			b:             []byte(`spdxVersion: SPDX-2.3`),
			want:          "cannot parse",
		},
		"TrailingData": {
			reason:        "A predicate is one JSON value.",
			predicateType: PredicateSPDX,
			b:             append(bytes.Clone(sbom), []byte("{}")...),
			want:          "cannot parse",
		},
		"Array": {
			reason:        "A predicate is a JSON object.",
			predicateType: PredicateSLSAProvenanceV1,
			b:             []byte(`[]`),
			want:          "cannot parse",
		},
		"Null": {
			reason:        "null is no predicate.",
			predicateType: PredicateSLSAProvenanceV1,
			b:             []byte(`null`),
			want:          "buildType",
		},
		"WrongSPDXVersion": {
			reason:        "Only SPDX 2.3 is accepted.",
			predicateType: PredicateSPDX,
			b:             bytes.Replace(sbom, []byte(`"SPDX-2.3"`), []byte(`"SPDX-2.2"`), 1),
			want:          `"SPDX-2.2"`,
		},
		"NoDescribes": {
			reason:        "An SPDX document must say what it describes.",
			predicateType: PredicateSPDX,
			b:             bytes.Replace(sbom, []byte(`"DESCRIBES"`), []byte(`"CONTAINS"`), 1),
			want:          "DESCRIBES",
		},
		"DescribesNothing": {
			reason:        "An SPDX document must describe one of its own elements.",
			predicateType: PredicateSPDX,
			b:             bytes.Replace(sbom, []byte(`"relatedSpdxElement": "SPDXRef-Package-xpkg-configuration-widget"`), []byte(`"relatedSpdxElement": "SPDXRef-Package-elsewhere"`), 1),
			want:          "DESCRIBES",
		},
		"BadSPDXID": {
			reason:        "SPDX identifiers have a fixed form.",
			predicateType: PredicateSPDX,
			b:             bytes.ReplaceAll(sbom, []byte(`SPDXRef-Package-xpkg-configuration-widget`), []byte(`SPDXRef-Package/configuration widget`)),
			want:          "SPDXRef-Package/configuration widget",
		},
		"NoBuildType": {
			reason:        "A provenance must have a build type.",
			predicateType: PredicateSLSAProvenanceV1,
			b:             bytes.Replace(prov, []byte(`"buildType"`), []byte(`"kind"`), 1),
			want:          "buildType",
		},
		"NoBuilderID": {
			reason:        "A provenance must name its builder.",
			predicateType: PredicateSLSAProvenanceV1,
			b:             []byte(`{"buildDefinition": {"buildType": "https://example.com/b@v1", "externalParameters": {}}, "runDetails": {"builder": {}}}`),
			want:          "builder.id",
		},
		"NoExternalParameters": {
			reason:        "A provenance must have external parameters, if empty.",
			predicateType: PredicateSLSAProvenanceV1,
			b:             []byte(`{"buildDefinition": {"buildType": "https://example.com/b@v1"}, "runDetails": {"builder": {"id": "https://example.com/builder"}}}`),
			want:          "externalParameters",
		},
		"Statement": {
			reason:        "cosign takes the predicate, not a whole in-toto Statement.",
			predicateType: PredicateSLSAProvenanceV1,
			b:             append(append([]byte(`{"_type": "https://in-toto.io/Statement/v1", "predicateType": "https://slsa.dev/provenance/v1", "predicate": `), prov...), '}'),
			want:          "in-toto Statement",
		},
		"Oversized": {
			reason:        "Input over 16 MiB is refused unread.",
			predicateType: PredicateSPDX,
			b:             append(bytes.Clone(sbom), bytes.Repeat([]byte(" "), MaxPredicateSize)...),
			want:          "16 MiB",
		},
		"UnknownType": {
			reason:        "Only the two predicate types are known.",
			predicateType: "https://cyclonedx.org/bom",
			b:             sbom,
			want:          "unknown type",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := Check(tc.predicateType, tc.b)
			if tc.want == "" {
				if err != nil {
					t.Errorf("\n%s\nCheck(...): %v", tc.reason, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("\n%s\nCheck(...): want an error mentioning %q, got %v", tc.reason, tc.want, err)
			}
		})
	}
}

// FuzzCheck checks that Check returns, never panics, whatever it is given.
func FuzzCheck(f *testing.F) {
	f.Add([]byte(`{"spdxVersion": "SPDX-2.3", "relationships": [{}]}`))
	f.Add([]byte(`{"buildDefinition": {"buildType": 1}}`))
	f.Add([]byte(strings.Repeat("[", 20000)))
	f.Fuzz(func(_ *testing.T, b []byte) {
		_ = Check(PredicateSPDX, b)
		_ = Check(PredicateSLSAProvenanceV1, b)
	})
}
