# provider-widget and function-widget. `make help` lists the targets.
#
# Nothing here downloads by URL: Go tools come from the module proxy (`tool`
# lines in go.mod, or the pinned modules under tools/ built by hack/tools.sh
# into a cache outside the clone).

SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := help

# A semantic version derived from git (v1.2.3 on a tag, v1.2.4-dev.5.gabcdef0
# after it, -dirty with uncommitted changes; `go run ./package/build version`),
# computed once and only when a target needs it. Crossplane resolves the
# Configuration's dependencies by it.
VERSION    ?= $(eval VERSION := $(shell $(GO) run ./package/build version 2>/dev/null || echo v0.0.0-dev))$(VERSION)
# Where the Configuration's dependencies are published (make publish pushes
# all three packages there).
REGISTRY   ?= ghcr.io/widgetco
OUTPUT_DIR := _output
BIN_DIR    := $(OUTPUT_DIR)/bin
GO         ?= go
TOOLS      := bash hack/tools.sh
GO_TEST_FLAGS ?= -race -count=1
# The real-node tests (test/e2e, test/demo, test/lib/cluster,
# test/lib/node) run unless E2E_NODE=0; they need root, cgroup v1 and
# overlayfs, and fail naming what is missing rather than skip.
E2E_NODE ?= 1

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
		/^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Regenerate deepcopy, method sets, resolvers and CRDs (go generate ./...).
	$(GO) generate ./...

.PHONY: check-diff
check-diff: ## Fail if generated files are stale (regenerates them, then compares) or go.mod/go.sum are not tidy (module and tools/*).
	bash hack/check-generated.sh

.PHONY: fmt
fmt: ## gofmt every Go file.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet, and fail on files gofmt would change.
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

.PHONY: lint
lint: ## Run golangci-lint (v2.6.0, built from the module proxy and cached) through a path shared by every clone, so that its cache hits.
	bash hack/lint.sh

.PHONY: tools
tools: ## Build (first run, 45-65 min on 2 cores) or reuse the cached kube-apiserver, etcd, Crossplane core and CLI, golangci-lint, kubectl and the real node's kubelet, containerd, runc, CNI, kube-proxy, CoreDNS, helm.
	$(TOOLS)

##@ Build

LDFLAGS := -s -w -X main.version=$(VERSION)

XPKG_ARCHS ?= amd64,arm64

.PHONY: build
build: binaries xpkg ## Build the binaries into _output/bin and the provider, function and configuration packages into _output/xpkg.

.PHONY: binaries
binaries: ## Build provider-widget, function-widget and widget-api for this machine into _output/bin.
	@mkdir -p $(BIN_DIR)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN_DIR)/provider-widget ./provider
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN_DIR)/function-widget ./function
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN_DIR)/widget-api ./widgetapi/cmd/widget-api

.PHONY: xpkg
xpkg: ## Build provider-widget and function-widget .xpkg packages for linux/amd64 and linux/arm64, and configuration-widget depending on them in $(REGISTRY), into _output/xpkg (no Docker).
	@$(TOOLS) crank
	CRANK_BIN="$$($(TOOLS) path crank)" $(GO) run ./package/build xpkg --version $(VERSION) --arch $(XPKG_ARCHS) --output-dir $(OUTPUT_DIR) --registry $(REGISTRY)

# Before anything is built: publishing needs to be told where.
.PHONY: publish-registry
publish-registry:
	@test "$(origin REGISTRY)" = "command line" -o "$(origin REGISTRY)" = "environment" || { echo "publish: say where to push, e.g. make publish REGISTRY=xpkg.example.com/widgetco" >&2; exit 1; }

.PHONY: publish
publish: publish-registry xpkg ## Push the provider and function as multi-arch images, then the Configuration, to $(REGISTRY)/<package>:$(VERSION), each signed with COSIGN_KEY (its password in COSIGN_PASSWORD) with its SBOM and provenance, e.g. make publish REGISTRY=xpkg.example.com/widgetco COSIGN_KEY=cosign.key.
	$(TOOLS) crank cosign
	CRANK_BIN="$$($(TOOLS) path crank)" COSIGN_BIN="$$($(TOOLS) path cosign)" $(GO) run ./package/build publish --version $(VERSION) --arch $(XPKG_ARCHS) --output-dir $(OUTPUT_DIR) --registry $(REGISTRY)

##@ Test

# Before anything is built or started: can this machine run the real node?
.PHONY: node-preflight
node-preflight:
	@E2E_NODE=$(E2E_NODE) bash hack/node-preflight.sh "make $(or $(MAKECMDGOALS),test)"

.PHONY: reviewable
reviewable: check-diff vet ## The fast loop before a review, in a few minutes: generated files, vet and gofmt, lint, and every test that needs no built binary and no node (the others skip, saying what they need; make test runs everything).
	@# Of the tools, only golangci-lint (built once, then cached).
	$(TOOLS) golangci-lint
	bash hack/lint.sh
	@# Without the tools' variables, whatever the caller's shell holds.
	env $$($(TOOLS) env-names | sed 's/^/-u /') E2E_NODE=0 $(GO) test -count=1 ./...

.PHONY: test
test: node-preflight tools check-diff ## Everything CI runs: tools, the generated-file check, then vet/gofmt, lint and all tests beside the end-to-end suite.
	@# The end-to-end suite mostly waits on its control plane (240 s of CPU
	@# over a 5-minute run), so it runs beside the other tests rather than
	@# after them. Their lines interleave; each package's result and each
	@# e2e scenario names itself.
	@echo "vet, lint and unit run beside e2e; their output interleaves (e2e lines name their scenario)"
	@# Each suite leaves a digest of its failures (hack/testreport); they
	@# are printed last, where a CI log's tail shows them.
	@mkdir -p _output && rm -f _output/failures-*.txt
	$(MAKE) --no-print-directory -j2 --output-sync=none e2e checks-and-unit || { cat _output/failures-*.txt 2>/dev/null; exit 1; }

# vet, lint and the unit tests, one after the other in the job slot the e2e
# suite leaves (which builds its packages from the tree check-diff has
# already checked). Recipes, not prerequisites: as prerequisites make ran
# vet and lint in both slots first, and the e2e suite, the long pole,
# started only once they were done (half a minute with warm caches, minutes
# on a fresh machine, where lint alone is 190 s of CPU). Not niced: with
# nice -n 10 the e2e suite took 5.5 rather than 7 minutes, but the unit
# tests became the long pole and make test took longer (542 s): two cores
# carry both, so the order cannot shorten the sum.
.PHONY: checks-and-unit
checks-and-unit:
	@$(MAKE) --no-print-directory vet
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory unit

# Four test binaries at a time rather than one per core: the integration
# tiers mostly wait on the processes they start (the provider's used 39 s
# of CPU in 206 s). Packages' tests get 30 minutes, not go test's default
# 10: on a fresh machine TestPackages cross-compiles every dependency for
# arm64 first.
.PHONY: unit
unit: ## Run go test ./... except what runs a real node (the e2e suite, the demo's test, test/lib/node and test/lib/cluster; with -race); the integration tiers find binaries via hack/tools.sh env.
	@mkdir -p _output
	eval "$$($(TOOLS) env)" && E2E_NODE=$(E2E_NODE) $(GO) test -json $(GO_TEST_FLAGS) -p 4 -timeout 30m $$($(GO) list ./... | grep -v -e '/test/e2e$$' -e '/test/demo$$' -e '/test/lib/node$$' -e '/test/lib/cluster$$') | $(GO) run ./hack/testreport -o _output/failures-unit.txt

.PHONY: e2e
e2e: node-preflight tools ## End-to-end suite on a real one-node cluster (kubelet, containerd, Crossplane from its Helm chart; as root): make demo's program, then packages installed by Crossplane's package manager, claims and XWidgets Ready, drift, crashes, failover, OOM kill, rolling update, API server restart, identity, deletion.
	@# Only this machine's architecture: the suite runs these packages' images.
	$(MAKE) xpkg XPKG_ARCHS=$$($(GO) env GOARCH) VERSION=$(VERSION)
	@# One node at a time on a machine: the node and cluster libraries'
	@# tests, the demo's, then the suite.
	@mkdir -p _output
	eval "$$($(TOOLS) env)" && E2E_NODE=$(E2E_NODE) $(GO) test -json $(GO_TEST_FLAGS) -p 1 -v -timeout 30m ./test/lib/node ./test/lib/cluster ./test/demo ./test/e2e | $(GO) run ./hack/testreport -v -o _output/failures-e2e.txt

.PHONY: e2e-cluster
e2e-cluster: ## The end-to-end suite against a cluster of your own, by kubeconfig (kind, say; no root needed): E2E_KUBECONFIG, E2E_REGISTRY (host:port it pulls from, E2E_REGISTRY_USERNAME/_PASSWORD if it needs them), E2E_WIDGET_API_ADDR (an address of this machine its pods reach). docs/development.md.
	@test -n "$(E2E_KUBECONFIG)" || { echo "e2e-cluster: set E2E_KUBECONFIG, E2E_REGISTRY and E2E_WIDGET_API_ADDR (docs/development.md)" >&2; exit 1; }
	@# Only what runs against a cluster of your own: core (its image and
	@# chart), the Crossplane CLI, cosign and helm.
	$(TOOLS) crossplane crank cosign helm
	$(MAKE) xpkg XPKG_ARCHS=$$($(GO) env GOARCH) VERSION=$(VERSION)
	eval "$$($(TOOLS) env 2>/dev/null)"; $(GO) test -count=1 -v -timeout 40m ./test/e2e

.PHONY: e2e-upgrade
e2e-upgrade: node-preflight tools ## Upgrade a real one-node cluster (as root) from the v1alpha1-only packages (built from git) to this tree's: nothing lost or re-created, both API versions readable, storage migrated, webhook outage (~5 min; not part of make test).
	$(MAKE) xpkg XPKG_ARCHS=$$($(GO) env GOARCH) VERSION=$(VERSION)
	eval "$$($(TOOLS) env)" && E2E_NODE=1 E2E_API_UPGRADE=1 $(GO) test -count=1 -v -timeout 40m ./test/upgrade

FUZZTIME ?= 30s

.PHONY: fuzz
fuzz: ## Run every fuzz target (Widget API bodies and query parameters, the function's XR and input) for FUZZTIME each (default 30s); seeds already run in make test.
	bash hack/fuzz.sh $(FUZZTIME)

.PHONY: render-update
render-update: ## Regenerate the golden crossplane render output of the examples.
	eval "$$($(TOOLS) env)" && $(GO) test ./function -run TestRender -update

.PHONY: bench
bench: node-preflight build ## Run the benchmarks and write _output/bench/benchmarks.md (not part of make test; its end-to-end sections run a real one-node cluster, as root; WIDGET_BENCH_N=1000 for the full provider run).
	$(GO) test -run '^$$' -bench . -benchmem ./widgetapi/server/ ./function/fn/
	$(TOOLS) all
	eval "$$($(TOOLS) env)" && E2E_NODE=1 WIDGET_BENCH=1 $(GO) test -count=1 -timeout 30m -run TestBenchmarks -v ./test/bench/

##@ Run

.PHONY: demo
demo: ## A one-node Kubernetes cluster on this machine (as root) with Crossplane from its Helm chart and both packages, an example XWidget and a claim going Ready; stays up until Ctrl-C (DEMO_FLAGS=--debug).
	@E2E_NODE=1 bash hack/node-preflight.sh "make demo"
	$(TOOLS)
	$(MAKE) xpkg XPKG_ARCHS=$$($(GO) env GOARCH) VERSION=$(VERSION)
	$(GO) build -o $(BIN_DIR)/demo ./test/demo
	eval "$$($(TOOLS) env)" && exec $(BIN_DIR)/demo $(DEMO_FLAGS)

.PHONY: run-widget-api
run-widget-api: ## Run the reference Widget API on 127.0.0.1:8080 (data in _output/widget-api, token dev-token).
	@mkdir -p $(OUTPUT_DIR)/widget-api
	@test -f $(OUTPUT_DIR)/widget-api/tokens || echo "dev-token dev" > $(OUTPUT_DIR)/widget-api/tokens
	$(GO) run ./widgetapi/cmd/widget-api --data-dir $(OUTPUT_DIR)/widget-api/data --tokens-file $(OUTPUT_DIR)/widget-api/tokens
