package fn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/crossplane/function-sdk-go/errors"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

// Composition resource names: how the function and Crossplane identify the
// resources the function composes across calls. They never change.
const (
	resourceWidget           resource.Name = "widget"
	resourceConnectionSecret resource.Name = "connection-secret"
)

// keyResourceName is the composition resource name of access key i.
func keyResourceName(i int) resource.Name {
	return resource.Name(fmt.Sprintf("key-%d", i))
}

// labelComponent marks the Widget the function composes, so that the
// WidgetKeys select it (together with their shared controller, the XR) even
// when an earlier pipeline step composes other Widgets for the same XR.
const (
	labelComponent  = "fn.widgetco.io/component"
	componentWidget = "widget"
)

// An outcome is the function's answer for an XR it composes.
type outcome struct {
	// composed are the resources the function composes. Resources that
	// earlier pipeline steps compose are passed through as they are.
	composed map[resource.Name]*resource.DesiredComposed

	// xr is the desired XR: what earlier steps desire, plus its status and,
	// for a legacy XR, its connection details.
	xr *resource.Composite

	conditions []condition
	ready      bool
}

// compose decides the desired resources, the XR's status and connection
// details, and its conditions, from what is observed. Once ctx is done it
// may return an incomplete outcome; the caller must then not use it.
func compose(ctx context.Context, s *state, pol policy, want settings) (*outcome, error) {
	obs := observe(ctx, s.widget, s.observed, want.keys)

	cds, err := composeResources(ctx, scopeFor(s.xr.flavour, pol), s.xr, want, obs)
	if err != nil {
		return nil, err
	}
	o := &outcome{composed: cds, xr: s.dxr}
	if err := publishConnectionDetails(o, s.xr, want, obs); err != nil {
		return nil, err
	}
	if err := setStatus(o.xr, s.xr, want, obs); err != nil {
		return nil, err
	}

	o.conditions = []condition{compliantCondition(s.xr), widgetCondition(obs.widget), keysCondition(obs)}
	o.ready = obs.isReady(s.xr.flavour)
	return o, nil
}

// writeTo adds the desired resources and XR of the outcome to the response.
// It adds to the desired state of earlier pipeline steps, replacing only
// resources of the same composition resource names.
func (o *outcome) writeTo(rsp *fnv1.RunFunctionResponse) error {
	if err := response.SetDesiredComposedResources(rsp, o.composed); err != nil {
		return errors.Wrap(err, "cannot set the desired composed resources")
	}
	return errors.Wrap(response.SetDesiredCompositeResource(rsp, o.xr), "cannot set the desired composite resource")
}

// A scope builds the managed resources of one flavour of XR.
type scope interface {
	// Widget returns the desired Widget.
	Widget(s settings) runtime.Object

	// Key returns the desired WidgetKey of access key i.
	Key(x xwidget, i int) runtime.Object
}

func scopeFor(f Flavour, pol policy) scope {
	if f == FlavourNamespaced {
		return namespacedScope{providerConfig: pol.namespacedProviderConfig}
	}
	return legacyScope{providerConfig: pol.legacyProviderConfig, secretNamespace: pol.legacySecretNamespace}
}

// namespacedScope builds namespaced (widget.m.widgetco.io) managed resources.
// Crossplane puts them in the XR's namespace.
type namespacedScope struct {
	providerConfig xpv2.ProviderConfigReference
}

func (n namespacedScope) Widget(s settings) runtime.Object {
	return &namespacedv1beta1.Widget{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{labelComponent: componentWidget}},
		Spec: namespacedv1beta1.WidgetSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: ptr.To(n.providerConfig)},
			ForProvider:         widgetParameters(s),
			InitProvider:        widgetInitParameters(s),
		},
	}
}

func (n namespacedScope) Key(x xwidget, i int) runtime.Object {
	return &namespacedv1beta1.WidgetKey{
		Spec: namespacedv1beta1.WidgetKeySpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{
				ProviderConfigReference:          ptr.To(n.providerConfig),
				WriteConnectionSecretToReference: &xpv2.LocalSecretReference{Name: keySecretName(x, i)},
			},
			ForProvider: namespacedv1beta1.WidgetKeyParameters{
				WidgetNameSelector: &xpv2.NamespacedSelector{
					MatchControllerRef: ptr.To(true),
					MatchLabels:        map[string]string{labelComponent: componentWidget},
				},
			},
			InitProvider: keyInitParameters(x, i),
		},
	}
}

// legacyScope builds cluster-scoped (widget.widgetco.io) managed resources.
type legacyScope struct {
	providerConfig  string
	secretNamespace string
}

func (l legacyScope) Widget(s settings) runtime.Object {
	return &clusterv1beta1.Widget{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{labelComponent: componentWidget}},
		Spec: clusterv1beta1.WidgetSpec{
			ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{ProviderConfigReference: &xpv2.Reference{Name: l.providerConfig}},
			ForProvider:                widgetParameters(s),
			InitProvider:               widgetInitParameters(s),
		},
	}
}

func (l legacyScope) Key(x xwidget, i int) runtime.Object {
	return &clusterv1beta1.WidgetKey{
		Spec: clusterv1beta1.WidgetKeySpec{
			ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{
				ProviderConfigReference:          &xpv2.Reference{Name: l.providerConfig},
				WriteConnectionSecretToReference: &xpv2.SecretReference{Name: keySecretName(x, i), Namespace: l.secretNamespace},
			},
			ForProvider: clusterv1beta1.WidgetKeyParameters{
				WidgetNameSelector: &xpv2.Selector{
					MatchControllerRef: ptr.To(true),
					MatchLabels:        map[string]string{labelComponent: componentWidget},
				},
			},
			InitProvider: keyInitParameters(x, i),
		},
	}
}

func widgetParameters(s settings) commonv1beta1.WidgetParameters {
	return commonv1beta1.WidgetParameters{
		Size:        ptr.To(s.size),
		Labels:      s.labels,
		Description: ptr.To(s.description),
	}
}

// widgetInitParameters hold the region, which a widget gets when it is
// created and never changes.
func widgetInitParameters(s settings) commonv1beta1.WidgetInitParameters {
	var p commonv1beta1.WidgetInitParameters
	if s.region != "" {
		p.Region = ptr.To(s.region)
	}
	return p
}

func keyInitParameters(x xwidget, i int) commonv1beta1.WidgetKeyInitParameters {
	// The Widget API cannot change a key's description, so it must never
	// change: it depends only on the XR's identity and the key's index.
	return commonv1beta1.WidgetKeyInitParameters{Description: ptr.To(describe(fmt.Sprintf("Access key %d of ", i), x.owner(), ", managed by Crossplane"))}
}

// composeResources returns the desired Widget and WidgetKeys. A key is
// composed with the Widget, unless the widget refuses new keys, and from then
// on for as long as the XR asks for it, even while the widget is not ready:
// removing a key's WidgetKey would revoke the key. It returns ctx's error
// once ctx is done.
func composeResources(ctx context.Context, sc scope, x xwidget, s settings, obs observation) (map[resource.Name]*resource.DesiredComposed, error) {
	desired := make(map[resource.Name]*resource.DesiredComposed, 2+len(obs.keys))

	w, err := fromTyped(sc.Widget(s))
	if err != nil {
		return nil, errors.Wrap(err, "cannot build the Widget")
	}
	desired[resourceWidget] = &resource.DesiredComposed{Resource: w, Ready: asReady(obs.widget.isReady())}

	for _, k := range obs.keys {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !k.exists && obs.widget.refusesKeys() {
			continue
		}
		cd, err := fromTyped(sc.Key(x, k.index))
		if err != nil {
			return nil, errors.Wrapf(err, "cannot build WidgetKey %d", k.index)
		}
		desired[keyResourceName(k.index)] = &resource.DesiredComposed{Resource: cd, Ready: asReady(k.isReady())}
	}
	return desired, nil
}

// fromTyped converts a typed object to a composed resource. The function has
// no opinion about a composed resource's status, so it sends none: the zero
// values of a typed status would otherwise be sent too.
func fromTyped(o runtime.Object) (*composed.Unstructured, error) {
	cd, err := composed.From(o)
	if err != nil {
		return nil, err
	}
	delete(cd.Object, "status")
	return cd, nil
}

// keySecretName is the name of the Secret that access key i's WidgetKey
// writes its connection details to. A namespaced XR's keys write to its own
// namespace, so the XR's name makes the Secret's name unique; a legacy XR's
// name is unique in the cluster.
func keySecretName(x xwidget, i int) string {
	return childName(x.name, fmt.Sprintf("-key-%d", i))
}

// childName derives the name of an object from its parent's name and a
// suffix. The result is a valid object name no matter how long the parent's
// name is: a name too long for the suffix is shortened and made unique again
// by a hash of the full name.
func childName(parent, suffix string) string {
	if len(parent)+len(suffix) <= validation.DNS1123SubdomainMaxLength {
		return parent + suffix
	}
	sum := sha256.Sum256([]byte(parent))
	h := "-" + hex.EncodeToString(sum[:])[:8]
	short := strings.TrimRight(parent[:validation.DNS1123SubdomainMaxLength-len(suffix)-len(h)], "-.")
	return short + h + suffix
}
