package apis_test

import (
	"strings"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/widgetco/crossplane-widget/apis/cluster/v1alpha1"
	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	namespacedv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
)

func nsWidget(fp commonv1alpha1.WidgetParameters) *namespacedv1alpha1.Widget {
	return &namespacedv1alpha1.Widget{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace},
		Spec:       namespacedv1alpha1.WidgetSpec{ForProvider: fp},
	}
}

func clWidget(fp commonv1alpha1.WidgetParameters) *clusterv1alpha1.Widget {
	return &clusterv1alpha1.Widget{Spec: clusterv1alpha1.WidgetSpec{ForProvider: fp}}
}

func nsKey(fp namespacedv1alpha1.WidgetKeyParameters) *namespacedv1alpha1.WidgetKey {
	return &namespacedv1alpha1.WidgetKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace},
		Spec:       namespacedv1alpha1.WidgetKeySpec{ForProvider: fp},
	}
}

func clKey(fp clusterv1alpha1.WidgetKeyParameters) *clusterv1alpha1.WidgetKey {
	return &clusterv1alpha1.WidgetKey{Spec: clusterv1alpha1.WidgetKeySpec{ForProvider: fp}}
}

var (
	tokenRef      = &xpv2.SecretKeySelector{SecretReference: xpv2.SecretReference{Name: "widget-token", Namespace: "crossplane-system"}, Key: "token"}
	localTokenRef = &xpv2.LocalSecretKeySelector{LocalSecretReference: xpv2.LocalSecretReference{Name: "widget-token"}, Key: "token"}
)

func nsProviderConfig(endpoint, caBundle string, ref *xpv2.LocalSecretKeySelector) *namespacedv1alpha1.ProviderConfig {
	return &namespacedv1alpha1.ProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace},
		Spec: commonv1alpha1.LocalProviderConfigSpec{
			APIConnection: commonv1alpha1.APIConnection{Endpoint: endpoint, CABundle: caBundle},
			Credentials:   commonv1alpha1.LocalProviderCredentials{Source: xpv2.CredentialsSourceSecret, SecretRef: ref},
		},
	}
}

func clusterSpec(endpoint string) commonv1alpha1.ProviderConfigSpec {
	return commonv1alpha1.ProviderConfigSpec{
		APIConnection: commonv1alpha1.APIConnection{Endpoint: endpoint},
		Credentials:   commonv1alpha1.ProviderCredentials{Source: xpv2.CredentialsSourceSecret, SecretRef: tokenRef},
	}
}

// fileSpec is a cluster-scoped ProviderConfigSpec whose token is in the
// file at path; an empty path names no file.
func fileSpec(path string) commonv1alpha1.ProviderConfigSpec {
	s := commonv1alpha1.ProviderConfigSpec{
		APIConnection: commonv1alpha1.APIConnection{Endpoint: "https://widgets.example.com"},
		Credentials:   commonv1alpha1.ProviderCredentials{Source: xpv2.CredentialsSourceFilesystem},
	}
	if path != "" {
		s.Credentials.Fs = &commonv1alpha1.TokenFileSelector{Path: path}
	}
	return s
}

func labels(n int) map[string]string {
	l := map[string]string{}
	for i := range n {
		l[string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
	}
	return l
}

// v1alpha1WriteCases are writes in v1alpha1. Widgets and WidgetKeys are
// stored in v1beta1, so the API server converts each of their writes with
// the conversion webhook, and reads the stored object back (to check an
// update's transition rules) through it too; it validates the write in
// v1alpha1, against v1alpha1's schema.
func v1alpha1WriteCases() map[string]writeCase {
	const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

	return map[string]writeCase{
		"WidgetAllFields": {
			reason: "A Widget that sets every field validly must be accepted.",
			create: nsWidget(commonv1alpha1.WidgetParameters{Size: ptr.To("medium"), Region: ptr.To("eu-west-1"), Description: ptr.To("d"), Labels: map[string]string{"team": "a", "example.com/x_y.z": "v"}}),
		},
		"WidgetUnknownSize": {
			reason:  "The Widget API knows only small, medium and large.",
			create:  nsWidget(commonv1alpha1.WidgetParameters{Size: ptr.To("huge")}),
			wantErr: `supported values: "small", "medium", "large"`,
		},
		"WidgetInvalidRegion": {
			reason:  "A region must look like eu-west-1.",
			create:  nsWidget(commonv1alpha1.WidgetParameters{Region: ptr.To("EU_WEST")}),
			wantErr: "should match",
		},
		"WidgetInvalidLabelKey": {
			reason:  "A label key with a space is not a valid key.",
			create:  nsWidget(commonv1alpha1.WidgetParameters{Labels: map[string]string{"Bad Key": "v"}}),
			wantErr: ruleLabelKeys.Message,
		},
		"WidgetLabelKeyTooLong": {
			reason:  "A label key is at most 63 characters.",
			create:  nsWidget(commonv1alpha1.WidgetParameters{Labels: map[string]string{strings.Repeat("a", 64): "v"}}),
			wantErr: ruleLabelKeys.Message,
		},
		"WidgetReservedLabelKey": {
			reason:  "Label keys under widgetco.io/ belong to the provider.",
			create:  nsWidget(commonv1alpha1.WidgetParameters{Labels: map[string]string{"widgetco.io/owner": "me"}}),
			wantErr: ruleLabelKeysReserved.Message,
		},
		"WidgetLabelValueTooLong": {
			reason:  "A label value is at most 63 characters.",
			create:  nsWidget(commonv1alpha1.WidgetParameters{Labels: map[string]string{"a": strings.Repeat("v", 64)}}),
			wantErr: ruleLabelValues.Message,
		},
		"WidgetLabelValueUnicode": {
			reason: "Printable non-ASCII label values within 63 bytes are valid.",
			create: nsWidget(commonv1alpha1.WidgetParameters{Labels: map[string]string{"a": "Zürich ok", "b": ""}}),
		},
		"WidgetDescriptionMultiline": {
			reason: "A description may span lines and hold tabs.",
			create: nsWidget(commonv1alpha1.WidgetParameters{Description: ptr.To("Größe:\tklein\nzweite Zeile")}),
		},
		"WidgetDescriptionNotPrintable": {
			reason:  "The Widget API rejects control characters other than tab and newline in a description.",
			create:  nsWidget(commonv1alpha1.WidgetParameters{Description: ptr.To("bell\a")}),
			wantErr: ruleDescriptionPrintable.Message,
		},
		"WidgetThirtyOneLabels": {
			reason: "A widget may have 31 labels (the provider adds the 32nd, its ownership marker).",
			create: nsWidget(commonv1alpha1.WidgetParameters{Labels: labels(31)}),
		},
		"WidgetThirtyTwoLabels": {
			reason:  "A widget may not have more than 31 labels.",
			create:  nsWidget(commonv1alpha1.WidgetParameters{Labels: labels(32)}),
			wantErr: "must have at most 31 items",
		},
		"WidgetDescriptionTooLong": {
			reason:  "A description is at most 256 characters.",
			create:  nsWidget(commonv1alpha1.WidgetParameters{Description: ptr.To(strings.Repeat("d", 257))}),
			wantErr: "Too long",
		},
		"WidgetRegionChanged": {
			reason:  "A widget cannot move to another region.",
			create:  nsWidget(commonv1alpha1.WidgetParameters{Region: ptr.To("eu-west-1")}),
			update:  func(o client.Object) { o.(*namespacedv1alpha1.Widget).Spec.ForProvider.Region = ptr.To("us-east-1") },
			wantErr: ruleRegionImmutable.Message,
		},
		"WidgetRegionRemoved": {
			reason:  "A widget's region cannot be unset once set.",
			create:  nsWidget(commonv1alpha1.WidgetParameters{Region: ptr.To("eu-west-1")}),
			update:  func(o client.Object) { o.(*namespacedv1alpha1.Widget).Spec.ForProvider.Region = nil },
			wantErr: ruleRegionImmutable.Message,
		},
		"WidgetRegionLateInitialized": {
			reason: "The provider may set a region that was unset, e.g. from the widget it observed.",
			create: nsWidget(commonv1alpha1.WidgetParameters{}),
			update: func(o client.Object) { o.(*namespacedv1alpha1.Widget).Spec.ForProvider.Region = ptr.To("eu-west-1") },
		},
		"WidgetResized": {
			reason: "A widget's size may change.",
			create: nsWidget(commonv1alpha1.WidgetParameters{Size: ptr.To("small"), Region: ptr.To("eu-west-1")}),
			update: func(o client.Object) { o.(*namespacedv1alpha1.Widget).Spec.ForProvider.Size = ptr.To("large") },
		},
		"WidgetUnsupportedProviderConfigKind": {
			reason: "A namespaced Widget can only use a ProviderConfig or a ClusterProviderConfig.",
			create: func() client.Object {
				w := nsWidget(commonv1alpha1.WidgetParameters{})
				w.Spec.ProviderConfigReference = &xpv2.ProviderConfigReference{Kind: "Secret", Name: "x"}
				return w
			}(),
			wantErr: ruleProviderConfigKind.Message,
		},
		"WidgetUnknownObservedState": {
			reason: "The provider must be able to record a state the Widget API added after this provider was built.",
			create: nsWidget(commonv1alpha1.WidgetParameters{}),
			update: func(o client.Object) {
				o.(*namespacedv1alpha1.Widget).Status.AtProvider.State = "Hibernating"
			},
			status: true,
		},
		"ClusterWidgetRegionChanged": {
			reason:  "A cluster-scoped widget cannot move to another region either.",
			create:  clWidget(commonv1alpha1.WidgetParameters{Region: ptr.To("eu-west-1")}),
			update:  func(o client.Object) { o.(*clusterv1alpha1.Widget).Spec.ForProvider.Region = ptr.To("us-east-1") },
			wantErr: ruleRegionImmutable.Message,
		},
		"ClusterWidgetReservedLabelKey": {
			reason:  "Label keys under widgetco.io/ belong to the provider in either scope.",
			create:  clWidget(commonv1alpha1.WidgetParameters{Labels: map[string]string{"widgetco.io/owner": "me"}}),
			wantErr: ruleLabelKeysReserved.Message,
		},
		"WidgetKeyWithoutWidget": {
			reason:  "A key must say which widget it belongs to.",
			create:  nsKey(namespacedv1alpha1.WidgetKeyParameters{}),
			wantErr: ruleKeyNamesWidget.Message,
		},
		"WidgetKeyInvalidWidgetName": {
			reason:  "A widget name is a DNS label.",
			create:  nsKey(namespacedv1alpha1.WidgetKeyParameters{WidgetName: ptr.To("Bad_Name")}),
			wantErr: "should match",
		},
		"WidgetKeyWidgetNameChanged": {
			reason:  "A key cannot move to another widget.",
			create:  nsKey(namespacedv1alpha1.WidgetKeyParameters{WidgetName: ptr.To("w1")}),
			update:  func(o client.Object) { o.(*namespacedv1alpha1.WidgetKey).Spec.ForProvider.WidgetName = ptr.To("w2") },
			wantErr: ruleWidgetNameImmutable.Message,
		},
		"WidgetKeyWidgetNameResolved": {
			reason: "Crossplane sets widgetName from a reference after the key was created.",
			create: nsKey(namespacedv1alpha1.WidgetKeyParameters{WidgetNameRef: &xpv2.NamespacedReference{Name: "w1"}}),
			update: func(o client.Object) { o.(*namespacedv1alpha1.WidgetKey).Spec.ForProvider.WidgetName = ptr.To("w1") },
		},
		"WidgetKeyWidgetNameSelected": {
			reason: "Crossplane sets widgetName and a widgetNameRef with the Widget's namespace when it resolves a selector.",
			create: nsKey(namespacedv1alpha1.WidgetKeyParameters{WidgetNameSelector: &xpv2.NamespacedSelector{MatchLabels: map[string]string{"a": "b"}}}),
			update: func(o client.Object) {
				k := o.(*namespacedv1alpha1.WidgetKey)
				k.Spec.ForProvider.WidgetName = ptr.To("w1")
				k.Spec.ForProvider.WidgetNameRef = &xpv2.NamespacedReference{Name: "w1", Namespace: testNamespace}
			},
		},
		"WidgetKeyReferenceIntoAnotherNamespace": {
			reason:  "A WidgetKey cannot reference a Widget in another namespace.",
			create:  nsKey(namespacedv1alpha1.WidgetKeyParameters{WidgetNameRef: &xpv2.NamespacedReference{Name: "w1", Namespace: "team-b"}}),
			wantErr: ruleKeyRefLocal.Message,
		},
		"WidgetKeyReferenceIntoAnotherNamespaceWithSelector": {
			reason: "A selector next to a reference into another namespace, without a widgetName, would make Crossplane follow the reference: it must be refused at admission.",
			create: nsKey(namespacedv1alpha1.WidgetKeyParameters{
				WidgetNameSelector: &xpv2.NamespacedSelector{MatchLabels: map[string]string{"a": "b"}},
				WidgetNameRef:      &xpv2.NamespacedReference{Name: "w1", Namespace: "team-b"},
			}),
			wantErr: ruleKeyRefLocal.Message,
		},
		"WidgetKeySelectorReferenceNamespaceAdded": {
			reason: "A selected key's reference cannot be pointed at another namespace by an update that leaves widgetName unset.",
			create: nsKey(namespacedv1alpha1.WidgetKeyParameters{WidgetNameSelector: &xpv2.NamespacedSelector{MatchLabels: map[string]string{"a": "b"}}}),
			update: func(o client.Object) {
				o.(*namespacedv1alpha1.WidgetKey).Spec.ForProvider.WidgetNameRef = &xpv2.NamespacedReference{Name: "w1", Namespace: "team-b"}
			},
			wantErr: ruleKeyRefLocal.Message,
		},
		"WidgetKeySelectorIntoAnotherNamespace": {
			reason:  "A WidgetKey cannot select a Widget in another namespace.",
			create:  nsKey(namespacedv1alpha1.WidgetKeyParameters{WidgetNameSelector: &xpv2.NamespacedSelector{MatchLabels: map[string]string{"a": "b"}, Namespace: "team-b"}}),
			wantErr: ruleKeySelectorLocal.Message,
		},
		"WidgetKeyReferenceNamespaceAdded": {
			reason: "A reference cannot be pointed at another namespace later either.",
			create: nsKey(namespacedv1alpha1.WidgetKeyParameters{WidgetNameRef: &xpv2.NamespacedReference{Name: "w1"}}),
			update: func(o client.Object) {
				o.(*namespacedv1alpha1.WidgetKey).Spec.ForProvider.WidgetNameRef.Namespace = "team-b"
			},
			wantErr: ruleKeyRefLocal.Message,
		},
		"WidgetKeyDescriptionChanged": {
			reason: "The Widget API cannot change a key's description.",
			create: nsKey(namespacedv1alpha1.WidgetKeyParameters{WidgetName: ptr.To("w1"), WidgetKeyParameters: commonv1alpha1.WidgetKeyParameters{Description: ptr.To("one")}}),
			update: func(o client.Object) {
				o.(*namespacedv1alpha1.WidgetKey).Spec.ForProvider.Description = ptr.To("two")
			},
			wantErr: ruleKeyDescriptionImmutable.Message,
		},
		"WidgetKeyDescriptionNotPrintable": {
			reason:  "The Widget API rejects control characters other than tab and newline in a key's description.",
			create:  nsKey(namespacedv1alpha1.WidgetKeyParameters{WidgetName: ptr.To("w1"), WidgetKeyParameters: commonv1alpha1.WidgetKeyParameters{Description: ptr.To("carriage\rreturn")}}),
			wantErr: ruleDescriptionPrintable.Message,
		},
		"ClusterWidgetKeyWidgetNameChanged": {
			reason:  "A cluster-scoped key cannot move to another widget.",
			create:  clKey(clusterv1alpha1.WidgetKeyParameters{WidgetName: ptr.To("w1")}),
			update:  func(o client.Object) { o.(*clusterv1alpha1.WidgetKey).Spec.ForProvider.WidgetName = ptr.To("w2") },
			wantErr: ruleWidgetNameImmutable.Message,
		},
		"ClusterWidgetKeySelector": {
			reason: "A cluster-scoped key may select its widget by labels.",
			create: clKey(clusterv1alpha1.WidgetKeyParameters{WidgetNameSelector: &xpv2.Selector{MatchLabels: map[string]string{"a": "b"}}}),
		},
		"ProviderConfig": {
			reason: "A namespaced ProviderConfig with an endpoint, a CA bundle and a token Secret must be accepted.",
			create: nsProviderConfig("https://widgets.example.com/api", pem, localTokenRef),
		},
		"ProviderConfigEndpointNotHTTP": {
			reason:  "The Widget API is served over http or https.",
			create:  nsProviderConfig("ftp://widgets.example.com", "", localTokenRef),
			wantErr: "should match '^https?://'",
		},
		"ProviderConfigEndpointWithoutHost": {
			reason:  "An endpoint needs a host.",
			create:  nsProviderConfig("https://", "", localTokenRef),
			wantErr: ruleEndpointHost.Message,
		},
		"ProviderConfigWithoutSecretRef": {
			reason:  "Secret credentials must name the Secret key.",
			create:  nsProviderConfig("https://widgets.example.com", "", nil),
			wantErr: ruleLocalSecretRefRequired.Message,
		},
		"ProviderConfigCABundleNotPEM": {
			reason:  "A CA bundle must be PEM.",
			create:  nsProviderConfig("https://widgets.example.com", "not a certificate", localTokenRef),
			wantErr: ruleCABundlePEM.Message,
		},
		"ClusterProviderConfig": {
			reason: "A ClusterProviderConfig with an endpoint and a token Secret must be accepted.",
			create: &namespacedv1alpha1.ClusterProviderConfig{Spec: clusterSpec("http://127.0.0.1:8080")},
		},
		"LegacyProviderConfig": {
			reason: "A cluster-scoped ProviderConfig with an endpoint and a token Secret must be accepted.",
			create: &clusterv1alpha1.ProviderConfig{Spec: clusterSpec("http://127.0.0.1:8080")},
		},
		"ClusterProviderConfigTokenFile": {
			reason: "A ClusterProviderConfig may read its token from a file, such as a projected ServiceAccount token.",
			create: &namespacedv1alpha1.ClusterProviderConfig{Spec: fileSpec("/var/run/secrets/widgetco.io/serviceaccount/token")},
		},
		"LegacyProviderConfigTokenFile": {
			reason: "A cluster-scoped ProviderConfig may read its token from a file.",
			create: &clusterv1alpha1.ProviderConfig{Spec: fileSpec("/var/run/secrets/widgetco.io/serviceaccount/token")},
		},
		"ClusterProviderConfigTokenFileRelative": {
			reason:  "A token file's path is absolute.",
			create:  &namespacedv1alpha1.ClusterProviderConfig{Spec: fileSpec("token")},
			wantErr: "should match '^/'",
		},
		"ClusterProviderConfigFilesystemWithoutFs": {
			reason:  "Filesystem credentials must name the file.",
			create:  &namespacedv1alpha1.ClusterProviderConfig{Spec: fileSpec("")},
			wantErr: ruleFsRequired.Message,
		},
		"ProviderConfigFilesystem": {
			reason: "A namespaced ProviderConfig, which a tenant writes, cannot make the provider read a file.",
			create: func() client.Object {
				pc := nsProviderConfig("https://widgets.example.com", "", nil)
				pc.Spec.Credentials.Source = xpv2.CredentialsSourceFilesystem
				return pc
			}(),
			wantErr: `Unsupported value: "Filesystem"`,
		},
		"ProviderConfigUsage": {
			reason: "A usage of a ClusterProviderConfig by a namespaced Widget must be accepted in the Widget's namespace.",
			create: &namespacedv1alpha1.ProviderConfigUsage{
				ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace},
				TypedProviderConfigUsage: xpv2.TypedProviderConfigUsage{
					ProviderConfigReference: xpv2.ProviderConfigReference{Kind: "ClusterProviderConfig", Name: "default"},
					ResourceReference:       xpv2.TypedReference{APIVersion: namespacedv1alpha1.SchemeGroupVersion.String(), Kind: "Widget", Name: "w"},
				},
			},
		},
		"LegacyProviderConfigUsage": {
			reason: "A usage of a ProviderConfig by a cluster-scoped Widget must be accepted.",
			create: &clusterv1alpha1.ProviderConfigUsage{
				ProviderConfigUsage: xpv2.ProviderConfigUsage{
					ProviderConfigReference: xpv2.Reference{Name: "default"},
					ResourceReference:       xpv2.TypedReference{APIVersion: clusterv1alpha1.SchemeGroupVersion.String(), Kind: "Widget", Name: "w"},
				},
			},
		},
	}
}
