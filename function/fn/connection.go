package fn

import (
	"fmt"

	"github.com/crossplane/function-sdk-go/errors"
	"github.com/crossplane/function-sdk-go/resource"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Connection detail keys a WidgetKey writes, as the provider documents them.
const (
	keyDetailEndpoint = "endpoint"
	keyDetailKey      = "key"
	keyDetailKeyName  = "keyName"

	// During a rotation's overlap, the key it replaced (rotation.go).
	keyDetailPreviousKey     = "previousKey"
	keyDetailPreviousKeyName = "previousKeyName"
)

// Connection detail keys of an XWidget. For each access key i there are two
// more: key-<i> (the key itself) and key-<i>-name (its name in the Widget
// API); during a rotation's overlap two more, key-<i>-previous and
// key-<i>-previous-name, hold the key the rotation replaced, still valid.
const (
	detailEndpoint = "endpoint"
	detailWidget   = "widget"
)

// connectionDetails are the XR's connection details: the widget's endpoint
// and name, and every access key that is ready. The endpoint comes from the
// widget's observed status, or, while that has none, from a key's connection
// details.
func connectionDetails(obs observation) resource.ConnectionDetails {
	d := resource.ConnectionDetails{}
	if e := obs.widget.endpoint(); e != "" {
		d[detailEndpoint] = []byte(e)
	}
	if n := obs.widget.externalName; n != "" {
		d[detailWidget] = []byte(n)
	}
	for _, k := range obs.keys {
		if !k.isReady() {
			continue
		}
		d[fmt.Sprintf("key-%d", k.index)] = k.details[keyDetailKey]
		if n := k.details[keyDetailKeyName]; len(n) > 0 {
			d[fmt.Sprintf("key-%d-name", k.index)] = n
		}
		if p := k.details[keyDetailPreviousKey]; len(p) > 0 {
			d[fmt.Sprintf("key-%d-previous", k.index)] = p
			if n := k.details[keyDetailPreviousKeyName]; len(n) > 0 {
				d[fmt.Sprintf("key-%d-previous-name", k.index)] = n
			}
		}
		if _, ok := d[detailEndpoint]; !ok && len(k.details[keyDetailEndpoint]) > 0 {
			d[detailEndpoint] = k.details[keyDetailEndpoint]
		}
	}
	return d
}

// composeConnectionSecret returns the connection Secret of a namespaced XR.
// Crossplane v2 does not publish the connection details of namespaced XRs,
// so the function composes a Secret in the XR's namespace that holds them.
// It is ready once it exists; its content follows the widget and its keys.
func composeConnectionSecret(name string, d resource.ConnectionDetails, exists bool) (*resource.DesiredComposed, error) {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Type:       corev1.SecretTypeOpaque,
		Data:       d,
	}
	cd, err := fromTyped(s)
	if err != nil {
		return nil, errors.Wrap(err, "cannot build the connection Secret")
	}
	return &resource.DesiredComposed{Resource: cd, Ready: asReady(exists)}, nil
}

// publishConnectionDetails makes the connection details reach the XR's
// owner: as a composed Secret for a namespaced XR, as the XR's own
// connection details for a legacy XR, which Crossplane writes to the XR's
// connection secret and copies to its claim's. Connection details that
// earlier pipeline steps set on a legacy XR are kept.
func publishConnectionDetails(o *outcome, x xwidget, s settings, obs observation) error {
	d := connectionDetails(obs)
	if x.flavour != FlavourNamespaced {
		for k, v := range d {
			o.xr.ConnectionDetails[k] = v
		}
		return nil
	}
	cd, err := composeConnectionSecret(s.secretName, d, obs.secretExists)
	if err != nil {
		return err
	}
	o.composed[resourceConnectionSecret] = cd
	return nil
}
