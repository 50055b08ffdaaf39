#!/usr/bin/env bash
# hack/tools.sh - build and cache the heavy out-of-tree binaries that the
# integration, render and e2e test tiers and the demo need (kube-apiserver,
# etcd, Crossplane core, the Crossplane CLI, golangci-lint, kubectl, cosign, what a
# real node runs: kubelet, containerd, runc, CNI plugins, CoreDNS, helm; and,
# opt in, benchmark peers).
#
# Why this exists:
#   * There is no internet here, only the Go module proxy. So nothing is
#     downloaded by URL: every binary is compiled with `go build` from a pinned
#     module version. Each tool has its own tiny module under tools/<name>/ with
#     a committed go.sum, which keeps these huge dependency graphs out of the
#     product's go.mod and lets the same module path appear at two versions
#     (crossplane/v2 v2.4.2 for core, v2.2.1 for the CLI).
#   * The first build is slow (kube-apiserver and Crossplane core take minutes
#     on 2 cores), so binaries are cached OUTSIDE the clone, keyed by
#     name + version + a hash of the tool's go.mod, go.sum and build recipe.
#     When the key exists, `go` is not invoked at all.
#   * Builds go to a temp dir inside the cache and are renamed into place, so an
#     interrupted build never leaves a half-written "cached" binary.
#
# Usage:
#   bash hack/tools.sh                 build (or reuse) the default set (with node)
#   bash hack/tools.sh all             default set + optional benchmark peers
#   bash hack/tools.sh node            only the real node's tools (test/lib/cluster):
#                                      kubelet, kube-scheduler, kube-proxy (+ nft),
#                                      containerd (+ shim, ctr), runc, cni-plugins,
#                                      coredns, helm
#   bash hack/tools.sh etcd crank ...  build just the named tools
#   bash hack/tools.sh path <name>     print a cached path: a tool's binary, or
#                                      crossplane-crds, crossplane-webhookconfigs,
#                                      kubebuilder-assets, cni-plugins-dir
#   bash hack/tools.sh env             print `export` lines for tests / make
#   bash hack/tools.sh env-names       every variable `env` may set, built or not
#   bash hack/tools.sh list            print tool names, versions and status
#
# Environment:
#   WIDGET_TOOLS_CACHE  cache root (default
#                       ${XDG_CACHE_HOME:-$HOME/.cache}/crossplane-widget/tools)
#   WIDGET_CORE         "patched": also build Crossplane core with the patches
#                       in tools/crossplane/patches (crossplane/crossplane#7062
#                       and #7692, docs/convergence.md), and make `env` point
#                       CROSSPLANE_BIN at it. Unset: stock core only.
#
# Binary names: Crossplane core is `crossplane`; the Crossplane CLI (upstream
# also calls it `crossplane`, built from cmd/crank) is installed as `crank`.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS_DIR=${REPO_ROOT}/tools
CACHE_ROOT=${WIDGET_TOOLS_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/crossplane-widget/tools}
OUTPUT_DIR=${REPO_ROOT}/_output/tools

DEFAULT_TOOLS=(etcd kube-apiserver kube-controller-manager crossplane crank golangci-lint kubectl cosign)
if [[ ${WIDGET_CORE:-} == patched ]]; then
	DEFAULT_TOOLS+=(crossplane-patched)
elif [[ -n ${WIDGET_CORE:-} ]]; then
	printf 'tools: ERROR: WIDGET_CORE=%s: unset it (stock core) or set it to "patched"\n' "${WIDGET_CORE}" >&2
	exit 1
fi
OPTIONAL_TOOLS=(function-patch-and-transform function-auto-ready crossplane-patched)
# What a real node runs (test/lib/cluster), part of the default set: make
# test runs the platform on a real node. kube-controller-manager is listed
# above already.
NODE_TOOLS=(runc cni-plugins containerd kubelet kube-scheduler kube-proxy coredns helm)
DEFAULT_TOOLS+=("${NODE_TOOLS[@]}")
ALL_TOOLS=("${DEFAULT_TOOLS[@]}" "${OPTIONAL_TOOLS[@]}")

log() { printf 'tools: %s\n' "$*" >&2; }
die() { printf 'tools: ERROR: %s\n' "$*" >&2; exit 1; }

# tool_recipe NAME sets the T_* variables describing how to build NAME.
#   T_VERSION  upstream version (for the cache key and messages)
#   T_MODDIR   the tool's module directory (tools/<dir>)
#   T_PKG      the main package to build, or several (space-separated): each
#              becomes bin/<last element of its path>
#   T_BIN      the binary name in the cache (with several packages: the one
#              `path` and `env` name)
#   T_LDFLAGS  extra -ldflags (version stamping, which `go build` of a
#              dependency does not do by itself)
#   T_ETA      rough first-build time on 2 cores, for the progress line
#   T_ENV      name of the env var `env` exports for the binary
#   T_EXTRAS   directories of the built module copied next to bin/
#   T_TAGS     build tags (-tags), if any
#   T_CGO      1 to build with cgo (default 0: static binaries)
#   T_PREPARE  a function run before `go build` with the temp dir as its
#              argument, for a build's C dependencies (runc's libseccomp)
#   T_FINISH   a function run after `go build` with the temp dir as its
#              argument, for what the binary needs at run time (kube-proxy's
#              nft)
# T_VERSION, T_PKG, T_LDFLAGS, T_EXTRAS, T_TAGS, T_CGO, T_PREPARE and
# T_FINISH (with the module's go.mod and go.sum) make up the cache key.
tool_recipe() {
	T_LDFLAGS="-s -w" T_EXTRAS="" T_PATCHES="" T_TAGS="" T_CGO=0 T_PREPARE="" T_FINISH=""
	case "$1" in
	kubelet | kube-scheduler | kube-proxy)
		# The real node (test/lib/node): built and stamped like
		# kube-apiserver, from the same k8s.io/kubernetes version.
		T_VERSION=v1.35.4 T_MODDIR=$1 T_BIN=$1
		T_PKG=k8s.io/kubernetes/cmd/$1
		case "$1" in
		kubelet) T_ETA="~7 min" T_ENV=KUBELET_BIN ;;
		kube-scheduler) T_ETA="~3 min" T_ENV=KUBE_SCHEDULER_BIN ;;
		kube-proxy)
			# Its nftables mode runs the nft command: bundled from
			# Debian's packages (see bundle_nft), not installed.
			T_ETA="~3 min" T_ENV=KUBE_PROXY_BIN T_FINISH=bundle_nft
			;;
		esac
		local k
		for k in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			T_LDFLAGS+=" -X ${k}.gitVersion=v1.35.4 -X ${k}.gitMajor=1 -X ${k}.gitMinor=35"
			T_LDFLAGS+=" -X ${k}.gitTreeState=clean -X ${k}.buildDate=2026-04-15T18:01:22Z"
		done
		;;
	containerd)
		# containerd, its runc shim and ctr in one bin/ (containerd finds
		# the shim next to itself or in PATH). Static like upstream's shim
		# (its Makefile: SHIM_CGO_ENABLED=0); without cgo the btrfs
		# snapshotter is left out, overlayfs is what the node uses.
		T_VERSION=v2.2.9 T_MODDIR=containerd T_BIN=containerd
		T_PKG="github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/ctr"
		T_ETA="~5 min" T_ENV=CONTAINERD_BIN T_TAGS=urfave_cli_no_docs
		T_LDFLAGS+=" -X github.com/containerd/containerd/v2/version.Version=v2.2.9"
		T_LDFLAGS+=" -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2"
		;;
	runc)
		# kubelet always asks for the RuntimeDefault seccomp profile, so
		# runc needs the seccomp tag, hence cgo and libseccomp (linked
		# statically from Debian's libseccomp-dev, see prepare_libseccomp).
		T_VERSION=v1.3.0 T_MODDIR=runc T_BIN=runc
		T_PKG=github.com/opencontainers/runc T_ETA="~1 min" T_ENV=RUNC_BIN
		T_CGO=1 T_TAGS=seccomp T_PREPARE=prepare_libseccomp
		T_LDFLAGS+=" -X main.gitCommit=v1.3.0" # its version is go:embed-ded
		;;
	cni-plugins)
		# The plugins a one-node bridge network needs; bin/ is the CNI
		# plugin directory (`env`: CNI_PLUGINS_DIR).
		T_VERSION=v1.10.0 T_MODDIR=cni-plugins T_BIN=bridge
		T_PKG="github.com/containernetworking/plugins/plugins/main/bridge github.com/containernetworking/plugins/plugins/ipam/host-local github.com/containernetworking/plugins/plugins/main/loopback github.com/containernetworking/plugins/plugins/meta/portmap"
		T_ETA="~1 min" T_ENV=CNI_BRIDGE_BIN
		T_LDFLAGS+=" -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=v1.10.0"
		;;
	coredns)
		# The module root is CoreDNS's own main with its default plugins.
		T_VERSION=v1.12.1 T_MODDIR=coredns T_BIN=coredns
		T_PKG=github.com/coredns/coredns T_ETA="~2 min" T_ENV=COREDNS_BIN
		T_LDFLAGS+=" -X github.com/coredns/coredns/coremain.GitCommit=v1.12.1"
		;;
	kube-controller-manager)
		# Only its garbage collector and namespace controllers are used:
		# envtest has none, and Crossplane v2 relies on Kubernetes GC to
		# delete what a deleted composite resource composed.
		T_VERSION=v1.35.4 T_MODDIR=kube-controller-manager T_BIN=kube-controller-manager
		T_PKG=k8s.io/kubernetes/cmd/kube-controller-manager T_ETA="~2 min" T_ENV=KUBE_CONTROLLER_MANAGER_BIN
		local q
		for q in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			T_LDFLAGS+=" -X ${q}.gitVersion=v1.35.4 -X ${q}.gitMajor=1 -X ${q}.gitMinor=35"
			T_LDFLAGS+=" -X ${q}.gitTreeState=clean -X ${q}.buildDate=2026-04-15T18:01:22Z"
		done
		;;
	kube-apiserver)
		T_VERSION=v1.35.4 T_MODDIR=kube-apiserver T_BIN=kube-apiserver
		T_PKG=k8s.io/kubernetes/cmd/kube-apiserver T_ETA="~4 min" T_ENV=TEST_ASSET_KUBE_APISERVER
		# What kubernetes' hack/lib/version.sh stamps; without it
		# --version reports v0.0.0-master.
		local p
		for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			T_LDFLAGS+=" -X ${p}.gitVersion=v1.35.4 -X ${p}.gitMajor=1 -X ${p}.gitMinor=35"
			T_LDFLAGS+=" -X ${p}.gitTreeState=clean -X ${p}.buildDate=2026-04-15T18:01:22Z"
		done
		;;
	etcd)
		# The server module's root package is etcd's own `main` wrapper
		# around etcdmain.Main(os.Args).
		T_VERSION=v3.6.5 T_MODDIR=etcd T_BIN=etcd
		T_PKG=go.etcd.io/etcd/server/v3 T_ETA="~1 min" T_ENV=TEST_ASSET_ETCD
		;;
	helm)
		# Crossplane's own chart (the crossplane tool's charts/) is
		# installed with it on the real node, as users install Crossplane.
		T_VERSION=v3.22.0 T_MODDIR=helm T_BIN=helm
		T_PKG=helm.sh/helm/v3/cmd/helm T_ETA="~2 min" T_ENV=HELM_BIN
		T_LDFLAGS+=" -X helm.sh/helm/v3/internal/version.version=v3.22.0 -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
		;;
	crossplane)
		T_VERSION=v2.4.2 T_MODDIR=crossplane T_BIN=crossplane
		T_PKG=github.com/crossplane/crossplane/v2/cmd/crossplane T_ETA="~4 min" T_ENV=CROSSPLANE_BIN
		# Crossplane checks packages' spec.crossplane.version constraints
		# against this; unset, every constrained package fails to install.
		T_LDFLAGS+=" -X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=v2.4.2"
		# `crossplane core init` reads these from disk (CRDS_PATH and, with
		# webhooks enabled, WEBHOOK_CONFIGS_PATH); the release image ships
		# them as /crds and /webhookconfigurations. Take them from the very
		# module version the binary is built from.
		# The Helm chart of the same version installs core on the real
		# node (test/lib/cluster).
		T_EXTRAS="crds webhookconfigurations charts"
		;;
	crossplane-patched)
		# Core as above, built from a copy of its module source with the
		# patches in tools/crossplane/patches applied: the same go.mod and
		# go.sum, the patched copy replacing the module. Opt in with
		# WIDGET_CORE=patched; make test stays on stock core.
		tool_recipe crossplane
		T_BIN=crossplane-patched T_ETA="~2 min" T_ENV=CROSSPLANE_PATCHED_BIN
		T_PATCHES=$(cd "${TOOLS_DIR}/crossplane/patches" && ls ./*.patch)
		return
		;;
	crank)
		T_VERSION=v2.2.1 T_MODDIR=crank T_BIN=crank
		T_PKG=github.com/crossplane/crossplane/v2/cmd/crank T_ETA="~3 min" T_ENV=CRANK_BIN
		# At v2.2.1 the version lives in crossplane's own internal/version
		# (core moved it to crossplane-runtime later). `beta validate` uses
		# it for the default --crossplane-image tag.
		T_LDFLAGS+=" -X github.com/crossplane/crossplane/v2/internal/version.version=v2.2.1"
		;;
	kubectl)
		# The commands the demo and docs/troubleshooting.md suggest, on a
		# machine with only Go and make. The module's own main (upstream's
		# cmd/kubectl, a few lines) on k8s.io/kubectl at the version of the
		# product's kube libraries (go.mod: k8s.io/client-go v0.35.3), so
		# kubectl v1.35.3 (stamped like kube-apiserver, with k8s.io/kubectl's
		# release time).
		T_VERSION=v1.35.3 T_MODDIR=kubectl T_BIN=kubectl
		T_PKG=github.com/widgetco/crossplane-widget/tools/kubectl T_ETA="~3 min" T_ENV=KUBECTL_BIN
		local v
		for v in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			T_LDFLAGS+=" -X ${v}.gitVersion=v1.35.3 -X ${v}.gitMajor=1 -X ${v}.gitMinor=35"
			T_LDFLAGS+=" -X ${v}.gitTreeState=clean -X ${v}.buildDate=2026-03-19T08:35:32Z"
		done
		;;
	cosign)
		# Signs the packages' images and attaches their SBOM and
		# provenance attestations (make publish, package/sign's tests,
		# the e2e suite's push), and verifies them offline.
		T_VERSION=v3.0.6 T_MODDIR=cosign T_BIN=cosign
		T_PKG=github.com/sigstore/cosign/v3/cmd/cosign T_ETA="~3 min" T_ENV=COSIGN_BIN
		T_LDFLAGS+=" -X sigs.k8s.io/release-utils/version.gitVersion=v3.0.6 -X sigs.k8s.io/release-utils/version.gitTreeState=clean"
		;;
	golangci-lint)
		T_VERSION=v2.6.0 T_MODDIR=golangci-lint T_BIN=golangci-lint
		T_PKG=github.com/golangci/golangci-lint/v2/cmd/golangci-lint T_ETA="~2 min" T_ENV=GOLANGCI_LINT_BIN
		# goreleaser's stamps; a non-empty date stops it reporting "(devel)".
		T_LDFLAGS+=" -X main.version=2.6.0 -X main.commit=v2.6.0 -X main.date=2025-10-29T19:28:07Z"
		;;
	function-patch-and-transform)
		# Optional benchmark peer. The issue names v0.9.0, but the module
		# proxy refuses the .mod and/or .zip of v0.6.0 to v0.9.0; v0.5.0 is
		# the newest version it serves in full (tools/README.md).
		T_VERSION=v0.5.0 T_MODDIR=function-patch-and-transform T_BIN=function-patch-and-transform
		T_PKG=github.com/crossplane-contrib/function-patch-and-transform T_ETA="~1 min" T_ENV=FUNCTION_PATCH_AND_TRANSFORM_BIN
		;;
	function-auto-ready)
		# Optional benchmark peer: the serving floor (a function that
		# composes nothing), next to function-patch-and-transform.
		T_VERSION=v0.6.0 T_MODDIR=function-auto-ready T_BIN=function-auto-ready
		T_PKG=github.com/crossplane/function-auto-ready T_ETA="~2 min" T_ENV=FUNCTION_AUTO_READY_BIN
		;;
	*)
		die "unknown tool '$1' (known: ${ALL_TOOLS[*]})"
		;;
	esac
}

# tool_key NAME prints <name>-<version>-<hash8>: the cache directory name.
# The hash covers the tool module's go.mod and go.sum plus the build recipe
# (package, flags), so bumping a dependency or a flag gives a new entry.
# The Go toolchain version is deliberately not part of it: a Go patch
# release should not force a 10-minute rebuild.
tool_key() {
	tool_recipe "$1"
	local dir=${TOOLS_DIR}/${T_MODDIR} hash
	[[ -f ${dir}/go.mod && -f ${dir}/go.sum ]] || die "missing ${dir}/go.mod or go.sum"
	hash=$({
		cat "${dir}/go.mod" "${dir}/go.sum"
		# A tool whose main is the module's own (kubectl) builds its source.
		local f
		for f in "${dir}"/*.go; do
			if [[ -e ${f} ]]; then cat "${f}"; fi
		done
		printf 'pkg=%s\nldflags=%s\ncgo=0 trimpath\n' "${T_PKG}" "${T_LDFLAGS}"
		if [[ -n ${T_EXTRAS} ]]; then printf 'extras=%s\n' "${T_EXTRAS}"; fi
		# Only when set, so that the keys of the tools without them stay.
		if [[ -n ${T_TAGS} ]]; then printf 'tags=%s\n' "${T_TAGS}"; fi
		if [[ ${T_CGO} != 0 ]]; then printf 'cgo=%s\n' "${T_CGO}"; fi
		if [[ -n ${T_PREPARE} ]]; then declare -f "${T_PREPARE}"; fi
		if [[ -n ${T_FINISH} ]]; then declare -f "${T_FINISH}"; fi
		local p
		for p in ${T_PATCHES}; do cat "${dir}/patches/${p}"; done
	} | sha256sum | cut -c1-8)
	printf '%s-%s-%s\n' "$1" "${T_VERSION}" "${hash}"
}

# tool_dir NAME / tool_bin NAME print where NAME lives in the cache.
tool_dir() { printf '%s/%s\n' "${CACHE_ROOT}" "$(tool_key "$1")"; }
tool_bin() {
	local dir
	dir=$(tool_dir "$1")
	tool_recipe "$1"
	printf '%s/bin/%s\n' "${dir}" "${T_BIN}"
}
is_cached() { [[ -x $(tool_bin "$1") ]]; }

# The temp dir of the build in progress, removed if we exit before the rename.
BUILD_TMP=""
cleanup() { if [[ -n ${BUILD_TMP} ]]; then rm -rf "${BUILD_TMP}"; fi; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# build_tool NAME builds NAME into the cache unless it is already there.
build_tool() {
	local name=$1 final key start secs
	key=$(tool_key "${name}")
	final=${CACHE_ROOT}/${key}
	tool_recipe "${name}"

	if [[ -x ${final}/bin/${T_BIN} ]]; then
		log "cached ${name} ${T_VERSION}"
		return 0
	fi

	log "building ${name} ${T_VERSION} (not cached; ${T_ETA} with a cold Go build cache)..."
	mkdir -p "${CACHE_ROOT}"
	# Same filesystem as the final location, so the rename below is atomic.
	BUILD_TMP=$(mktemp -d "${CACHE_ROOT}/.tmp-${name}-XXXXXX")
	chmod 755 "${BUILD_TMP}" # mktemp makes it 0700; it becomes the cache entry
	start=$(date +%s)

	# GOWORK=off: a go.work the product may grow must not capture these
	#   modules. -mod=readonly: fail (rather than silently fix) if go.sum is
	#   incomplete, whatever GOFLAGS says. -buildvcs=false: the binary must
	#   not depend on the clone's git state. nice: the machine is shared.
	local moddir=${TOOLS_DIR}/${T_MODDIR}
	if [[ -n ${T_PATCHES} ]]; then
		moddir=$(patched_module "${BUILD_TMP}")
	fi
	local -a pkgs extra=()
	read -r -a pkgs <<<"${T_PKG}"
	local out=${BUILD_TMP}/bin/${T_BIN}
	if ((${#pkgs[@]} > 1)); then
		out=${BUILD_TMP}/bin/ # go build names each binary after its package
		mkdir -p "${out}"
	fi
	if [[ -n ${T_TAGS} ]]; then extra+=(-tags "${T_TAGS}"); fi
	local -a cgoenv=()
	if [[ -n ${T_PREPARE} ]]; then
		# Prints the environment (NAME=value lines) the build needs.
		mapfile -t cgoenv < <("${T_PREPARE}" "${BUILD_TMP}") || die "preparing ${name}'s build failed"
		((${#cgoenv[@]} > 0)) || die "preparing ${name}'s build failed"
	fi
	if ! (cd "${moddir}" &&
		env ${cgoenv[@]+"${cgoenv[@]}"} GOWORK=off CGO_ENABLED="${T_CGO}" nice -n 10 go build \
			-mod=readonly -trimpath -buildvcs=false ${extra[@]+"${extra[@]}"} \
			-ldflags "${T_LDFLAGS}" \
			-o "${out}" "${pkgs[@]}"); then
		die "building ${name} ${T_VERSION} failed (module tools/${T_MODDIR}, package ${T_PKG}); see the go output above"
	fi

	copy_extras "${BUILD_TMP}"
	if [[ -n ${T_FINISH} ]]; then
		"${T_FINISH}" "${BUILD_TMP}" || die "finishing ${name}'s cache entry failed"
	fi
	rm -rf "${BUILD_TMP}/src" "${BUILD_TMP}/mod" "${BUILD_TMP}/build"

	secs=$(($(date +%s) - start))
	{
		printf 'tool: %s %s\npackage: %s\nkey: %s\n' "${name}" "${T_VERSION}" "${T_PKG}" "${key}"
		printf 'built: %s in %ss\n%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${secs}" "$(go version)"
		if [[ -f ${BUILD_TMP}/BUILDINFO.extra ]]; then cat "${BUILD_TMP}/BUILDINFO.extra"; fi
	} >"${BUILD_TMP}/BUILDINFO"
	rm -f "${BUILD_TMP}/BUILDINFO.extra"

	# Atomic publish. If a concurrent run published the same key first,
	# keep theirs (same inputs, same result) and drop ours.
	if [[ -e ${final} ]] || ! mv "${BUILD_TMP}" "${final}"; then
		[[ -x ${final}/bin/${T_BIN} ]] || die "could not move ${name} into ${final}"
	fi
	rm -rf "${BUILD_TMP}"
	BUILD_TMP=""
	log "built ${name} ${T_VERSION} in $((secs / 60))m$((secs % 60))s"
}

# prepare_libseccomp DIR fetches Debian's libseccomp-dev (headers and the
# static library; nothing is installed on the system), unpacks it once per
# package version into ${CACHE_ROOT}/build/<package>_<version>, and prints
# the environment that makes cgo link it statically: runc's seccomp
# bindings ask pkg-config for libseccomp, so a .pc file of our own names the
# headers and the .a by path. The unpacked tree stays (300 KB): Go's build
# cache remembers cgo flags by path, and a stable path per version, also
# named in CGO_CFLAGS (which Go's cache key covers, unlike pkg-config's
# output), keeps a cached build from linking a library that is gone or
# stale. The package's version goes to BUILDINFO.
prepare_libseccomp() {
	local tmp=$1/build deb ver dir lib
	command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
		die "runc needs libseccomp-dev's headers and static library, fetched with apt-get download (Debian); apt-get or dpkg-deb is missing"
	command -v pkg-config >/dev/null || die "runc's build needs pkg-config (Debian package pkg-config)"
	command -v gcc >/dev/null || die "runc's build needs gcc (cgo)"
	mkdir -p "${tmp}"
	# As root, apt would hand the download to its _apt user, who cannot
	# enter the cache (under $HOME); it then warns and downloads as root.
	(cd "${tmp}" && apt-get -q -o APT::Sandbox::User=root download libseccomp-dev >&2) ||
		die "cannot fetch libseccomp-dev with apt-get download (try apt-get update)"
	deb=$(ls "${tmp}"/libseccomp-dev_*.deb)
	ver=$(dpkg-deb -f "${deb}" Version) || die "cannot read the version of ${deb}"
	dir=${CACHE_ROOT}/build/libseccomp-dev_${ver}
	if [[ ! -f ${dir}/pkgconfig/libseccomp.pc ]]; then
		rm -rf "${tmp}/unpacked"
		mkdir -p "${tmp}/unpacked/root" "${tmp}/unpacked/pkgconfig" "${CACHE_ROOT}/build"
		dpkg-deb -x "${deb}" "${tmp}/unpacked/root" || die "cannot unpack ${deb}"
		lib=$(cd "${tmp}/unpacked" && find root -name libseccomp.a | head -n 1)
		[[ -n ${lib} && -f ${tmp}/unpacked/root/usr/include/seccomp.h ]] ||
			die "${deb} has no libseccomp.a or seccomp.h"
		printf 'Name: libseccomp\nDescription: libseccomp from %s\nVersion: %s\nCflags: -I%s\nLibs: %s\n' \
			"$(basename "${deb}")" "${ver%%-*}" "${dir}/root/usr/include" "${dir}/${lib}" >"${tmp}/unpacked/pkgconfig/libseccomp.pc"
		# A concurrent run may have published the same version first.
		mv -T "${tmp}/unpacked" "${dir}" 2>/dev/null || [[ -f ${dir}/pkgconfig/libseccomp.pc ]] ||
			die "cannot move libseccomp-dev into ${dir}"
	fi
	printf 'libseccomp: %s (static, from %s)\n' "$(basename "${deb}")" "${dir}" >"$1/BUILDINFO.extra"
	printf '%s\n' "PKG_CONFIG_LIBDIR=${dir}/pkgconfig" "PKG_CONFIG_PATH=" "CGO_CFLAGS=-O2 -g -I${dir}/root/usr/include"
}

# bundle_nft DIR puts the nft command next to kube-proxy (DIR/bin/nft),
# which its nftables mode runs: Debian's nftables and the two libraries
# this machine kind lacks (libnftables1, libnftnl11), fetched with apt-get
# download and unpacked into DIR/nft; nothing is installed on the system.
# bin/nft is a wrapper that runs the unpacked binary with its libraries;
# put DIR/bin first in kube-proxy's PATH. The packages' versions go to
# BUILDINFO.
bundle_nft() {
	local dir=$1 tmp=$1/build/nft deb p
	command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
		die "kube-proxy needs the nft command, fetched with apt-get download (Debian); apt-get or dpkg-deb is missing"
	mkdir -p "${tmp}" "${dir}/nft"
	(cd "${tmp}" && apt-get -q -o APT::Sandbox::User=root download nftables libnftables1 libnftnl11 >&2) ||
		die "cannot fetch nftables, libnftables1 and libnftnl11 with apt-get download (try apt-get update)"
	for deb in "${tmp}"/*.deb; do
		dpkg-deb -x "${deb}" "${dir}/nft" || die "cannot unpack ${deb}"
		printf 'bundled: %s\n' "$(basename "${deb}")" >>"${dir}/BUILDINFO.extra"
	done
	p=$(cd "${dir}/nft" && find . -name nft -type f -perm -u+x | head -n 1)
	[[ -n ${p} ]] || die "the nftables package has no nft binary"
	local libs
	libs=$(cd "${dir}/nft" && find . -name 'libnftables.so.*' -printf '%h\n' | head -n 1)
	[[ -n ${libs} ]] || die "libnftables1 has no libnftables.so"
	cat >"${dir}/bin/nft" <<-SCRIPT
		#!/bin/sh
		# nft from Debian's nftables, unpacked beside kube-proxy (hack/tools.sh).
		d=\$(dirname "\$(readlink -f "\$0")")/../nft
		LD_LIBRARY_PATH="\$d/${libs#./}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$d/${p#./}" "\$@"
	SCRIPT
	chmod 755 "${dir}/bin/nft"
	"${dir}/bin/nft" --version >&2 || die "the bundled nft does not run"
}

# patched_module DIR copies the source of the module that provides T_PKG
# into DIR/src, applies T_PATCHES to it, and prints DIR/mod: a copy of the
# tool's module (go.mod, go.sum) that replaces that module with DIR/src.
patched_module() {
	local dir=$1 mod src p
	mod=$(cd "${TOOLS_DIR}/${T_MODDIR}" &&
		GOWORK=off go list -mod=readonly -f '{{.Module.Path}}' "${T_PKG}") ||
		die "cannot locate the module providing ${T_PKG}"
	src=$(cd "${TOOLS_DIR}/${T_MODDIR}" &&
		GOWORK=off go list -mod=readonly -f '{{.Module.Dir}}' "${T_PKG}") ||
		die "cannot locate the module providing ${T_PKG}"
	cp -R "${src}" "${dir}/src"
	chmod -R u+w "${dir}/src"
	for p in ${T_PATCHES}; do
		patch --quiet --forward -p1 -d "${dir}/src" <"${TOOLS_DIR}/${T_MODDIR}/patches/${p}" >&2 ||
			die "patch ${p} does not apply to ${mod} ${T_VERSION}"
	done
	mkdir -p "${dir}/mod"
	cp "${TOOLS_DIR}/${T_MODDIR}/go.mod" "${TOOLS_DIR}/${T_MODDIR}/go.sum" "${dir}/mod/"
	(cd "${dir}/mod" && GOWORK=off go mod edit -replace "${mod}=../src") ||
		die "cannot replace ${mod} with the patched copy"
	printf '%s\n' "${dir}/mod"
}

# copy_extras DIR copies the T_EXTRAS directories (cluster/<x> of the
# module that provides T_PKG) into a fresh cache entry DIR.
copy_extras() {
	[[ -n ${T_EXTRAS} ]] || return 0
	local src x
	src=$(cd "${TOOLS_DIR}/${T_MODDIR}" &&
		GOWORK=off go list -mod=readonly -f '{{.Module.Dir}}' "${T_PKG}") ||
		die "cannot locate the module providing ${T_PKG}"
	for x in ${T_EXTRAS}; do
		[[ -d ${src}/cluster/${x} ]] || die "no cluster/${x} in ${src}"
		cp -R "${src}/cluster/${x}" "$1/${x}"
		chmod -R u+w "$1/${x}" # copies of the read-only module cache
	done
}

# link_outputs refreshes the git-ignored convenience links in _output/tools:
# bin/<binary> for every cached tool, crossplane-crds, and (via env)
# KUBEBUILDER_ASSETS. Cheap, so it runs every time.
link_outputs() {
	local name bin
	mkdir -p "${OUTPUT_DIR}/bin"
	for name in "${ALL_TOOLS[@]}"; do
		bin=$(tool_bin "${name}")
		if [[ -x ${bin} ]]; then
			ln -sfn "${bin}" "${OUTPUT_DIR}/bin/$(basename "${bin}")"
		else
			# Never leave a link to an older build of a tool whose
			# inputs changed but which has not been rebuilt yet.
			rm -f "${OUTPUT_DIR}/bin/$(basename "${bin}")"
		fi
	done
	if is_cached crossplane; then
		ln -sfn "$(tool_dir crossplane)/crds" "${OUTPUT_DIR}/crossplane-crds"
	else
		rm -f "${OUTPUT_DIR}/crossplane-crds"
	fi
	ensure_assets_dir >/dev/null || true
}

# ensure_assets_dir prints a cache directory holding exactly etcd and
# kube-apiserver (as symlinks), which is what envtest's KUBEBUILDER_ASSETS /
# BinaryAssetsDirectory expects. It lives in the cache (not _output) so it
# works from any clone or worktree; its name follows both tools' keys.
ensure_assets_dir() {
	is_cached etcd && is_cached kube-apiserver || return 1
	local dir
	dir=${CACHE_ROOT}/kubebuilder-assets-$(printf '%s\n' "$(tool_key kube-apiserver)" "$(tool_key etcd)" | sha256sum | cut -c1-8)
	mkdir -p "${dir}"
	ln -sfn "$(tool_bin kube-apiserver)" "${dir}/kube-apiserver"
	ln -sfn "$(tool_bin etcd)" "${dir}/etcd"
	printf '%s\n' "${dir}"
}

need_cached() {
	is_cached "$1" || die "$1 is not built yet; run: bash hack/tools.sh $1"
}

# cmd_path NAME prints the cached path of a binary or a derived directory.
cmd_path() {
	[[ $# -eq 1 ]] || die "usage: hack/tools.sh path <name>"
	case "$1" in
	crossplane-crds)
		need_cached crossplane
		printf '%s/crds\n' "$(tool_dir crossplane)"
		;;
	crossplane-webhookconfigs)
		need_cached crossplane
		printf '%s/webhookconfigurations\n' "$(tool_dir crossplane)"
		;;
	kubebuilder-assets)
		need_cached etcd
		need_cached kube-apiserver
		ensure_assets_dir
		;;
	cni-plugins-dir)
		need_cached cni-plugins
		dirname "$(tool_bin cni-plugins)"
		;;
	*)
		need_cached "$1"
		tool_bin "$1"
		;;
	esac
}

# cmd_env prints export lines for `eval "$(bash hack/tools.sh env)"` or for
# make. Missing default tools are an error (after printing what exists).
cmd_env() {
	local name missing=0
	printf 'export WIDGET_TOOLS_CACHE=%q\n' "${CACHE_ROOT}"
	if is_cached etcd && is_cached kube-apiserver; then
		printf 'export KUBEBUILDER_ASSETS=%q\n' "$(ensure_assets_dir)"
	fi
	for name in "${ALL_TOOLS[@]}"; do
		tool_recipe "${name}"
		if is_cached "${name}"; then
			printf 'export %s=%q\n' "${T_ENV}" "$(tool_bin "${name}")"
		else
			printf '# %s: not built (bash hack/tools.sh %s)\n' "${T_ENV}" "${name}"
			if [[ " ${DEFAULT_TOOLS[*]} " == *" ${name} "* ]]; then
				log "warning: ${name} is not built; run: bash hack/tools.sh"
				missing=1
			fi
		fi
	done
	if [[ ${WIDGET_CORE:-} == patched ]]; then
		if is_cached crossplane-patched; then
			printf 'export CROSSPLANE_BIN=%q\n' "$(tool_bin crossplane-patched)"
		else
			log "warning: WIDGET_CORE=patched but crossplane-patched is not built; run: WIDGET_CORE=patched bash hack/tools.sh"
			missing=1
		fi
	fi
	if is_cached cni-plugins; then
		printf 'export CNI_PLUGINS_DIR=%q\n' "$(dirname "$(tool_bin cni-plugins)")"
	fi
	if is_cached crossplane; then
		printf 'export CROSSPLANE_CRDS=%q\n' "$(tool_dir crossplane)/crds"
		printf 'export CROSSPLANE_WEBHOOK_CONFIGS=%q\n' "$(tool_dir crossplane)/webhookconfigurations"
		printf 'export CROSSPLANE_CHART=%q\n' "$(tool_dir crossplane)/charts/crossplane"
	fi
	return "${missing}"
}

# cmd_env_names prints the name of every variable cmd_env may set, one a
# line, whether its tool is built or not (make reviewable unsets them).
cmd_env_names() {
	local name
	printf '%s\n' WIDGET_TOOLS_CACHE KUBEBUILDER_ASSETS
	for name in "${ALL_TOOLS[@]}"; do
		tool_recipe "${name}"
		printf '%s\n' "${T_ENV}"
	done
	printf '%s\n' CNI_PLUGINS_DIR CROSSPLANE_CRDS CROSSPLANE_WEBHOOK_CONFIGS CROSSPLANE_CHART
}

cmd_list() {
	local name state
	for name in "${ALL_TOOLS[@]}"; do
		tool_recipe "${name}"
		if is_cached "${name}"; then state=$(tool_bin "${name}"); else state="(not built)"; fi
		printf '%-28s %-8s %s\n' "${name}" "${T_VERSION}" "${state}"
	done
}

usage() {
	sed -n '/^# Usage:/,/^# Binary names/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}

main() {
	command -v go >/dev/null || die "go not found in PATH"
	command -v sha256sum >/dev/null || die "sha256sum not found in PATH"

	local -a tools=()
	case "${1:-}" in
	path) shift; cmd_path "$@"; return ;;
	env) cmd_env; return ;;
	env-names) cmd_env_names; return ;;
	list) cmd_list; return ;;
	-h | --help | help) usage; return ;;
	"") tools=("${DEFAULT_TOOLS[@]}") ;;
	all) tools=("${ALL_TOOLS[@]}") ;;
	node) tools=("${NODE_TOOLS[@]}") ;;
	*) tools=("$@") ;;
	esac

	local name
	# Validate every name before spending minutes on the first build.
	for name in "${tools[@]}"; do tool_recipe "${name}"; done
	# One at a time: each big link step wants a few GB and both cores.
	for name in "${tools[@]}"; do build_tool "${name}"; done
	link_outputs
	log "done; binaries linked in ${OUTPUT_DIR#"${REPO_ROOT}/"}/bin (eval \"\$(bash hack/tools.sh env)\" for paths)"
}

main "$@"
