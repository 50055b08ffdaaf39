package kube

import (
	"fmt"

	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	xpextv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	xpextv1alpha1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1alpha1"
	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
)

// CrossplaneScheme knows Kubernetes' built-in kinds, CRDs and Crossplane's
// own kinds (packages, runtime and image configs, XRDs, Compositions,
// activation policies): what a client of a control plane with Crossplane
// installed needs.
func CrossplaneScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		extv1.AddToScheme,
		pkgv1.AddToScheme,
		pkgv1beta1.AddToScheme,
		xpextv1.AddToScheme,
		xpextv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("cannot build scheme: %v", err))
		}
	}
	return s
}
