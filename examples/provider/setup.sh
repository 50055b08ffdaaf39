#!/usr/bin/env bash
# Creates what the managed resources in examples/provider need, for uptest's
# --setup-script or by hand, once provider-widget is installed: the Widget
# API token as Secrets, the namespaced ProviderConfig team-a/default
# (widget.yaml), and the cluster-scoped ClusterProviderConfig and legacy
# ProviderConfig named default (cluster-widget.yaml, the Compositions).
#
#   WIDGET_API_ENDPOINT=https://widgets.example.com WIDGET_API_TOKEN=... \
#     bash examples/provider/setup.sh
#
# WIDGET_NAMESPACE (default team-a) is the examples' namespace and
# CROSSPLANE_NAMESPACE (default crossplane-system) where the cluster-scoped
# configs' Secret lives. The token goes to kubectl on stdin, never as an
# argument.
set -euo pipefail

: "${WIDGET_API_ENDPOINT:?set WIDGET_API_ENDPOINT to the Widget API URL, e.g. https://widgets.example.com}"
: "${WIDGET_API_TOKEN:?set WIDGET_API_TOKEN to a Widget API token of your project}"
ns=${WIDGET_NAMESPACE:-team-a}
xp=${CROSSPLANE_NAMESPACE:-crossplane-system}

for crd in providerconfigs.widget.m.widgetco.io clusterproviderconfigs.widget.m.widgetco.io providerconfigs.widget.widgetco.io; do
	kubectl wait --for condition=established --timeout=120s "crd/${crd}" >/dev/null ||
		{ echo "setup.sh: ${crd} is not served: is provider-widget installed?" >&2; exit 1; }
done

kubectl create namespace "${ns}" --dry-run=client -o yaml | kubectl apply --server-side --field-manager=widget-setup --force-conflicts -f - >/dev/null
for n in "${ns}" "${xp}"; do
	printf '%s' "${WIDGET_API_TOKEN}" |
		kubectl -n "${n}" create secret generic widget-api-token --from-file=token=/dev/stdin --dry-run=client -o yaml |
		kubectl apply --server-side --field-manager=widget-setup --force-conflicts -f - >/dev/null
done

kubectl apply --server-side --field-manager=widget-setup --force-conflicts -f - <<YAML
apiVersion: widget.m.widgetco.io/v1alpha1
kind: ProviderConfig
metadata:
  namespace: ${ns}
  name: default
spec:
  endpoint: ${WIDGET_API_ENDPOINT}
  credentials:
    source: Secret
    secretRef: {name: widget-api-token, key: token}
---
apiVersion: widget.m.widgetco.io/v1alpha1
kind: ClusterProviderConfig
metadata:
  name: default
spec:
  endpoint: ${WIDGET_API_ENDPOINT}
  credentials:
    source: Secret
    secretRef: {namespace: ${xp}, name: widget-api-token, key: token}
---
apiVersion: widget.widgetco.io/v1alpha1
kind: ProviderConfig
metadata:
  name: default
spec:
  endpoint: ${WIDGET_API_ENDPOINT}
  credentials:
    source: Secret
    secretRef: {namespace: ${xp}, name: widget-api-token, key: token}
YAML
echo "setup.sh: ProviderConfig ${ns}/default, ClusterProviderConfig default and ProviderConfig default point at ${WIDGET_API_ENDPOINT}"
