package apis_test

import (
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1beta1 "github.com/widgetco/crossplane-widget/apis/cluster/v1beta1"
	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	namespacedv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

func nsWidgetV1beta1(s namespacedv1beta1.WidgetSpec) *namespacedv1beta1.Widget {
	return &namespacedv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace}, Spec: s}
}

func clWidgetV1beta1(s clusterv1beta1.WidgetSpec) *clusterv1beta1.Widget {
	return &clusterv1beta1.Widget{Spec: s}
}

func nsKeyV1beta1(s namespacedv1beta1.WidgetKeySpec) *namespacedv1beta1.WidgetKey {
	return &namespacedv1beta1.WidgetKey{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace}, Spec: s}
}

func clKeyV1beta1(s clusterv1beta1.WidgetKeySpec) *clusterv1beta1.WidgetKey {
	return &clusterv1beta1.WidgetKey{Spec: s}
}

// policies returns managementPolicies of a namespaced managed resource.
func policies(a ...xpv2.ManagementAction) xpv2.ManagedResourceSpec {
	return xpv2.ManagedResourceSpec{ManagementPolicies: a}
}

// v1beta1WriteCases are writes in v1beta1, the storage version: the API
// server validates and stores them without the conversion webhook.
func v1beta1WriteCases() map[string]writeCase {
	small := ptr.To("small")
	observe := xpv2.ManagementActionObserve
	return map[string]writeCase{
		"WidgetAllFields": {
			reason: "A Widget that sets every field of forProvider and initProvider validly must be accepted.",
			create: nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{
				ForProvider:  commonv1beta1.WidgetParameters{Size: ptr.To("medium"), Description: ptr.To("d"), Labels: map[string]string{"team": "a", "example.com/x_y.z": "v"}},
				InitProvider: commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1"), Size: ptr.To("large"), Description: ptr.To("Größe:\tklein\nzweite Zeile"), Labels: map[string]string{"cost-centre": "42"}},
			}),
		},
		"WidgetWithoutSize": {
			reason:  "A Widget that Crossplane creates and updates (managementPolicies defaults to [*]) needs a size.",
			create:  nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{InitProvider: commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1")}}),
			wantErr: ruleSizeRequired.Message,
		},
		"WidgetFullyManagedWithoutSize": {
			reason:  "A Widget with managementPolicies [*] needs a size.",
			create:  nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ManagedResourceSpec: policies(xpv2.ManagementActionAll)}),
			wantErr: ruleSizeRequired.Message,
		},
		"WidgetCreateOnlyWithoutSize": {
			reason:  "A Widget that Crossplane only creates needs a size too.",
			create:  nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ManagedResourceSpec: policies(observe, xpv2.ManagementActionCreate, xpv2.ManagementActionDelete)}),
			wantErr: ruleSizeRequired.Message,
		},
		"WidgetUpdateOnlyWithoutSize": {
			reason:  "A Widget that Crossplane updates needs a size too.",
			create:  nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ManagedResourceSpec: policies(observe, xpv2.ManagementActionUpdate)}),
			wantErr: ruleSizeRequired.Message,
		},
		"WidgetObserveOnlyWithoutSize": {
			reason: "An observe-only Widget imports a widget and needs no size.",
			create: nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ManagedResourceSpec: policies(observe)}),
		},
		"WidgetObserveAndDeleteWithoutSize": {
			reason: "A Widget that Crossplane neither creates nor updates needs no size, even if it deletes the widget.",
			create: nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ManagedResourceSpec: policies(observe, xpv2.ManagementActionDelete)}),
		},
		"WidgetInitProviderSize": {
			reason: "A size in initProvider satisfies the size requirement.",
			create: nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{InitProvider: commonv1beta1.WidgetInitParameters{Size: small}}),
		},
		"WidgetSizeRemoved": {
			reason: "The size requirement holds for updates too.",
			create: nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: small}}),
			update: func(o client.Object) {
				o.(*namespacedv1beta1.Widget).Spec.ForProvider.Size = nil
			},
			wantErr: ruleSizeRequired.Message,
		},
		"WidgetSwitchedToFullyManagedWithoutSize": {
			reason: "An imported Widget cannot be made fully managed without a size.",
			create: nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ManagedResourceSpec: policies(observe)}),
			update: func(o client.Object) {
				o.(*namespacedv1beta1.Widget).Spec.ManagementPolicies = xpv2.ManagementPolicies{xpv2.ManagementActionAll}
			},
			wantErr: ruleSizeRequired.Message,
		},
		"WidgetUnknownSize": {
			reason:  "The Widget API knows only small, medium and large, in forProvider as in initProvider.",
			create:  nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{InitProvider: commonv1beta1.WidgetInitParameters{Size: ptr.To("huge")}}),
			wantErr: `supported values: "small", "medium", "large"`,
		},
		"WidgetInvalidRegion": {
			reason:  "A region must look like eu-west-1.",
			create:  nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: small}, InitProvider: commonv1beta1.WidgetInitParameters{Region: ptr.To("EU_WEST")}}),
			wantErr: "should match",
		},
		"WidgetInitProviderReservedLabelKey": {
			reason:  "Label keys under widgetco.io/ belong to the provider, in initProvider too.",
			create:  nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: small}, InitProvider: commonv1beta1.WidgetInitParameters{Labels: map[string]string{"widgetco.io/owner": "me"}}}),
			wantErr: ruleLabelKeysReserved.Message,
		},
		"WidgetInitProviderThirtyTwoLabels": {
			reason:  "A widget may not be created with more than 31 labels.",
			create:  nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: small}, InitProvider: commonv1beta1.WidgetInitParameters{Labels: labels(32)}}),
			wantErr: "must have at most 31 items",
		},
		"WidgetInitProviderDescriptionNotPrintable": {
			reason:  "The Widget API rejects control characters other than tab and newline in a description, in initProvider too.",
			create:  nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: small}, InitProvider: commonv1beta1.WidgetInitParameters{Description: ptr.To("bell\a")}}),
			wantErr: ruleDescriptionPrintable.Message,
		},
		"WidgetForProviderReservedLabelKey": {
			reason:  "Label keys under widgetco.io/ belong to the provider.",
			create:  nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: small, Labels: map[string]string{"widgetco.io/owner": "me"}}}),
			wantErr: ruleLabelKeysReserved.Message,
		},
		"WidgetRegionChanged": {
			reason: "A widget cannot move to another region.",
			create: nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: small}, InitProvider: commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1")}}),
			update: func(o client.Object) {
				o.(*namespacedv1beta1.Widget).Spec.InitProvider.Region = ptr.To("us-east-1")
			},
			wantErr: ruleRegionImmutable.Message,
		},
		"WidgetRegionRemoved": {
			reason: "A widget's region cannot be unset once set.",
			create: nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: small}, InitProvider: commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1")}}),
			update: func(o client.Object) {
				o.(*namespacedv1beta1.Widget).Spec.InitProvider.Region = nil
			},
			wantErr: ruleRegionImmutable.Message,
		},
		"WidgetRegionRemovedWithInitProvider": {
			reason:  "A widget's region cannot be unset by removing spec.initProvider either.",
			create:  nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: small}, InitProvider: commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1")}}),
			patch:   `{"spec":{"initProvider":null}}`,
			wantErr: ruleRegionImmutable.Message,
		},
		"WidgetRegionLateInitialized": {
			reason: "The provider may set a region that was unset, e.g. from the widget it observed.",
			create: nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: small}}),
			update: func(o client.Object) {
				o.(*namespacedv1beta1.Widget).Spec.InitProvider.Region = ptr.To("eu-west-1")
			},
		},
		"WidgetInitProviderChanged": {
			reason: "initProvider's size, labels and description may change: they matter only when the widget is created.",
			create: nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{InitProvider: commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1"), Size: small, Labels: map[string]string{"a": "b"}, Description: ptr.To("one")}}),
			update: func(o client.Object) {
				w := o.(*namespacedv1beta1.Widget)
				w.Spec.InitProvider = commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1"), Size: ptr.To("large"), Description: ptr.To("two")}
			},
		},
		"WidgetResized": {
			reason: "A widget's size may change.",
			create: nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: small}, InitProvider: commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1")}}),
			update: func(o client.Object) {
				o.(*namespacedv1beta1.Widget).Spec.ForProvider.Size = ptr.To("large")
			},
		},
		"WidgetUnsupportedProviderConfigKind": {
			reason: "A namespaced Widget can only use a ProviderConfig or a ClusterProviderConfig.",
			create: nsWidgetV1beta1(namespacedv1beta1.WidgetSpec{
				ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: &xpv2.ProviderConfigReference{Kind: "Secret", Name: "x"}},
				ForProvider:         commonv1beta1.WidgetParameters{Size: small},
			}),
			wantErr: ruleProviderConfigKind.Message,
		},
		"ClusterWidgetWithoutSize": {
			reason:  "A cluster-scoped Widget that Crossplane creates needs a size too.",
			create:  clWidgetV1beta1(clusterv1beta1.WidgetSpec{}),
			wantErr: ruleSizeRequired.Message,
		},
		"ClusterWidgetObserveOnlyWithoutSize": {
			reason: "An observe-only cluster-scoped Widget needs no size.",
			create: clWidgetV1beta1(clusterv1beta1.WidgetSpec{ClusterManagedResourceSpec: xpv2.ClusterManagedResourceSpec{ManagementPolicies: xpv2.ManagementPolicies{observe}}}),
		},
		"ClusterWidgetInitProviderSize": {
			reason: "A size in initProvider satisfies the size requirement in either scope.",
			create: clWidgetV1beta1(clusterv1beta1.WidgetSpec{InitProvider: commonv1beta1.WidgetInitParameters{Size: small}}),
		},
		"ClusterWidgetRegionChanged": {
			reason: "A cluster-scoped widget cannot move to another region either.",
			create: clWidgetV1beta1(clusterv1beta1.WidgetSpec{ForProvider: commonv1beta1.WidgetParameters{Size: small}, InitProvider: commonv1beta1.WidgetInitParameters{Region: ptr.To("eu-west-1")}}),
			update: func(o client.Object) {
				o.(*clusterv1beta1.Widget).Spec.InitProvider.Region = ptr.To("us-east-1")
			},
			wantErr: ruleRegionImmutable.Message,
		},
		"WidgetKeyWithoutWidget": {
			reason:  "A key must say which widget it belongs to.",
			create:  nsKeyV1beta1(namespacedv1beta1.WidgetKeySpec{}),
			wantErr: ruleKeyNamesWidget.Message,
		},
		"WidgetKeyWidgetNameChanged": {
			reason: "A key cannot move to another widget.",
			create: nsKeyV1beta1(namespacedv1beta1.WidgetKeySpec{ForProvider: namespacedv1beta1.WidgetKeyParameters{WidgetName: ptr.To("w1")}}),
			update: func(o client.Object) {
				o.(*namespacedv1beta1.WidgetKey).Spec.ForProvider.WidgetName = ptr.To("w2")
			},
			wantErr: ruleWidgetNameImmutable.Message,
		},
		"WidgetKeyReferenceIntoAnotherNamespace": {
			reason:  "A WidgetKey cannot reference a Widget in another namespace.",
			create:  nsKeyV1beta1(namespacedv1beta1.WidgetKeySpec{ForProvider: namespacedv1beta1.WidgetKeyParameters{WidgetNameRef: &xpv2.NamespacedReference{Name: "w1", Namespace: "team-b"}}}),
			wantErr: ruleKeyRefLocal.Message,
		},
		"WidgetKeyWidgetNameSelected": {
			reason: "Crossplane sets widgetName and a widgetNameRef with the Widget's namespace, in one update, when it resolves a selector.",
			create: nsKeyV1beta1(namespacedv1beta1.WidgetKeySpec{ForProvider: namespacedv1beta1.WidgetKeyParameters{WidgetNameSelector: &xpv2.NamespacedSelector{MatchLabels: map[string]string{"a": "b"}}}}),
			update: func(o client.Object) {
				k := o.(*namespacedv1beta1.WidgetKey)
				k.Spec.ForProvider.WidgetName = ptr.To("w1")
				k.Spec.ForProvider.WidgetNameRef = &xpv2.NamespacedReference{Name: "w1", Namespace: testNamespace}
			},
		},
		"WidgetKeyReferenceIntoAnotherNamespaceWithSelector": {
			reason: "A selector next to a reference into another namespace, without a widgetName, would make Crossplane follow the reference: it must be refused at admission.",
			create: nsKeyV1beta1(namespacedv1beta1.WidgetKeySpec{ForProvider: namespacedv1beta1.WidgetKeyParameters{
				WidgetNameSelector: &xpv2.NamespacedSelector{MatchLabels: map[string]string{"a": "b"}},
				WidgetNameRef:      &xpv2.NamespacedReference{Name: "w1", Namespace: "team-b"},
			}}),
			wantErr: ruleKeyRefLocal.Message,
		},
		"WidgetKeySelectorIntoAnotherNamespace": {
			reason:  "A WidgetKey cannot select a Widget in another namespace.",
			create:  nsKeyV1beta1(namespacedv1beta1.WidgetKeySpec{ForProvider: namespacedv1beta1.WidgetKeyParameters{WidgetNameSelector: &xpv2.NamespacedSelector{MatchLabels: map[string]string{"a": "b"}, Namespace: "team-b"}}}),
			wantErr: ruleKeySelectorLocal.Message,
		},
		"WidgetKeyDescriptionChanged": {
			reason: "The Widget API cannot change a key's description.",
			create: nsKeyV1beta1(namespacedv1beta1.WidgetKeySpec{
				ForProvider:  namespacedv1beta1.WidgetKeyParameters{WidgetName: ptr.To("w1")},
				InitProvider: commonv1beta1.WidgetKeyInitParameters{Description: ptr.To("one")},
			}),
			update: func(o client.Object) {
				o.(*namespacedv1beta1.WidgetKey).Spec.InitProvider.Description = ptr.To("two")
			},
			wantErr: ruleKeyDescriptionImmutable.Message,
		},
		"WidgetKeyDescriptionRemoved": {
			reason: "A key's description cannot be unset once set.",
			create: nsKeyV1beta1(namespacedv1beta1.WidgetKeySpec{
				ForProvider:  namespacedv1beta1.WidgetKeyParameters{WidgetName: ptr.To("w1")},
				InitProvider: commonv1beta1.WidgetKeyInitParameters{Description: ptr.To("one")},
			}),
			update: func(o client.Object) {
				o.(*namespacedv1beta1.WidgetKey).Spec.InitProvider.Description = nil
			},
			wantErr: ruleKeyDescriptionImmutable.Message,
		},
		"WidgetKeyDescriptionRemovedWithInitProvider": {
			reason: "A key's description cannot be unset by removing spec.initProvider either.",
			create: nsKeyV1beta1(namespacedv1beta1.WidgetKeySpec{
				ForProvider:  namespacedv1beta1.WidgetKeyParameters{WidgetName: ptr.To("w1")},
				InitProvider: commonv1beta1.WidgetKeyInitParameters{Description: ptr.To("one")},
			}),
			patch:   `{"spec":{"initProvider":null}}`,
			wantErr: ruleKeyDescriptionImmutable.Message,
		},
		"WidgetKeyDescriptionLateInitialized": {
			reason: "The provider may set a description that was unset, from the key it observed.",
			create: nsKeyV1beta1(namespacedv1beta1.WidgetKeySpec{ForProvider: namespacedv1beta1.WidgetKeyParameters{WidgetName: ptr.To("w1")}}),
			update: func(o client.Object) {
				o.(*namespacedv1beta1.WidgetKey).Spec.InitProvider.Description = ptr.To("one")
			},
		},
		"WidgetKeyDescriptionNotPrintable": {
			reason: "The Widget API rejects control characters other than tab and newline in a key's description.",
			create: nsKeyV1beta1(namespacedv1beta1.WidgetKeySpec{
				ForProvider:  namespacedv1beta1.WidgetKeyParameters{WidgetName: ptr.To("w1")},
				InitProvider: commonv1beta1.WidgetKeyInitParameters{Description: ptr.To("carriage\rreturn")},
			}),
			wantErr: ruleDescriptionPrintable.Message,
		},
		"ClusterWidgetKeyDescriptionChanged": {
			reason: "A cluster-scoped key's description cannot change either.",
			create: clKeyV1beta1(clusterv1beta1.WidgetKeySpec{
				ForProvider:  clusterv1beta1.WidgetKeyParameters{WidgetName: ptr.To("w1")},
				InitProvider: commonv1beta1.WidgetKeyInitParameters{Description: ptr.To("one")},
			}),
			update: func(o client.Object) {
				o.(*clusterv1beta1.WidgetKey).Spec.InitProvider.Description = ptr.To("two")
			},
			wantErr: ruleKeyDescriptionImmutable.Message,
		},
		"ClusterWidgetKeyWidgetNameChanged": {
			reason: "A cluster-scoped key cannot move to another widget.",
			create: clKeyV1beta1(clusterv1beta1.WidgetKeySpec{ForProvider: clusterv1beta1.WidgetKeyParameters{WidgetName: ptr.To("w1")}}),
			update: func(o client.Object) {
				o.(*clusterv1beta1.WidgetKey).Spec.ForProvider.WidgetName = ptr.To("w2")
			},
			wantErr: ruleWidgetNameImmutable.Message,
		},
	}
}
