package fn

import (
	"fmt"
	"time"

	"github.com/crossplane/function-sdk-go/errors"
	"github.com/crossplane/function-sdk-go/resource"
)

// XR status fields the function writes. It owns them: a field it does not
// write, because what it reports is not known (any more), is removed from
// the XR.
const (
	statusEndpoint             = "status.endpoint"
	statusWidgetState          = "status.widgetState"
	statusExternalName         = "status.externalName"
	statusRegion               = "status.region"
	statusKeysReady            = "status.keysReady"
	statusConnectionSecretName = "status.connectionSecretName"
	statusDrift                = "status.drift"
)

// setStatus writes what the app team needs to know about its widget to the
// desired XR's status: the widget's endpoint, state, name in the Widget API
// and region, how many access keys are ready (once the widget exists),
// and, for a namespaced XR, the
// name of the connection Secret; and, once the provider has restored the
// widget after a change made outside Crossplane, how often, when last and
// what it restored.
func setStatus(xr *resource.Composite, x xwidget, s settings, obs observation) error {
	type field struct{ path, value string }
	fields := []field{
		{statusEndpoint, obs.widget.endpoint()},
		{statusWidgetState, string(obs.widget.atProvider.State)},
		{statusExternalName, obs.widget.externalName},
		{statusRegion, obs.widget.atProvider.Region},
	}
	// Keys are created only once the Widget API has the widget: until then
	// the KeysReady condition says what the keys wait for, and leaving the
	// count out spares the XR and its claim a status change each.
	if obs.widget.externalName != "" {
		fields = append(fields, field{statusKeysReady, fmt.Sprintf("%d/%d", obs.readyKeys(), len(obs.keys))})
	}
	if x.flavour == FlavourNamespaced {
		fields = append(fields, field{statusConnectionSecretName, s.secretName})
	}
	for _, f := range fields {
		if f.value == "" {
			continue
		}
		if err := xr.Resource.SetString(f.path, f.value); err != nil {
			return errors.Wrapf(err, "cannot set %s", f.path)
		}
	}
	if d := obs.widget.drift; d != nil {
		drift := map[string]any{"repairs": d.Count, "lastRepairAt": d.LastAt.UTC().Format(time.RFC3339)}
		if d.LastChange != "" {
			drift["lastChange"] = d.LastChange
		}
		if err := xr.Resource.SetValue(statusDrift, drift); err != nil {
			return errors.Wrapf(err, "cannot set %s", statusDrift)
		}
	}
	return nil
}
