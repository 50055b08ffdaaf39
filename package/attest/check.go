package attest

import (
	"encoding/json"
	"regexp"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// spdxIDPattern is SPDX 2.3's form of an element identifier.
var spdxIDPattern = regexp.MustCompile(`^SPDXRef-[A-Za-z0-9.-]+$`)

// Check returns an error when b is not a predicate of predicateType, which
// is PredicateSPDX or PredicateSLSAProvenanceV1 or cosign's name for either
// (CosignTypeSPDX, CosignTypeSLSAProvenanceV1).
//
// It checks the shape a consumer relies on, not every rule of the formats:
// the JSON parses; an SPDX document is SPDX-2.3, its element identifiers are
// well formed and SPDXRef-DOCUMENT DESCRIBES one of its elements; a
// provenance has a buildType, externalParameters and a builder ID. A whole
// in-toto Statement is refused: cosign wants the predicate alone. Input
// larger than MaxPredicateSize is refused unread.
func Check(predicateType string, b []byte) error {
	if len(b) > MaxPredicateSize {
		return errors.Errorf("predicate is %d bytes, more than the %d (16 MiB) a predicate may be", len(b), MaxPredicateSize)
	}
	switch predicateType {
	case PredicateSPDX, CosignTypeSPDX:
		return checkSPDX(b)
	case PredicateSLSAProvenanceV1, CosignTypeSLSAProvenanceV1:
		return checkSLSA(b)
	}
	return errors.Errorf("cannot check predicate of unknown type %q: pass %s or %s", predicateType, PredicateSPDX, PredicateSLSAProvenanceV1)
}

// statement holds the fields that tell an in-toto Statement from a
// predicate.
type statement struct {
	Type          string `json:"_type"`
	PredicateType string `json:"predicateType"`
}

func (s statement) err() error {
	if s.Type == "" && s.PredicateType == "" {
		return nil
	}
	return errors.Errorf("this is an in-toto Statement (_type %q, predicateType %q), not a predicate: pass its predicate", s.Type, s.PredicateType)
}

type spdxElement struct {
	SPDXID string `json:"SPDXID"`
}

func checkSPDX(b []byte) error {
	var d struct {
		statement
		SPDXVersion   string             `json:"spdxVersion"`
		SPDXID        string             `json:"SPDXID"`
		Packages      []spdxElement      `json:"packages"`
		Files         []spdxElement      `json:"files"`
		Relationships []spdxRelationship `json:"relationships"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return errors.Wrap(err, "cannot parse SPDX document")
	}
	if err := d.err(); err != nil {
		return err
	}
	if d.SPDXVersion != spdxVersion {
		return errors.Errorf("SPDX document has spdxVersion %q, not %q", d.SPDXVersion, spdxVersion)
	}
	if d.SPDXID != spdxDocumentID {
		return errors.Errorf("SPDX document has SPDXID %q, not %q", d.SPDXID, spdxDocumentID)
	}
	elements := map[string]bool{}
	for _, e := range append(d.Packages, d.Files...) {
		if !spdxIDPattern.MatchString(e.SPDXID) {
			return errors.Errorf("SPDX document has an element with SPDXID %q, which does not match %s", e.SPDXID, spdxIDPattern)
		}
		elements[e.SPDXID] = true
	}
	for _, r := range d.Relationships {
		if r.Element == spdxDocumentID && r.Type == relDescribes && elements[r.Related] {
			return nil
		}
	}
	return errors.Errorf("SPDX document has no DESCRIBES relationship from %s to one of its packages or files: it does not say what it describes", spdxDocumentID)
}

func checkSLSA(b []byte) error {
	var p struct {
		statement
		BuildDefinition struct {
			BuildType          string                     `json:"buildType"`
			ExternalParameters map[string]json.RawMessage `json:"externalParameters"`
		} `json:"buildDefinition"`
		RunDetails struct {
			Builder struct {
				ID string `json:"id"`
			} `json:"builder"`
		} `json:"runDetails"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return errors.Wrap(err, "cannot parse SLSA provenance")
	}
	if err := p.err(); err != nil {
		return err
	}
	switch {
	case p.BuildDefinition.BuildType == "":
		return errors.New("SLSA provenance has no buildDefinition.buildType")
	case p.BuildDefinition.ExternalParameters == nil:
		return errors.New("SLSA provenance has no buildDefinition.externalParameters")
	case p.RunDetails.Builder.ID == "":
		return errors.New("SLSA provenance has no runDetails.builder.id")
	}
	return nil
}
