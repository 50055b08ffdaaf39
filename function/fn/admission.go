package fn

import (
	"strings"
	"time"

	"github.com/crossplane/function-sdk-go/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/widgetco/crossplane-widget/function/internal/nspolicy"
)

// admission is what namespace admission (package nspolicy) decides on: the
// XR, the Composition's policy, what the XR asks for and what it has
// composed.
func admission(s *state, pol policy, want settings) nspolicy.Input {
	x := nspolicy.XR{
		Owner:     s.xr.owner(),
		Kind:      s.xr.kind,
		Legacy:    s.xr.flavour == FlavourLegacy,
		Namespace: s.xr.namespace,
		Claim:     s.xr.claim,
	}
	if c, ok := s.xr.conditions[typePolicyCompliant]; ok {
		pc := nspolicy.Condition(c)
		x.PolicyCompliant = &pc
	}
	c := nspolicy.Composed{
		Nothing:                  composedNothing(s),
		Size:                     s.widget.atProvider.Size,
		ReadySinceCreationSecond: s.widget.isReady() && readyAfterCreationSecond(s),
	}
	if s.widget.exists {
		c.Widget = s.widget.name
	}
	for n, r := range s.observed {
		if !strings.HasPrefix(n, "key-") {
			continue
		}
		if name := r.GetResource().GetFields()["metadata"].GetStructValue().GetFields()["name"].GetStringValue(); name != "" {
			c.Keys = append(c.Keys, name)
		}
	}
	if sz := widgetSpecSize(s); sz != "" {
		c.Size = sz
	}
	return nspolicy.Input{
		XR: x,
		Composition: nspolicy.Composition{
			AllowedSizes:   pol.allowedSizes,
			AllowedRegions: pol.allowedRegions,
			MaxKeys:        pol.maxKeys,
			DefaultSize:    pol.defaultSize,
			DefaultKeys:    pol.defaultKeys,
		},
		Want:     nspolicy.Spec{Size: want.size, Region: want.region, Keys: want.keys},
		Composed: c,
	}
}

// fromAdmission returns what namespace admission refused an XR for as a
// rejection, and any other error as it is.
func fromAdmission(err error) error {
	if r := (&nspolicy.Rejection{}); errors.As(err, &r) {
		return &rejection{reason: r.Reason, message: r.Message, fields: r.Fields}
	}
	return err
}

// composedNothing reports whether the XR has none of the resources the
// function composes: it is new, and takes a place in its namespace's queue.
// An XR that composed anything was admitted earlier; waiting would drop what
// it has from the desired state, which Crossplane would delete.
func composedNothing(s *state) bool {
	for n := range s.observed {
		if n == string(resourceWidget) || n == string(resourceConnectionSecret) || strings.HasPrefix(n, "key-") {
			return false
		}
	}
	return true
}

// widgetSpecSize is the size the observed Widget asks for, as quotas count
// it.
func widgetSpecSize(s *state) string {
	ocd, ok := s.observed.get(resourceWidget)
	if !ok {
		return ""
	}
	sz, _ := ocd.Resource.GetString("spec.forProvider.size")
	return sz
}

// readyAfterCreationSecond reports whether the observed Widget's Ready
// condition became True in a later second than the Widget was created.
func readyAfterCreationSecond(s *state) bool {
	ocd, ok := s.observed.get(resourceWidget)
	if !ok {
		return false
	}
	created := ocd.Resource.GetCreationTimestamp()
	cs, _, _ := unstructured.NestedSlice(ocd.Resource.Object, "status", "conditions")
	for _, c := range cs {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" || m["status"] != "True" {
			continue
		}
		at, _ := m["lastTransitionTime"].(string)
		t, err := time.Parse(time.RFC3339, at)
		return err == nil && t.Unix() > created.Unix()
	}
	return false
}
